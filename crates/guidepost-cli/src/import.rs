//! `guidepost import parlant <url>`: reads an agent from a running Parlant 3.3 server over
//! its REST API and writes a definition folder, with what could not be carried over.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Subcommand;
use guidepost_core::definition::parlant::wire::*;
use guidepost_core::definition::parlant::{
    AgentScope, Fetched, Imported, NEVER_IN_THE_API, ParlantServer, RelationshipRead, RelationshipsOf, import_agent,
};
use guidepost_core::definition::{SourceFile, load_agent};
use serde::de::DeserializeOwned;

/// `guidepost import ...`.
#[derive(Subcommand)]
pub enum ImportCommand {
    /// Bring an agent over from a running Parlant 3.3 server.
    ///
    /// Reads the agent over the server's REST API (its guidelines with their criticality,
    /// tags, metadata and tools, relationships, journeys with their conditions and the states
    /// its Mermaid chart shows, glossary, context variables, canned responses, capabilities and
    /// tool services) and writes OUT/agent.yaml, which `guidepost check` accepts, and
    /// OUT/IMPORT.md, which lists what could not be carried over and why (also printed).
    /// Exit status: 0, or 1 when the written definition has errors.
    Parlant {
        /// The Parlant server, e.g. http://localhost:8800.
        url: String,
        /// The agent's id or name (needed when the server has several).
        #[arg(long)]
        agent: Option<String>,
        /// The folder to write (default: the agent's id).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write into OUT even when it already holds files.
        #[arg(long)]
        force: bool,
        /// Seconds each request may take.
        #[arg(long, default_value_t = 30)]
        timeout_secs: u64,
    },
}

/// Runs an import command.
pub async fn run(command: ImportCommand) -> anyhow::Result<ExitCode> {
    let ImportCommand::Parlant { url, agent, out, force, timeout_secs } = command;
    let reader = Reader::new(&url, Duration::from_secs(timeout_secs.max(1)))?;
    let server = reader.read(agent.as_deref()).await?;
    let imported = import_agent(&server)?;
    let folder = out.unwrap_or_else(|| PathBuf::from(&server.agent.id));
    write(&folder, &server, &imported, force)
}

/// Reads the REST API.
struct Reader {
    base: String,
    client: reqwest::Client,
}

/// A path segment or query value, percent-encoded.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => char::from(b).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

impl Reader {
    fn new(url: &str, timeout: Duration) -> anyhow::Result<Self> {
        let parsed = reqwest::Url::parse(url).with_context(|| format!("`{url}` is not a URL"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            bail!("`{url}` must start with http:// or https://");
        }
        let client = guidepost_llm::http::client_builder().timeout(timeout).build()?;
        Ok(Self { base: url.trim_end_matches('/').to_string(), client })
    }

    async fn text(&self, path: &str) -> Fetched<String> {
        let response =
            self.client.get(format!("{}{path}", self.base)).send().await.map_err(|e| format!("GET {path}: {e}"))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| format!("GET {path}: reading the answer: {e}"))?;
        if !status.is_success() {
            let excerpt: String = body.trim().chars().take(200).collect();
            return Err(format!("GET {path} answered HTTP {status}: {excerpt}"));
        }
        Ok(body)
    }

    async fn json<T: DeserializeOwned>(&self, path: &str) -> Fetched<T> {
        let body = self.text(path).await?;
        serde_json::from_str(&body).map_err(|e| format!("GET {path} answered JSON that does not read: {e}"))
    }

    /// Everything the import needs about the agent `wanted` (its id or name).
    async fn read(&self, wanted: Option<&str>) -> anyhow::Result<ParlantServer> {
        let agents: Vec<AgentDto> = self
            .json("/agents")
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("{} does not answer like a Parlant server", self.base))?;
        let agent = choose(agents, wanted)?;
        let mut scope = AgentScope::new(&agent);
        let mut server = ParlantServer {
            url: self.base.clone(),
            agent: agent.clone(),
            tags: self.json("/tags").await,
            guidelines: self.json("/guidelines").await,
            guideline_details: BTreeMap::new(),
            relationships: Vec::new(),
            journeys: self.json("/journeys").await,
            charts: BTreeMap::new(),
            terms: self.json("/terms").await,
            variables: self.json("/context-variables").await,
            variable_values: BTreeMap::new(),
            canned_responses: self.json("/canned_responses").await,
            capabilities: self.json("/capabilities").await,
            services: self.json("/services").await,
            service_tools: BTreeMap::new(),
        };
        let journeys: Vec<JourneyDto> =
            server.journeys.as_ref().map(|j| scope.journeys(j).into_iter().cloned().collect()).unwrap_or_default();
        for j in &journeys {
            server.charts.insert(j.id.clone(), self.text(&format!("/journeys/{}/mermaid", encode(&j.id))).await);
        }
        let mut tools = BTreeSet::new();
        let guidelines: Vec<GuidelineDto> = server.guidelines.clone().unwrap_or_default();
        for g in guidelines.iter().filter(|g| scope.includes(&g.tags)) {
            let detail: Fetched<GuidelineDetailDto> = self.json(&format!("/guidelines/{}", encode(&g.id))).await;
            for a in detail.iter().flat_map(|d| &d.tool_associations) {
                tools.insert(a.tool_id.clone());
            }
            server.guideline_details.insert(g.id.clone(), detail);
            server.relationships.push(self.relationships(RelationshipsOf::Guideline(g.id.clone())).await);
        }
        let mut tag_ids: Vec<String> = server.tags.iter().flatten().map(|t| t.id.clone()).collect();
        tag_ids.push(format!("agent:{}", agent.id));
        tag_ids.extend(journeys.iter().map(|j| format!("journey:{}", j.id)));
        for tag in tag_ids {
            server.relationships.push(self.relationships(RelationshipsOf::Tag(tag)).await);
        }
        let variables: Vec<ContextVariableDto> = server.variables.clone().unwrap_or_default();
        for v in variables.iter().filter(|v| scope.includes(v.tags.as_deref().unwrap_or_default())) {
            tools.extend(v.tool_id.clone());
            let path = format!("/context-variables/{}?include_values=true", encode(&v.id));
            server.variable_values.insert(v.id.clone(), self.json(&path).await);
        }
        let services: Vec<ServiceDto> = server.services.clone().unwrap_or_default();
        for s in &services {
            let listed: Fetched<ServiceDto> = self.json(&format!("/services/{}", encode(&s.name))).await;
            let listed = listed.map(|l| l.tools.unwrap_or_default());
            for t in listed.iter().flatten() {
                tools.insert(ToolIdDto { service_name: s.name.clone(), tool_name: t.name.clone() });
            }
            server.service_tools.insert(s.name.clone(), listed);
        }
        for tool in tools {
            server.relationships.push(self.relationships(RelationshipsOf::Tool(tool)).await);
        }
        Ok(server)
    }

    async fn relationships(&self, of: RelationshipsOf) -> RelationshipRead {
        let query = match &of {
            RelationshipsOf::Guideline(id) => format!("guideline_id={}", encode(id)),
            RelationshipsOf::Tag(id) => format!("tag_id={}", encode(id)),
            RelationshipsOf::Tool(t) => format!("tool_id={}", encode(&format!("{}:{}", t.service_name, t.tool_name))),
        };
        let answer = self.json(&format!("/relationships?{query}&indirect=false")).await;
        RelationshipRead { of, answer }
    }
}

/// The agent named `wanted`, or the only one.
fn choose(agents: Vec<AgentDto>, wanted: Option<&str>) -> anyhow::Result<AgentDto> {
    let listed = || agents.iter().map(|a| format!("{} ({})", a.id, a.name)).collect::<Vec<_>>().join(", ");
    match wanted {
        Some(w) => {
            let found: Vec<&AgentDto> = agents.iter().filter(|a| a.id == w).collect();
            let found = if found.is_empty() { agents.iter().filter(|a| a.name == w).collect() } else { found };
            match found.as_slice() {
                [one] => Ok((*one).clone()),
                [] => bail!("the server has no agent `{w}`; it has: {}", listed()),
                _ => bail!("several agents are named `{w}`; give the id of one: {}", listed()),
            }
        }
        None => match agents.as_slice() {
            [one] => Ok(one.clone()),
            [] => bail!("the server has no agents"),
            _ => bail!("the server has several agents; choose one with --agent: {}", listed()),
        },
    }
}

/// Writes OUT/agent.yaml and OUT/IMPORT.md, prints the report and checks the result.
fn write(folder: &Path, server: &ParlantServer, imported: &Imported, force: bool) -> anyhow::Result<ExitCode> {
    if folder.is_dir() && folder.read_dir()?.next().is_some() && !force {
        bail!("{} already holds files (--force writes into it anyway)", folder.display());
    }
    std::fs::create_dir_all(folder).with_context(|| format!("creating {}", folder.display()))?;
    let agent = &server.agent;
    let header = format!(
        "# Agent `{}` ({}), brought over from the Parlant server at {} by `guidepost import parlant`.\n\
         # What could not be carried over is listed in IMPORT.md.\n",
        agent.id, agent.name, server.url
    );
    let yaml = format!("{header}{}", yaml_serde::to_string(&imported.file)?);
    let definition = folder.join("agent.yaml");
    std::fs::write(&definition, &yaml).with_context(|| format!("writing {}", definition.display()))?;
    let report = report(server, imported);
    std::fs::write(folder.join("IMPORT.md"), &report).with_context(|| format!("writing {}", folder.display()))?;

    let file = &imported.file;
    eprintln!(
        "imported {} ({}): {} guidelines, {} relationships, {} journeys, {} glossary terms, {} variables, \
         {} canned responses, {} capabilities, {} tool services -> {}",
        agent.id,
        agent.name,
        file.guidelines.len() + file.journeys.iter().map(|j| j.guidelines.len()).sum::<usize>(),
        file.relationships.len(),
        file.journeys.len(),
        file.glossary.len(),
        file.variables.len(),
        file.canned_responses.len(),
        file.capabilities.len(),
        file.services.len(),
        definition.display()
    );
    eprintln!("not carried over ({}; see {}):", imported.losses.len(), folder.join("IMPORT.md").display());
    for loss in &imported.losses {
        eprintln!("  - {}: {}", loss.what, loss.why);
    }
    let loaded = load_agent(&[SourceFile::new(definition.display().to_string(), yaml.clone())]);
    for d in &loaded.diagnostics {
        eprintln!("{}", d.render(Some(&yaml)));
    }
    Ok(if loaded.has_errors() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// IMPORT.md.
fn report(server: &ParlantServer, imported: &Imported) -> String {
    let agent = &server.agent;
    let mut out = format!(
        "# `{}` ({}), brought over from Parlant\n\n`guidepost import parlant {}` read this agent over Parlant's REST API \
         and wrote `agent.yaml`.\n\n## Not carried over\n\n",
        agent.id, agent.name, server.url
    );
    if imported.losses.is_empty() {
        out.push_str("Nothing the API showed was left behind.\n");
    }
    for loss in &imported.losses {
        out.push_str(&format!("- **{}**: {}.\n", loss.what, loss.why));
    }
    out.push_str("\n## Not visible over the API\n\nIf the agent has any of these, they are not in `agent.yaml`:\n\n");
    for (what, why) in NEVER_IN_THE_API {
        out.push_str(&format!("- **{what}**: {why}.\n"));
    }
    out
}
