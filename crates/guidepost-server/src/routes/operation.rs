//! One operation of the API, declared once beside its handler: method, path, handler, who
//! may call it and how `/openapi.json` describes it. The router, the access check and the
//! document are all built from these declarations, so none of them can name an operation
//! the others do not know.
//!
//! ```ignore
//! Operation::get("/agents/{agent_id}", read, "read_agent", "Reads an agent")
//!     .customer()
//!     .answers::<AgentDto>()
//! ```

use std::sync::Arc;

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, MethodRouter, on};
use schemars::generate::SchemaGenerator;
use schemars::{JsonSchema, Schema};
use serde_json::{Value, json};

use crate::access::Access;
use crate::state::AppState;

/// Makes the JSON Schema of a request or response type (a reference into the document's
/// components).
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// Makes an OpenAPI `content` object (media type to schema) for bodies that are not one of
/// the API's JSON types.
pub type ContentFn = fn() -> Value;

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// A query parameter an operation reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// Its name.
    pub name: &'static str,
    /// Its JSON type (`string`, `integer`, `boolean`).
    pub kind: &'static str,
    /// What it does.
    pub description: &'static str,
    /// Whether a request must give it.
    pub required: bool,
}

impl Param {
    /// An optional parameter.
    pub const fn new(name: &'static str, kind: &'static str, description: &'static str) -> Self {
        Self { name, kind, description, required: false }
    }

    /// The same parameter, required.
    pub const fn required(self) -> Self {
        Self { required: true, ..self }
    }
}

/// What an operation answers with 503, if it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// It never answers 503.
    Never,
    /// 503 with the API's error body, when something it depends on does not answer.
    Error,
    /// 503 with the same body as its success (a report that says what is wrong).
    SameBody,
}

/// One operation: what the router serves, the access check decides on and the document
/// describes. Its method, path and handler are fixed together when it is made; the rest says
/// who may call it and how the document describes it.
pub struct Operation {
    method: &'static str,
    path: &'static str,
    /// The operation id (the reference's, for the compatible routes).
    pub id: &'static str,
    /// What it does.
    pub summary: &'static str,
    /// Its query parameters.
    pub query: Vec<Param>,
    /// The request body's type, when it takes JSON.
    pub body: Option<SchemaFn>,
    /// The request body's content, when it is not (only) one of the API's JSON types.
    pub request_content: Option<ContentFn>,
    /// Success status.
    pub status: u16,
    /// The success body's type (`None`: no body, or see `content`).
    pub response: Option<SchemaFn>,
    /// The success body's content, when it is not one of the API's JSON types (text, YAML).
    pub content: Option<ContentFn>,
    /// Whether it also answers 201, with the same body as its 200, when it created what it
    /// was given.
    pub may_create: bool,
    /// Whether it may answer 503, and with what.
    pub unavailable: Unavailable,
    /// Whether it is a Guidepost extension (not in the reference API).
    pub extension: bool,
    /// Who may call it.
    pub access: Access,
    /// Whether `/openapi.json` lists it (everything but the web page's files).
    pub documented: bool,
    verb: Method,
    route: MethodRouter<Arc<AppState>>,
}

macro_rules! constructor {
    ($name:ident, $filter:ident, $method:literal, $doc:literal) => {
        #[doc = $doc]
        pub fn $name<H, T>(path: &'static str, handler: H, id: &'static str, summary: &'static str) -> Self
        where
            H: Handler<T, Arc<AppState>>,
            T: 'static,
        {
            Self::new($method, Method::$filter, MethodFilter::$filter, path, handler, id, summary)
        }
    };
}

impl Operation {
    fn new<H, T>(
        method: &'static str,
        verb: Method,
        filter: MethodFilter,
        path: &'static str,
        handler: H,
        id: &'static str,
        summary: &'static str,
    ) -> Self
    where
        H: Handler<T, Arc<AppState>>,
        T: 'static,
    {
        Self {
            method,
            path,
            id,
            summary,
            query: Vec::new(),
            body: None,
            request_content: None,
            status: 200,
            response: None,
            content: None,
            may_create: false,
            unavailable: Unavailable::Never,
            extension: false,
            access: Access::Admin,
            documented: true,
            verb,
            route: on(filter, handler),
        }
    }

    constructor!(get, GET, "get", "`GET path` served by `handler`, admin only, answering 200 until told otherwise.");
    constructor!(
        post,
        POST,
        "post",
        "`POST path` served by `handler`, admin only, answering 200 until told otherwise."
    );
    constructor!(put, PUT, "put", "`PUT path` served by `handler`, admin only, answering 200 until told otherwise.");
    constructor!(
        patch,
        PATCH,
        "patch",
        "`PATCH path` served by `handler`, admin only, answering 200 until told otherwise."
    );
    constructor!(
        delete,
        DELETE,
        "delete",
        "`DELETE path` served by `handler`, admin only, answering 200 until told otherwise."
    );

    /// Its query parameters.
    pub fn query(mut self, params: impl IntoIterator<Item = Param>) -> Self {
        self.query.extend(params);
        self
    }

    /// It takes a JSON body of type `T`.
    pub fn body<T: JsonSchema>(mut self) -> Self {
        self.body = Some(schema_of::<T>);
        self
    }

    /// It takes a body described by `content` (media types to schemas).
    pub fn request_content(mut self, content: ContentFn) -> Self {
        self.request_content = Some(content);
        self
    }

    /// It answers 200 with a `T`.
    pub fn answers<T: JsonSchema>(mut self) -> Self {
        self.status = 200;
        self.response = Some(schema_of::<T>);
        self
    }

    /// It answers 201 with the `T` it created.
    pub fn creates<T: JsonSchema>(mut self) -> Self {
        self.status = 201;
        self.response = Some(schema_of::<T>);
        self
    }

    /// It answers 204 without a body.
    pub fn no_content(mut self) -> Self {
        self.status = 204;
        self.response = None;
        self
    }

    /// Its success body is described by `content` (text, YAML, or JSON of no API type).
    pub fn content(mut self, content: ContentFn) -> Self {
        self.content = Some(content);
        self
    }

    /// It answers 201 instead of 200, with the same body, when it created what it was given.
    pub fn may_create(mut self) -> Self {
        self.may_create = true;
        self
    }

    /// It may answer 503.
    pub fn unavailable(mut self, answer: Unavailable) -> Self {
        self.unavailable = answer;
        self
    }

    /// It is a Guidepost extension, not in the reference API.
    pub fn extension(mut self) -> Self {
        self.extension = true;
        self
    }

    /// Anyone may call it, always.
    pub fn public(mut self) -> Self {
        self.access = Access::Public;
        self
    }

    /// A customer-facing widget may call it (see [`crate::access`]).
    pub fn customer(mut self) -> Self {
        self.access = Access::Customer;
        self
    }

    /// It is served but not part of the API, so the document leaves it out (the web page).
    pub fn undocumented(mut self) -> Self {
        self.documented = false;
        self
    }

    /// Its HTTP method, lowercase, as the document spells it.
    pub fn method(&self) -> &'static str {
        self.method
    }

    /// Its HTTP method.
    pub fn http_method(&self) -> &Method {
        &self.verb
    }

    /// Its path with `{parameters}`, as the router matches it.
    pub fn path(&self) -> &'static str {
        self.path
    }

    /// Its route, for the router.
    pub(crate) fn into_route(self) -> (&'static str, MethodRouter<Arc<AppState>>) {
        (self.path, self.route)
    }
}

/// A `text/plain` success body.
pub fn text() -> Value {
    json!({"text/plain": {"schema": {"type": "string"}}})
}

/// A JSON object of no particular API type.
pub fn any_object() -> Value {
    json!({"application/json": {"schema": {"type": "object"}}})
}
