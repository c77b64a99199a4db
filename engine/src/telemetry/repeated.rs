//! A background pass's failures, logged once per run of them: a poll that fails every few
//! hundred milliseconds while its database is away (a look for work, an admission pass) warns
//! at the first failure, says the rest at debug, and says once at info when it passes again.

/// Whether a background pass is failing, to log its failures once per run of them.
#[derive(Debug)]
pub(crate) struct Repeated {
    /// What the pass is, as the log names it.
    pass: &'static str,
    /// Failures since it last passed.
    failures: u64,
}

impl Repeated {
    pub(crate) fn new(pass: &'static str) -> Self {
        Self { pass, failures: 0 }
    }

    /// The pass failed with `error`: a warning at the first failure of a run, debug after.
    /// Returns whether it warned.
    pub(crate) fn failed(&mut self, error: &dyn std::fmt::Display) -> bool {
        self.failures += 1;
        if self.failures == 1 {
            tracing::warn!(pass = self.pass, %error, "a background pass failed (repeats are logged at debug until it passes)");
            return true;
        }
        tracing::debug!(pass = self.pass, %error, failures = self.failures, "a background pass failed again");
        false
    }

    /// The pass passed: said once at info after a run of failures.
    pub(crate) fn passed(&mut self) {
        if self.failures > 0 {
            tracing::info!(
                pass = self.pass,
                failures = self.failures,
                "a background pass passes again"
            );
        }
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::Repeated;

    #[test]
    fn only_the_first_failure_of_a_run_warns() {
        let mut admission = Repeated::new("queue admission");
        let warned: Vec<bool> = (0..3).map(|_| admission.failed(&"no answer")).collect();
        assert_eq!(warned, [true, false, false]);
        admission.passed();
        assert!(admission.failed(&"no answer"), "a new run of failures warns again");
    }
}
