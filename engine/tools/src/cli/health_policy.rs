//! The health policy flags `cairn serve` and `cairn worker` share (`--stuck-action`,
//! `--expired-locks`, `--stuck-after-ms`, `--health-every-ms`): what the engine's own health
//! passes do about a stuck thread and a lock held past its time to live
//! (`cairn::HealthPolicy`, `EngineBuilder::health_policy`), when a thread counts as stuck
//! (`EngineBuilder::watchdog_ms`), and how often a pass runs (`EngineBuilder::health_every_ms`).

use cairn::{ExpiredLockAction, HealthPolicy, StuckAction};

/// What a health pass does about a stuck thread (`cairn::StuckAction`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum StuckFlag {
    /// Report it only.
    #[default]
    Report,
    /// Pause it at its next step boundary.
    Pause,
    /// Cancel it (reason `watchdog: no step for N ms`).
    Cancel,
    /// End the node attempts it runs as their timeout would: their retry policies go on.
    Retry,
}

/// What a health pass does about a lock held past its time to live
/// (`cairn::ExpiredLockAction`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ExpiredLocksFlag {
    /// Report it only.
    #[default]
    Report,
    /// Release it.
    Release,
}

/// The health policy flags of `cairn serve` and `cairn worker`.
#[derive(Debug, Clone, clap::Args)]
pub struct HealthPolicyFlags {
    /// What the engine's health passes do about a stuck thread (Running, no step for longer
    /// than --stuck-after-ms).
    #[arg(long, value_enum, default_value_t = StuckFlag::Report)]
    stuck_action: StuckFlag,
    /// What the engine's health passes do about a lock held past its time to live.
    #[arg(long, value_enum, default_value_t = ExpiredLocksFlag::Report)]
    expired_locks: ExpiredLocksFlag,
    /// A Running thread with no step for longer than this is stuck, in ms (the watchdog).
    #[arg(long, alias = "watchdog-ms", default_value_t = cairn::Config::default().watchdog_ms)]
    stuck_after_ms: u64,
    /// How often the engine runs a health pass, in ms (default 60000).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    health_every_ms: Option<u64>,
}

impl HealthPolicyFlags {
    /// The engine's health policy these flags ask for.
    pub fn policy(&self) -> HealthPolicy {
        let stuck = match self.stuck_action {
            StuckFlag::Report => StuckAction::Report,
            StuckFlag::Pause => StuckAction::Pause,
            StuckFlag::Cancel => StuckAction::Cancel,
            StuckFlag::Retry => StuckAction::Retry,
        };
        let expired_locks = match self.expired_locks {
            ExpiredLocksFlag::Report => ExpiredLockAction::Report,
            ExpiredLocksFlag::Release => ExpiredLockAction::Release,
        };
        HealthPolicy { stuck, expired_locks }
    }

    /// `builder` with the policy, the watchdog and (when given) the health passes' interval.
    pub fn apply(&self, builder: cairn::EngineBuilder) -> cairn::EngineBuilder {
        let builder = builder.health_policy(self.policy()).watchdog_ms(self.stuck_after_ms);
        match self.health_every_ms {
            Some(ms) => builder.health_every_ms(Some(ms)),
            None => builder,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Cmd {
        #[command(flatten)]
        flags: HealthPolicyFlags,
    }

    fn parse(args: &[&str]) -> Result<HealthPolicyFlags, clap::Error> {
        Cmd::try_parse_from(std::iter::once("cmd").chain(args.iter().copied())).map(|c| c.flags)
    }

    #[test]
    fn the_default_only_reports_with_the_engines_watchdog() {
        let flags = parse(&[]).expect("no flags");
        assert_eq!(flags.policy(), HealthPolicy::default());
        assert_eq!(flags.stuck_after_ms, cairn::Config::default().watchdog_ms);
        assert_eq!(flags.health_every_ms, None);
    }

    #[test]
    fn each_value_becomes_its_action() {
        let stuck = [
            ("report", StuckAction::Report),
            ("pause", StuckAction::Pause),
            ("cancel", StuckAction::Cancel),
            ("retry", StuckAction::Retry),
        ];
        for (given, action) in stuck {
            let flags = parse(&["--stuck-action", given]).expect(given);
            assert_eq!(flags.policy().stuck, action, "{given}");
            assert_eq!(flags.policy().expired_locks, ExpiredLockAction::Report, "{given}");
        }
        let flags = parse(&["--expired-locks", "release"]).expect("release");
        assert_eq!(flags.policy().expired_locks, ExpiredLockAction::Release);
        assert_eq!(flags.policy().stuck, StuckAction::Report);
        let flags =
            parse(&["--stuck-after-ms", "250", "--health-every-ms", "20"]).expect("numbers");
        assert_eq!((flags.stuck_after_ms, flags.health_every_ms), (250, Some(20)));
        let flags = parse(&["--watchdog-ms", "7"]).expect("the alias");
        assert_eq!(flags.stuck_after_ms, 7);
    }

    #[test]
    fn a_bad_value_is_refused_naming_its_flag() {
        for args in [
            &["--stuck-action", "kill"][..],
            &["--expired-locks", "cancel"][..],
            &["--health-every-ms", "0"][..],
        ] {
            let e = parse(args).expect_err("refused");
            // A usage error: the process exits 2.
            assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
            assert!(e.to_string().contains(args[0]), "{args:?}: {e}");
        }
        // The control: the same flags with good values parse.
        assert!(parse(&["--stuck-action", "cancel", "--expired-locks", "release"]).is_ok());
    }
}
