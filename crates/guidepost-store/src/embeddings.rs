//! The embedding cache: a vector per (model, text), kept across restarts and shared by
//! replicas, with nearest-neighbour search (pgvector on PostgreSQL when installed, exact
//! cosine search in the process otherwise).

use guidepost_core::vectors::cosine;
use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::Store;
use crate::direct::Arg;
use crate::error::Result;
use crate::ids::now_us;

fn key(model: &str, text: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(model.as_bytes());
    hasher.update([0x1f]);
    hasher.update(text.as_bytes());
    hex::encode(hasher.finalize())
}

fn to_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn pg_vector(vector: &[f32]) -> String {
    let parts: Vec<String> = vector.iter().map(|x| if x.is_finite() { x.to_string() } else { "0".into() }).collect();
    format!("[{}]", parts.join(","))
}

impl Store {
    /// The cached vectors of `texts` under `model`, in order (`None` where not cached).
    pub async fn cached_embeddings(&self, model: &str, texts: &[String]) -> Result<Vec<Option<Vec<f32>>>> {
        let mut out = Vec::with_capacity(texts.len());
        for text in texts {
            let key = key(model, text);
            let sql = "SELECT vector FROM embeddings WHERE key = $1";
            let vector = self.read_row(sql, &[Arg::Text(&key)], |row| row.bytes("vector")).await?;
            out.push(vector.map(|bytes| from_bytes(&bytes)));
        }
        Ok(out)
    }

    /// Caches the vector of `text` under `model`.
    pub async fn cache_embedding(&self, model: &str, text: &str, vector: &[f32]) -> Result<()> {
        let k = key(model, text);
        let insert = sqlx::query(
            "INSERT INTO embeddings (key, model, text, dims, vector, created_us) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (key) DO NOTHING",
        )
        .bind(k.clone())
        .bind(model.to_string())
        .bind(text.to_string())
        .bind(i64::try_from(vector.len()).unwrap_or(0))
        .bind(to_bytes(vector))
        .bind(now_us());
        self.write_statement(insert).await?;
        if self.vector_search {
            sqlx::query("UPDATE embeddings SET embedding = CAST($1 AS vector) WHERE key = $2")
                .bind(pg_vector(vector))
                .bind(&k)
                .execute(self.writer()?)
                .await?;
        }
        Ok(())
    }

    /// The `k` cached texts of `model` nearest to `query` by cosine similarity, best
    /// first, with their similarity.
    pub async fn nearest_embeddings(&self, model: &str, query: &[f32], k: usize) -> Result<Vec<(String, f32)>> {
        let limit = i64::try_from(k).unwrap_or(i64::MAX);
        if self.vector_search {
            let rows = sqlx::query(
                "SELECT text, CAST(1 - (embedding <=> CAST($1 AS vector)) AS DOUBLE PRECISION) AS similarity \
                 FROM embeddings WHERE model = $2 AND dims = $3 AND embedding IS NOT NULL \
                 ORDER BY embedding <=> CAST($1 AS vector) LIMIT $4",
            )
            .bind(pg_vector(query))
            .bind(model)
            .bind(i64::try_from(query.len()).unwrap_or(0))
            .bind(limit)
            .fetch_all(&self.reader)
            .await?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                out.push((row.try_get("text")?, row.try_get::<f64, _>("similarity")? as f32));
            }
            return Ok(out);
        }
        let rows = sqlx::query("SELECT text, vector FROM embeddings WHERE model = $1")
            .bind(model)
            .fetch_all(&self.reader)
            .await?;
        let mut scored = Vec::with_capacity(rows.len());
        for row in rows {
            let vector = from_bytes(&row.try_get::<Vec<u8>, _>("vector")?);
            scored.push((row.try_get::<String, _>("text")?, cosine(query, &vector)));
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.truncate(k);
        Ok(scored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_through_bytes() {
        let v = vec![0.5f32, -1.25, 3.0];
        assert_eq!(from_bytes(&to_bytes(&v)), v);
        assert_eq!(pg_vector(&v), "[0.5,-1.25,3]");
    }
}
