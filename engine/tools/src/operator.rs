//! [`Operator`]: the one type the operator operations on a thread hang off (their `impl` blocks
//! live beside what they do, in `debug/`).

use cairn::Engine;

/// Operator operations on an engine's threads: time travel, node runs, traces, forks,
/// rollbacks and debug bundles. Built from an open engine; cheap to make and to clone (it holds
/// a handle of the engine, as [`Engine`]'s clones do).
///
/// # Examples
/// ```no_run
/// # async fn run() -> Result<(), cairn::Error> {
/// let engine = cairn::Engine::builder("cairn.db").open().await?;
/// let operator = cairn_tools::Operator::new(&engine);
/// let view = operator.state_at("t1", None).await?;
/// tracing::info!(seq = view.seq, "latest state");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Operator {
    pub(crate) engine: Engine,
}

impl Operator {
    /// The operator of `engine`.
    pub fn new(engine: &Engine) -> Operator {
        Operator { engine: engine.clone() }
    }

    /// The engine it works on.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}
