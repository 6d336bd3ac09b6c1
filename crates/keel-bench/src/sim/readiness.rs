//! How the simulated nodes' Ready condition moves, as seen by one watch of the Nodes: the
//! sans-I/O half of the NotReady measurement.
//!
//! The node lifecycle controller (`pkg/controller/nodelifecycle`) sets a node's Ready
//! condition to `Unknown` (reason `NodeStatusUnknown`) once neither its Lease's `renewTime`
//! nor its Ready `lastHeartbeatTime` has moved for `--node-monitor-grace-period`. For every
//! node the simulator stopped on purpose, the time from its last heartbeat (the later of the
//! last renewTime and the last status heartbeat it wrote) to the first watch event showing
//! Ready other than `True` is its NotReady delay. A node that was not stopped and whose Ready
//! goes from `True` to anything else is a false NotReady: the server or the controller lost
//! heartbeats that were sent. Times are wall-clock microseconds of this machine, so the two
//! ends of each delay come from one clock.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// What the watch saw of the simulated nodes' readiness.
#[derive(Debug, Default)]
pub struct Readiness {
    /// Nodes chosen to stop.
    failing: HashSet<u32>,
    /// Stopped nodes and their last heartbeat.
    stopped: HashMap<u32, i64>,
    /// Each node's Ready, as last seen (true: `True`).
    ready: HashMap<u32, bool>,
    /// Stopped nodes seen NotReady, and after how long.
    not_ready_after: HashMap<u32, Duration>,
    /// Nodes not stopped that went from Ready to not Ready.
    false_not_ready: HashSet<u32>,
}

/// The measurement's result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadinessSummary {
    /// Nodes stopped.
    pub failed_nodes: u64,
    /// Stopped nodes seen NotReady.
    pub not_ready_nodes: u64,
    /// The median NotReady delay of those, in seconds.
    pub not_ready_seconds_p50: Option<f64>,
    /// The longest.
    pub not_ready_seconds_max: Option<f64>,
    /// Nodes not stopped that went NotReady.
    pub false_not_ready: u64,
}

impl Readiness {
    /// Tracking for a fleet in which `failing` will be stopped.
    pub fn new(failing: impl IntoIterator<Item = u32>) -> Self {
        Self {
            failing: failing.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Whether node `node` is one to stop.
    pub fn is_failing(&self, node: u32) -> bool {
        self.failing.contains(&node)
    }

    /// Node `node` stopped; its last heartbeat was at `heartbeat` (µs). Called again when a
    /// request it had in flight lands later, with that heartbeat.
    pub fn stopped(&mut self, node: u32, heartbeat: i64) {
        let last = self.stopped.entry(node).or_insert(heartbeat);
        *last = (*last).max(heartbeat);
    }

    /// The watch shows node `node` with Ready `status` (None: no Ready condition) at `at` (µs).
    pub fn observe(&mut self, node: u32, status: Option<&str>, at: i64) {
        let ready = status == Some("True");
        let was_ready = self.ready.insert(node, ready);
        if ready {
            return;
        }
        if let Some(&heartbeat) = self.stopped.get(&node) {
            if heartbeat <= at {
                let after = Duration::from_micros((at - heartbeat) as u64);
                self.not_ready_after.entry(node).or_insert(after);
            }
        } else if was_ready == Some(true) {
            self.false_not_ready.insert(node);
        }
    }

    /// The result so far.
    pub fn summary(&self) -> ReadinessSummary {
        let mut delays: Vec<f64> = self
            .not_ready_after
            .values()
            .map(Duration::as_secs_f64)
            .collect();
        delays.sort_by(f64::total_cmp);
        ReadinessSummary {
            failed_nodes: self.stopped.len() as u64,
            not_ready_nodes: delays.len() as u64,
            not_ready_seconds_p50: median(&delays),
            not_ready_seconds_max: delays.last().copied(),
            false_not_ready: self.false_not_ready.len() as u64,
        }
    }
}

/// The median of sorted `values` (the lower of the middle two).
fn median(values: &[f64]) -> Option<f64> {
    values.get(values.len().saturating_sub(1) / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000;

    #[test]
    fn stopped_nodes_are_timed_from_their_last_heartbeat() {
        let mut r = Readiness::new([1, 2, 3]);
        assert!(r.is_failing(2) && !r.is_failing(4));
        for node in 0..5 {
            r.observe(node, Some("True"), 0);
        }
        r.stopped(1, 100 * S);
        r.stopped(2, 100 * S);
        r.stopped(2, 104 * S); // a status post in flight landed after the stop
        r.stopped(3, 100 * S);
        // The controller's Unknown, then later events of the same node change nothing.
        r.observe(1, Some("Unknown"), 150 * S);
        r.observe(1, Some("Unknown"), 160 * S);
        r.observe(2, Some("Unknown"), 150 * S);
        r.observe(3, Some("True"), 120 * S);
        let s = r.summary();
        assert_eq!(s.failed_nodes, 3);
        assert_eq!(s.not_ready_nodes, 2);
        assert_eq!(s.not_ready_seconds_p50, Some(46.0));
        assert_eq!(s.not_ready_seconds_max, Some(50.0));
        assert_eq!(s.false_not_ready, 0);
    }

    #[test]
    fn nodes_still_running_that_go_not_ready_are_false() {
        let mut r = Readiness::new([1]);
        r.observe(0, Some("True"), 0);
        r.observe(0, Some("Unknown"), 50 * S);
        r.observe(0, Some("True"), 60 * S);
        r.observe(0, Some("False"), 70 * S); // the same node again: counted once
        // A node chosen to fail but not stopped yet is not excused.
        r.observe(1, Some("True"), 0);
        r.observe(1, None, 10 * S);
        // A node first seen not Ready (left over from an earlier run) did not go NotReady.
        r.observe(7, Some("Unknown"), 0);
        let s = r.summary();
        assert_eq!(s.false_not_ready, 2);
        assert_eq!((s.failed_nodes, s.not_ready_nodes), (0, 0));
        assert_eq!(s.not_ready_seconds_p50, None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0]), Some(1.0));
        assert_eq!(median(&[1.0, 2.0]), Some(1.0));
        assert_eq!(median(&[1.0, 2.0, 3.0]), Some(2.0));
    }
}
