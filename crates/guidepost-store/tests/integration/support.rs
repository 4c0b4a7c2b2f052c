use guidepost_store::Store;

/// Runs a test body on both backends.
#[macro_export]
macro_rules! store_test {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let store = $crate::integration::support::sqlite().await;
                ($body)(store).await;
            }

            /// On a file, where point reads run on the calling thread.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite_file() {
                let dir = tempfile::tempdir().expect("a temporary folder");
                let store = guidepost_store::Store::open_sqlite_file(&dir.path().join("store.db"))
                    .await
                    .expect("a SQLite file opens");
                ($body)(store.clone()).await;
                store.close().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(db) = $crate::integration::support::postgres().await else { return };
                ($body)(db.store.clone()).await;
                db.drop().await;
            }
        }
    };
}

pub async fn sqlite() -> Store {
    Store::ephemeral().await.expect("in-memory SQLite opens")
}

/// A database of its own on the test PostgreSQL server.
pub struct PgDatabase {
    pub store: Store,
    pub url: String,
    admin: Store,
    name: String,
}

impl PgDatabase {
    pub async fn drop(self) {
        self.store.close().await;
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name)))
            .execute(self.admin.pool())
            .await;
        self.admin.close().await;
    }
}

pub fn postgres_url() -> Option<String> {
    match std::env::var("GUIDEPOST_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("GUIDEPOST_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "GUIDEPOST_REQUIRE_POSTGRES=1 but GUIDEPOST_TEST_DATABASE_URL is not set (run `scripts/postgres.sh start`)"
            );
            eprintln!("skipped: GUIDEPOST_TEST_DATABASE_URL is not set");
            None
        }
    }
}

pub async fn postgres() -> Option<PgDatabase> {
    let url = postgres_url()?;
    let admin = Store::open_with(&url, 2).await.expect("the test PostgreSQL opens");
    let name = format!("gp_test_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(admin.pool())
        .await
        .expect("create database");
    let base = url.rsplit_once('/').map_or(url.as_str(), |(base, _)| base);
    let url = format!("{base}/{name}");
    let store = Store::open_with(&url, 8).await.expect("the test database opens");
    Some(PgDatabase { store, url, admin, name })
}

pub fn example(name: &str) -> guidepost_core::AgentDefinition {
    let path = format!("{}/../../examples/agents/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("example exists");
    let loaded = guidepost_core::definition::load_agent(&[guidepost_core::definition::SourceFile::new(path, text)]);
    loaded.definition.expect("example loads")
}

pub fn load_yaml(name: &str, yaml: &str) -> guidepost_core::AgentDefinition {
    let loaded = guidepost_core::definition::load_agent(&[guidepost_core::definition::SourceFile::new(name, yaml)]);
    assert!(!loaded.has_errors(), "{:?}", loaded.diagnostics);
    loaded.definition.expect("loads")
}
