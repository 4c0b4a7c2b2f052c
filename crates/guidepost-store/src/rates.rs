//! Rate-limit buckets kept in the database, so the replicas of a server share one budget per
//! caller instead of each granting it in full.
//!
//! A bucket holds up to `per_minute` tokens and refills continuously, `per_minute` a minute;
//! taking a token and refilling are one statement, so concurrent replicas never grant the
//! same token twice. The table holds only transient counters (a bucket untouched for a minute
//! is full and carries no information), so it is created when the store opens rather than by a
//! numbered migration, and old buckets are pruned as the table is used.

use std::time::Duration;

use sqlx::{AnyPool, AssertSqlSafe, Row};

use crate::{Backend, Result, Store};

/// Buckets untouched this long are full and are forgotten.
const FORGET_AFTER_US: i64 = 120_000_000;

/// Creates the buckets' table if it is missing.
pub(crate) async fn prepare(pool: &AnyPool) -> Result<()> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS rate_buckets (key TEXT PRIMARY KEY, tokens DOUBLE PRECISION NOT NULL, \
         at_us BIGINT NOT NULL, granted BIGINT NOT NULL)",
    )
    .execute(pool)
    .await?;
    Ok(())
}

impl Store {
    /// Takes one token from the shared bucket `key` of `per_minute` (or, with `take` false,
    /// only looks whether one is there); `Ok(Err(wait))` when the bucket is empty, with how
    /// long until a token is back.
    pub async fn take_rate_token(
        &self,
        key: &str,
        per_minute: u32,
        take: bool,
    ) -> Result<std::result::Result<(), Duration>> {
        let capacity = f64::from(per_minute.max(1));
        let per_us = capacity / 60_000_000.0;
        let (least, greatest) = match self.backend() {
            Backend::Postgres => ("LEAST", "GREATEST"),
            Backend::Sqlite => ("MIN", "MAX"),
        };
        let refilled = format!("{least}($2, rate_buckets.tokens + {greatest}(0, $3 - rate_buckets.at_us) * $4)");
        let sql = format!(
            "INSERT INTO rate_buckets (key, tokens, at_us, granted) VALUES ($1, $2 - $5, $3, 1) \
             ON CONFLICT (key) DO UPDATE SET \
             tokens = CASE WHEN {refilled} >= 1 THEN {refilled} - $5 ELSE {refilled} END, \
             granted = CASE WHEN {refilled} >= 1 THEN 1 ELSE 0 END, \
             at_us = {greatest}(rate_buckets.at_us, $3) \
             RETURNING tokens, granted"
        );
        let now = crate::ids::now_us();
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(key)
            .bind(capacity)
            .bind(now)
            .bind(per_us)
            .bind(if take { 1.0_f64 } else { 0.0_f64 })
            .fetch_one(self.writer()?)
            .await?;
        let tokens: f64 = row.try_get("tokens")?;
        let granted: i64 = row.try_get("granted")?;
        if granted == 1 {
            return Ok(Ok(()));
        }
        Ok(Err(Duration::from_secs_f64(((1.0 - tokens) / (per_us * 1_000_000.0)).max(0.001))))
    }

    /// Forgets the buckets nobody used for two minutes (they are full); returns how many.
    pub async fn prune_rate_buckets(&self) -> Result<u64> {
        let done = sqlx::query("DELETE FROM rate_buckets WHERE at_us < $1")
            .bind(crate::ids::now_us() - FORGET_AFTER_US)
            .execute(self.writer()?)
            .await?;
        Ok(done.rows_affected())
    }
}
