//! Guidepost's domain types and agent definition format.
//!
//! This crate is data and logic: no async runtime, and no I/O beyond reading the files a user
//! names ([`files`]: regular files only, bounded in size, folder walks without cycles). It holds
//!
//! - the entities of an agent ([`Agent`], [`Guideline`], [`Relationship`], [`Journey`],
//!   [`Tool`], context variables, glossary terms, capabilities, canned responses) and of a
//!   conversation ([`Session`], [`Event`], [`AgentState`]);
//! - the definition format people write ([`definition`]): YAML or JSON, checked with
//!   precise, position-carrying diagnostics, with a published JSON Schema;
//! - the projection of journeys into node guidelines ([`projection`]) and the journey
//!   path algebra ([`JourneyPath`]);
//! - what session events carry, typed ([`payload`]);
//! - journey diagrams in Mermaid and Graphviz ([`graph`]).
//!
//! ```
//! use guidepost_core::definition::{SourceFile, load_agent};
//! use guidepost_core::projection::project;
//!
//! let yaml = r#"
//! agent: { name: Taxi }
//! journeys:
//!   - id: book
//!     title: Book a taxi
//!     conditions: [The customer wants a taxi]
//!     start: pickup
//!     states:
//!       - { id: pickup, chat: Ask for the pickup address, next: dropoff }
//!       - { id: dropoff, chat: Ask for the destination, next: end }
//! "#;
//! let loaded = load_agent(&[SourceFile::new("taxi.yaml", yaml)]);
//! let definition = loaded.definition.expect("valid");
//! let nodes = project(&definition, "book").expect("journey exists");
//! assert_eq!(nodes[0].guideline_id, "journey_node:book.initial");
//! assert_eq!(nodes[1].guideline_id, "journey_node:book.pickup:edge_001");
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod agent;
pub mod builder;
pub mod cron;
pub mod definition;
pub mod files;
pub mod graph;
pub mod guideline;
pub mod ids;
pub mod journey;
pub mod knowledge;
pub mod limits;
pub mod model;
pub mod path;
pub mod payload;
pub mod projection;
pub mod relationship;
pub mod reply_check;
pub mod session;
pub mod templates;
pub mod tool;
pub mod vectors;

pub use agent::{Agent, CompositionMode, OutputMode};
pub use guideline::{Criticality, Guideline, GuidelineExample};
pub use journey::{Journey, JourneyState, StateKind, Transition};
pub use knowledge::{CannedResponse, Capability, ContextVariable, Tag, Term};
pub use model::AgentDefinition;
pub use path::{JourneyPath, PathStep};
pub use relationship::{Endpoint, Relationship, RelationshipKind, TagMode};
pub use session::{AgentState, Customer, Event, EventKind, EventSource, Session};
pub use tool::{Tool, ToolId, ToolService};
