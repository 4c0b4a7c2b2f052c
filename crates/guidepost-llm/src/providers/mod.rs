//! Model providers, one module per wire protocol, plus the scripted test models.

pub mod anthropic;
pub mod hashing;
pub mod http;
pub mod openai_compat;
pub mod scripted;
