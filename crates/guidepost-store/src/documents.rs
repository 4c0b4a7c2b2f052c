//! Documents: agents, their definition entities, customers and evaluations, stored as
//! JSON with a version for compare-and-set updates.
//!
//! A [`Record`] wraps the domain value ([`Entity`]) with what the store knows about it:
//! when it was created, where it came from (a definition file or the API) and its version.
//! Writes go through [`Write`] batches applied in one transaction; a change to any
//! definition entity bumps the definition revision in that same transaction.

use crate::direct::Columns;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::{Result, StoreError};
use crate::ids::time_from_us;

/// A kind of document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collection {
    /// Agents.
    Agents,
    /// Tags.
    Tags,
    /// Guidelines, observations and journey conditions.
    Guidelines,
    /// Relationships.
    Relationships,
    /// Journeys with their states and transitions.
    Journeys,
    /// Tools declared by definitions.
    Tools,
    /// Tool services.
    Services,
    /// Context variables.
    Variables,
    /// Glossary terms.
    Terms,
    /// Capabilities.
    Capabilities,
    /// Canned responses.
    CannedResponses,
    /// Customers.
    Customers,
    /// Evaluations.
    Evaluations,
}

impl Collection {
    /// The collection's name in the database.
    pub fn name(self) -> &'static str {
        match self {
            Self::Agents => "agents",
            Self::Tags => "tags",
            Self::Guidelines => "guidelines",
            Self::Relationships => "relationships",
            Self::Journeys => "journeys",
            Self::Tools => "tools",
            Self::Services => "services",
            Self::Variables => "context_variables",
            Self::Terms => "terms",
            Self::Capabilities => "capabilities",
            Self::CannedResponses => "canned_responses",
            Self::Customers => "customers",
            Self::Evaluations => "evaluations",
        }
    }

    /// What one document is called in messages.
    pub fn noun(self) -> &'static str {
        match self {
            Self::Agents => "agent",
            Self::Tags => "tag",
            Self::Guidelines => "guideline",
            Self::Relationships => "relationship",
            Self::Journeys => "journey",
            Self::Tools => "tool",
            Self::Services => "service",
            Self::Variables => "context variable",
            Self::Terms => "term",
            Self::Capabilities => "capability",
            Self::CannedResponses => "canned response",
            Self::Customers => "customer",
            Self::Evaluations => "evaluation",
        }
    }

    /// Whether the collection is part of agents' definitions (a change makes compiled
    /// definitions stale).
    pub fn is_definition(self) -> bool {
        !matches!(self, Self::Customers | Self::Evaluations)
    }
}

/// A value the store keeps as a document.
pub trait Entity: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {
    /// Where documents of this type live.
    const COLLECTION: Collection;
}

macro_rules! entity {
    ($($ty:ty => $collection:ident),* $(,)?) => {
        $(impl Entity for $ty { const COLLECTION: Collection = Collection::$collection; })*
    };
}

entity! {
    guidepost_core::Agent => Agents,
    guidepost_core::Tag => Tags,
    guidepost_core::Guideline => Guidelines,
    guidepost_core::Relationship => Relationships,
    guidepost_core::Journey => Journeys,
    guidepost_core::Tool => Tools,
    guidepost_core::ToolService => Services,
    guidepost_core::ContextVariable => Variables,
    guidepost_core::Term => Terms,
    guidepost_core::Capability => Capabilities,
    guidepost_core::CannedResponse => CannedResponses,
    guidepost_core::Customer => Customers,
}

/// Where a document came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Origin {
    /// Created through the API (or by code).
    Api,
    /// Imported from the definition files of this agent; the next import replaces it.
    File(String),
}

impl Origin {
    pub(crate) fn encode(&self) -> String {
        match self {
            Self::Api => "api".into(),
            Self::File(agent) => format!("file:{agent}"),
        }
    }

    fn decode(text: &str) -> Self {
        match text.strip_prefix("file:") {
            Some(agent) => Self::File(agent.to_string()),
            None => Self::Api,
        }
    }
}

/// A stored document: the entity and what the store knows about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<T> {
    /// Id, unique within the collection.
    pub id: String,
    /// When it was created.
    pub created: DateTime<Utc>,
    /// Where it came from.
    pub origin: Origin,
    /// Incremented by every write; updates name the version they read.
    pub version: i64,
    /// The entity.
    pub entity: T,
    /// Fields the API carries that the domain type does not (kept as given).
    pub extra: Map<String, Value>,
}

impl<T: Entity> Record<T> {
    /// A new record created now through the API.
    pub fn new(id: impl Into<String>, entity: T) -> Self {
        Self { id: id.into(), created: Utc::now(), origin: Origin::Api, version: 0, entity, extra: Map::new() }
    }

    /// With this origin.
    pub fn with_origin(mut self, origin: Origin) -> Self {
        self.origin = origin;
        self
    }

    /// With these extra fields.
    pub fn with_extra(mut self, extra: Map<String, Value>) -> Self {
        self.extra = extra;
        self
    }

    fn raw(&self) -> Result<RawDoc> {
        let data = serde_json::json!({"entity": self.entity, "extra": self.extra});
        Ok(RawDoc {
            collection: T::COLLECTION,
            id: self.id.clone(),
            created_us: self.created.timestamp_micros(),
            origin: self.origin.encode(),
            data: serde_json::to_string(&data).map_err(|e| StoreError::Corrupt { what: self.id.clone(), source: e })?,
        })
    }

    pub(crate) fn from_row(row: &dyn Columns) -> Result<Self> {
        let id = row.text("id")?;
        let data = row.text("data")?;
        let what = || format!("{} `{id}`", T::COLLECTION.noun());
        let mut value: Value =
            serde_json::from_str(&data).map_err(|e| StoreError::Corrupt { what: what(), source: e })?;
        let entity = serde_json::from_value(value.get_mut("entity").map(Value::take).unwrap_or_default())
            .map_err(|e| StoreError::Corrupt { what: what(), source: e })?;
        let extra = match value.get_mut("extra").map(Value::take) {
            Some(Value::Object(map)) => map,
            _ => Map::new(),
        };
        Ok(Self {
            created: time_from_us(row.int("created_us")?),
            origin: Origin::decode(&row.text("origin")?),
            version: row.int("version")?,
            entity,
            extra,
            id,
        })
    }
}

#[derive(Debug, Clone)]
pub(crate) struct RawDoc {
    collection: Collection,
    id: String,
    created_us: i64,
    origin: String,
    data: String,
}

impl RawDoc {
    /// `INSERT`s the document, with `on_conflict` appended to the statement.
    async fn insert(&self, on_conflict: &'static str, tx: &mut sqlx::AnyConnection) -> Result<(), sqlx::Error> {
        let sql = format!(
            "INSERT INTO documents (collection, id, created_us, origin, version, data) VALUES ($1, $2, $3, $4, 1, $5){on_conflict}"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(self.collection.name())
            .bind(&self.id)
            .bind(self.created_us)
            .bind(&self.origin)
            .bind(&self.data)
            .execute(&mut *tx)
            .await
            .map(|_| ())
    }
}

/// One write of a batch applied with [`crate::Store::apply`].
#[derive(Debug, Clone)]
pub struct Write(WriteOp);

#[derive(Debug, Clone)]
enum WriteOp {
    Insert(RawDoc),
    Replace { doc: RawDoc, expected_version: i64 },
    Upsert(RawDoc),
    Delete { collection: Collection, id: String },
}

impl Write {
    /// Creates the document; the batch fails with `AlreadyExists` if the id is taken.
    pub fn insert<T: Entity>(record: &Record<T>) -> Result<Self> {
        Ok(Self(WriteOp::Insert(record.raw()?)))
    }

    /// Replaces the document if it is still at `record.version`; the batch fails with
    /// `Conflict` otherwise (re-read and try again).
    pub fn replace<T: Entity>(record: &Record<T>) -> Result<Self> {
        Ok(Self(WriteOp::Replace { doc: record.raw()?, expected_version: record.version }))
    }

    /// Creates or replaces the document whatever its version (imports).
    pub fn upsert<T: Entity>(record: &Record<T>) -> Result<Self> {
        Ok(Self(WriteOp::Upsert(record.raw()?)))
    }

    /// Deletes the document if it exists.
    pub fn delete<T: Entity>(id: &str) -> Self {
        Self(WriteOp::Delete { collection: T::COLLECTION, id: id.to_string() })
    }

    fn collection(&self) -> Collection {
        match &self.0 {
            WriteOp::Insert(d) | WriteOp::Upsert(d) | WriteOp::Replace { doc: d, .. } => d.collection,
            WriteOp::Delete { collection, .. } => *collection,
        }
    }

    pub(crate) fn touches_definition(&self) -> bool {
        self.collection().is_definition()
    }

    pub(crate) async fn apply(self, tx: &mut sqlx::AnyConnection) -> Result<()> {
        match self.0 {
            WriteOp::Insert(doc) => {
                let result = doc.insert("", tx).await;
                match result {
                    Err(e) if StoreError::is_unique_violation(&e) => {
                        Err(StoreError::AlreadyExists { kind: doc.collection.noun(), id: doc.id })
                    }
                    other => other.map(|_| ()).map_err(Into::into),
                }
            }
            WriteOp::Replace { doc, expected_version } => {
                let done = sqlx::query(
                    "UPDATE documents SET origin = $1, version = version + 1, data = $2 \
                     WHERE collection = $3 AND id = $4 AND version = $5",
                )
                .bind(&doc.origin)
                .bind(&doc.data)
                .bind(doc.collection.name())
                .bind(&doc.id)
                .bind(expected_version)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 1 {
                    return Ok(());
                }
                let exists = sqlx::query("SELECT 1 AS one FROM documents WHERE collection = $1 AND id = $2")
                    .bind(doc.collection.name())
                    .bind(&doc.id)
                    .fetch_optional(&mut *tx)
                    .await?
                    .is_some();
                Err(if exists {
                    StoreError::Conflict { kind: doc.collection.noun(), id: doc.id }
                } else {
                    StoreError::NotFound { kind: doc.collection.noun(), id: doc.id }
                })
            }
            WriteOp::Upsert(doc) => {
                doc.insert(
                    " ON CONFLICT (collection, id) DO UPDATE SET origin = excluded.origin, data = excluded.data, \
                     version = documents.version + 1",
                    tx,
                )
                .await?;
                Ok(())
            }
            WriteOp::Delete { collection, id } => {
                sqlx::query("DELETE FROM documents WHERE collection = $1 AND id = $2")
                    .bind(collection.name())
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
                Ok(())
            }
        }
    }
}

/// Where a page of a listing starts: after the item with this creation time and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// Creation time of the last item of the previous page, in microseconds.
    pub created_us: i64,
    /// Its id.
    pub id: String,
}

impl Cursor {
    /// The cursor after `record`.
    pub fn after(created: DateTime<Utc>, id: &str) -> Self {
        Self { created_us: created.timestamp_micros(), id: id.to_string() }
    }

    /// The opaque text handed to clients.
    pub fn encode(&self) -> String {
        let text = format!("{}:{}", self.created_us, self.id);
        hex::encode(text.as_bytes())
    }

    /// Reads a cursor handed out by [`Cursor::encode`].
    pub fn decode(text: &str) -> Option<Self> {
        let bytes = hex::decode(text).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (created, id) = text.split_once(':')?;
        Some(Self { created_us: created.parse().ok()?, id: id.to_string() })
    }
}

/// Listing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// Oldest first.
    #[default]
    Ascending,
    /// Newest first.
    Descending,
}

/// A page request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// At most this many items.
    pub limit: u32,
    /// Start after this item.
    pub cursor: Option<Cursor>,
    /// Order.
    pub sort: Sort,
}

/// A page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// How many items the whole listing has.
    pub total_count: u64,
    /// Whether more items follow.
    pub has_more: bool,
    /// The cursor of the next page, when there is one.
    pub next_cursor: Option<Cursor>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let c = Cursor { created_us: 1_700_000_000_000_000, id: "ab:c".into() };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        assert_eq!(Cursor::decode("zz"), None);
        assert_eq!(Cursor::decode(&hex::encode("nocolon")), None);
    }

    #[test]
    fn origins_round_trip() {
        for o in [Origin::Api, Origin::File("weather".into())] {
            assert_eq!(Origin::decode(&o.encode()), o);
        }
    }
}
