//! Time, as the engine sees it: injectable, so tests control it and replay reads it back.
//!
//! Node code never reads the system clock: it asks its context, which takes the time from the
//! engine's [`Clock`] and records it. Durable timers, retry backoffs, lease expiry and deadlines
//! all use the same clock, so a [`ManualClock`] lets a test advance a week in a microsecond.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use tokio::sync::watch;

/// A source of time in milliseconds since the Unix epoch, with the ability to wait for a time.
pub trait Clock: Send + Sync + 'static {
    /// The current time in ms since the Unix epoch.
    fn now_ms(&self) -> u64;
    /// Resolves once `now_ms() >= at_ms`.
    fn sleep_until(&self, at_ms: u64) -> BoxFuture<'static, ()>;
}

/// The wall clock (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // A clock before 1970 is a broken machine, not input: treat it as the epoch.
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
    }

    fn sleep_until(&self, at_ms: u64) -> BoxFuture<'static, ()> {
        let wait = at_ms.saturating_sub(self.now_ms());
        Box::pin(tokio::time::sleep(Duration::from_millis(wait)))
    }
}

/// A clock that only moves when a test moves it.
///
/// # Examples
/// ```
/// use cairn::clock::{Clock, ManualClock};
/// let clock = ManualClock::new(1_000);
/// clock.advance_ms(500);
/// assert_eq!(clock.now_ms(), 1_500);
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Debug)]
struct ManualInner {
    now: AtomicU64,
    tick: watch::Sender<u64>,
}

impl ManualClock {
    /// A clock standing at `start_ms`.
    pub fn new(start_ms: u64) -> Self {
        let (tick, _) = watch::channel(start_ms);
        Self { inner: Arc::new(ManualInner { now: AtomicU64::new(start_ms), tick }) }
    }

    /// Moves the clock forward by `ms` and wakes every sleeper whose time has come.
    pub fn advance_ms(&self, ms: u64) {
        let now = self.inner.now.fetch_add(ms, Ordering::SeqCst) + ms;
        self.publish(now);
    }

    /// Sets the clock to `at_ms` if that is later than now (time never goes back).
    pub fn set_ms(&self, at_ms: u64) {
        let now = self.inner.now.fetch_max(at_ms, Ordering::SeqCst).max(at_ms);
        self.publish(now);
    }

    /// Tells sleepers the clock reached `now`. Two moves on two threads may publish out of
    /// order; the published time only grows, so the later one is never overwritten by the
    /// earlier (a sleeper would wait for a time already reached).
    fn publish(&self, now: u64) {
        self.inner.tick.send_modify(|published| *published = (*published).max(now));
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.inner.now.load(Ordering::SeqCst)
    }

    fn sleep_until(&self, at_ms: u64) -> BoxFuture<'static, ()> {
        let mut rx = self.inner.tick.subscribe();
        Box::pin(async move {
            // `wait_for` checks the current value first, so a tick that happened before we
            // subscribed is not missed.
            let _ = rx.wait_for(|now| *now >= at_ms).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn manual_sleep_wakes_on_advance() {
        let clock = ManualClock::new(0);
        let sleeper = tokio::spawn(clock.sleep_until(100));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        clock.advance_ms(99);
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        clock.advance_ms(1);
        sleeper.await.expect("sleeper");
        assert_eq!(clock.now_ms(), 100);
    }

    #[tokio::test]
    async fn moves_published_out_of_order_never_take_the_clock_back() {
        let clock = ManualClock::new(0);
        clock.set_ms(200);
        // What a move to 100 on another thread publishing after the move to 200 would send.
        clock.publish(100);
        assert_eq!(*clock.inner.tick.borrow(), 200);
        tokio::time::timeout(std::time::Duration::from_secs(5), clock.sleep_until(150))
            .await
            .expect("a sleeper until a time the clock reached wakes");
    }

    #[tokio::test]
    async fn sleep_in_the_past_returns_at_once() {
        let clock = ManualClock::new(50);
        clock.sleep_until(10).await;
    }
}
