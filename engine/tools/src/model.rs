//! The language-model seam: a trait a user implements for a real model, and a deterministic
//! scripted implementation for demos and tests.
//!
//! Nodes call a model through [`cairn_dsl::Ctx::tool`], so a completion is recorded like any
//! tool result: it is never requested twice for the same call, on resume or on replay.

use std::collections::BTreeMap;

use cairn_dsl::{ToolError, Usage};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

/// A request to a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// What the completion is for (a routing key such as "classify" or "draft").
    pub purpose: String,
    /// The prompt.
    pub prompt: String,
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The completion text.
    pub text: String,
    /// The model that answered (what its usage is recorded under). Empty in completions
    /// recorded before it existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// Tokens and cost of the call.
    pub usage: Usage,
}

/// A language model. Implement this for a real model; the engine records every completion.
pub trait LanguageModel: Send + Sync + 'static {
    /// Completes `request`.
    ///
    /// # Errors
    /// A [`ToolError`] (retryable for rate limits and timeouts, fatal for bad requests).
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ToolError>>;
}

/// The name a [`ScriptedModel`] answers under.
pub const SCRIPTED_MODEL: &str = "scripted";

/// A scripted model: NOT a language model. It answers from a fixed script keyed by purpose,
/// choosing among the scripted answers by a hash of the prompt, so the same request always gets
/// the same answer on every machine. Used by `cairn demo` and the tests.
///
/// # Examples
/// ```
/// use cairn_tools::model::{LanguageModel, ModelRequest, ScriptedModel};
/// # futures::executor::block_on(async {
/// let model = ScriptedModel::demo();
/// let req = ModelRequest { purpose: "classify".into(), prompt: "why is the sky blue?".into() };
/// let a = model.complete(req.clone()).await.unwrap();
/// let b = model.complete(req).await.unwrap();
/// assert_eq!(a, b);
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct ScriptedModel {
    script: BTreeMap<String, Vec<String>>,
}

impl ScriptedModel {
    /// An empty script: every purpose is answered by echoing the prompt.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the answers for `purpose`.
    #[must_use]
    pub fn answers(mut self, purpose: &str, answers: &[&str]) -> Self {
        self.script.insert(purpose.to_owned(), answers.iter().map(|s| (*s).to_owned()).collect());
        self
    }

    /// The script of `cairn demo`.
    pub fn demo() -> Self {
        Self::new()
            .answers("classify", &["research", "research", "simple"])
            .answers(
                "plan",
                &[
                    "background; current methods; open problems",
                    "definitions; evidence; counterpoints",
                ],
            )
            .answers(
                "draft",
                &[
                    "A short answer built from the findings.",
                    "A structured answer: context, evidence, conclusion.",
                ],
            )
            .answers("review", &["approve", "revise", "approve"])
            .answers("answer", &["A direct answer."])
    }
}

impl LanguageModel for ScriptedModel {
    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ToolError>> {
        let hash = blake3::hash(format!("{}\n{}", request.purpose, request.prompt).as_bytes());
        let n = u64::from_le_bytes(hash.as_bytes()[..8].try_into().unwrap_or([0; 8]));
        let text = match self.script.get(&request.purpose) {
            Some(answers) if !answers.is_empty() => {
                answers[(n % answers.len() as u64) as usize].clone()
            }
            _ => request.prompt.clone(),
        };
        let tokens = (request.prompt.len() + text.len()) as u64 / 4 + 1;
        let usage = Usage { tokens, cost_micros: tokens * 2 };
        let model = SCRIPTED_MODEL.to_owned();
        Box::pin(async move { Ok(ModelResponse { text, model, usage }) })
    }
}
