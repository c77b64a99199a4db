//! Budgets in the fold: the limits a thread's own policy sets (`budgets_set`), and the budgets
//! already warned about (a warning is given once per budget and set of limits).

use crate::error::Error;
use crate::event::Body;
use crate::thread_ctx::EventAt;
use crate::thread_ctx::ThreadCtx;

/// Folds the budgets' part of `e` into `ctx`.
///
/// # Errors
/// None: every event folds.
pub(crate) fn fold(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    let m = &mut ctx.meta;
    match e.body {
        Body::Budget { budget, used, limit }
            if used < limit && !m.budget_warned.contains(budget) =>
        {
            m.budget_warned.push(budget.clone());
        }
        Body::BudgetsSet { budgets } => {
            m.policy.budgets = Some(budgets.clone());
            // New limits: warn again when the new fractions are crossed.
            m.budget_warned.clear();
        }
        _ => {}
    }
    Ok(())
}
