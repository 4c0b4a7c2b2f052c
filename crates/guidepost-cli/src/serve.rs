//! `guidepost serve`: the agents over the Parlant-compatible REST API, and
//! `guidepost export`: an agent's stored definition back as YAML.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use guidepost_server::{Cors, Server};
use guidepost_store::Store;

use crate::discover::discover;

/// Where the store is.
pub struct StoreOptions {
    /// A database URL (`sqlite://...`, `postgres://...`).
    pub database_url: Option<String>,
    /// The folder of the embedded SQLite file.
    pub data_dir: PathBuf,
    /// In memory: nothing survives the process.
    pub ephemeral: bool,
}

impl StoreOptions {
    /// Opens the store these options name.
    pub async fn open(&self) -> Result<(Store, String)> {
        if self.ephemeral {
            return Ok((
                Store::ephemeral().await.context("opening an in-memory store")?,
                "memory (--ephemeral)".into(),
            ));
        }
        if let Some(url) = &self.database_url {
            let store =
                Store::open(url).await.with_context(|| format!("opening {}", guidepost_store::db::redact(url)))?;
            return Ok((store, guidepost_store::db::redact(url)));
        }
        let path = self.data_dir.join("guidepost.db");
        let store = Store::open_sqlite_file(&path).await.with_context(|| format!("opening {}", path.display()))?;
        Ok((store, path.display().to_string()))
    }
}

/// Options of `guidepost serve`.
pub struct ServeOptions {
    pub paths: Vec<PathBuf>,
    pub host: String,
    pub port: u16,
    pub store: StoreOptions,
    pub model: Option<String>,
    pub embedder: Option<String>,
    pub threads: Option<usize>,
    pub cors_origins: Vec<String>,
    pub turns: guidepost_conversation::TurnSettings,
    pub production: bool,
    pub api_keys_file: Option<PathBuf>,
    pub rate_limit: Option<u32>,
    pub session_message_limit: Option<u32>,
    pub auth_failure_limit: Option<u32>,
    pub trusted_proxies: guidepost_server::client::TrustedProxies,
    pub simulations: Option<PathBuf>,
    pub bounds: guidepost_server::bounds::Bounds,
}

/// API keys from `GUIDEPOST_API_KEYS` and `--api-keys-file` (`role:key` entries).
fn api_keys(file: Option<&PathBuf>) -> Result<Vec<(String, guidepost_server::access::Role)>> {
    use guidepost_server::access::AccessPolicy;
    let mut keys = Vec::new();
    if let Ok(text) = std::env::var("GUIDEPOST_API_KEYS") {
        keys.extend(AccessPolicy::parse_keys(&text).map_err(|e| anyhow::anyhow!("GUIDEPOST_API_KEYS: {e}"))?);
    }
    if let Some(path) = file {
        let text = guidepost_core::files::read_text(path, guidepost_core::limits::Limits::global())?;
        keys.extend(AccessPolicy::parse_keys(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?);
    }
    Ok(keys)
}

async fn shutdown_signal() {
    crate::child::StopSignals::listen().recv().await;
    eprintln!("shutting down: no new turns; turns already replying finish, the others resume on the next start");
}

pub async fn run(options: ServeOptions) -> Result<ExitCode> {
    let started = Instant::now();
    // The port first: a taken port is the most common first mistake, and nothing else should
    // happen (imports, model checks) before it is known to be free.
    let addr: SocketAddr = format!("{}:{}", options.host, options.port).parse().with_context(|| {
        format!("`{}:{}` is not an address to listen on (--host, --port)", options.host, options.port)
    })?;
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => bail!(
            "port {} is in use on {} (another `guidepost serve`, or another program): stop it, or pick another \
             port with --port (--port 0 picks a free one)",
            options.port,
            options.host
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot listen on {addr}")),
    };
    let mut definitions = Vec::new();
    let found = discover(&options.paths)?;
    let mut failed = false;
    for agent in &found {
        let loaded = agent.load();
        match loaded.definition {
            Some(d) if !loaded.has_errors() => definitions.push(d),
            _ => {
                failed = true;
                for d in &loaded.diagnostics {
                    let source = agent.sources.iter().find(|s| s.name == d.file).map(|s| s.text.as_str());
                    eprintln!("{}", d.render(source));
                }
                eprintln!("error: {} does not load", agent.origin.display());
            }
        }
    }
    if failed {
        bail!("fix the definitions above (guidepost check shows the same), then start again");
    }
    let (store, location) = options.store.open().await?;
    let mut unchanged = 0;
    for definition in &definitions {
        let report = store
            .import_definition(definition)
            .await
            .with_context(|| format!("importing agent `{}`", definition.agent.id))?;
        if report.created + report.updated + report.removed == 0 {
            unchanged += 1;
            continue;
        }
        eprintln!(
            "agent {}: {} created, {} updated, {} unchanged, {} removed",
            report.agent_id, report.created, report.updated, report.unchanged, report.removed
        );
        for id in &report.replaced_edits {
            eprintln!(
                "  note: `{id}` was changed over the API since the last start; the definition file's version replaces it"
            );
        }
    }
    if unchanged > 0 {
        eprintln!("{unchanged} agent(s) unchanged since the last start");
    }
    let stack =
        crate::models::stack_with(options.model.as_deref(), options.embedder.as_deref(), options.threads, Some(128))?;
    let models = crate::models::runtime_models(&stack);
    let model_id = models.generation.model_id().to_string();
    let cors = if options.cors_origins.is_empty() { Cors::Any } else { Cors::Origins(options.cors_origins.clone()) };
    let keys = api_keys(options.api_keys_file.as_ref())?;
    let mut secrets = guidepost_llm::secrets::environment_secrets();
    secrets.extend(keys.iter().map(|(k, _)| k.clone()));
    crate::add_log_secrets(&secrets);
    let key_count = keys.len();
    let mut access = guidepost_server::access::AccessPolicy::with_keys(keys, options.production);
    if let Some(n) = options.rate_limit {
        access.requests_per_minute = (n > 0).then_some(n);
    }
    if let Some(n) = options.session_message_limit {
        access.messages_per_session_per_minute = (n > 0).then_some(n);
    }
    if let Some(n) = options.auth_failure_limit {
        access.failed_authentications_per_minute = (n > 0).then_some(n);
    }
    let protected = access.is_protected();
    // The simulator's artifact folder: as given, or `.tally` when there is one here.
    let simulations = options.simulations.clone().or_else(|| {
        let default = PathBuf::from(".tally");
        default.is_dir().then_some(default)
    });
    let server_options = guidepost_server::ServerOptions {
        turns: options.turns.clone(),
        access,
        secrets,
        cors,
        simulations: simulations.clone(),
        bounds: options.bounds.clone(),
        trusted_proxies: options.trusted_proxies.clone(),
    };
    let config = guidepost_cli::config_file::runtime_config()?;
    let server = Server::with_options(store.clone(), models, config, server_options);
    server.start().await.context("preparing the store")?;
    let bound = listener.local_addr()?;
    let agents = store.agent_ids().await?;
    eprintln!(
        "store: {location} ({}); model: {model_id}; agents: {}",
        store.backend().name(),
        if agents.is_empty() { "none yet (create one over the API)".to_string() } else { agents.join(", ") }
    );
    if protected {
        eprintln!(
            "access: {key_count} API key(s); {}",
            if options.production {
                "production mode: callers without a key may use the customer-facing operations"
            } else {
                "callers without a key are refused"
            }
        );
    } else {
        eprintln!("access: open (no API keys; set GUIDEPOST_API_KEYS or --production before exposing the server)");
    }
    if let Some(dir) = &simulations {
        eprintln!("simulation runs: {} (shown on the web page)", dir.display());
    }
    eprintln!("ready in {:.2} s", started.elapsed().as_secs_f64());
    outln!("listening on http://{bound}");
    // Local weights load now, in the background, so the first message does not pay for them
    // (one that arrives sooner waits for the same load).
    let to_load = stack.models_to_warm_up();
    if !to_load.is_empty() {
        let names = to_load.join(", ");
        eprintln!(
            "loading {names} in the background: a message that arrives before it is loaded waits for it{}",
            if guidepost_llm::is_local_model(&model_id) { " (set GUIDEPOST_MODEL for a hosted model)" } else { "" }
        );
        let stack = stack.clone();
        tokio::spawn(async move {
            let loading = Instant::now();
            match stack.warm_up().await {
                Ok(()) => eprintln!("loaded {names} in {:.1} s", loading.elapsed().as_secs_f64()),
                Err(e) => eprintln!("warning: loading {names} failed ({e}); each turn will try again"),
            }
        });
    }
    eprintln!("web page: http://{bound}/ (chat, inspector, agents, simulations)");
    server.run(listener, shutdown_signal()).await.context("serving")?;
    drop(stack);
    Ok(ExitCode::SUCCESS)
}

/// `guidepost export AGENT`: the agent's definition as the store holds it, as YAML.
pub async fn export(agent: &str, store: StoreOptions) -> Result<ExitCode> {
    let file = store.data_dir.join("guidepost.db");
    if store.database_url.is_none() && !file.is_file() {
        bail!(
            "no store at {}: `guidepost serve PATH` creates it (run export from the folder you served from, \
             or give --data-dir or --database-url)",
            file.display()
        );
    }
    let (store, location) = store.open().await?;
    let mut definition = match store.export_definition(agent).await {
        Ok(d) => d,
        Err(guidepost_store::StoreError::NotFound { .. }) => {
            let known = store.agent_ids().await?;
            bail!(
                "no agent `{agent}` in {location} (agents: {})",
                if known.is_empty() { "none".into() } else { known.join(", ") }
            );
        }
        Err(e) => return Err(e.into()),
    };
    // Tool services' credentials are not shown; importing this back keeps the stored ones.
    definition.services = definition.services.iter().map(guidepost_tools::registry::shown_service).collect();
    out!("{}", guidepost_core::definition::to_yaml(&definition)?);
    Ok(ExitCode::SUCCESS)
}
