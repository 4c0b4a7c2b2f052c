//! `/customers`: the people agents talk to. The `guest` customer always exists and
//! owns sessions created without a customer.

use axum::Json;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use guidepost_core::Customer;
use guidepost_core::session::GUEST_CUSTOMER;
use guidepost_store::definitions::check_api_id;
use guidepost_store::{Cursor, PageRequest, Record, Sort, Store, Write};
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::dto::{MetadataUpdate, PageDto, PageOrList, TagsUpdate};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{Body, Params};
use crate::routes::operation::{Operation, Param};
use crate::routes::{created, no_content};
use crate::state::State;

/// What this resource serves, each operation declared once (see [`crate::routes::operation`]).
pub fn operations() -> Vec<Operation> {
    vec![
        Operation::post("/customers", create, "create_customer", "Creates a customer")
            .body::<CustomerCreationParams>()
            .creates::<CustomerDto>(),
        Operation::get("/customers", list, "list_customers", "Lists customers: a plain array, or a page with limit")
            .query([
                Param::new("limit", "integer", "Page size, 1 to 100"),
                Param::new("cursor", "string", "The next_cursor of the previous page"),
                Param::new("sort", "string", "asc or desc"),
            ])
            .answers::<PageOrList<CustomerDto>>(),
        Operation::get("/customers/{customer_id}", read, "read_customer", "Reads a customer").answers::<CustomerDto>(),
        Operation::patch("/customers/{customer_id}", update, "update_customer", "Changes a customer")
            .body::<CustomerUpdateParams>()
            .answers::<CustomerDto>(),
        Operation::delete("/customers/{customer_id}", delete, "delete_customer", "Deletes a customer").no_content(),
    ]
}

/// A customer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CustomerDto {
    /// Id.
    pub id: String,
    /// When the customer was created (ISO 8601).
    pub creation_utc: String,
    /// Name.
    pub name: String,
    /// Free-form string metadata.
    pub metadata: IndexMap<String, String>,
    /// Tag ids.
    pub tags: Vec<String>,
}

impl From<&Record<Customer>> for CustomerDto {
    fn from(r: &Record<Customer>) -> Self {
        Self {
            id: r.id.clone(),
            creation_utc: r.created.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            name: r.entity.name.clone(),
            metadata: r.entity.metadata.clone(),
            tags: r.entity.tags.clone(),
        }
    }
}

/// A new customer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CustomerCreationParams {
    /// Name.
    pub name: String,
    /// Id (generated when absent).
    pub id: Option<String>,
    /// Free-form string metadata.
    pub metadata: Option<IndexMap<String, String>>,
    /// Tag ids.
    pub tags: Option<Vec<String>>,
}

/// Changes to a customer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CustomerUpdateParams {
    /// New name.
    pub name: Option<String>,
    /// Metadata keys to set and unset.
    pub metadata: Option<MetadataUpdate<String>>,
    /// Tags to add and remove.
    pub tags: Option<TagsUpdate>,
}

/// Makes sure the `guest` customer exists (created at the epoch, so it lists first).
pub async fn ensure_guest(store: &Store) -> guidepost_store::Result<()> {
    if store.get::<Customer>(GUEST_CUSTOMER).await?.is_none() {
        let epoch = chrono::DateTime::from_timestamp(0, 0).unwrap_or_default();
        let guest = Customer {
            id: GUEST_CUSTOMER.into(),
            creation_utc: epoch,
            name: guidepost_core::session::GUEST_NAME.into(),
            metadata: IndexMap::new(),
            tags: Vec::new(),
        };
        let mut record = Record::new(GUEST_CUSTOMER, guest);
        record.created = epoch;
        match store.apply(vec![Write::insert(&record)?]).await {
            Ok(()) | Err(guidepost_store::StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `POST /customers`
pub async fn create(state: State, Body(params): Body<CustomerCreationParams>) -> ApiResult<Response> {
    let id = params.id.clone().unwrap_or_else(guidepost_store::ids::new_id);
    check_api_id(&id)?;
    let tags = params.tags.clone().unwrap_or_default();
    state.check_tags(&tags).await?;
    let record = Record::new(
        id.clone(),
        Customer {
            id,
            creation_utc: chrono::Utc::now(),
            name: params.name,
            metadata: params.metadata.unwrap_or_default(),
            tags,
        },
    );
    state.store.apply(vec![Write::insert(&record)?]).await?;
    Ok(created(CustomerDto::from(&record)))
}

/// Reads the listing parameters shared by customers and sessions: `limit` (1 to 100),
/// `cursor` and `sort`. `None` without a `limit`: the whole listing as a plain array.
pub fn page_request(params: &Params) -> ApiResult<Option<PageRequest>> {
    let Some(limit) = params.bounded("limit", 1, 100)? else {
        return Ok(None);
    };
    let cursor = match params.get("cursor") {
        None | Some("") => None,
        Some(text) => Some(Cursor::decode(text).ok_or_else(|| {
            ApiError::invalid(
                FieldError::query("cursor", "value_error", "the cursor is not one this server handed out")
                    .with_input(json!(text)),
            )
        })?),
    };
    let sort = match params.choice::<String>("sort", &["asc", "desc"])?.as_deref() {
        None | Some("asc") => Sort::Ascending,
        Some("desc") => Sort::Descending,
        Some(other) => {
            return Err(ApiError::invalid(
                FieldError::query("sort", "enum", "Input should be 'asc' or 'desc'").with_input(json!(other)),
            ));
        }
    };
    Ok(Some(PageRequest { limit: u32::try_from(limit).unwrap_or(100), cursor, sort }))
}

/// `GET /customers`: a plain array, or a page with `limit`.
pub async fn list(state: State, params: Params) -> ApiResult<Response> {
    ensure_guest(&state.store).await?;
    match page_request(&params)? {
        None => {
            let all = state.store.list::<Customer>().await?;
            Ok(Json(all.iter().map(CustomerDto::from).collect::<Vec<_>>()).into_response())
        }
        Some(request) => {
            let page = state.store.page::<Customer>(&request).await?;
            Ok(Json(PageDto {
                items: page.items.iter().map(CustomerDto::from).collect(),
                total_count: page.total_count,
                has_more: page.has_more,
                next_cursor: page.next_cursor.map(|c| c.encode()),
            })
            .into_response())
        }
    }
}

/// `GET /customers/{customer_id}`
pub async fn read(state: State, Path(customer_id): Path<String>) -> ApiResult<Json<CustomerDto>> {
    if customer_id == GUEST_CUSTOMER {
        ensure_guest(&state.store).await?;
    }
    Ok(Json(CustomerDto::from(&state.store.require::<Customer>(&customer_id).await?)))
}

/// `PATCH /customers/{customer_id}`
pub async fn update(
    state: State,
    Path(customer_id): Path<String>,
    Body(params): Body<CustomerUpdateParams>,
) -> ApiResult<Json<CustomerDto>> {
    if let Some(add) = params.tags.as_ref().and_then(|t| t.add.as_ref()) {
        state.check_tags(add).await?;
    }
    let record = state
        .store
        .update::<Customer>(&customer_id, |r| {
            if let Some(name) = &params.name {
                r.entity.name.clone_from(name);
            }
            if let Some(m) = &params.metadata {
                m.apply(&mut r.entity.metadata);
            }
            if let Some(t) = &params.tags {
                t.apply(&mut r.entity.tags);
            }
            Ok(())
        })
        .await?;
    Ok(Json(CustomerDto::from(&record)))
}

/// `DELETE /customers/{customer_id}`
pub async fn delete(state: State, Path(customer_id): Path<String>) -> ApiResult<Response> {
    state.store.delete::<Customer>(&customer_id).await?;
    Ok(no_content())
}
