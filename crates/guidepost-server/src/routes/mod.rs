//! One module per resource of the API: its wire types, its handlers and its operations
//! (each module's `operations()`: method, path, handler, access and how the document
//! describes it, declared together). The router, the access check and `/openapi.json` are
//! all built from [`operations`].

pub mod agents;
pub mod canned_responses;
pub mod capabilities;
pub mod customers;
pub mod evaluations;
pub mod events;
pub mod guidelines;
pub mod health;
pub mod journey_states;
pub mod journeys;
pub mod operation;
pub mod relationships;
pub mod services;
pub mod sessions;
pub mod simulations;
pub mod tags;
pub mod terms;
pub mod variables;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::access::Access;
use crate::state::AppState;

pub use operation::{Operation, Param, Unavailable};

/// Every operation the server serves, resource by resource, in the order the document
/// lists them.
pub fn operations() -> Vec<Operation> {
    [
        health::operations(),
        crate::web::operations(),
        agents::operations(),
        sessions::operations(),
        events::operations(),
        simulations::operations(),
        services::operations(),
        tags::operations(),
        terms::operations(),
        customers::operations(),
        canned_responses::operations(),
        variables::operations(),
        guidelines::operations(),
        relationships::operations(),
        journeys::operations(),
        journey_states::operations(),
        evaluations::operations(),
        capabilities::operations(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The router of every operation (without the server's layers and state).
pub fn router() -> Router<Arc<AppState>> {
    operations()
        .into_iter()
        .map(Operation::into_route)
        .fold(Router::new(), |router, (path, route)| router.route(path, route))
}

/// The access each declared operation needs, by path, then method.
fn accesses() -> &'static HashMap<&'static str, Vec<(Method, Access)>> {
    static ACCESSES: OnceLock<HashMap<&'static str, Vec<(Method, Access)>>> = OnceLock::new();
    ACCESSES.get_or_init(|| {
        let mut by_path: HashMap<&'static str, Vec<(Method, Access)>> = HashMap::new();
        for op in operations() {
            by_path.entry(op.path()).or_default().push((op.http_method().clone(), op.access));
        }
        by_path
    })
}

/// The access a request to `route` (the path as declared, with `{parameters}`) with `method`
/// needs: the operation's own. A method no operation of the path declares (`HEAD`, which the
/// `GET` handler answers) needs nothing on a path whose every operation is public and the
/// admin role elsewhere, as does a route nobody declared.
pub fn access_of(method: &Method, route: &str) -> Access {
    let Some(declared) = accesses().get(route) else { return Access::Admin };
    if let Some((_, access)) = declared.iter().find(|(m, _)| m == method) {
        return *access;
    }
    if declared.iter().all(|(_, access)| *access == Access::Public) { Access::Public } else { Access::Admin }
}

/// `204 No Content`.
pub fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// `201 Created` with a JSON body.
pub fn created<T: serde::Serialize>(body: T) -> Response {
    (StatusCode::CREATED, axum::Json(body)).into_response()
}
