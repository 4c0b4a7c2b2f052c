//! The Guidepost HTTP server: agents served over the Parlant-compatible REST API.
//!
//! The routes, JSON fields, enum strings, status codes and event semantics are those of
//! the Parlant 3.3 API, so its official clients and chat widget work unchanged; Guidepost's
//! extensions (journey states and transitions, definition import and export, turn traces,
//! usage, `/openapi.json`, `/metrics`) sit beside them. Everything is kept in a
//! [`guidepost_store::Store`]; messages, turns and waits for events are the
//! [`guidepost_conversation::Conversations`] service's, which the routes call: each parses
//! its request, authorizes the caller, calls the service and maps its errors.
//!
//! A customer message is followed from its route to the stored reply like this:
//! [`routes::events::create`] parses it into a [`guidepost_conversation::Post`] and posts it;
//! the service stores it with its turn row, runs the turn and commits its reply; clients
//! long-polling [`routes::events::list`] wake on each commit.
//!
//! ```no_run
//! # async fn run() -> anyhow::Result<()> {
//! use guidepost_server::Server;
//! # let models: guidepost_conversation::RuntimeModels = todo!();
//! let store = guidepost_store::Store::open("sqlite://.guidepost/guidepost.db").await?;
//! let server = Server::new(store, models, Default::default());
//! server.start().await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8800").await?;
//! server.run(listener, async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod access;
mod body_shape;
pub mod bounds;
pub mod client;
pub mod dto;
pub mod error;
pub mod extract;
pub mod listener;
pub mod metrics;
pub mod openapi;
pub mod rates;
pub mod routes;
pub mod state;
pub mod web;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use guidepost_conversation::{ConversationSettings, Conversations, RuntimeConfig, RuntimeModels, TurnSettings};
use guidepost_store::Store;
use tokio_util::sync::CancellationToken;
use tower_http::cors::{AllowHeaders, AllowMethods, AllowOrigin, CorsLayer};

use crate::access::{AccessPolicy, Caller};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::routes::{customers, evaluations};
use crate::state::AppState;

pub use error::{ApiError as Error, FieldError};

/// Largest request body accepted (413 above).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// Which origins may call the API from a browser.
#[derive(Debug, Clone, Default)]
pub enum Cors {
    /// Any origin: the default. An open server (no API keys, not in production) echoes the
    /// origin back with credentials allowed, as the reference server does; a protected one
    /// answers `*`, never with credentials.
    #[default]
    Any,
    /// Only these origins, with credentials allowed.
    Origins(Vec<String>),
}

/// How the server runs.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// Leases, turns in flight, turn timeout.
    pub turns: TurnSettings,
    /// Who may do what, and rate limits.
    pub access: AccessPolicy,
    /// Secrets never to repeat in responses and events (API keys, provider credentials).
    pub secrets: Vec<String>,
    /// Which browsers may call.
    pub cors: Cors,
    /// The simulator's artifact folder the web page shows runs from.
    pub simulations: Option<std::path::PathBuf>,
    /// Event sizes, header and idle timeouts, connections at once.
    pub bounds: bounds::Bounds,
    /// The proxies whose `X-Forwarded-For` names the client (for per-address limits).
    pub trusted_proxies: client::TrustedProxies,
}

/// The server: its shared state and its routes.
pub struct Server {
    state: Arc<AppState>,
    cors: Cors,
    /// How long stopping waits for the turns' running tool calls.
    shutdown_grace: Duration,
}

impl Server {
    /// A server on `store`, running agents with `models`, open (no keys), any origin. The
    /// embedder's vectors are cached in the store.
    pub fn new(store: Store, models: RuntimeModels, config: RuntimeConfig) -> Self {
        Self::with_options(store, models, config, ServerOptions::default())
    }

    /// As [`Server::new`], with these turn settings (lease, turns in flight, timeout).
    pub fn with_settings(store: Store, models: RuntimeModels, config: RuntimeConfig, turns: TurnSettings) -> Self {
        Self::with_options(store, models, config, ServerOptions { turns, ..ServerOptions::default() })
    }

    /// A server with these options.
    pub fn with_options(store: Store, models: RuntimeModels, config: RuntimeConfig, options: ServerOptions) -> Self {
        let metrics = Arc::new(Metrics::default());
        let shutdown_grace = options.turns.shutdown_grace;
        let settings =
            ConversationSettings { turns: options.turns, secrets: options.secrets, observer: metrics.clone() };
        let conversations = Arc::new(Conversations::new(store.clone(), models, config, settings));
        let limiter = rates::Limiter::for_store(&store);
        let state = Arc::new(AppState {
            limiter,
            store,
            conversations,
            metrics,
            evaluations: Default::default(),
            access: options.access,
            simulations: options.simulations,
            bounds: options.bounds,
            proxies: options.trusted_proxies,
        });
        Self { state, cors: options.cors, shutdown_grace }
    }

    /// The shared state.
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// Prepares the store (the `guest` customer) and resumes turns a previous process left
    /// unfinished; from then on, turns whose lease expires are taken again.
    pub async fn start(&self) -> Result<(), guidepost_store::StoreError> {
        customers::ensure_guest(&self.state.store).await?;
        evaluations::fail_orphans(&self.state).await?;
        self.state.conversations.start().await;
        Ok(())
    }

    /// Serves on `listener` until `shutdown` completes; then stops taking turns, hands
    /// back those still preparing, lets those replying finish (up to 10 s) and closes the
    /// store.
    pub async fn run(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let app = self.router();
        let token = CancellationToken::new();
        // Turns are handed back or finished while the HTTP side drains: long polls and
        // streams end at once when the service stops.
        let conversations = self.state.conversations.clone();
        let grace = self.shutdown_grace;
        let stopping = {
            let token = token.clone();
            tokio::spawn(async move {
                token.cancelled().await;
                conversations.shutdown(grace).await;
            })
        };
        let signal = {
            let token = token.clone();
            async move {
                shutdown.await;
                token.cancel();
            }
        };
        let served = listener::serve(listener, app, &self.state.bounds, signal, Duration::from_secs(15)).await;
        token.cancel();
        let _ = stopping.await;
        self.state.store.close().await;
        served
    }

    /// Every route, with CORS, body limits and request metrics.
    pub fn router(&self) -> Router {
        let cors = match &self.cors {
            // An open server has nothing a page from elsewhere could borrow credentials for.
            Cors::Any if !self.state.access.is_protected() => {
                CorsLayer::new().allow_origin(AllowOrigin::mirror_request()).allow_credentials(true)
            }
            // A protected one answers any origin as `*`, which browsers never combine with
            // credentials: a page from anywhere may call it with a key it holds, not with
            // the visitor's.
            Cors::Any => CorsLayer::new().allow_origin(AllowOrigin::any()),
            Cors::Origins(origins) => CorsLayer::new()
                .allow_origin(AllowOrigin::list(
                    origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()).collect::<Vec<_>>(),
                ))
                .allow_credentials(true),
        }
        .allow_headers(AllowHeaders::mirror_request())
        .allow_methods(AllowMethods::mirror_request())
        .max_age(Duration::from_secs(600));
        let metrics = self.state.metrics.clone();
        routes::router()
            .route_layer(axum::middleware::from_fn_with_state(self.state.clone(), authorize))
            .route_layer(axum::middleware::from_fn(move |req: Request, next: Next| {
                let metrics = metrics.clone();
                async move { count(metrics, req, next).await }
            }))
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed)
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .layer(cors)
            .with_state(self.state.clone())
    }
}

/// Who the caller is, whether they may do this, and whether they are within their rate.
/// The caller goes into the request's extensions for handlers that decide on the body.
async fn authorize(
    axum::extract::State(state): axum::extract::State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    if req.method() == Method::OPTIONS {
        return next.run(req).await;
    }
    let route = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_default();
    let access = access::access_of(req.method(), &route);
    let presented = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .or_else(|| req.headers().get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(|k| k.trim().to_string());
    let address = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| state.proxies.client(c.0.ip(), req.headers()));
    let failures = state.access.failed_authentications_per_minute.filter(|_| presented.is_some());
    if let Some(limit) = failures
        && let Err(wait) = state.limiter.check(&access::failure_key(address), limit).await
    {
        return ApiError::TooManyRequests(wait).into_response();
    }
    let caller = match state.access.caller(presented.as_deref()) {
        Ok(c) => c,
        Err(unknown) => {
            if let Some(limit) = failures
                && state.limiter.take(&access::failure_key(address), limit).await.is_ok()
                && state.limiter.check(&access::failure_key(address), limit).await.is_err()
            {
                tracing::warn!(address = ?address, "API keys that match none: further keys from this address wait");
            }
            return ApiError::Unauthorized(unknown.to_string()).into_response();
        }
    };
    if !state.access.allows(&caller, access) {
        return match caller {
            Caller::Anonymous => ApiError::Unauthorized("this operation needs an API key".into()).into_response(),
            _ => ApiError::Forbidden("this API key's role does not allow this operation".into()).into_response(),
        };
    }
    if access != access::Access::Public
        && let Some(limit) = state.access.requests_per_minute
        && !matches!(caller, Caller::Key { role: access::Role::Admin, .. })
        && let Err(wait) = state.limiter.take(&access::rate_key(&caller, address), limit).await
    {
        return ApiError::TooManyRequests(wait).into_response();
    }
    let mut req = match reach_session(&state, &caller, access, req).await {
        Ok(req) => req,
        Err(refused) => return refused,
    };
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// For a session-scoped operation, whether the caller may reach that session: a caller
/// without a key reaches guest sessions only (see [`access::reaches_session`]). A session
/// that does not exist is left to the handler (404).
async fn reach_session(
    state: &Arc<AppState>,
    caller: &Caller,
    access: access::Access,
    req: Request,
) -> Result<Request, Response> {
    use axum::extract::FromRequestParts;
    if !caller.is_anonymous() || access == access::Access::Public {
        return Ok(req);
    }
    let (mut parts, body) = req.into_parts();
    let params = axum::extract::RawPathParams::from_request_parts(&mut parts, state).await;
    let req = Request::from_parts(parts, body);
    let Some(session_id) =
        params.ok().and_then(|p| p.iter().find(|(name, _)| *name == "session_id").map(|(_, id)| id.to_string()))
    else {
        return Ok(req);
    };
    match state.store.get_session(&session_id).await {
        Ok(Some(record)) if !access::reaches_session(caller, &record.session.customer_id) => {
            Err(ApiError::Unauthorized("this session belongs to a named customer: reaching it needs an API key".into())
                .into_response())
        }
        Ok(_) => Ok(req),
        Err(error) => Err(ApiError::from(error).into_response()),
    }
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, axum::Json(serde_json::json!({"detail": "Not Found"}))).into_response()
}

async fn method_not_allowed() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, axum::Json(serde_json::json!({"detail": "Method Not Allowed"}))).into_response()
}

async fn count(metrics: Arc<Metrics>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let route =
        req.extensions().get::<MatchedPath>().map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(req).await;
    if method != Method::OPTIONS {
        metrics.request(method.as_str(), &route, response.status().as_u16(), started.elapsed());
    }
    response
}

/// An [`ApiError`] as a response (for code outside the handlers).
pub fn error_response(error: ApiError) -> Response {
    error.into_response()
}
