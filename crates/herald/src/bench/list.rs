//! The timed full list: one GET of every event of the namespace, timed to its last byte.
//!
//! The items are counted while the body arrives, by [`ItemCounter`], which looks for one
//! fixed byte sequence with SIMD (`memchr::memmem`) instead of collecting the body and parsing
//! it: holding a 100 MB body means touching 100 MB of fresh memory, which on a small VM takes
//! longer than the server needs to produce the list, and any parse, even a structural scan,
//! competes with the server for the CPU while it is sending (a byte-wise scanner here tripled
//! the measured time of a 100,000-event list).

use std::net::SocketAddr;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use tokio::time::Instant;

use super::conn::connect;
use super::summary::ListSummary;

/// Lists every event of `ns` in one request and times it to the last byte.
pub async fn timed_list(addr: SocketAddr, ns: &str) -> anyhow::Result<ListSummary> {
    let path = format!("/api/v1/namespaces/{ns}/events");
    let mut sender = connect(addr).await.context("connecting to list events")?;
    let request = |path: &str| {
        http::Request::get(path)
            .header(http::header::HOST, addr.to_string())
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .context("building the list request")
    };
    // Use the connection once first so the timing is the list alone.
    let warm = sender
        .send_request(request("/version")?)
        .await
        .context("asking for /version before listing")?;
    warm.into_body()
        .collect()
        .await
        .context("reading /version before listing")?;

    sender
        .ready()
        .await
        .context("the connection closed before listing")?;
    let t = Instant::now();
    let resp = sender
        .send_request(request(&path)?)
        .await
        .context("listing events failed")?;
    let status = resp.status();
    let mut body = resp.into_body();
    let mut bytes = 0u64;
    let mut counter = ItemCounter::default();
    while let Some(frame) = body.frame().await {
        let frame = frame.context("reading the events list")?;
        if let Ok(data) = frame.into_data() {
            bytes += data.len() as u64;
            counter.feed(&data);
        }
    }
    let millis = t.elapsed().as_secs_f64() * 1000.0;
    let items = counter.finish().context("reading the events list")?;
    Ok(ListSummary {
        path,
        status: status.as_u16(),
        items: if status.is_success() { items } else { 0 },
        bytes,
        millis,
    })
}

/// Counts the items of an event list (core/v1 or events.k8s.io/v1, compact JSON as both
/// kube-apiserver and herald-server send it) fed in arbitrary chunks, without keeping them.
///
/// It counts the occurrences of `"metadata":{`. In JSON that byte sequence is always an object
/// key followed by an object: inside a string every `"` is escaped, so it cannot appear there.
/// An event has exactly one such key (its own metadata; its references, source, series and
/// `managedFields` have none), and the list adds one for its `ListMeta`. Bound: memory is the
/// needle's length.
#[derive(Debug, Default)]
pub struct ItemCounter {
    /// The last bytes seen (fewer than the needle), to find a needle split across chunks.
    tail: Vec<u8>,
    found: u64,
    /// The last two bytes that were not whitespace.
    last: [u8; 2],
}

const NEEDLE: &[u8] = br#""metadata":{"#;

impl ItemCounter {
    /// Scans the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) {
        let keep = NEEDLE.len() - 1;
        if !self.tail.is_empty() {
            // Matches that start in the tail and end in this chunk: the tail and the chunk's
            // head are each shorter than the needle, so none is counted twice.
            self.tail.extend_from_slice(&chunk[..chunk.len().min(keep)]);
            self.found += memchr::memmem::find_iter(&self.tail, NEEDLE).count() as u64;
        }
        self.found += memchr::memmem::find_iter(chunk, NEEDLE).count() as u64;
        if chunk.len() >= keep {
            self.tail.clear();
            self.tail.extend_from_slice(&chunk[chunk.len() - keep..]);
        } else {
            if self.tail.is_empty() {
                self.tail.extend_from_slice(chunk);
            }
            // The tail already ends with this short chunk.
            let excess = self.tail.len().saturating_sub(keep);
            self.tail.drain(..excess);
        }
        let mut solid = chunk.iter().rev().filter(|b| !b.is_ascii_whitespace());
        if let Some(&z) = solid.next() {
            let y = solid.next().copied().unwrap_or(self.last[1]);
            self.last = [y, z];
        }
    }

    /// The count, or an error if the body was not a list (a list ends with its `items`
    /// array). A body cut short is already an error from the HTTP framing.
    pub fn finish(self) -> anyhow::Result<u64> {
        if &self.last != b"]}" || self.found == 0 {
            anyhow::bail!("the list ended before its JSON did");
        }
        Ok(self.found - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(body: &[u8], size: usize) -> anyhow::Result<u64> {
        let mut c = ItemCounter::default();
        for chunk in body.chunks(size) {
            c.feed(chunk);
        }
        c.finish()
    }

    #[test]
    fn counts_items_across_chunk_boundaries() {
        let body = br#"{"kind":"EventList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"a"},"message":"\"metadata\":{ in a message"},{"count":2,"metadata":{"name":"b","managedFields":[{"fieldsV1":{"f:metadata":{}}}]}},{"metadata":{"name":"c"}}]}"#;
        for size in [1, 2, 3, 7, 11, 12, 13, body.len()] {
            assert_eq!(count(body, size).unwrap(), 3, "chunks of {size}");
        }
        assert_eq!(
            count(br#"{"kind":"EventList","metadata":{},"items":[]}"#, 5).unwrap(),
            0
        );
        assert!(count(br#"{"kind":"Status","code":500}"#, 4).is_err());
        assert!(count(br#"{"metadata":{},"items":[{"metadata":{}}"#, 3).is_err());
    }
}
