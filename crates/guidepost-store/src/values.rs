//! Context variable values, by variable and key. Keys follow the wire: a customer id,
//! `tag:<tag id>` for customers carrying a tag, or `DEFAULT` for everyone.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::Store;
use crate::error::{Result, StoreError};
use crate::ids::{new_id, now_us, time_from_us};

/// The key of the value everyone gets.
pub const DEFAULT_KEY: &str = "DEFAULT";

/// A stored value.
#[derive(Debug, Clone, PartialEq)]
pub struct VariableValue {
    /// Id of the value.
    pub id: String,
    /// The key it is stored under.
    pub key: String,
    /// When it was last set.
    pub last_modified: DateTime<Utc>,
    /// The value.
    pub data: Value,
}

fn decode(row: &AnyRow) -> Result<VariableValue> {
    let key: String = row.try_get("key")?;
    let data: String = row.try_get("data")?;
    Ok(VariableValue {
        id: row.try_get("id")?,
        last_modified: time_from_us(row.try_get("last_modified_us")?),
        data: serde_json::from_str(&data)
            .map_err(|e| StoreError::Corrupt { what: format!("value `{key}`"), source: e })?,
        key,
    })
}

impl Store {
    /// The variable's value under `key`.
    pub async fn get_value(&self, variable_id: &str, key: &str) -> Result<Option<VariableValue>> {
        let row = sqlx::query(
            "SELECT key, id, last_modified_us, data FROM variable_values WHERE variable_id = $1 AND key = $2",
        )
        .bind(variable_id)
        .bind(key)
        .fetch_optional(&self.reader)
        .await?;
        row.as_ref().map(decode).transpose()
    }

    /// Every value of the variable, by key.
    pub async fn list_values(&self, variable_id: &str) -> Result<Vec<VariableValue>> {
        let rows = sqlx::query(
            "SELECT key, id, last_modified_us, data FROM variable_values WHERE variable_id = $1 ORDER BY key",
        )
        .bind(variable_id)
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(decode).collect()
    }

    /// Sets the variable's value under `key` (keeping the value's id when it existed).
    pub async fn set_value(
        &self,
        variable_id: &str,
        key: &str,
        data: &Value,
        at: DateTime<Utc>,
    ) -> Result<VariableValue> {
        let id = new_id();
        sqlx::query(
            "INSERT INTO variable_values (variable_id, key, id, last_modified_us, data) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (variable_id, key) DO UPDATE SET last_modified_us = excluded.last_modified_us, data = excluded.data",
        )
        .bind(variable_id)
        .bind(key)
        .bind(&id)
        .bind(at.timestamp_micros())
        .bind(data.to_string())
        .execute(self.writer()?)
        .await?;
        self.get_value(variable_id, key)
            .await?
            .ok_or_else(|| StoreError::NotFound { kind: "value", id: key.to_string() })
    }

    /// Deletes the variable's value under `key`; returns whether there was one.
    pub async fn delete_value(&self, variable_id: &str, key: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM variable_values WHERE variable_id = $1 AND key = $2")
            .bind(variable_id)
            .bind(key)
            .execute(self.writer()?)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes every value of the variable.
    pub async fn delete_values(&self, variable_id: &str) -> Result<()> {
        sqlx::query("DELETE FROM variable_values WHERE variable_id = $1")
            .bind(variable_id)
            .execute(self.writer()?)
            .await?;
        Ok(())
    }
}

/// Microseconds now, for callers that stamp values.
pub fn now() -> DateTime<Utc> {
    time_from_us(now_us())
}
