//! Record/replay of model calls, for deterministic tests and reproducible benchmarks.
//!
//! | mode | on a recorded request | on a new request |
//! |---|---|---|
//! | `live` | calls the model | calls the model |
//! | `record` | calls the model, overwrites | calls the model, records |
//! | `replay` | answers from the recording | calls the model, records |
//! | `replay-or-fail` | answers from the recording | fails, naming what changed |

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Mutex;

use async_trait::async_trait;
use futures::StreamExt;

use super::recording::{RecordedRequest, Recording, explain_miss, load, recording_path, request_key, save};
use crate::error::LlmError;
use crate::ports::{ChatModel, TextStream, single_shot_stream};
use crate::request::{ChatRequest, ChatResponse, StreamEvent};

/// How the record/replay cache behaves (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheMode {
    /// No cache.
    #[default]
    Live,
    /// Always call, always record.
    Record,
    /// Use recordings when present, record the rest.
    Replay,
    /// Use recordings only; never touch the network.
    ReplayOrFail,
}

impl FromStr for CacheMode {
    type Err = LlmError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "live" => Ok(CacheMode::Live),
            "record" => Ok(CacheMode::Record),
            "replay" => Ok(CacheMode::Replay),
            "replay-or-fail" => Ok(CacheMode::ReplayOrFail),
            other => Err(LlmError::Config(format!(
                "invalid cache mode `{other}`; accepted: live, record, replay, replay-or-fail"
            ))),
        }
    }
}

impl fmt::Display for CacheMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CacheMode::Live => "live",
            CacheMode::Record => "record",
            CacheMode::Replay => "replay",
            CacheMode::ReplayOrFail => "replay-or-fail",
        })
    }
}

/// Every request a `replay-or-fail` cache of this process found no recording for, in order:
/// the task and what differs from the closest recording. A caller that handles a failed call
/// by degrading (a journey check that keeps the journey where it was) hides the miss from
/// the run's outcome; commands that replay read this ledger at the end and fail the run, so a
/// missing recording never reads as a decision.
static MISSES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The misses [`MISSES`] holds so far (see there).
pub fn replay_misses() -> Vec<String> {
    MISSES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

/// The record/replay layer. Recordings are keyed by the sha256 of the inner model's id and
/// the normalized request, and stored under `dir` (see [`recording`](super::recording)).
#[derive(Debug)]
pub struct RecordReplay<M> {
    inner: M,
    dir: PathBuf,
    mode: CacheMode,
}

impl<M: ChatModel> RecordReplay<M> {
    /// Wraps `inner`, storing recordings under `dir`.
    pub fn new(inner: M, dir: impl Into<PathBuf>, mode: CacheMode) -> Self {
        Self { inner, dir: dir.into(), mode }
    }

    /// Looks the request up. `Ok(Some)` on a hit; `Err(ReplayMiss)` on a miss in
    /// replay-or-fail mode.
    async fn lookup(&self, req: &ChatRequest) -> Result<(Option<ChatResponse>, Recording), LlmError> {
        let request = RecordedRequest::from(req);
        let model = self.inner.model_id().to_string();
        let key = request_key(&model, &request);
        let path = recording_path(&self.dir, &req.task, &key);
        let found = match self.mode {
            CacheMode::Replay | CacheMode::ReplayOrFail => load(&path).await?.filter(|r| r.key == key),
            CacheMode::Live | CacheMode::Record => None,
        };
        if let Some(recording) = found {
            tracing::debug!(task = %req.task, path = %path.display(), "replaying recorded answer");
            let response = recording.response.clone();
            return Ok((Some(response), recording));
        }
        if self.mode == CacheMode::ReplayOrFail {
            let miss = LlmError::ReplayMiss {
                task: req.task.to_string(),
                diff: explain_miss(&self.dir, &req.task, &model, &request).await,
            };
            MISSES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(miss.to_string());
            return Err(miss);
        }
        let placeholder = Recording {
            key,
            task: req.task.clone(),
            model,
            request,
            response: ChatResponse::new(crate::request::Output::Text(String::new()), crate::usage::Usage::default()),
        };
        Ok((None, placeholder))
    }

    async fn store(&self, mut recording: Recording, response: &ChatResponse) -> Result<(), LlmError> {
        recording.response = response.clone();
        let path = recording_path(&self.dir, &recording.task, &recording.key);
        save(&path, &recording).await
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for RecordReplay<M> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn capabilities(&self) -> crate::ModelCapabilities {
        self.inner.capabilities()
    }

    /// Passed on where answers may come from the model; never when they come from
    /// recordings only.
    async fn read_ahead(&self, req: ChatRequest) -> Result<bool, LlmError> {
        if self.mode == CacheMode::ReplayOrFail {
            return Ok(false);
        }
        self.inner.read_ahead(req).await
    }

    fn reads_ahead(&self) -> bool {
        self.mode != CacheMode::ReplayOrFail && self.inner.reads_ahead()
    }

    async fn complete(&self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        if self.mode == CacheMode::Live {
            return self.inner.complete(req).await;
        }
        let (hit, recording) = self.lookup(&req).await?;
        if let Some(response) = hit {
            return Ok(response);
        }
        let response = self.inner.complete(req).await?;
        self.store(recording, &response).await?;
        Ok(response)
    }

    async fn stream(&self, req: ChatRequest) -> Result<TextStream, LlmError> {
        if self.mode == CacheMode::Live {
            return self.inner.stream(req).await;
        }
        let (hit, recording) = self.lookup(&req).await?;
        if let Some(response) = hit {
            return Ok(single_shot_stream(response));
        }
        let mut inner = self.inner.stream(req).await?;
        let dir = self.dir.clone();
        let recorded = async_stream::stream! {
            while let Some(item) = inner.next().await {
                if let Ok(StreamEvent::Done(response)) = &item {
                    let mut recording = recording.clone();
                    recording.response = response.clone();
                    let path = recording_path(&dir, &recording.task, &recording.key);
                    if let Err(error) = save(&path, &recording).await {
                        yield Err(error);
                        return;
                    }
                }
                yield item;
            }
        };
        Ok(Box::pin(recorded))
    }
}
