//! Model providers, one module per wire protocol, plus the scripted test model.

pub mod scripted;
