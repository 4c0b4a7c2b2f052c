//! Serving connections within [`Bounds`]: a client that does not send its request's headers in
//! time, stalls in the middle of its body or does not read what it is sent is dropped, and
//! no more than `max_connections` are served at once, so slow or idle clients cannot hold the
//! server's sockets and file descriptors forever.
//!
//! - headers: hyper's header-read timeout, which runs from the connection's opening and from
//!   the end of each response, so it also closes an idle kept-alive connection;
//! - a quiet connection: one that sends nothing for the header timeout while none of its
//!   requests is being answered is closed whatever its protocol ([`Activity`]), so a client
//!   that connects and never speaks, or stops halfway through an HTTP/2 preface or frame,
//!   holds no slot;
//! - a request body that stalls between two pieces: [`RequestBodyTimeout`];
//! - a response the client does not read: [`Stalled`], which fails a write that has waited
//!   longer than the idle timeout. A long poll or an event stream waiting on the server writes
//!   nothing and waits on nothing from the client, so it is never cut;
//! - connections past the cap are closed as soon as they are accepted.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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
        let activity = Arc::new(Activity::new());
        let service =
            Tracked { inner: RequestBodyTimeout::new(service, bounds.idle_timeout), activity: activity.clone() };
        let io = TokioIo::new(Stalled::new(stream, bounds.idle_timeout, activity.clone()));
        let connection =
            graceful.watch(builder.serve_connection_with_upgrades(io, TowerToHyperService::new(service)).into_owned());
        let quiet = bounds.header_timeout;
        tokio::spawn(async move {
            tokio::select! {
                ended = connection => if let Err(error) = ended {
                    tracing::debug!(%address, %error, "connection ended");
                },
                () = activity.quiet_for(quiet) => {
                    tracing::debug!(%address, "connection closed: it sent nothing for {quiet:?} with no request being answered");
                }
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

/// What a connection is doing: when it last sent something or had a request end, and how
/// many of its requests are being answered (a response counts until its body is sent or
/// dropped, so a long poll and an event stream are never quiet).
struct Activity {
    opened: tokio::time::Instant,
    /// Milliseconds from `opened` to the last read or request start or end.
    last: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    fn new() -> Self {
        Self { opened: tokio::time::Instant::now(), last: AtomicU64::new(0), in_flight: AtomicUsize::new(0) }
    }

    fn touch(&self) {
        let now = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.fetch_max(now, Ordering::Relaxed);
    }

    /// Completes once the connection was quiet for `limit`: nothing read, no request started
    /// or ended, and none being answered.
    async fn quiet_for(&self, limit: Duration) {
        loop {
            let last = self.last.load(Ordering::Relaxed);
            tokio::time::sleep_until(self.opened + Duration::from_millis(last) + limit).await;
            if self.in_flight.load(Ordering::Relaxed) == 0 && self.last.load(Ordering::Relaxed) == last {
                return;
            }
            if self.last.load(Ordering::Relaxed) == last {
                // Requests being answered and nothing else: look again a limit later.
                self.touch();
            }
        }
    }
}

/// Counts a request as being answered from its start until its response's body is sent or
/// dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn new(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        activity.touch();
        Self(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// A service whose requests are counted in the connection's [`Activity`].
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S, R> tower::Service<R> for Tracked<S>
where
    S: tower::Service<R, Response = axum::response::Response>,
    S::Future: Send + 'static,
{
    type Response = axum::response::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let in_flight = InFlight::new(self.activity.clone());
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| axum::body::Body::new(Answering { body, _in_flight: in_flight })))
        })
    }
}

/// A response body that keeps its request counted as being answered until it is done.
struct Answering {
    body: axum::body::Body,
    _in_flight: InFlight,
}

impl axum::body::HttpBody for Answering {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// A stream whose writes fail once one has waited longer than `limit` for the client to
/// read (its socket buffer full): a client that stops reading is dropped, not served forever.
/// What it reads counts as the connection's activity.
struct Stalled<S> {
    inner: S,
    limit: Duration,
    /// When the write that is waiting gives up.
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
    activity: Arc<Activity>,
}

impl<S> Stalled<S> {
    fn new(inner: S, limit: Duration, activity: Arc<Activity>) -> Self {
        Self { inner, limit, waiting: None, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Stalled<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.touch();
        }
        polled
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
