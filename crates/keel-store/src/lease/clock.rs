//! The lease axis's clock: the `now` the shell hands the [`Lessor`](super::Lessor).
//!
//! The lessor is driven by `(input, now)`; every `now` of a member's lease axis (grants
//! applied, keepalives, TimeToLive, the expiry and checkpoint loop, the promotion of a new
//! leader) is read from its one [`LeaseClock`]. A member runs on the monotonic clock
//! ([`LeaseClock::system`]). A test opens one on a manual clock instead
//! ([`LeaseClock::manual`], `Store::open_with_lease_clock`), which stands still until the test
//! moves it ([`LeaseClock::advance`]): a lease expires, and a checkpoint falls due, exactly
//! when the test says, however slow the machine, and the test learns that the loop acted on
//! a time by waiting for it ([`LeaseClock::pass_at`]) rather than by sleeping. Only lease
//! time is manual: Raft, request timeouts and the loop's own tick stay on real time.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::watch;

/// The clock of one member's lease axis (see the module docs).
#[derive(Debug)]
pub struct LeaseClock {
    /// `None`: the monotonic clock; `Some`: the current time of a manual clock.
    manual: Option<Mutex<Instant>>,
    /// The time of the lease loop's last finished pass.
    passes: watch::Sender<Option<Instant>>,
}

impl LeaseClock {
    /// The monotonic clock, which every member runs on.
    pub fn system() -> LeaseClock {
        LeaseClock {
            manual: None,
            passes: watch::Sender::new(None),
        }
    }

    /// A clock that reads `start` until it is moved by [`LeaseClock::advance`] (for tests).
    pub fn manual(start: Instant) -> LeaseClock {
        LeaseClock {
            manual: Some(Mutex::new(start)),
            ..LeaseClock::system()
        }
    }

    /// The current lease time.
    pub fn now(&self) -> Instant {
        match &self.manual {
            Some(now) => *now.lock(),
            None => Instant::now(),
        }
    }

    /// Moves a manual clock forward by `by`.
    ///
    /// # Panics
    ///
    /// On the system clock, which only time moves.
    pub fn advance(&self, by: Duration) {
        let now = self
            .manual
            .as_ref()
            .expect("only a manual lease clock can be advanced");
        *now.lock() += by;
    }

    /// Records that the lease loop finished its pass at lease time `at`: it proposed every
    /// expiry and checkpoint due by then, and the proposals returned.
    pub(crate) fn pass_finished(&self, at: Instant) {
        self.passes.send_if_modified(|last| {
            let newer = last.is_none_or(|last| last < at);
            if newer {
                *last = Some(at);
            }
            newer
        });
    }

    /// Waits until the lease loop has finished a pass at lease time `at` or later; on the
    /// leader, every expiry and checkpoint due by `at` is then applied. Waits forever on a
    /// member whose loop has stopped: callers bound it.
    pub async fn pass_at(&self, at: Instant) {
        let mut passes = self.passes.subscribe();
        // The sender lives in `self`, which outlives this wait.
        let _ = passes
            .wait_for(|last| last.is_some_and(|last| last >= at))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let t0 = Instant::now();
        let clock = LeaseClock::manual(t0);
        assert_eq!(clock.now(), t0);
        clock.advance(Duration::from_secs(3));
        assert_eq!(clock.now(), t0 + Duration::from_secs(3));
        let system = LeaseClock::system();
        assert!(system.now() >= t0);
    }

    #[tokio::test]
    async fn pass_at_returns_once_a_pass_reached_the_time() {
        let t0 = Instant::now();
        let clock = LeaseClock::manual(t0);
        clock.pass_finished(t0 + Duration::from_secs(2));
        // An older pass reported late does not move the record back.
        clock.pass_finished(t0);
        clock.pass_at(t0 + Duration::from_secs(1)).await;
        clock.pass_at(t0 + Duration::from_secs(2)).await;
        let later = clock.pass_at(t0 + Duration::from_secs(3));
        tokio::pin!(later);
        assert!(futures::poll!(&mut later).is_pending());
        clock.pass_finished(t0 + Duration::from_secs(3));
        later.await;
    }
}
