//! When each simulated node does what next: one queue of deadlines per worker instead of a
//! task or a timer per node.
//!
//! A worker owns a share of the nodes; each of its nodes has at most one lease renewal and
//! one status post pending, each an entry `(deadline, node, duty)` in a binary heap. The
//! worker sleeps until the earliest deadline, takes every entry that is due, and puts an entry
//! back only when the duty's request is answered: the next deadline is measured from the end
//! of the last one, as the kubelet's `wait.JitterUntil(..., sliding=true)` does. 50,000 nodes
//! are 100,000 entries, a few megabytes, and a renewal costs a push and a pop (O(log n)).
//!
//! Jitter is the kubelet's `wait.Jitter(d, 0.04)`: `d + rand * 0.04 * d`. The first deadlines
//! are spread evenly over one period, as kubelets started at random moments would be.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use tokio::time::Instant;

/// The kubelet's lease renewal jitter factor (`wait.JitterUntil(..., 0.04, ...)`).
pub const JITTER: f64 = 0.04;

/// A node's periodic duties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Duty {
    /// Renew its lease.
    Renew,
    /// Post its status.
    Status,
}

/// The pending duties of a worker's nodes, earliest first.
#[derive(Debug, Default)]
pub struct Schedule {
    heap: BinaryHeap<Reverse<(Instant, u32, Duty)>>,
}

impl Schedule {
    /// Adds `duty` of node `node` (the worker's own numbering) at `at`.
    pub fn push(&mut self, at: Instant, node: u32, duty: Duty) {
        self.heap.push(Reverse((at, node, duty)));
    }

    /// The earliest deadline, if any.
    pub fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Takes the earliest entry if it is due at `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<(u32, Duty)> {
        match self.heap.peek() {
            Some(Reverse((at, _, _))) if *at <= now => {
                let Reverse((_, node, duty)) = self.heap.pop()?;
                Some((node, duty))
            }
            _ => None,
        }
    }
}

/// A small, fast random source (SplitMix64): the jitter needs no cryptography.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    /// A source seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `period` jittered as the kubelet does: `period * (1 + rand * 0.04)`.
    pub fn period(&mut self, period: Duration) -> Duration {
        period.mul_f64(1.0 + self.unit() * JITTER)
    }

    /// A first deadline's offset, anywhere in `[0, period)`.
    pub fn phase(&mut self, period: Duration) -> Duration {
        period.mul_f64(self.unit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_entries_come_out_in_deadline_order() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut s = Schedule::default();
        s.push(at(30), 1, Duty::Renew);
        s.push(at(10), 2, Duty::Status);
        s.push(at(20), 3, Duty::Renew);
        assert_eq!(s.next(), Some(at(10)));
        assert_eq!(s.pop_due(at(5)), None);
        assert_eq!(s.pop_due(at(25)), Some((2, Duty::Status)));
        assert_eq!(s.pop_due(at(25)), Some((3, Duty::Renew)));
        assert_eq!(s.pop_due(at(25)), None);
        assert_eq!(s.pop_due(at(30)), Some((1, Duty::Renew)));
        assert_eq!(s.next(), None);
    }

    #[test]
    fn jitter_stays_within_the_kubelets_bounds() {
        let mut j = Jitter::new(7);
        let period = Duration::from_secs(10);
        let (mut low, mut high) = (period * 2, Duration::ZERO);
        for _ in 0..10_000 {
            let d = j.period(period);
            low = low.min(d);
            high = high.max(d);
            assert!(j.phase(period) < period);
        }
        assert!(
            low >= period && high < period.mul_f64(1.04),
            "{low:?} {high:?}"
        );
        // Spread over the whole range, not stuck at one end.
        assert!(low < period.mul_f64(1.005) && high > period.mul_f64(1.035));
    }
}
