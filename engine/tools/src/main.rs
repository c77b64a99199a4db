//! The `cairn` command line, with the demo workflows compiled in (so that `cairn graph
//! research-agent`, `resume`, `fork` and `replay` work on the demo's threads, and `cairn serve`
//! offers `signoff-demo`, which publishes events, waits on a promise and streams chunks).

use std::process::ExitCode;
use std::sync::Arc;

use cairn_tools::demo::research_workflow;
use cairn_tools::demo_signoff::signoff_workflow;
use cairn_tools::model::ScriptedModel;

fn main() -> ExitCode {
    // Listed by id: research-agent, the demo of the docs, stays the first.
    let built = research_workflow(Arc::new(ScriptedModel::demo()))
        .and_then(|research| Ok(vec![research.erase(), signoff_workflow()?.erase()]));
    let workflows = match built {
        Ok(wfs) => wfs,
        Err(e) => {
            // Inspection (threads, events, verify...) does not need it: carry on without it.
            #[allow(clippy::print_stderr, reason = "the binary reports a startup problem")]
            {
                eprintln!(
                    "warning: the demo workflows do not build, so they are not available: {e}"
                );
            }
            Vec::new()
        }
    };
    cairn_tools::cli::run(workflows)
}
