//! The web page, embedded in the binary: a chat with any agent, the inspector that shows
//! why each reply came out as it did, the agents' definitions with their journeys drawn,
//! and the simulator's runs with their coverage. It talks to the server through the same
//! public API as any client, and a Content-Security-Policy keeps it from loading anything
//! from another host.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::routes::Operation;

/// The page and its files: open to anyone, and not part of the API's document.
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::get("/", index, "web_page", "The web page").public().undocumented(),
        Operation::get("/assets/{name}", asset, "web_asset", "The web page's scripts, styles and icon")
            .public()
            .undocumented(),
    ]
}

const INDEX: &str = include_str!("../web/index.html");

/// The page's files: name, content type, content.
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.js", "text/javascript; charset=utf-8", include_str!("../web/app.js")),
    ("diagram.js", "text/javascript; charset=utf-8", include_str!("../web/diagram.js")),
    ("app.css", "text/css; charset=utf-8", include_str!("../web/app.css")),
    ("favicon.svg", "image/svg+xml", include_str!("../web/favicon.svg")),
];

/// Nothing from another host: scripts, styles, images and requests all stay on this server.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn page(content_type: &'static str, body: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `GET /`: the page.
pub async fn index() -> Response {
    page("text/html; charset=utf-8", INDEX)
}

/// `GET /assets/{name}`: its scripts, styles and icon.
pub async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => page(content_type, body),
        None => (StatusCode::NOT_FOUND, axum::Json(serde_json::json!({"detail": "Not Found"}))).into_response(),
    }
}
