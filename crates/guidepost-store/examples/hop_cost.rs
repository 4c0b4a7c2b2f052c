//! What a point read of a SQLite file costs, through sqlx (a statement is a round trip to
//! the connection's thread) and on the calling thread (how the store reads a file): the same
//! statement on the same file, CPU and wall time per read.
//!
//! `cargo run --release -p guidepost-store --example hop_cost [READS]`

use std::time::Instant;

use guidepost_core::Session;
use guidepost_store::Store;

/// This process's CPU time so far, in milliseconds (user and system, from /proc).
fn cpu_ms() -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or_default().split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of the line (utime, stime), counted after the command's closing
    // parenthesis; clock ticks of 10 ms.
    Ok((ticks(11) + ticks(12)) * 10.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let reads: u32 = std::env::args().nth(1).map(|n| n.parse()).transpose()?.unwrap_or(5000);
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("store.db");
    let store = Store::open_sqlite_file(&path).await?;
    let session = Session::new("s1", "a", "c");
    store.create_session(&session).await?;
    let sql = "SELECT id, version, data FROM sessions WHERE id = $1";
    println!("| read | CPU µs per read | wall µs per read |\n|---|---|---|");
    for round in 1..=2 {
        let (cpu, wall) = (cpu_ms()?, Instant::now());
        for _ in 0..reads {
            sqlx::query(sql).bind("s1").fetch_one(store.read_pool()).await?;
        }
        let per = |total: f64| total * 1000.0 / f64::from(reads);
        println!(
            "| through sqlx (round {round}) | {:.1} | {:.1} |",
            per(cpu_ms()? - cpu),
            per(wall.elapsed().as_secs_f64() * 1000.0)
        );
        let (cpu, wall) = (cpu_ms()?, Instant::now());
        for _ in 0..reads {
            store.get_session("s1").await?;
        }
        println!(
            "| the store's (round {round}) | {:.1} | {:.1} |",
            per(cpu_ms()? - cpu),
            per(wall.elapsed().as_secs_f64() * 1000.0)
        );
    }
    store.close().await;
    Ok(())
}
