//! A response body that holds a value until the body has been sent or dropped.
//!
//! A request is not over when its handler returns: a list or a watch goes on in its body.
//! What must last as long as the request (an inflight permit, a connection's "busy" mark)
//! rides in the body, and is released when the body ends, fails, or is dropped (the client
//! went away), whichever comes first.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// `inner`, with `held` released when the body ends or is dropped.
    pub struct Holding<T> {
        #[pin]
        inner: Body,
        held: Option<T>,
    }
}

impl<T: Send + 'static> Holding<T> {
    /// `body`, holding `held` until it is done; as an axum [`Body`] again.
    ///
    /// The size hint is kept, so a body of known length still goes out with a
    /// `Content-Length`.
    pub fn body(body: Body, held: T) -> Body {
        Body::new(Holding {
            inner: body,
            held: Some(held),
        })
    }
}

impl<T> http_body::Body for Holding<T> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.project();
        let r = this.inner.poll_frame(cx);
        if matches!(r, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            this.held.take();
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn held_until_the_body_ends_and_the_length_is_kept() {
        let held = Arc::new(());
        let body = Holding::body(Body::from("abc"), held.clone());
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(3));
        assert_eq!(Arc::strong_count(&held), 2);
        let bytes = axum::body::to_bytes(body, 10).await.unwrap();
        assert_eq!(&bytes[..], b"abc");
        assert_eq!(Arc::strong_count(&held), 1);
    }

    #[test]
    fn released_when_dropped_unsent() {
        let held = Arc::new(());
        let body = Holding::body(Body::from("abc"), held.clone());
        assert_eq!(Arc::strong_count(&held), 2);
        drop(body);
        assert_eq!(Arc::strong_count(&held), 1);
    }
}
