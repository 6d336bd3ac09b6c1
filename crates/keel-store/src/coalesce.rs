//! [`Coalesced`]: a client connection whose writes wait one scheduler turn, so that the
//! responses finished in the same turn leave in one system call.
//!
//! Each gRPC call runs in its own task; when it answers, it wakes the connection's task, which
//! would otherwise write that one response at once. Under load, several answers of the same
//! connection finish within a turn of the runtime, and writing them one by one costs a system
//! call and a loopback packet each (more CPU than the request itself on a small machine). So a
//! write first yields once: the connection's task goes to the back of the run queue, the other
//! ready calls finish and queue their frames behind it, and the write that follows carries them
//! all. This is what grpc-go's "loopy writer" achieves with its control buffer. An idle server
//! pays one extra poll, not a timer: nothing waits unless other work is ready to run.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection whose writes are deferred by one turn of the scheduler (see the module docs).
#[derive(Debug)]
pub struct Coalesced<T> {
    inner: T,
    /// The pending write already yielded once.
    yielded: bool,
}

impl<T> Coalesced<T> {
    /// Wraps a connection.
    pub fn new(inner: T) -> Coalesced<T> {
        Coalesced {
            inner,
            yielded: false,
        }
    }

    /// Yields once before each write: `Ready` means "write now".
    fn turn(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.yielded = !self.yielded;
        if !self.yielded {
            Poll::Ready(())
        } else {
            // Waking ourselves while being polled puts this task at the back of the queue.
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalesced<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesced<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.turn(cx));
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.turn(cx));
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn writes_arrive_whole_and_in_order() {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let mut a = Coalesced::new(a);
        let writer = tokio::spawn(async move {
            for i in 0..100u8 {
                a.write_all(&[i; 100]).await.unwrap();
            }
            a.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        let want: Vec<u8> = (0..100u8).flat_map(|i| [i; 100]).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn every_other_poll_writes() {
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut c = Coalesced::new(());
        assert!(c.turn(&mut cx).is_pending());
        assert!(c.turn(&mut cx).is_ready());
        assert!(c.turn(&mut cx).is_pending());
    }
}
