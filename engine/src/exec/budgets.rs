//! The runner's budget checks at a step boundary (steps, tool calls, tokens, cost, wall time):
//! a `budget` warning once a limit's warning fraction is crossed, a clean stop (Paused,
//! resumable once the budget is raised) at the limit.

use cairn_storage::Batch;

use super::runner::{Exit, Runner};
use crate::core::event::Body;
use crate::core::status::Transition;
use crate::error::Error;
use crate::limits;

impl Runner {
    /// Budget checks at a step boundary: a warning once the configured fraction is crossed, a
    /// clean stop (Paused, resumable) at the limit.
    pub(super) async fn check_budgets(&mut self, now: u64) -> Result<Option<Exit>, Error> {
        let budgets = self.env.budgets.clone();
        let t = &self.ctx.meta.telemetry;
        let wall = now.saturating_sub(self.ctx.meta.created_at_ms);
        let figures = [
            ("steps", t.steps, budgets.max_steps),
            ("tool_calls", t.tool_calls, budgets.max_tool_calls),
            ("tokens", t.tokens, budgets.max_tokens),
            ("cost", t.cost_micros, budgets.max_cost_micros),
            ("wall_ms", wall, budgets.max_wall_ms),
        ];
        let mut warned = false;
        for (name, used, limit) in figures {
            let Some(limit) = limit else { continue };
            if used >= limit {
                // A clean stop in a resumable state: raise the budget and resume.
                self.emit(Body::Budget { budget: name.to_owned(), used, limit }, now)?;
                let exit = self
                    .finish(Transition::Pause, &format!("budget {name} exhausted"), now)
                    .await?;
                return Ok(Some(exit));
            }
            let threshold = (limit as f64 * budgets.warn_fraction).ceil() as u64;
            if used >= threshold && !self.ctx.meta.budget_warned.iter().any(|b| b == name) {
                self.emit(Body::Budget { budget: name.to_owned(), used, limit }, now)?;
                warned = true;
            }
        }
        if warned {
            // Submit now: tasks append their own events next (after settling), and the seqs
            // predicted for emitted events must not overlap theirs.
            // Boxed: a warning is rare, and this is awaited before every step.
            Box::pin(self.commit(Batch::default(), None, None, self.now())).await?;
        }
        if self.ctx.meta.step >= limits::STEPS_PER_THREAD_MAX {
            return Err(Error::LimitExceeded {
                limit: "the steps of one thread",
                value: self.ctx.meta.step,
                max: limits::STEPS_PER_THREAD_MAX,
            });
        }
        Ok(None)
    }
}
