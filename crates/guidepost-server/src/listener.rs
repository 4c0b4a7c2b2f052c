//! Serving connections within [`Bounds`]: a client that does not send its request's headers in
//! time, stalls in the middle of its body or does not read what it is sent is dropped, and
//! no more than `max_connections` are served at once, so slow or idle clients cannot hold the
//! server's sockets and file descriptors forever.
//!
//! - headers: hyper's header-read timeout, which runs from the connection's opening and from
//!   the end of each response, so it also closes an idle kept-alive connection;
//! - a request body that stalls between two pieces: [`RequestBodyTimeout`];
//! - a response the client does not read: [`Stalled`], which fails a write that has waited
//!   longer than the idle timeout. A long poll or an event stream waiting on the server writes
//!   nothing and waits on nothing from the client, so it is never cut;
//! - connections past the cap are closed as soon as they are accepted.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower_http::timeout::RequestBodyTimeout;

use crate::bounds::Bounds;

/// Serves `app` on `listener` within `bounds` until `shutdown` completes, then stops accepting
/// and waits (up to `drain`) for the connections being served to finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    bounds: &Bounds,
    shutdown: impl Future<Output = ()> + Send,
    drain: Duration,
) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(bounds.header_timeout);
    builder.http2().timer(TokioTimer::new());
    let slots = Arc::new(Semaphore::new(bounds.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, address) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, say: wait a moment rather than spin.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%address, max = bounds.max_connections, "connection refused: the server serves its most at once");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = app.clone().layer(axum::Extension(axum::extract::ConnectInfo(address)));
        let service = TowerToHyperService::new(RequestBodyTimeout::new(service, bounds.idle_timeout));
        let io = TokioIo::new(Stalled::new(stream, bounds.idle_timeout));
        let connection = graceful.watch(builder.serve_connection_with_upgrades(io, service).into_owned());
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%address, %error, "connection ended");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(drain, graceful.shutdown()).await.is_err() {
        tracing::warn!("connections still open {drain:?} after shutting down; closing them");
    }
    Ok(())
}

/// A stream whose writes fail once one has waited longer than `limit` for the client to
/// read (its socket buffer full): a client that stops reading is dropped, not served forever.
struct Stalled<S> {
    inner: S,
    limit: Duration,
    /// When the write that is waiting gives up.
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> Stalled<S> {
    fn new(inner: S, limit: Duration) -> Self {
        Self { inner, limit, waiting: None }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Stalled<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> Stalled<S> {
    /// `poll` on the inner stream, failing once a write has waited past the limit.
    fn guard<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(Pin<&mut S>, &mut Context<'_>) -> Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        match poll(Pin::new(&mut self.inner), cx) {
            Poll::Ready(result) => {
                self.waiting = None;
                Poll::Ready(result)
            }
            Poll::Pending => {
                let limit = self.limit;
                let waiting = self.waiting.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                match waiting.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("the client read nothing for {limit:?}"),
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Stalled<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.get_mut().guard(cx, |inner, cx| inner.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.get_mut().guard(cx, |inner, cx| inner.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().guard(cx, |inner, cx| inner.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
