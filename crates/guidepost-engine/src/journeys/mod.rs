//! Journeys: the graph the engine walks, prediction of relevant journeys, node selection
//! and the path algebra applied to selection decisions.

pub mod graph;
pub mod paths;
pub mod prediction;
pub mod selection;
