//! One module per resource of the API: its wire types and its handlers.

pub mod agents;
pub mod canned_responses;
pub mod capabilities;
pub mod customers;
pub mod evaluations;
pub mod events;
pub mod guidelines;
pub mod health;
pub mod journeys;
pub mod relationships;
pub mod services;
pub mod sessions;
pub mod simulations;
pub mod tags;
pub mod terms;
pub mod variables;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// `204 No Content`.
pub fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// `201 Created` with a JSON body.
pub fn created<T: serde::Serialize>(body: T) -> Response {
    (StatusCode::CREATED, axum::Json(body)).into_response()
}
