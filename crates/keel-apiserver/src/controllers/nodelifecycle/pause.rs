//! The pause: no node's grace period runs while the store fails the apiserver's health check
//! ([`crate::storage::health`]), and every grace period that began before the store passed
//! it again starts over then.
//!
//! The store's health is followed by a task of its own, one check every monitor period,
//! never by the monitor pass. A pass waits on the store for each of its writes (an event,
//! a node's status, a taint), so a pass that started before an outage can sit in one write
//! until the store is back and then go on judging nodes whose renewals failed meanwhile:
//! checked only at the start of each pass, that outage would never be seen, and every node
//! that had not renewed again in the instant after the store came back would be marked
//! NotReady. Followed on its own, the outage is seen while the pass waits, the pass stops at
//! its next node while the store fails, and a node whose last heartbeat predates the end of
//! the last outage has its grace period started over at that end ([`Pause::resumed_at`]),
//! whichever pass judges it.
//!
//! [`Pause::observe`] is the sans-I/O core (a check's result at a time, and what changed);
//! [`follow`] the shell that makes the checks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use super::health::{Millis, now_millis};
use super::metrics::NodeLifecycleMetrics;
use crate::registry::store::Registry;

/// What a check changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing.
    None,
    /// The store failed the check after passing it: the grace periods stop.
    Paused,
    /// The store passed the check after failing it: the grace periods start over.
    Resumed,
}

/// Whether the grace periods are paused, and when they last resumed.
#[derive(Debug, Default)]
pub struct Pause {
    paused: AtomicBool,
    /// When the store last passed the check after failing it ([`Millis`]; 0: never).
    resumed_at: AtomicI64,
}

impl Pause {
    /// Whether the store failed its last check.
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    /// When the last outage ended (0 if the store never failed a check): a grace period that
    /// began before that starts over at that time.
    pub fn resumed_at(&self) -> Millis {
        self.resumed_at.load(Ordering::Acquire)
    }

    /// Takes in a check of the store made at `now`: `healthy` or not.
    pub fn observe(&self, healthy: bool, now: Millis) -> Change {
        let was_paused = self.paused.swap(!healthy, Ordering::AcqRel);
        match (was_paused, healthy) {
            (false, false) => Change::Paused,
            (true, true) => {
                self.resumed_at.store(now, Ordering::Release);
                Change::Resumed
            }
            _ => Change::None,
        }
    }
}

/// Checks the store every `period` for as long as the process runs, telling `pause` and the
/// metrics what each check changed.
pub async fn follow(
    registry: Arc<Registry>,
    pause: Arc<Pause>,
    period: Duration,
    metrics: NodeLifecycleMetrics,
) {
    let mut tick = tokio::time::interval(period.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let healthy = registry.heartbeat_stores_healthy().await;
        match pause.observe(healthy, now_millis()) {
            Change::None => {}
            Change::Paused => {
                tracing::warn!(
                    "node lifecycle: the store fails its health check (no leader, or not \
                     reachable); no node's grace period runs until it passes"
                );
                metrics.paused.set(1);
                metrics.pauses.inc();
            }
            Change::Resumed => {
                tracing::info!(
                    "node lifecycle: the store is healthy again; every node's grace period starts over"
                );
                metrics.paused.set(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_pauses_and_its_end_is_remembered() {
        let pause = Pause::default();
        assert!(!pause.paused());
        assert_eq!(pause.resumed_at(), 0);
        assert_eq!(pause.observe(true, 1_000), Change::None);
        assert_eq!(pause.observe(false, 2_000), Change::Paused);
        assert!(pause.paused());
        assert_eq!(pause.observe(false, 3_000), Change::None);
        assert_eq!(pause.resumed_at(), 0);
        assert_eq!(pause.observe(true, 4_000), Change::Resumed);
        assert!(!pause.paused());
        assert_eq!(pause.resumed_at(), 4_000);
        assert_eq!(pause.observe(true, 5_000), Change::None);
        assert_eq!(pause.resumed_at(), 4_000);
    }
}
