//! Timestamps as the store writes them, read without a general parser.
//!
//! [`super::encode`] writes a `Time` as `"YYYY-MM-DDTHH:MM:SSZ"` and a `MicroTime` as
//! `"YYYY-MM-DDTHH:MM:SS.ffffffZ"`, in UTC. The transcoders that render stored bytes
//! directly ([`crate::events_v1`], the protobuf list) read them here: a fixed layout
//! of digits, checked to be a real date and time, and nothing else. Text in any other
//! layout is `None`, and the caller leaves the object to the decoding path, which parses
//! (and re-formats) whatever RFC 3339 text it finds.

/// The two layouts the store writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `Time`: whole seconds.
    Seconds,
    /// `MicroTime`: six fractional digits.
    Micros,
}

/// A stored timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredTime {
    /// Go's zero time (`0001-01-01T00:00:00Z`): unset.
    Zero,
    /// A time: seconds since the Unix epoch and the microseconds past them.
    At {
        /// Seconds since the Unix epoch.
        seconds: i64,
        /// Microseconds past `seconds`.
        micros: u32,
    },
}

/// Reads `quoted` (the JSON text, quotes included) in `layout`; `None` for any other text,
/// a date that does not exist, or a leap second.
pub fn parse(quoted: &[u8], layout: Layout) -> Option<StoredTime> {
    let (len, fraction) = match layout {
        Layout::Seconds => (22, false),
        Layout::Micros => (29, true),
    };
    let b = quoted;
    let shape = b.len() == len
        && b[0] == b'"'
        && b[len - 2] == b'Z'
        && b[len - 1] == b'"'
        && b[5] == b'-'
        && b[8] == b'-'
        && b[11] == b'T'
        && b[14] == b':'
        && b[17] == b':'
        && (!fraction || b[20] == b'.');
    if !shape {
        return None;
    }
    let digits = |from: usize, to: usize| -> Option<u32> {
        b[from..to].iter().try_fold(0u32, |n, d| {
            d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
        })
    };
    let year = digits(1, 5)?;
    let month = digits(6, 8)?;
    let day = digits(9, 11)?;
    let hour = digits(12, 14)?;
    let minute = digits(15, 17)?;
    let second = digits(18, 20)?;
    let micros = if fraction { digits(21, 27)? } else { 0 };
    if hour >= 24 || minute >= 60 || second >= 60 {
        return None;
    }
    // Checks the day against the month, as jiff (which the decoding path parses with) does;
    // four digits are years 0..=9999, all of which jiff takes.
    let date = jiff::civil::Date::new(
        i16::try_from(year).ok()?,
        i8::try_from(month).ok()?,
        i8::try_from(day).ok()?,
    )
    .ok()?;
    if (year, month, day, hour, minute, second, micros) == (1, 1, 1, 0, 0, 0, 0) {
        return Some(StoredTime::Zero);
    }
    let days = days_from_civil(i64::from(date.year()), month, day);
    let seconds = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    Some(StoredTime::At { seconds, micros })
}

/// Days from 1970-01-01 to a (valid) proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
    use proptest::prelude::*;

    #[test]
    fn the_zero_time_and_other_layouts() {
        assert_eq!(
            parse(br#""0001-01-01T00:00:00Z""#, Layout::Seconds),
            Some(StoredTime::Zero)
        );
        assert_eq!(
            parse(br#""0001-01-01T00:00:00.000000Z""#, Layout::Micros),
            Some(StoredTime::Zero)
        );
        assert_eq!(
            parse(br#""1970-01-01T00:00:01.000002Z""#, Layout::Micros),
            Some(StoredTime::At {
                seconds: 1,
                micros: 2
            })
        );
        for text in [
            r#""2026-11-25T09:48:17+00:00""#,
            r#""2026-11-25T09:48:17.123Z""#,
            r#""2026-11-25 09:48:17Z""#,
            r#""2026-02-29T09:48:17Z""#,
            r#""2026-11-25T24:00:00Z""#,
            r#""2026-11-25T23:59:60Z""#,
            r#""2026-1a-25T09:48:17Z""#,
            "null",
        ] {
            assert_eq!(parse(text.as_bytes(), Layout::Seconds), None, "{text}");
        }
        assert_eq!(
            parse(br#""2024-02-29T09:48:17Z""#, Layout::Seconds),
            Some(StoredTime::At {
                seconds: 1_709_200_097,
                micros: 0
            })
        );
    }

    proptest! {
        /// Every time the store writes reads back as the instant it was.
        #[test]
        fn written_times_read_back(secs in -62_167_219_200i64..253_402_300_799, micros in 0u32..1_000_000) {
            let ts = Timestamp::new(secs, (micros * 1000) as i32).unwrap();
            let text = serde_json::to_vec(&MicroTime(ts)).unwrap();
            let want = if secs == -62_135_596_800 && micros == 0 {
                StoredTime::Zero
            } else {
                StoredTime::At { seconds: secs, micros }
            };
            prop_assert_eq!(parse(&text, Layout::Micros), Some(want));
            let text = serde_json::to_vec(&Time(ts)).unwrap();
            let want = if secs == -62_135_596_800 {
                StoredTime::Zero
            } else {
                StoredTime::At { seconds: secs, micros: 0 }
            };
            prop_assert_eq!(parse(&text, Layout::Seconds), Some(want));
        }
    }
}
