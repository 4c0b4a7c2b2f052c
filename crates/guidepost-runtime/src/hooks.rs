//! Hooks: code that runs at fixed points of a turn and can read and change what the turn
//! has gathered, emit events of its own, or stop the turn.
//!
//! The points follow the response lifecycle: acknowledged, preparing, each preparation
//! iteration's start and end, before messages are generated, after the draft, after each
//! message, after all messages were emitted, and on error.

use async_trait::async_trait;

use crate::events::EventSink;
use crate::state::ResponseState;

/// What a hook wants the turn to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HookAction {
    /// Go on.
    #[default]
    Continue,
    /// Stop: during preparation this ends preparation early; before or during generation
    /// it drops the reply (the turn ends with `ready` and no message); on a draft or a
    /// message it keeps the text as it is.
    Bail,
}

/// Hook points of a turn. Every method has a default that does nothing.
#[async_trait]
pub trait EngineHooks: Send + Sync {
    /// The customer message was acknowledged.
    async fn on_acknowledged(&self, _state: &mut ResponseState, _events: &dyn EventSink) -> HookAction {
        HookAction::Continue
    }
    /// Preparation is about to start.
    async fn on_preparing(&self, _state: &mut ResponseState, _events: &dyn EventSink) -> HookAction {
        HookAction::Continue
    }
    /// A preparation iteration starts (1-based).
    async fn on_iteration_start(
        &self,
        _iteration: u32,
        _state: &mut ResponseState,
        _events: &dyn EventSink,
    ) -> HookAction {
        HookAction::Continue
    }
    /// A preparation iteration ended: its matches and tool calls are in the state.
    async fn on_iteration_end(
        &self,
        _iteration: u32,
        _state: &mut ResponseState,
        _events: &dyn EventSink,
    ) -> HookAction {
        HookAction::Continue
    }
    /// Preparation is done; the reply is about to be composed.
    async fn on_generating_messages(&self, _state: &mut ResponseState, _events: &dyn EventSink) -> HookAction {
        HookAction::Continue
    }
    /// The reply was drafted; the hook may edit it.
    async fn on_draft_generated(&self, _draft: &mut String, _state: &ResponseState) -> HookAction {
        HookAction::Continue
    }
    /// A message is about to be emitted; the hook may edit it.
    async fn on_message_generated(&self, _message: &mut String, _state: &ResponseState) -> HookAction {
        HookAction::Continue
    }
    /// Every message of the reply was emitted.
    async fn on_messages_emitted(&self, _state: &ResponseState, _events: &dyn EventSink) {}
    /// The turn failed.
    async fn on_error(&self, _error: &crate::TurnError, _state: &ResponseState, _events: &dyn EventSink) {}
}

/// Hooks that do nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

impl EngineHooks for NoHooks {}
