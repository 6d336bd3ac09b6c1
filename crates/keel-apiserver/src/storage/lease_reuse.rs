//! TTL writes (events expire after `--event-ttl`) through etcd leases, reusing one lease for
//! the writes of a window as kube-apiserver's `lease_manager.go` does: a lease grant is a
//! Raft write of its own, so granting one per event would double the store's write load.
//!
//! A write with TTL `t` reuses the previous lease if that lease expires after `now + t` (the
//! object lives at least its TTL) but before `now + t + reuse` (it does not live much longer),
//! and fewer than 1,000 writes used it; otherwise a new lease of `t + reuse` seconds is
//! granted. `reuse` is the smaller of 60 s (`--lease-reuse-duration-seconds`) and 5 % of `t`.
//! [`LeaseReuse`] is the decision alone, driven by `now`, so it is tested without a store.

use std::time::{Duration, Instant};

/// kube-apiserver's default `--lease-reuse-duration-seconds`.
pub const REUSE_SECONDS: i64 = 60;
/// The share of the TTL a lease may be reused for.
const REUSE_PERCENT: f64 = 0.05;
/// The most writes one lease is used for.
const MAX_OBJECTS: u64 = 1000;

/// What a TTL write needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseFor {
    /// Reuse this lease.
    Reuse(i64),
    /// Grant a lease of this many seconds, then report it with [`LeaseReuse::granted`].
    Grant(i64),
}

/// The previous lease and how it may be reused.
#[derive(Debug, Clone)]
pub struct LeaseReuse {
    reuse_seconds: i64,
    previous: Option<(i64, Instant)>,
    attached: u64,
}

impl Default for LeaseReuse {
    fn default() -> Self {
        LeaseReuse::new(REUSE_SECONDS)
    }
}

impl LeaseReuse {
    /// No lease yet; leases reused for at most `reuse_seconds`.
    pub fn new(reuse_seconds: i64) -> LeaseReuse {
        LeaseReuse {
            reuse_seconds,
            previous: None,
            attached: 0,
        }
    }

    fn reuse_for(&self, ttl: i64) -> i64 {
        ((REUSE_PERCENT * ttl as f64) as i64).min(self.reuse_seconds)
    }

    /// The lease for one write with `ttl` seconds at `now`.
    pub fn lease_for(&mut self, ttl: i64, now: Instant) -> LeaseFor {
        let reuse = self.reuse_for(ttl);
        self.attached += 1;
        if let Some((id, expires)) = self.previous {
            let valid = now + secs(ttl) < expires;
            let sufficient = now + secs(ttl + reuse) > expires;
            if valid && sufficient && self.attached <= MAX_OBJECTS {
                return LeaseFor::Reuse(id);
            }
        }
        LeaseFor::Grant(ttl + reuse)
    }

    /// Records the lease granted for a [`LeaseFor::Grant`] asked for at `now`; returns the
    /// count kube-apiserver observes in `etcd_lease_object_counts` at that moment (the
    /// previous lease's writes, this one's included).
    pub fn granted(&mut self, id: i64, granted_ttl: i64, now: Instant) -> u64 {
        self.previous = Some((id, now + secs(granted_ttl)));
        std::mem::replace(&mut self.attached, 1)
    }
}

fn secs(n: i64) -> Duration {
    Duration::from_secs(n.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_reused_within_its_window_and_for_at_most_1000_writes() {
        let mut l = LeaseReuse::default();
        let t0 = Instant::now();
        // --event-ttl 1h: reuse for min(60 s, 5 % of 3600 s = 180 s) = 60 s.
        assert_eq!(l.lease_for(3600, t0), LeaseFor::Grant(3660));
        l.granted(7, 3660, t0);
        assert_eq!(l.lease_for(3600, t0 + secs(30)), LeaseFor::Reuse(7));
        assert_eq!(l.lease_for(3600, t0 + secs(59)), LeaseFor::Reuse(7));
        // Past the window the object would outlive the lease.
        assert_eq!(l.lease_for(3600, t0 + secs(60)), LeaseFor::Grant(3660));
        // Observed as kube-apiserver observes it: lease 7's three writes and this one.
        assert_eq!(l.granted(8, 3660, t0 + secs(60)), 4);
        for _ in 0..999 {
            assert_eq!(l.lease_for(3600, t0 + secs(61)), LeaseFor::Reuse(8));
        }
        assert_eq!(l.lease_for(3600, t0 + secs(61)), LeaseFor::Grant(3660));
        // A much shorter TTL does not reuse a lease that would keep its object far too long.
        assert_eq!(l.granted(9, 3660, t0 + secs(61)), 1001);
        assert_eq!(l.lease_for(10, t0 + secs(62)), LeaseFor::Grant(10));
        l.granted(10, 10, t0 + secs(62));
        // 5 % of 10 s rounds down to 0: no reuse window at all.
        assert_eq!(l.lease_for(10, t0 + secs(62)), LeaseFor::Grant(10));
    }
}
