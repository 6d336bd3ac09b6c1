//! The warnings an operator greps a store's log for, with etcd 3.5's own messages and fields,
//! so the same greps, alerts and `keel doctor --log` work on either:
//!
//! - `slow fdatasync` (`took`, `expected-duration`): one WAL fsync took longer than
//!   [`SLOW_FSYNC`], etcd's `warnSyncDuration`;
//! - `apply request took too long` (`took`, `expected-duration`): one apply took longer than
//!   [`SLOW_APPLY`], etcd's default `--warning-apply-duration`.
//!
//! A slow disk makes every fsync slow, so each kind writes at most one line per [`PERIOD`];
//! the next line says how many were held back meanwhile (`suppressed`). The decision is a
//! plain struct driven by `now` ([`RateLimit`]).

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
                None
            }
            _ => {
                window.last = Some(now);
                Some(std::mem::take(&mut window.suppressed))
            }
        }
    }
}

/// The store's slow-operation warnings, one [`RateLimit`] per kind.
#[derive(Debug, Default)]
pub struct SlowLog {
    fsync: RateLimit,
    apply: RateLimit,
}

impl SlowLog {
    /// Logs `slow fdatasync` when one WAL fsync took `took`, longer than [`SLOW_FSYNC`].
    pub fn fsync(&self, took: Duration) {
        if took <= SLOW_FSYNC {
            return;
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
    /// longer than [`SLOW_APPLY`].
    pub fn apply(&self, took: Duration, entries: usize) {
        if took <= SLOW_APPLY {
            return;
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
}
