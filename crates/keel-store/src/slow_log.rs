//! The warnings an operator greps a store's log for, with etcd 3.5's own messages and fields,
//! so the same greps, alerts and `keel doctor --log` work on either:
//!
//! - `slow fdatasync` (`took`, `expected-duration`): one WAL fsync took longer than
//!   [`SLOW_FSYNC`], etcd's `warnSyncDuration`;
//! - `apply request took too long` (`took`, `expected-duration`): one apply took longer than
//!   [`SLOW_APPLY`], etcd's default `--warning-apply-duration`.
//!
//! A slow disk makes every fsync slow, so each kind writes at most one line per [`PERIOD`];
//! the next line says how many were held back meanwhile (`suppressed`). When the flood ends,
//! the first quick operation a period or more after the last line writes one closing line
//! with the count (`suppressed`, `in-the-last`), so none goes unsaid. While nothing is held
//! back, a quick operation costs one atomic load. The decision is a plain struct driven by
//! `now` ([`RateLimit`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keel_process::go_duration;
use parking_lot::Mutex;

pub use crate::metrics::SLOW_APPLY;

/// How long one WAL fsync may take before it is logged: etcd's `warnSyncDuration`.
pub const SLOW_FSYNC: Duration = Duration::from_secs(1);

/// At most one line of each kind per this period.
pub const PERIOD: Duration = Duration::from_secs(1);

/// Lets one line through per [`PERIOD`] and counts the others.
#[derive(Debug, Default)]
pub struct RateLimit {
    state: Mutex<Window>,
    /// The window's `suppressed`, read without the lock by [`RateLimit::holds_back`].
    held: AtomicU64,
}

#[derive(Debug, Default)]
struct Window {
    /// When the last line was let through.
    last: Option<Instant>,
    /// Lines held back since.
    suppressed: u64,
}

impl RateLimit {
    /// Whether a line may be written at `now`: `Some(n)`, with `n` the lines held back since
    /// the last one, at most once per [`PERIOD`]; `None` (and counted) otherwise.
    pub fn admit(&self, now: Instant) -> Option<u64> {
        let mut window = self.state.lock();
        match window.last {
            Some(last) if now.saturating_duration_since(last) < PERIOD => {
                window.suppressed += 1;
                self.held.store(window.suppressed, Ordering::Relaxed);
                None
            }
            _ => {
                window.last = Some(now);
                self.held.store(0, Ordering::Relaxed);
                Some(std::mem::take(&mut window.suppressed))
            }
        }
    }

    /// Whether lines are held back: one atomic load, the check before [`RateLimit::close`].
    pub fn holds_back(&self) -> bool {
        self.held.load(Ordering::Relaxed) != 0
    }

    /// For an operation under the threshold at `now`: when lines are held back and the last
    /// line is a [`PERIOD`] or more old, `Some((n, since))`, the `n` lines held back in the
    /// `since` after it, for a closing line (which counts as a line).
    pub fn close(&self, now: Instant) -> Option<(u64, Duration)> {
        let mut window = self.state.lock();
        let since = now.saturating_duration_since(window.last?);
        if window.suppressed == 0 || since < PERIOD {
            return None;
        }
        window.last = Some(now);
        self.held.store(0, Ordering::Relaxed);
        Some((std::mem::take(&mut window.suppressed), since))
    }
}

/// The store's slow-operation warnings, one [`RateLimit`] per kind.
#[derive(Debug, Default)]
pub struct SlowLog {
    fsync: RateLimit,
    apply: RateLimit,
}

impl SlowLog {
    /// Logs `slow fdatasync` when one WAL fsync took `took`, longer than [`SLOW_FSYNC`]; a
    /// quicker one writes a flood's closing line when one is due.
    pub fn fsync(&self, took: Duration) {
        if took <= SLOW_FSYNC {
            return close_flood(&self.fsync, SLOW_FSYNC, "slow fdatasync");
        }
        if let Some(suppressed) = self.fsync.admit(Instant::now()) {
            tracing::warn!(
                took = %go_duration::format(took),
                "expected-duration" = %go_duration::format(SLOW_FSYNC),
                suppressed,
                "slow fdatasync"
            );
        }
    }

    /// Logs `apply request took too long` when applying `entries` log entries took `took`,
    /// longer than [`SLOW_APPLY`]; a quicker one writes a flood's closing line when one is due.
    pub fn apply(&self, took: Duration, entries: usize) {
        if took <= SLOW_APPLY {
            return close_flood(&self.apply, SLOW_APPLY, "apply request took too long");
        }
        if let Some(suppressed) = self.apply.admit(Instant::now()) {
            tracing::warn!(
                took = %go_duration::format(took),
                "expected-duration" = %go_duration::format(SLOW_APPLY),
                entries,
                suppressed,
                "apply request took too long"
            );
        }
    }
}

/// An operation under `expected`, of the kind `limit` holds back lines of: the closing line
/// (etcd's `message`) with the count held back, when one is due.
fn close_flood(limit: &RateLimit, expected: Duration, message: &str) {
    if limit.holds_back()
        && let Some((suppressed, since)) = limit.close(Instant::now())
    {
        tracing::warn!(
            "expected-duration" = %go_duration::format(expected),
            suppressed,
            "in-the-last" = %go_duration::format(since),
            "{message}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_a_period_and_the_next_counts_the_rest() {
        let limit = RateLimit::default();
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        assert_eq!(limit.admit(at(0)), Some(0));
        assert_eq!(limit.admit(at(100)), None);
        assert_eq!(limit.admit(at(999)), None);
        assert_eq!(limit.admit(at(1000)), Some(2));
        assert_eq!(limit.admit(at(1500)), None);
        assert_eq!(limit.admit(at(5000)), Some(1));
        assert_eq!(limit.admit(at(6000)), Some(0));
    }

    #[test]
    fn the_end_of_a_flood_writes_the_count_held_back() {
        let limit = RateLimit::default();
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        // Nothing held back: nothing to close.
        assert!(!limit.holds_back());
        assert_eq!(limit.close(at(0)), None);
        assert_eq!(limit.admit(at(0)), Some(0));
        assert_eq!(limit.close(at(2000)), None);
        assert_eq!(limit.admit(at(3000)), Some(0));
        assert_eq!(limit.admit(at(3100)), None);
        assert_eq!(limit.admit(at(3200)), None);
        assert!(limit.holds_back());
        // Too soon after the last line: still held.
        assert_eq!(limit.close(at(3900)), None);
        assert_eq!(
            limit.close(at(6200)),
            Some((2, Duration::from_millis(3200)))
        );
        assert!(!limit.holds_back());
        assert_eq!(limit.close(at(9000)), None);
        // The closing line counts as a line: the next one is a period after it.
        assert_eq!(limit.admit(at(6500)), None);
        assert_eq!(limit.admit(at(7200)), Some(1));
    }
}
