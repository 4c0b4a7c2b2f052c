//! Glossary, context variables, canned responses, capabilities and tool services.

use indexmap::IndexMap;
use serde_json::Value;

use super::Builder;
use crate::definition::file::{
    AgentFile, CannedFieldDecl, CannedResponseDecl, CapabilityDecl, ServiceDecl, TermDecl, VariableDecl,
};
use crate::tool::ServiceKind;

pub(crate) fn import(b: &mut Builder<'_>, file: &mut AgentFile) {
    terms(b, file);
    variables(b, file);
    canned_responses(b, file);
    capabilities(b, file);
    services(b, file);
}

fn terms(b: &mut Builder<'_>, file: &mut AgentFile) {
    let server = b.server;
    let terms = match &server.terms {
        Ok(terms) => terms,
        Err(e) => return b.lose("the glossary", e.clone()),
    };
    for t in terms {
        if !b.scope.includes(&t.tags) {
            continue;
        }
        file.glossary.push(TermDecl {
            name: t.name.clone(),
            id: None,
            description: t.description.clone(),
            synonyms: t.synonyms.clone(),
            tags: b.tag_refs(&t.tags),
        });
    }
}

fn variables(b: &mut Builder<'_>, file: &mut AgentFile) {
    let server = b.server;
    let variables = match &server.variables {
        Ok(variables) => variables,
        Err(e) => return b.lose("the context variables", e.clone()),
    };
    for v in variables {
        let tags = v.tags.clone().unwrap_or_default();
        if !b.scope.includes(&tags) {
            continue;
        }
        let mut value = None;
        match server.variable_values.get(&v.id) {
            Some(Ok(read)) => {
                let pairs = read.key_value_pairs.clone().unwrap_or_default();
                value = pairs.get("DEFAULT").map(|d| d.data.clone()).filter(|d| !d.is_null());
                let particular = pairs.keys().filter(|k| *k != "DEFAULT").count();
                if particular > 0 {
                    b.lose(
                        format!("{particular} value(s) of variable `{}` for particular customers or tags", v.name),
                        "they are data kept per customer, not part of the definition (its global value came over)",
                    );
                }
            }
            Some(Err(e)) => b.lose(format!("the values of variable `{}`", v.name), e.clone()),
            None => {}
        }
        file.variables.push(VariableDecl {
            name: v.name.clone(),
            id: None,
            description: v.description.clone().filter(|d| !d.trim().is_empty()),
            tool: v.tool_id.as_ref().map(|t| format!("{}:{}", t.service_name, t.tool_name)),
            freshness: v.freshness_rules.clone().filter(|f| !f.trim().is_empty()),
            value,
            tags: b.tag_refs(&tags),
        });
    }
}

/// A template's words without its `{{fields}}`, for its id.
fn template_words(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        rest = rest[open..].find("}}").map_or("", |close| &rest[open + close + 2..]);
    }
    out.push_str(rest);
    out
}

fn canned_responses(b: &mut Builder<'_>, file: &mut AgentFile) {
    let server = b.server;
    let templates = match &server.canned_responses {
        Ok(templates) => templates,
        Err(e) => return b.lose("the canned responses", e.clone()),
    };
    for c in templates {
        let guidelines: Vec<String> =
            c.tags.iter().filter_map(|t| t.strip_prefix("guideline:")).map(str::to_string).collect();
        let for_guideline = guidelines.iter().any(|g| b.guideline_ids.contains_key(g));
        // Tags that say nothing of the agent: a journey state's (whose journey the API does not
        // tell) and the preamble's.
        let unplaced =
            !c.tags.is_empty() && c.tags.iter().all(|t| t.starts_with("journey_node:") || t == "__preamble__");
        if !(b.scope.includes(&c.tags) || for_guideline || unplaced) {
            continue;
        }
        let shown = format!("canned response \"{}\"", c.value);
        if c.tags.iter().any(|t| t.starts_with("journey_node:")) {
            b.lose(shown, "it is tied to a journey state, and the API does not say which state is which");
            continue;
        }
        if c.tags.iter().any(|t| t == "__preamble__") {
            b.lose(shown, "it is a preamble template; Guidepost's preambles are set with `agent.preamble`");
            continue;
        }
        let id = b.fresh_id(&template_words(&c.value), &c.id);
        for g in guidelines.iter().filter(|g| b.guideline_ids.contains_key(*g)) {
            b.guideline_templates.entry(g.clone()).or_default().push(id.clone());
        }
        for journey in c.tags.iter().filter_map(|t| t.strip_prefix("journey:")) {
            if let Some(ours) = b.journey_ids.get(journey).cloned() {
                b.journey_templates.entry(ours).or_default().push(id.clone());
            }
        }
        if !c.metadata.is_empty() {
            let keys: Vec<&str> = c.metadata.keys().map(String::as_str).collect();
            b.lose(
                format!("the metadata of canned response `{id}` ({})", keys.join(", ")),
                "the definition format keeps no metadata on templates",
            );
        }
        file.canned_responses.push(CannedResponseDecl {
            id: Some(id),
            template: c.value.clone(),
            fields: c
                .fields
                .iter()
                .map(|f| CannedFieldDecl {
                    name: f.name.clone(),
                    description: f.description.clone().filter(|d| !d.trim().is_empty()),
                    examples: f.examples.iter().map(text_of).collect(),
                })
                .collect(),
            signals: c.signals.clone(),
            field_dependencies: c.field_dependencies.clone(),
            tags: b.tag_refs(&c.tags),
        });
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn capabilities(b: &mut Builder<'_>, file: &mut AgentFile) {
    let server = b.server;
    let capabilities = match &server.capabilities {
        Ok(capabilities) => capabilities,
        Err(e) => return b.lose("the capabilities", e.clone()),
    };
    for c in capabilities {
        if !b.scope.includes(&c.tags) {
            continue;
        }
        file.capabilities.push(CapabilityDecl {
            title: c.title.clone(),
            id: None,
            description: c.description.clone(),
            signals: c.signals.clone(),
            tags: b.tag_refs(&c.tags),
        });
    }
}

fn services(b: &mut Builder<'_>, file: &mut AgentFile) {
    let server = b.server;
    let services = match &server.services {
        Ok(services) => services.clone(),
        Err(e) => return b.lose("the tool services", e.clone()),
    };
    for s in services {
        let Some(url) = s.url.clone().filter(|u| !u.is_empty()) else {
            b.lose(format!("tool service `{}`", s.name), "the API gives no URL for it");
            continue;
        };
        let (kind, spec) = match s.kind.as_str() {
            "sdk" => (ServiceKind::Parlant, None),
            "mcp" => (ServiceKind::Mcp, None),
            "openapi" => {
                b.lose(
                    format!("where the OpenAPI document of service `{}` is", s.name),
                    "the API gives the service's URL only; `spec` is taken to be <url>/openapi.json",
                );
                (ServiceKind::Openapi, Some(format!("{}/openapi.json", url.trim_end_matches('/'))))
            }
            other => {
                b.lose(
                    format!("tool service `{}`", s.name),
                    format!("`{other}` is not a kind of service Guidepost knows"),
                );
                continue;
            }
        };
        if s.name == "built-in" {
            b.lose(
                "the code of the tools of the `built-in` service",
                format!(
                    "they are Python functions inside the Parlant SDK process; the definition calls them at {url}, so that process must keep running (or port them to `@guidepost.tool`)"
                ),
            );
        }
        file.services.push(ServiceDecl {
            name: s.name.clone(),
            kind,
            url: Some(url),
            spec,
            command: Vec::new(),
            env: IndexMap::new(),
            timeout_ms: None,
            idempotency_keys: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_ids_leave_the_fields_out() {
        assert_eq!(template_words("You have {{points}} loyalty points."), "You have  loyalty points.");
        assert_eq!(template_words("{{a}}{{b"), "");
    }
}
