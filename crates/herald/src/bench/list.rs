//! The timed full list: one GET of every event of the namespace, timed to its last byte.
//!
//! The items are counted while the body arrives, by [`ItemCounter`], a scanner that skips
//! string contents with `memchr`, instead of collecting the body and parsing it: holding a
//! 60 MB body means touching 60 MB of fresh memory, which on a small VM takes longer than
//! the server needs to produce the list, and a full parse would compete with the server for
//! the CPU while it is sending.

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

/// Counts the elements of the `items` array of a JSON object fed in arbitrary chunks,
/// without keeping them. It follows strings (with escapes) and nesting, nothing more: it
/// does not validate the JSON beyond the brackets closing.
#[derive(Debug, Default)]
pub struct ItemCounter {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// In the top-level object, between a `{` or `,` and the next `:`.
    expecting_key: bool,
    /// Reading a top-level key (its first bytes are kept in `key`).
    reading_key: bool,
    key: Vec<u8>,
    /// Inside the top-level `items` array (whose elements are at depth 2).
    in_items: bool,
    /// The next value in the `items` array starts a new element.
    expect_element: bool,
    items: u64,
}

/// The longest top-level key prefix kept (enough to recognise `items`).
const KEY_PREFIX: usize = 8;

impl ItemCounter {
    /// Scans the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) {
        let mut i = 0;
        while i < chunk.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    self.keep_key(&chunk[i..=i]);
                    i += 1;
                    continue;
                }
                match memchr::memchr2(b'"', b'\\', &chunk[i..]) {
                    None => {
                        self.keep_key(&chunk[i..]);
                        i = chunk.len();
                    }
                    Some(off) => {
                        self.keep_key(&chunk[i..i + off]);
                        i += off;
                        if chunk[i] == b'\\' {
                            self.escaped = true;
                        } else {
                            self.in_string = false;
                            self.reading_key = false;
                        }
                        i += 1;
                    }
                }
                continue;
            }
            let c = chunk[i];
            i += 1;
            match c {
                b'"' => {
                    self.value_starts();
                    self.in_string = true;
                    if self.depth == 1 && self.expecting_key {
                        self.reading_key = true;
                        self.key.clear();
                    }
                }
                b'{' | b'[' => {
                    self.value_starts();
                    if c == b'[' && self.depth == 1 && self.key == b"items" {
                        self.in_items = true;
                        self.expect_element = true;
                    }
                    self.depth += 1;
                    if self.depth == 1 {
                        self.expecting_key = true;
                    }
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 1 {
                        self.in_items = false;
                    }
                }
                b',' => {
                    if self.in_items && self.depth == 2 {
                        self.expect_element = true;
                    }
                    if self.depth == 1 {
                        self.expecting_key = true;
                    }
                }
                b':' => {
                    if self.depth == 1 {
                        self.expecting_key = false;
                    }
                }
                b' ' | b'\t' | b'\n' | b'\r' => {}
                _ => self.value_starts(),
            }
        }
    }

    /// The count, or an error if the input ended inside a string or an open bracket.
    pub fn finish(self) -> anyhow::Result<u64> {
        if self.in_string || self.depth != 0 {
            anyhow::bail!("the list ended before its JSON did");
        }
        Ok(self.items)
    }

    fn value_starts(&mut self) {
        if self.in_items && self.depth == 2 && self.expect_element {
            self.items += 1;
            self.expect_element = false;
        }
    }

    fn keep_key(&mut self, part: &[u8]) {
        if self.reading_key {
            let room = KEY_PREFIX.saturating_sub(self.key.len());
            self.key.extend_from_slice(&part[..part.len().min(room)]);
        }
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
        let body = br#"{"kind":"EventList","metadata":{"resourceVersion":"9","items":[1,2]},"itemsX":[{}],"items":[{"a":"]}\"items\":[{"},{"b":[1,{"c":2}],"items":[{},{}]}, "s", 3 ,{}],"z":"items"}"#;
        for size in [1, 2, 3, 7, body.len()] {
            assert_eq!(count(body, size).unwrap(), 5, "chunks of {size}");
        }
        assert_eq!(count(br#"{"items":[]}"#, 1).unwrap(), 0);
        assert_eq!(count(br#"{"kind":"Status","code":500}"#, 4).unwrap(), 0);
        assert!(count(br#"{"items":[{}"#, 3).is_err());
        assert!(count(br#"{"items":["}]"#, 3).is_err());
    }
}
