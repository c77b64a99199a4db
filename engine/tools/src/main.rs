//! The `cairn` command line, with the demo workflow compiled in (so that `cairn graph
//! research-agent`, `resume`, `fork` and `replay` work on the demo's threads).

use std::process::ExitCode;
use std::sync::Arc;

use cairn_tools::demo::research_workflow;
use cairn_tools::model::ScriptedModel;

fn main() -> ExitCode {
    let workflows = match research_workflow(Arc::new(ScriptedModel::demo())) {
        Ok(wf) => vec![wf.erase()],
        Err(e) => {
            // Inspection (threads, events, verify...) does not need it: carry on without it.
            #[allow(clippy::print_stderr, reason = "the binary reports a startup problem")]
            {
                eprintln!("warning: the demo workflow does not build, so it is not available: {e}");
            }
            Vec::new()
        }
    };
    cairn_tools::cli::run(workflows)
}
