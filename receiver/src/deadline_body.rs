//! A request body that must have arrived by a deadline: a client sending its body a byte at
//! a time would otherwise hold a request, a connection and a request slot for as long as it
//! likes. Past the deadline the body yields [`BodyTimedOut`] instead of its next frame.

use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// The error of a body that did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyTimedOut(pub Duration);

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub struct DeadlineBody<B> {
    inner: Pin<Box<B>>,
    sleep: Pin<Box<tokio::time::Sleep>>,
    within: Duration,
}

impl<B> DeadlineBody<B> {
    /// `inner`, which must arrive within `within` from now. Must be called inside a tokio
    /// runtime (the deadline is a tokio timer).
    pub fn new(inner: B, within: Duration) -> DeadlineBody<B> {
        DeadlineBody {
            inner: Box::pin(inner),
            sleep: Box::pin(tokio::time::sleep(within)),
            within,
        }
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Poll::Ready(frame) = self.inner.as_mut().poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            let within = self.within;
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut(within)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether `error` (or one of its causes) is a [`BodyTimedOut`].
pub fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut e = Some(error);
    while let Some(x) = e {
        if x.is::<BodyTimedOut>() {
            return true;
        }
        e = x.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt as _, Full};

    /// A body that sends one byte, then nothing, ever: a client that stopped sending.
    struct Stalled(bool);

    impl Body for Stalled {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            if self.0 {
                return Poll::Pending;
            }
            self.0 = true;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_body_in_time_passes_through() {
        let body = DeadlineBody::new(
            Full::new(Bytes::from_static(b"abc")),
            Duration::from_secs(5),
        );
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"abc");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_body_that_stalls_times_out() {
        let body = DeadlineBody::new(Stalled(false), Duration::from_millis(50));
        let err = body.collect().await.unwrap_err();
        assert!(timed_out(err.as_ref()), "{err}");
    }
}
