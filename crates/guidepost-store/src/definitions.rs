//! Agents' definitions in the store: importing definition files, assembling the
//! definition a turn runs on, and exporting it back in the authoring format.
//!
//! Definition entities are shared the way the Parlant API shares them: an entity with no
//! tags applies to every agent, `agent:<id>` ties it to one agent, any of an agent's own
//! tags brings it into that agent's scope, and `journey:<id>` scopes a guideline to a
//! journey (or marks it as one of the journey's conditions).
//!
//! Imported entities get the id `<agent>.<id>` (ids are global on a server that serves
//! several agents) and the `agent:<agent>` tag; the export strips both again.

use std::collections::{BTreeSet, HashMap, HashSet};

use guidepost_core::journey::JourneyCondition;
use guidepost_core::{
    Agent, AgentDefinition, CannedResponse, Capability, ContextVariable, Endpoint, Guideline, Journey, Relationship,
    StateKind, Tag, Term, Tool, ToolService,
};
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::Store;
use crate::documents::{Entity, Origin, Record, Write};
use crate::error::{Result, StoreError};

/// The tag that ties an entity to one agent.
pub fn agent_tag(agent_id: &str) -> String {
    format!("agent:{agent_id}")
}

/// The tag that scopes a guideline to a journey.
pub fn journey_tag(journey_id: &str) -> String {
    format!("journey:{journey_id}")
}

/// Whether a tag is one the store manages (`agent:` or `journey:`), not a declared one.
pub fn is_system_tag(tag: &str) -> bool {
    tag.starts_with("agent:") || tag.starts_with("journey:")
}

/// The extra field that marks a guideline as a journey's condition.
pub const CONDITION_OF: &str = "journey_condition_of";
const IMPORTED_HASH: &str = "imported_hash";

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// The agent.
    pub agent_id: String,
    /// Entities created.
    pub created: usize,
    /// Entities whose content changed.
    pub updated: usize,
    /// Entities left as they were.
    pub unchanged: usize,
    /// Entities the files no longer define, deleted.
    pub removed: usize,
    /// Ids of entities changed through the API since the last import, now replaced by
    /// the files' content.
    pub replaced_edits: Vec<String>,
}

/// Namespacing of one agent's ids.
struct Names<'a> {
    agent: &'a str,
}

impl Names<'_> {
    fn id(&self, id: &str) -> String {
        format!("{}.{id}", self.agent)
    }

    fn ids(&self, ids: &[String]) -> Vec<String> {
        ids.iter().map(|i| self.id(i)).collect()
    }

    fn tags(&self, tags: &[String]) -> Vec<String> {
        let mut out = vec![agent_tag(self.agent)];
        out.extend(self.ids(tags));
        out
    }

    fn endpoint(&self, e: &Endpoint) -> Endpoint {
        match e {
            Endpoint::Guideline(id) => Endpoint::Guideline(self.id(id)),
            Endpoint::Journey(id) => Endpoint::Journey(self.id(id)),
            Endpoint::Tag { tag, mode } => Endpoint::Tag { tag: self.id(tag), mode: *mode },
            Endpoint::Tool(t) => Endpoint::Tool(t.clone()),
        }
    }
}

fn hash<T: Serialize>(entity: &T) -> String {
    let text = serde_json::to_string(entity).unwrap_or_default();
    hex::encode(&Sha256::digest(text.as_bytes())[..12])
}

/// Planned writes of an import, with its counts.
struct Plan<'s> {
    store: &'s Store,
    origin: Origin,
    /// What the previous import of these files left, read in one query: an unchanged
    /// definition costs that query and no writes.
    existing: HashMap<(String, String), sqlx::any::AnyRow>,
    writes: Vec<Write>,
    keep: HashSet<(crate::Collection, String)>,
    report: ImportReport,
}

impl Plan<'_> {
    async fn existing<T: Entity>(&self, id: &str) -> Result<Option<Record<T>>> {
        match self.existing.get(&(T::COLLECTION.name().to_string(), id.to_string())) {
            Some(row) => Record::from_row(row).map(Some),
            // Not from these files (yet): created over the API, or by another agent's files.
            None => self.store.get::<T>(id).await,
        }
    }

    async fn put<T: Entity>(&mut self, id: String, entity: T, mut extra: Map<String, Value>) -> Result<()> {
        let new_hash = hash(&entity);
        extra.insert(IMPORTED_HASH.into(), Value::String(new_hash.clone()));
        self.keep.insert((T::COLLECTION, id.clone()));
        let record = match self.existing::<T>(&id).await? {
            None => {
                self.report.created += 1;
                Record::new(id, entity).with_origin(self.origin.clone()).with_extra(extra)
            }
            Some(existing) => {
                let current = hash(&existing.entity);
                let imported = existing.extra.get(IMPORTED_HASH).and_then(Value::as_str).unwrap_or_default();
                if existing.origin == self.origin && current == new_hash && imported == new_hash {
                    self.report.unchanged += 1;
                    return Ok(());
                }
                if existing.origin != self.origin || current != imported {
                    self.report.replaced_edits.push(id.clone());
                }
                self.report.updated += 1;
                Record { entity, extra, origin: self.origin.clone(), ..existing }
            }
        };
        self.writes.push(Write::upsert(&record)?);
        Ok(())
    }

    fn sweep<T: Entity>(&mut self) {
        let mut gone: Vec<&String> = self
            .existing
            .keys()
            .filter(|(collection, id)| {
                collection == T::COLLECTION.name() && !self.keep.contains(&(T::COLLECTION, id.clone()))
            })
            .map(|(_, id)| id)
            .collect();
        gone.sort();
        self.report.removed += gone.len();
        self.writes.extend(gone.into_iter().map(|id| Write::delete::<T>(id)));
    }
}

fn state_refs(journey: &mut Journey, names: &Names<'_>) {
    for state in &mut journey.states {
        state.canned_responses = names.ids(&state.canned_responses);
        if let StateKind::Journey { journey } = &mut state.kind {
            *journey = names.id(journey);
        }
    }
}

impl Store {
    /// Imports an agent's definition (loaded from its files). Idempotent: ids are stable,
    /// entities that did not change are not written, entities the files no longer define
    /// are deleted, and entities changed through the API since the last import are
    /// replaced by the files' content (and listed in the report). One transaction.
    pub async fn import_definition(&self, definition: &AgentDefinition) -> Result<ImportReport> {
        let agent_id = definition.agent.id.clone();
        let names = Names { agent: &agent_id };
        let origin = Origin::File(agent_id.clone());
        let mut plan = Plan {
            store: self,
            existing: self.rows_from(&origin).await?,
            origin,
            writes: Vec::new(),
            keep: HashSet::new(),
            report: ImportReport { agent_id: agent_id.clone(), ..ImportReport::default() },
        };
        let mut agent = definition.agent.clone();
        agent.tags = names.ids(&agent.tags);
        plan.put(agent_id.clone(), agent, Map::new()).await?;
        for tag in &definition.tags {
            let id = names.id(&tag.id);
            plan.put(id.clone(), Tag { id, ..tag.clone() }, Map::new()).await?;
        }
        for g in &definition.guidelines {
            let mut g = g.clone();
            g.id = names.id(&g.id);
            g.tags = names.tags(&g.tags);
            g.journey = g.journey.as_deref().map(|j| names.id(j));
            if let Some(j) = &g.journey {
                g.tags.push(journey_tag(j));
            }
            g.canned_responses = names.ids(&g.canned_responses);
            plan.put(g.id.clone(), g, Map::new()).await?;
        }
        for j in &definition.journeys {
            let mut j = j.clone();
            j.id = names.id(&j.id);
            j.tags = names.tags(&j.tags);
            state_refs(&mut j, &names);
            for c in &mut j.conditions {
                c.id = names.id(&c.id);
                let mut extra = Map::new();
                extra.insert(CONDITION_OF.into(), Value::String(j.id.clone()));
                let observation =
                    condition_guideline(&c.id, &c.condition, vec![agent_tag(&agent_id), journey_tag(&j.id)]);
                plan.put(c.id.clone(), observation, extra).await?;
            }
            plan.put(j.id.clone(), j, Map::new()).await?;
        }
        for r in &definition.relationships {
            let id = names.id(&r.id);
            let r = Relationship {
                id: id.clone(),
                source: names.endpoint(&r.source),
                target: names.endpoint(&r.target),
                ..r.clone()
            };
            plan.put(id, r, Map::new()).await?;
        }
        for t in &definition.tools {
            plan.put(names.id(&t.id.to_string()), t.clone(), Map::new()).await?;
        }
        for s in &definition.services {
            let id = names.id(&s.name);
            let mut service = s.clone();
            if let Some(stored) = plan.existing::<ToolService>(&id).await? {
                keep_redacted_credentials(&mut service, &stored.entity);
            }
            plan.put(id, service, Map::new()).await?;
        }
        for v in &definition.variables {
            let id = names.id(&v.id);
            plan.put(id.clone(), ContextVariable { id, tags: names.tags(&v.tags), ..v.clone() }, Map::new()).await?;
        }
        for t in &definition.terms {
            let id = names.id(&t.id);
            plan.put(id.clone(), Term { id, tags: names.tags(&t.tags), ..t.clone() }, Map::new()).await?;
        }
        for c in &definition.capabilities {
            let id = names.id(&c.id);
            plan.put(id.clone(), Capability { id, tags: names.tags(&c.tags), ..c.clone() }, Map::new()).await?;
        }
        for c in &definition.canned_responses {
            let id = names.id(&c.id);
            plan.put(id.clone(), CannedResponse { id, tags: names.tags(&c.tags), ..c.clone() }, Map::new()).await?;
        }
        plan.sweep::<Tag>();
        plan.sweep::<Guideline>();
        plan.sweep::<Journey>();
        plan.sweep::<Relationship>();
        plan.sweep::<Tool>();
        plan.sweep::<ToolService>();
        plan.sweep::<ContextVariable>();
        plan.sweep::<Term>();
        plan.sweep::<Capability>();
        plan.sweep::<CannedResponse>();
        self.apply(plan.writes).await?;
        for id in &plan.report.replaced_edits {
            tracing::warn!(agent = %agent_id, id, "changed through the API since the last import; the definition files' content replaces it");
        }
        Ok(plan.report)
    }

    /// The entities of a kind the scope sees, with the system tags taken off.
    async fn in_scope<T: Entity>(&self, scope: &Scope, tags: impl Fn(&mut T) -> &mut Vec<String>) -> Result<Vec<T>> {
        let mut out = Vec::new();
        for record in self.list::<T>().await? {
            let mut entity = record.entity;
            let t = tags(&mut entity);
            if scope.sees(t) {
                *t = scope.declared(t);
                out.push(entity);
            }
        }
        Ok(out)
    }

    /// The definition agent `agent_id` runs on now: its identity and every entity in its
    /// scope, with the store's system tags turned back into the definition's structure.
    pub async fn agent_definition(&self, agent_id: &str) -> Result<AgentDefinition> {
        let agent = self.require::<Agent>(agent_id).await?.entity;
        let scope = Scope::new(agent_id, &agent.tags);
        let journeys_all = self.list::<Journey>().await?;
        let guidelines_all = self.list::<Guideline>().await?;
        let by_id: HashMap<&str, &Record<Guideline>> = guidelines_all.iter().map(|g| (g.id.as_str(), g)).collect();

        let mut journeys = Vec::new();
        let mut conditions: HashSet<String> = HashSet::new();
        for record in &journeys_all {
            if !scope.sees(&record.entity.tags) {
                continue;
            }
            let mut j = record.entity.clone();
            j.conditions = j
                .conditions
                .iter()
                .filter_map(|c| {
                    by_id
                        .get(c.id.as_str())
                        .map(|g| JourneyCondition { id: c.id.clone(), condition: g.entity.condition.clone() })
                })
                .collect();
            conditions.extend(j.conditions.iter().map(|c| c.id.clone()));
            j.tags = scope.declared(&j.tags);
            journeys.push(j);
        }
        let visible_journeys: HashSet<String> = journeys.iter().map(|j| j.id.clone()).collect();
        let mut guidelines = Vec::new();
        for record in &guidelines_all {
            let g = &record.entity;
            if conditions.contains(&record.id) || !scope.sees(&g.tags) {
                continue;
            }
            let scoped: Vec<&str> = g.tags.iter().filter_map(|t| t.strip_prefix("journey:")).collect();
            let journey = match scoped.iter().find(|j| visible_journeys.contains(**j)) {
                Some(j) => Some((*j).to_string()),
                None if !scoped.is_empty() => continue,
                None => None,
            };
            let mut g = g.clone();
            g.id.clone_from(&record.id);
            g.journey = journey;
            g.tags = scope.declared(&g.tags);
            guidelines.push(g);
        }
        let variables: Vec<ContextVariable> = self.in_scope(&scope, |v: &mut ContextVariable| &mut v.tags).await?;
        let terms: Vec<Term> = self.in_scope(&scope, |t: &mut Term| &mut t.tags).await?;
        let capabilities: Vec<Capability> = self.in_scope(&scope, |c: &mut Capability| &mut c.tags).await?;
        let canned_responses: Vec<CannedResponse> = self.in_scope(&scope, |c: &mut CannedResponse| &mut c.tags).await?;
        let canned_ids: HashSet<&str> = canned_responses.iter().map(|c| c.id.as_str()).collect();
        for g in &mut guidelines {
            g.canned_responses.retain(|c| canned_ids.contains(c.as_str()));
        }
        for j in &mut journeys {
            for s in &mut j.states {
                s.canned_responses.retain(|c| canned_ids.contains(c.as_str()));
            }
        }
        let mine = |origin: &Origin| match origin {
            Origin::Api => true,
            Origin::File(a) => a == agent_id,
        };
        let tools: Vec<Tool> =
            self.list::<Tool>().await?.into_iter().filter(|r| mine(&r.origin)).map(|r| r.entity).collect();
        let services: Vec<ToolService> =
            self.list::<ToolService>().await?.into_iter().filter(|r| mine(&r.origin)).map(|r| r.entity).collect();
        let guideline_ids: HashSet<&str> =
            guidelines.iter().map(|g| g.id.as_str()).chain(conditions.iter().map(String::as_str)).collect();
        let present = |e: &Endpoint| match e {
            Endpoint::Guideline(id) => guideline_ids.contains(id.as_str()),
            Endpoint::Journey(id) => visible_journeys.contains(id),
            Endpoint::Tag { .. } | Endpoint::Tool(_) => true,
        };
        let relationships: Vec<Relationship> = self
            .list::<Relationship>()
            .await?
            .into_iter()
            .filter(|r| mine(&r.origin))
            .map(|r| r.entity)
            .filter(|r| present(&r.source) && present(&r.target))
            .collect();
        let mut used_tags: BTreeSet<String> = agent.tags.iter().cloned().collect();
        let entity_tags = guidelines
            .iter()
            .flat_map(|g| &g.tags)
            .chain(journeys.iter().flat_map(|j| &j.tags))
            .chain(variables.iter().flat_map(|v| &v.tags))
            .chain(terms.iter().flat_map(|t| &t.tags))
            .chain(capabilities.iter().flat_map(|c| &c.tags))
            .chain(canned_responses.iter().flat_map(|c| &c.tags));
        used_tags.extend(entity_tags.cloned());
        for r in &relationships {
            for e in [&r.source, &r.target] {
                if let Endpoint::Tag { tag, .. } = e {
                    used_tags.insert(tag.clone());
                }
            }
        }
        let tags: Vec<Tag> =
            self.list::<Tag>().await?.into_iter().map(|r| r.entity).filter(|t| used_tags.contains(&t.id)).collect();
        Ok(AgentDefinition {
            agent,
            tags,
            guidelines,
            relationships,
            journeys,
            tools,
            services,
            variables,
            terms,
            capabilities,
            canned_responses,
        })
    }

    /// The agent's definition in the authoring form: the store's namespaces stripped, so
    /// `guidepost check` reads it and an import of it gives the same entities back.
    pub async fn export_definition(&self, agent_id: &str) -> Result<AgentDefinition> {
        let definition = self.agent_definition(agent_id).await?;
        Ok(localize(definition, agent_id))
    }

    /// Deletes the agent and every entity its definition files defined (entities created
    /// through the API stay: they may be shared).
    pub async fn delete_agent(&self, agent_id: &str) -> Result<()> {
        let origin = Origin::File(agent_id.to_string());
        let mut writes = vec![Write::delete::<Agent>(agent_id)];
        macro_rules! sweep {
            ($($ty:ty),*) => {$(
                for r in self.list_from::<$ty>(&origin).await? {
                    writes.push(Write::delete::<$ty>(&r.id));
                }
            )*};
        }
        sweep!(
            Tag,
            Guideline,
            Journey,
            Relationship,
            Tool,
            ToolService,
            ContextVariable,
            Term,
            Capability,
            CannedResponse
        );
        self.apply(writes).await
    }

    /// Ids of the agents.
    pub async fn agent_ids(&self) -> Result<Vec<String>> {
        Ok(self.list::<Agent>().await?.into_iter().map(|r| r.id).collect())
    }
}

/// The observation guideline that stands for a journey condition.
pub fn condition_guideline(id: &str, condition: &str, tags: Vec<String>) -> Guideline {
    Guideline {
        id: id.to_string(),
        condition: condition.to_string(),
        action: None,
        description: None,
        criticality: Default::default(),
        enabled: true,
        tags,
        labels: Vec::new(),
        metadata: Default::default(),
        priority: 0,
        track: true,
        tools: Vec::new(),
        composition_mode: None,
        journey: None,
        canned_responses: Vec::new(),
        examples: Vec::new(),
    }
}

/// Which entities an agent sees.
struct Scope {
    own: String,
    agent_tags: HashSet<String>,
}

impl Scope {
    fn new(agent_id: &str, tags: &[String]) -> Self {
        Self { own: agent_tag(agent_id), agent_tags: tags.iter().cloned().collect() }
    }

    /// Untagged entities are everyone's; otherwise the agent's own tag or one of its tags
    /// brings an entity into scope. Journey tags say where, not whose.
    fn sees(&self, tags: &[String]) -> bool {
        let mut owned = tags.iter().filter(|t| !t.starts_with("journey:")).peekable();
        if owned.peek().is_none() {
            return true;
        }
        owned.any(|t| *t == self.own || self.agent_tags.contains(t))
    }

    /// The tags a definition declares: the system ones removed.
    fn declared(&self, tags: &[String]) -> Vec<String> {
        tags.iter().filter(|t| !is_system_tag(t)).cloned().collect()
    }
}

/// Ids of one kind of entity, mapped from the store's form to the authoring form.
struct IdMap {
    map: HashMap<String, String>,
}

impl IdMap {
    /// Strips `<agent>.` where that leaves no clash within the kind, and makes ids given
    /// through the API valid definition ids (`_` for what ids may not hold, a numeric
    /// suffix where two would meet).
    fn new<'a>(ids: impl Iterator<Item = &'a String>, prefix: &str) -> Self {
        let ids: Vec<&String> = ids.collect();
        let clean = |id: &str| -> String {
            let c: String =
                id.chars().map(|c| if c.is_whitespace() || c == ':' || c == '/' { '_' } else { c }).collect();
            if c.is_empty() { "_".into() } else { c }
        };
        let mut used: HashSet<String> = HashSet::new();
        let mut map = HashMap::new();
        // Ids that need no change keep it, whatever order they come in.
        for id in &ids {
            if !id.starts_with(prefix) && clean(id) == **id {
                used.insert((*id).clone());
                map.insert((*id).clone(), (*id).clone());
            }
        }
        for id in ids {
            if map.contains_key(id) {
                continue;
            }
            let mut candidate = clean(id.strip_prefix(prefix).unwrap_or(id));
            if used.contains(&candidate) {
                let base = candidate.clone();
                let mut n = 2;
                while used.contains(&candidate) {
                    candidate = format!("{base}_{n}");
                    n += 1;
                }
            }
            used.insert(candidate.clone());
            map.insert(id.clone(), candidate);
        }
        Self { map }
    }

    fn get(&self, id: &str) -> String {
        self.map.get(id).cloned().unwrap_or_else(|| id.to_string())
    }

    fn all(&self, ids: &[String]) -> Vec<String> {
        ids.iter().map(|i| self.get(i)).collect()
    }
}

/// Strips `<agent>.` from ids and references (kind by kind, where that leaves no clash),
/// and makes ids given through the API valid definition ids.
fn localize(mut d: AgentDefinition, agent_id: &str) -> AgentDefinition {
    let prefix = format!("{agent_id}.");
    let guidelines = IdMap::new(
        d.guidelines.iter().map(|g| &g.id).chain(d.journeys.iter().flat_map(|j| j.conditions.iter().map(|c| &c.id))),
        &prefix,
    );
    let journeys = IdMap::new(d.journeys.iter().map(|j| &j.id), &prefix);
    let tags = IdMap::new(d.tags.iter().map(|t| &t.id), &prefix);
    let relationships = IdMap::new(d.relationships.iter().map(|r| &r.id), &prefix);
    let variables = IdMap::new(d.variables.iter().map(|v| &v.id), &prefix);
    let terms = IdMap::new(d.terms.iter().map(|t| &t.id), &prefix);
    let capabilities = IdMap::new(d.capabilities.iter().map(|c| &c.id), &prefix);
    let canned = IdMap::new(d.canned_responses.iter().map(|c| &c.id), &prefix);
    let endpoint = |e: &Endpoint| match e {
        Endpoint::Guideline(id) => Endpoint::Guideline(guidelines.get(id)),
        Endpoint::Journey(id) => Endpoint::Journey(journeys.get(id)),
        Endpoint::Tag { tag, mode } => Endpoint::Tag { tag: tags.get(tag), mode: *mode },
        Endpoint::Tool(t) => Endpoint::Tool(t.clone()),
    };
    d.agent.tags = tags.all(&d.agent.tags);
    for t in &mut d.tags {
        t.id = tags.get(&t.id);
    }
    for g in &mut d.guidelines {
        g.id = guidelines.get(&g.id);
        g.tags = tags.all(&g.tags);
        g.journey = g.journey.as_deref().map(|j| journeys.get(j));
        g.canned_responses = canned.all(&g.canned_responses);
    }
    for j in &mut d.journeys {
        j.id = journeys.get(&j.id);
        j.tags = tags.all(&j.tags);
        for c in &mut j.conditions {
            c.id = guidelines.get(&c.id);
        }
        for s in &mut j.states {
            s.canned_responses = canned.all(&s.canned_responses);
            if let StateKind::Journey { journey } = &mut s.kind {
                *journey = journeys.get(journey);
            }
        }
    }
    for r in &mut d.relationships {
        r.id = relationships.get(&r.id);
        r.source = endpoint(&r.source);
        r.target = endpoint(&r.target);
    }
    for v in &mut d.variables {
        v.id = variables.get(&v.id);
        v.tags = tags.all(&v.tags);
    }
    for t in &mut d.terms {
        t.id = terms.get(&t.id);
        t.tags = tags.all(&t.tags);
    }
    for c in &mut d.capabilities {
        c.id = capabilities.get(&c.id);
        c.tags = tags.all(&c.tags);
    }
    for c in &mut d.canned_responses {
        c.id = canned.get(&c.id);
        c.tags = tags.all(&c.tags);
    }
    d
}

/// What an exported definition shows in place of a credential.
const REDACTED: &str = "[redacted]";

/// `shown` (a value with `[redacted]` in place of its credentials) filled from `stored`
/// where the two agree around each redaction; `None` when they do not.
fn unredact(shown: &str, stored: &str) -> Option<String> {
    let parts: Vec<&str> = shown.split(REDACTED).collect();
    let (first, last) = (parts.first()?, parts.last()?);
    let fits = stored.starts_with(first)
        && stored.ends_with(last)
        && stored.len() >= first.len() + last.len()
        && parts[1..parts.len() - 1].iter().all(|p| stored.contains(p));
    fits.then(|| stored.to_string())
}

/// A service read back from an export carries `[redacted]` where its credentials were: the
/// stored ones stay (a changed host or path, or a new credential, is taken as given).
fn keep_redacted_credentials(service: &mut ToolService, stored: &ToolService) {
    let restore = |shown: &mut Option<String>, stored: &Option<String>| {
        if let (Some(text), Some(old)) = (shown.as_ref(), stored)
            && text.contains(REDACTED)
            && let Some(value) = unredact(text, old)
        {
            *shown = Some(value);
        }
    };
    restore(&mut service.url, &stored.url);
    restore(&mut service.spec, &stored.spec);
    for (name, value) in &mut service.env {
        if value.contains(REDACTED)
            && let Some(old) = stored.env.get(name)
            && let Some(restored) = unredact(value, old)
        {
            *value = restored;
        }
    }
}

/// Checks that an id given through the API can name an entity.
pub fn check_api_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > 200 || id.chars().any(|c| c.is_control() || c == '/' || c.is_whitespace()) {
        return Err(StoreError::Invalid(format!(
            "`{id}` cannot be an id: use 1 to 200 characters without spaces, control characters or `/`"
        )));
    }
    Ok(())
}
