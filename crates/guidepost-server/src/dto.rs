//! Wire types shared by several resources, and the conversions between the wire's
//! vocabulary and the domain's.

use guidepost_core::agent::{CompositionMode, OutputMode};
use guidepost_core::{Criticality, Guideline, Tag, ToolId};
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ApiResult;

/// Composition mode on the wire (`composited_canned` and `strict_canned` are the
/// reference API's names for the canned modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CompositionModeDto {
    /// Free text.
    #[serde(rename = "fluid")]
    Fluid,
    /// Free text, replaced by an approved template when one says exactly what is needed.
    #[serde(rename = "canned_fluid")]
    CannedFluid,
    /// Free text in the style of the approved templates.
    #[serde(rename = "composited_canned")]
    CompositedCanned,
    /// Approved templates only.
    #[serde(rename = "strict_canned")]
    StrictCanned,
}

impl From<CompositionMode> for CompositionModeDto {
    fn from(mode: CompositionMode) -> Self {
        match mode {
            CompositionMode::Fluid => Self::Fluid,
            CompositionMode::CannedFluid => Self::CannedFluid,
            CompositionMode::CannedComposited => Self::CompositedCanned,
            CompositionMode::CannedStrict => Self::StrictCanned,
        }
    }
}

impl From<CompositionModeDto> for CompositionMode {
    fn from(mode: CompositionModeDto) -> Self {
        match mode {
            CompositionModeDto::Fluid => Self::Fluid,
            CompositionModeDto::CannedFluid => Self::CannedFluid,
            CompositionModeDto::CompositedCanned => Self::CannedComposited,
            CompositionModeDto::StrictCanned => Self::CannedStrict,
        }
    }
}

/// Whether replies are sent whole or streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputModeDto {
    /// Whole messages.
    Block,
    /// Messages whose `chunks` grow as they are generated.
    Stream,
}

impl From<OutputMode> for OutputModeDto {
    fn from(mode: OutputMode) -> Self {
        match mode {
            OutputMode::Block => Self::Block,
            OutputMode::Stream => Self::Stream,
        }
    }
}

impl From<OutputModeDto> for OutputMode {
    fn from(mode: OutputModeDto) -> Self {
        match mode {
            OutputModeDto::Block => Self::Block,
            OutputModeDto::Stream => Self::Stream,
        }
    }
}

/// How much care a guideline gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CriticalityDto {
    /// Nice to have.
    Low,
    /// The default.
    Medium,
    /// Compliance or safety.
    High,
}

impl From<Criticality> for CriticalityDto {
    fn from(c: Criticality) -> Self {
        match c {
            Criticality::Low => Self::Low,
            Criticality::Medium => Self::Medium,
            Criticality::High => Self::High,
        }
    }
}

impl From<CriticalityDto> for Criticality {
    fn from(c: CriticalityDto) -> Self {
        match c {
            CriticalityDto::Low => Self::Low,
            CriticalityDto::Medium => Self::Medium,
            CriticalityDto::High => Self::High,
        }
    }
}

/// A tool's identity on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolIdDto {
    /// The service providing it.
    pub service_name: String,
    /// Its name in the service.
    pub tool_name: String,
}

impl From<&ToolId> for ToolIdDto {
    fn from(id: &ToolId) -> Self {
        Self { service_name: id.service.clone(), tool_name: id.name.clone() }
    }
}

impl From<&ToolIdDto> for ToolId {
    fn from(id: &ToolIdDto) -> Self {
        ToolId::new(&id.service_name, &id.tool_name)
    }
}

/// A tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TagDto {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
}

impl From<&Tag> for TagDto {
    fn from(t: &Tag) -> Self {
        Self { id: t.id.clone(), name: t.name.clone() }
    }
}

/// A guideline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GuidelineDto {
    /// Id.
    pub id: String,
    /// When it applies.
    pub condition: String,
    /// What the agent does; absent for an observation.
    pub action: Option<String>,
    /// Extra context for the model.
    pub description: Option<String>,
    /// How much care it gets.
    pub criticality: CriticalityDto,
    /// Whether it is matched at all.
    pub enabled: bool,
    /// Tag ids.
    pub tags: Vec<String>,
    /// Free-form metadata.
    pub metadata: IndexMap<String, Value>,
    /// Composition mode while it is matched.
    pub composition_mode: Option<CompositionModeDto>,
    /// `false`: never treated as already applied.
    pub track: bool,
    /// Labels copied onto sessions where it matched.
    pub labels: Vec<String>,
    /// Numeric priority.
    pub priority: i32,
}

impl From<&Guideline> for GuidelineDto {
    fn from(g: &Guideline) -> Self {
        Self {
            id: g.id.clone(),
            condition: g.condition.clone(),
            action: g.action.clone(),
            description: g.description.clone(),
            criticality: g.criticality.into(),
            enabled: g.enabled,
            tags: g.tags.clone(),
            metadata: g.metadata.clone(),
            composition_mode: g.composition_mode.map(Into::into),
            track: g.track,
            labels: g.labels.clone(),
            priority: g.priority,
        }
    }
}

/// Tags to add and remove.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct TagsUpdate {
    /// Tag ids to add.
    pub add: Option<Vec<String>>,
    /// Tag ids to remove.
    pub remove: Option<Vec<String>>,
}

impl TagsUpdate {
    /// Applies the update to `tags` (no duplicates; order kept).
    pub fn apply(&self, tags: &mut Vec<String>) {
        for t in self.add.iter().flatten() {
            if !tags.contains(t) {
                tags.push(t.clone());
            }
        }
        if let Some(remove) = &self.remove {
            tags.retain(|t| !remove.contains(t));
        }
    }
}

/// Labels to add and remove.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct LabelsUpdate {
    /// Labels to add.
    pub upsert: Option<Vec<String>>,
    /// Labels to remove.
    pub remove: Option<Vec<String>>,
}

impl LabelsUpdate {
    /// Applies the update to `labels`.
    pub fn apply(&self, labels: &mut Vec<String>) {
        TagsUpdate { add: self.upsert.clone(), remove: self.remove.clone() }.apply(labels);
    }
}

/// Metadata keys to set and unset.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct MetadataUpdate<V = Value> {
    /// Keys to set.
    pub set: Option<IndexMap<String, V>>,
    /// Keys to remove.
    pub unset: Option<Vec<String>>,
}

impl<V: Clone> MetadataUpdate<V> {
    /// Applies the update to `metadata`.
    pub fn apply(&self, metadata: &mut IndexMap<String, V>) {
        for (k, v) in self.set.iter().flatten() {
            metadata.insert(k.clone(), v.clone());
        }
        for k in self.unset.iter().flatten() {
            metadata.shift_remove(k);
        }
    }
}

/// Rejects an empty list of items where the wire requires some (e.g. nothing to do).
pub fn non_empty(text: &str, field: &str) -> ApiResult<()> {
    if text.trim().is_empty() {
        return Err(crate::error::ApiError::invalid(crate::error::FieldError::body(
            &[field],
            "string_too_short",
            "String should have at least 1 character",
        )));
    }
    Ok(())
}

/// Every list endpoint with `limit` answers a page.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PageDto<T> {
    /// The items.
    pub items: Vec<T>,
    /// How many items the whole listing has.
    pub total_count: u64,
    /// Whether more items follow.
    pub has_more: bool,
    /// The cursor of the next page.
    pub next_cursor: Option<String>,
}

/// What the listings that page on request answer, as the reference declares it: a page
/// when `limit` is given, else every item in a plain array.
#[derive(JsonSchema)]
#[schemars(untagged)]
#[allow(dead_code)]
pub enum PageOrList<T> {
    /// With `limit`.
    Page(PageDto<T>),
    /// Without `limit`.
    All(Vec<T>),
}
