//! The model as the application sees it: a [`LanguageModel`] (here the deterministic
//! [`ScriptedModel`]), a count of the completions asked of it per task, and the streaming of an
//! article's body to a UI that subscribed to the task.
//!
//! Streaming goes through a bounded channel of one chunk, as an SSE reader hands chunks to a
//! view: a UI that stops reading holds the stream (back-pressure). The call watches its
//! cancellation token while it waits, which is the cancellation chain: stop button ->
//! abort controller -> the signal passed into the model call -> the stream reader cancelled.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cairn::ToolError;
use cairn::dsl::ToolCtx;
use cairn_tools::model::{LanguageModel, ModelRequest, ModelResponse, ScriptedModel};
use tokio::sync::mpsc;

/// The purpose whose answers are streamed: the article's body.
pub const STREAMED_PURPOSE: &str = "content";

/// The example's scripted model: what each kind of request is answered with.
pub fn scripted() -> ScriptedModel {
    ScriptedModel::new()
        .answers("intent", &[r#"{"type":"UNKNOWN","confidence":0.2}"#])
        .answers(
            "outline",
            &[
                "1. Why it matters; 2. How it works; 3. Pitfalls; 4. Summary",
                "1. The problem; 2. The design; 3. A worked example; 4. What to watch",
            ],
        )
        .answers(
            "content",
            &[
                "Every step is written down before it counts. A crash loses nothing that was \
                 acknowledged. Work resumes from the last step, not from the start. Side effects \
                 are recorded, so they are not repeated.",
                "Long tasks fail in the middle. The fix is to make the middle durable. Each \
                 result is stored as it arrives. A restart reads them back and carries on.",
            ],
        )
        .answers("summary", &["Cairn writes every step to a log and resumes from it."])
}

/// The model, its call counts and the UI streams.
pub struct ModelService {
    model: Arc<dyn LanguageModel>,
    calls: Mutex<BTreeMap<(String, String), u32>>,
    streams: Mutex<HashMap<String, mpsc::Sender<String>>>,
}

impl std::fmt::Debug for ModelService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelService").field("calls", &*lock(&self.calls)).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each critical section is a single map operation; a poisoned map is still a valid map.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ModelService {
    /// A service over `model`.
    pub fn new(model: Arc<dyn LanguageModel>) -> Self {
        Self { model, calls: Mutex::default(), streams: Mutex::default() }
    }

    /// Subscribes a UI to `task`'s article body: chunks (sentences) arrive as the model
    /// produces them; the channel closes when the body is complete.
    pub fn stream(&self, task: &str) -> mpsc::Receiver<String> {
        // One chunk of buffer: the writer runs at most one chunk ahead of the reader.
        let (tx, rx) = mpsc::channel(1);
        lock(&self.streams).insert(task.to_owned(), tx);
        rx
    }

    /// Completions asked for `task` so far, by purpose (this process only).
    pub fn calls(&self, task: &str) -> BTreeMap<String, u32> {
        lock(&self.calls)
            .iter()
            .filter(|((t, _), _)| t == task)
            .map(|((_, purpose), n)| (purpose.clone(), *n))
            .collect()
    }

    /// Completes `request` for `task` inside a tool call: reports the usage to `tool`, and
    /// streams the body to a subscribed UI, stopping if the task is cancelled meanwhile.
    ///
    /// # Errors
    /// The model's error; a fatal `cancelled` error if the task was cancelled mid-stream.
    pub async fn complete(
        &self,
        task: &str,
        request: ModelRequest,
        tool: &ToolCtx,
    ) -> Result<ModelResponse, ToolError> {
        *lock(&self.calls).entry((task.to_owned(), request.purpose.clone())).or_default() += 1;
        let streamed = request.purpose == STREAMED_PURPOSE;
        let response = self.model.complete(request).await?;
        // Tokens are spent once the model answered, whether or not the stream is read to the end.
        tool.report_model_usage(&response.model, response.usage);
        let sink = if streamed { lock(&self.streams).remove(task) } else { None };
        if let Some(tx) = sink {
            for chunk in response.text.split_inclusive(['.', '。']) {
                tokio::select! {
                    sent = tx.send(chunk.trim().to_owned()) => {
                        if sent.is_err() {
                            break; // the UI went away; the body is still returned
                        }
                    }
                    () = tool.cancellation().cancelled() => {
                        let e = ToolError::fatal("cancelled while streaming");
                        return Err(e.with_code("cancelled"));
                    }
                }
            }
        }
        Ok(response)
    }
}
