//! A debug bundle's round trip: a support ticket's thread runs on one machine, is exported as
//! one redacted, gzip-compressed file (its events, state, checkpoints and the tool results), and
//! on another machine the file is imported into an empty database, replayed against the code
//! (it agrees with its record), and forked at the step before the answer to try another tone,
//! which runs to its end while the imported thread stays as it was.
//!
//! A bundle is the format of the design Cairn grew from (version, timestamp, state, events with
//! their payloads, checkpoints, metadata): the file can be read by that framework's tools, and
//! its bundles are read here too. The `classify` tool's API key is the tool's own credential,
//! not part of its input, so nothing recorded holds it; the export is told the key anyway
//! (`Redaction::secrets`), and the example checks that it is nowhere in the file. (A secret
//! passed in a tool's input would be recorded with the call; the bundle would carry it redacted,
//! and a replay of that bundle would rightly report the call's input as changed.)
//!
//! ```text
//! START -> classify (tool: the ticket's topic) -> answer (tool: a reply in a tone) -> END
//! ```

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, State, Workflow};
use cairn::replay::ReplayOptions;
use cairn::{END, Engine, START, StartOptions, ToolError};
use cairn_tools::debug::{Bundle, ExportOptions, ForkFrom, ForkOptions, Redaction};
use serde::{Deserialize, Serialize};

/// The key the `classify` tool is called with: it must not appear in the bundle.
pub const API_KEY: &str = "sk-live-4242-do-not-share";

/// A support ticket as it goes through the workflow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    /// What the customer wrote.
    pub text: String,
    /// The tone of the answer.
    pub tone: String,
    /// The topic `classify` found.
    pub topic: String,
    /// The answer.
    pub answer: String,
}

/// What a node changes in the ticket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Change {
    /// The topic found.
    Topic(String),
    /// The answer written.
    Answer(String),
    /// Another tone (the fork's change).
    Tone(String),
}

impl State for Ticket {
    type Update = Change;

    fn apply(&mut self, change: Change) {
        match change {
            Change::Topic(t) => self.topic = t,
            Change::Answer(a) => self.answer = a,
            Change::Tone(t) => self.tone = t,
        }
    }
}

/// The support workflow.
///
/// # Errors
/// A build error (none for this graph).
pub fn workflow() -> Result<Workflow<Ticket>, cairn::dsl::BuildError> {
    Workflow::<Ticket>::builder("support", 1)
        .node("classify", |s: Arc<Ticket>, ctx: Ctx| async move {
            let topic: String = ctx
                .tool("classify", s.text.clone(), |text: String, _| async move {
                    // A real classifier would send the text with `API_KEY` in a header.
                    if API_KEY.is_empty() {
                        return Err(ToolError::fatal("no API key"));
                    }
                    let topic =
                        if text.to_lowercase().contains("invoice") { "billing" } else { "general" };
                    Ok::<_, ToolError>(topic.to_owned())
                })
                .await?;
            Ok(NodeOutput::update(Change::Topic(topic)))
        })
        .node("answer", |s: Arc<Ticket>, ctx: Ctx| async move {
            let input = (s.topic.clone(), s.tone.clone());
            let answer: String = ctx
                .tool("write_answer", input, |(topic, tone): (String, String), _| async move {
                    Ok::<_, ToolError>(format!(
                        "[{tone}] about your {topic} question: we are on it"
                    ))
                })
                .await?;
            Ok(NodeOutput::update(Change::Answer(answer)))
        })
        .edge(START, "classify")
        .edge("classify", "answer")
        .edge("answer", END)
        .build()
}

/// What the example saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The bundle file's size, bytes (gzip).
    pub bundle_bytes: usize,
    /// Events in the bundle.
    pub events: usize,
    /// Whether the API key appears anywhere in the file's JSON.
    pub key_in_bundle: bool,
    /// The imported thread's final state (equal to the original's).
    pub imported: Ticket,
    /// The original thread's final state.
    pub original: Ticket,
    /// Whether the replay of the imported thread agreed with its record.
    pub replay_agrees: bool,
    /// Tasks the replay re-ran and compared.
    pub tasks_replayed: u64,
    /// The fork's final state (another tone).
    pub fork: Ticket,
}

/// Runs the thread in `first_db`, writes its bundle to `bundle_path`, imports it into
/// `second_db`, replays it and forks it there.
///
/// # Errors
/// Engine errors; the bundle file not written or read.
pub async fn run(first_db: &Path, second_db: &Path, bundle_path: &Path) -> anyhow::Result<Summary> {
    let wf = workflow()?;
    // Machine one: the thread runs, and is exported.
    let first = Engine::builder(first_db).workflow(&wf).open().await?;
    let input = Ticket {
        text: "My invoice shows the wrong amount".into(),
        tone: "formal".into(),
        ..Ticket::default()
    };
    let original = first.start(&wf, input, StartOptions::id("ticket-7")).await?.output().await?;
    let options = ExportOptions {
        include_checkpoints: true,
        gzip: true,
        redaction: Redaction { secrets: vec![API_KEY.into()], ..Redaction::default() },
        ..ExportOptions::default()
    };
    let bundle = cairn_tools::Operator::new(&first).export_bundle("ticket-7", &options).await?;
    let bytes = bundle.to_bytes(true)?;
    std::fs::write(bundle_path, &bytes)?;
    first.shutdown().await;

    // Machine two: the file, an empty database, the same code.
    let read = Bundle::from_bytes(&std::fs::read(bundle_path)?)?;
    let key_in_bundle = serde_json::to_string(&read)?.contains(API_KEY);
    let second = Engine::builder(second_db).workflow(&wf).open().await?;
    let operator = cairn_tools::Operator::new(&second);
    let id = operator.import_bundle(&read).await?;
    let imported: Ticket = second.thread(id.as_str()).await?.output().await?;
    let replay = second.replay(id.as_str(), &ReplayOptions::default()).await?;
    // Fork after the first step's events (the topic is known), in another tone.
    let after_classify = operator
        .states(id.as_str(), 1, operator.state_at(id.as_str(), None).await?.seq)
        .await?
        .into_iter()
        .find(|v| v.step == 1)
        .map(|v| v.seq)
        .ok_or_else(|| anyhow::anyhow!("no step 1 in the imported thread"))?;
    let fork = operator
        .fork(
            id.as_str(),
            ForkFrom::Seq(after_classify),
            ForkOptions::id("ticket-7-friendly").update(Change::Tone("friendly".into())),
        )
        .await?;
    let fork: Ticket = fork.output().await?;
    second.shutdown().await;
    Ok(Summary {
        bundle_bytes: bytes.len(),
        events: read.events.events.len(),
        key_in_bundle,
        imported,
        original,
        replay_agrees: replay.divergence.is_none(),
        tasks_replayed: replay.tasks_replayed,
        fork,
    })
}
