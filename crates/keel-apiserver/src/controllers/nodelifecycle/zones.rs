//! Zones and their disruption states (`ComputeZoneState` and `handleDisruption` of
//! kube-controller-manager's node lifecycle controller). A node's zone is its region and
//! zone labels. Each monitor pass classifies every zone by its nodes' Ready conditions:
//!
//! - `FullDisruption`: no node is Ready;
//! - `PartialDisruption`: more than two nodes are not Ready and they are at least
//!   `--unhealthy-zone-threshold` of the zone;
//! - `Normal` otherwise (`Initial` until the first pass).
//!
//! Each zone's NoExecute taints are paced by its [`Queue`], whose rate follows its state:
//! `--node-eviction-rate` when Normal (or fully disrupted while another zone is not),
//! `--secondary-node-eviction-rate` when partly disrupted in a zone larger than
//! `--large-cluster-size-threshold`, else 0. When every zone is fully disrupted the
//! trouble is more likely the control plane's than every node's: all queues stop and every
//! NoExecute taint is lifted ([`Disruption::EnteredFull`]); when a zone recovers from that,
//! every node's grace period starts again ([`Disruption::ExitedFull`]).
//!
//! Sans I/O: the caller lifts the taints and resets the timestamps.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Instant;

use serde_json::Value;

use super::queue::Queue;

/// A zone's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneState {
    /// Seen, not yet classified.
    Initial,
    /// Healthy enough.
    Normal,
    /// No node Ready.
    FullDisruption,
    /// Many nodes not Ready.
    PartialDisruption,
}

/// The zone key of a node (`nodetopology.GetZoneKey`): region and zone, from the beta
/// labels first, then the GA ones; "" when it has neither.
pub fn zone_key(node: &Value) -> String {
    let label = |key: &str| {
        node.get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(|l| l.get(key))
            .and_then(Value::as_str)
    };
    let zone = label("failure-domain.beta.kubernetes.io/zone")
        .or_else(|| label("topology.kubernetes.io/zone"))
        .unwrap_or("");
    let region = label("failure-domain.beta.kubernetes.io/region")
        .or_else(|| label("topology.kubernetes.io/region"))
        .unwrap_or("");
    if region.is_empty() && zone.is_empty() {
        return String::new();
    }
    format!("{region}:\0:{zone}")
}

/// Whether the node is left out of the disruption count
/// (`node.kubernetes.io/exclude-disruption`).
pub fn excluded_from_disruption(node: &Value) -> bool {
    node.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(|l| l.get("node.kubernetes.io/exclude-disruption"))
        .is_some()
}

/// A node's zone ([`zone_key`]) and whether it is left out of the disruption count,
/// read once per node object: a cached node never changes (a changed one is a new object).
#[derive(Debug, Clone)]
pub struct NodeZone {
    /// The object they were read from, by identity only (held, its address is not reused).
    from: Weak<Value>,
    /// The zone key.
    pub key: Arc<str>,
    /// Whether the node is left out of the disruption count.
    pub excluded: bool,
}

impl NodeZone {
    /// Read from `node`.
    pub fn of(node: &Arc<Value>) -> NodeZone {
        NodeZone {
            from: Arc::downgrade(node),
            key: zone_key(node).into(),
            excluded: excluded_from_disruption(node),
        }
    }

    /// Read again from `node` if it is another object than the last one.
    pub fn follow(&mut self, node: &Arc<Value>) -> &NodeZone {
        if !std::ptr::eq(self.from.as_ptr(), Arc::as_ptr(node)) {
            *self = NodeZone::of(node);
        }
        self
    }
}

/// A zone's nodes in a monitor pass: those counted and those of them Ready.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZoneCount {
    /// Nodes counted.
    pub size: usize,
    /// Nodes whose Ready condition is True.
    pub ready: usize,
}

impl ZoneCount {
    /// Counts a node.
    pub fn add(&mut self, ready: bool) {
        self.size += 1;
        self.ready += usize::from(ready);
    }
}

/// The number of not-Ready nodes of a zone and its state.
pub fn compute_zone_state(count: ZoneCount, unhealthy_threshold: f32) -> (usize, ZoneState) {
    let not_ready = count.size - count.ready;
    let state = if count.ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && not_ready as f32 / count.size as f32 >= unhealthy_threshold {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    };
    (not_ready, state)
}

/// The eviction rates, as the flags set them.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// `--node-eviction-rate`.
    pub eviction: f32,
    /// `--secondary-node-eviction-rate`.
    pub secondary: f32,
    /// `--large-cluster-size-threshold`.
    pub large_cluster_threshold: i32,
    /// `--unhealthy-zone-threshold`.
    pub unhealthy_zone_threshold: f32,
}

/// What a pass's disruption check asks of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disruption {
    /// Nothing beyond the rates already set.
    None,
    /// Every zone just became fully disrupted: lift every node's NoExecute taint.
    EnteredFull,
    /// Some zone recovered from a full disruption everywhere: restart every node's grace
    /// period.
    ExitedFull,
}

/// One zone's numbers from the last pass (for `node_collector_*` metrics).
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneHealth {
    /// Nodes counted.
    pub size: usize,
    /// Nodes not Ready.
    pub unhealthy: usize,
}

/// The zones: their states and their taint queues.
#[derive(Debug)]
pub struct Zones {
    rates: Rates,
    states: BTreeMap<String, ZoneState>,
    /// Queues are never dropped (a zone that comes back finds a fresh one).
    pub queues: BTreeMap<String, Queue>,
}

impl Zones {
    /// No zones yet.
    pub fn new(rates: Rates) -> Zones {
        Zones {
            rates,
            states: BTreeMap::new(),
            queues: BTreeMap::new(),
        }
    }

    /// The state of `zone`, if it is known.
    pub fn state(&self, zone: &str) -> Option<ZoneState> {
        self.states.get(zone).copied()
    }

    /// Starts tracking `zone` if it is new (`addPodEvictorForNewZone`); true if it was.
    pub fn add_zone(&mut self, zone: &str, now: Instant) -> bool {
        if self.states.contains_key(zone) {
            return false;
        }
        self.states.insert(zone.to_string(), ZoneState::Initial);
        self.queues
            .insert(zone.to_string(), Queue::new(self.rates.eviction, now));
        true
    }

    /// The queue of `zone` (made if missing).
    pub fn queue(&mut self, zone: &str, now: Instant) -> &mut Queue {
        if !self.queues.contains_key(zone) {
            let queue = Queue::new(self.rates.eviction, now);
            self.queues.insert(zone.to_string(), queue);
        }
        self.queues.get_mut(zone).expect("inserted above")
    }

    /// Classifies every zone from its nodes' Ready conditions and sets the queues' rates
    /// (`handleDisruption`); the numbers of each zone for the metrics and what the caller
    /// must do.
    pub fn handle_disruption(
        &mut self,
        zone_ready: &BTreeMap<Arc<str>, ZoneCount>,
        now: Instant,
    ) -> (BTreeMap<String, ZoneHealth>, Disruption) {
        let mut new_states = BTreeMap::new();
        let mut health = BTreeMap::new();
        let mut all_are_fully_disrupted = true;
        for (zone, count) in zone_ready {
            let (unhealthy, state) =
                compute_zone_state(*count, self.rates.unhealthy_zone_threshold);
            health.insert(
                zone.to_string(),
                ZoneHealth {
                    size: count.size,
                    unhealthy,
                },
            );
            all_are_fully_disrupted &= state == ZoneState::FullDisruption;
            new_states.insert(zone.to_string(), state);
            self.states
                .entry(zone.to_string())
                .or_insert(ZoneState::Initial);
        }
        // Zones with no node left are forgotten.
        self.states
            .retain(|zone, _| zone_ready.contains_key(zone.as_str()));
        let all_were_fully_disrupted = self
            .states
            .values()
            .all(|s| *s == ZoneState::FullDisruption);
        if all_are_fully_disrupted && all_were_fully_disrupted {
            return (health, Disruption::None);
        }
        if all_are_fully_disrupted {
            for zone in self.states.keys() {
                if let Some(queue) = self.queues.get_mut(zone) {
                    queue.swap_limiter(0.0, now);
                }
            }
            for state in self.states.values_mut() {
                *state = ZoneState::FullDisruption;
            }
            return (health, Disruption::EnteredFull);
        }
        let zones: Vec<String> = self.states.keys().cloned().collect();
        let mut outcome = Disruption::None;
        if all_were_fully_disrupted {
            outcome = Disruption::ExitedFull;
        }
        for zone in zones {
            let new = new_states[&zone];
            if outcome == Disruption::None && self.states[&zone] == new {
                continue;
            }
            let size = zone_ready[zone.as_str()].size;
            let qps = self.rate(size, new);
            if let (Some(qps), Some(queue)) = (qps, self.queues.get_mut(&zone)) {
                queue.swap_limiter(qps, now);
            }
            if outcome == Disruption::None {
                tracing::info!(zone = %zone.replace('\0', ""), state = ?new, "node lifecycle: zone is in a new state");
            }
            self.states.insert(zone, new);
        }
        (health, outcome)
    }

    /// The taint rate of a zone of `size` nodes in `state` (`setLimiterInZone`); None
    /// leaves it as it is.
    fn rate(&self, size: usize, state: ZoneState) -> Option<f32> {
        match state {
            ZoneState::Normal | ZoneState::FullDisruption => Some(self.rates.eviction),
            ZoneState::PartialDisruption => Some(
                if size as i64 > i64::from(self.rates.large_cluster_threshold) {
                    self.rates.secondary
                } else {
                    0.0
                },
            ),
            ZoneState::Initial => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RATES: Rates = Rates {
        eviction: 0.1,
        secondary: 0.01,
        large_cluster_threshold: 50,
        unhealthy_zone_threshold: 0.55,
    };

    fn count(ready: usize, not: usize) -> ZoneCount {
        ZoneCount {
            size: ready + not,
            ready,
        }
    }

    #[test]
    fn zone_states_are_computed_as_upstream_computes_them() {
        assert_eq!(
            compute_zone_state(count(0, 1), 0.55),
            (1, ZoneState::FullDisruption)
        );
        // Two not-ready nodes never make a partial disruption.
        assert_eq!(
            compute_zone_state(count(1, 2), 0.55),
            (2, ZoneState::Normal)
        );
        assert_eq!(
            compute_zone_state(count(2, 3), 0.55),
            (3, ZoneState::PartialDisruption)
        );
        assert_eq!(
            compute_zone_state(count(3, 3), 0.55),
            (3, ZoneState::Normal)
        );
        assert_eq!(
            compute_zone_state(count(0, 0), 0.55),
            (0, ZoneState::Normal)
        );
    }

    #[test]
    fn zone_keys_prefer_the_beta_labels() {
        let node = json!({"metadata": {"labels": {
            "topology.kubernetes.io/zone": "ga",
            "failure-domain.beta.kubernetes.io/zone": "beta",
            "topology.kubernetes.io/region": "r",
        }}});
        assert_eq!(zone_key(&node), "r:\0:beta");
        assert_eq!(zone_key(&json!({"metadata": {}})), "");
    }

    #[test]
    fn a_nodes_zone_is_read_again_when_the_node_changes() {
        let labels =
            |zone: &str| json!({"metadata": {"labels": {"topology.kubernetes.io/zone": zone}}});
        let node = Arc::new(labels("a"));
        let mut zone = NodeZone::of(&node);
        assert_eq!((&*zone.key, zone.excluded), (":\0:a", false));
        let key = zone.key.clone();
        assert!(
            Arc::ptr_eq(&zone.follow(&node).key, &key),
            "the same node: not read again"
        );
        let mut moved = labels("b");
        moved["metadata"]["labels"]["node.kubernetes.io/exclude-disruption"] = "".into();
        let moved = Arc::new(moved);
        let followed = zone.follow(&moved);
        assert_eq!((&*followed.key, followed.excluded), (":\0:b", true));
        // A node equal to the last one but another object is read again too.
        let again = Arc::new(labels("b"));
        assert!(!zone.follow(&again).excluded);
    }

    fn pass(zones: &mut Zones, at: Instant, z: &[(&str, usize, usize)]) -> Disruption {
        let mut ready = BTreeMap::new();
        for (zone, r, n) in z {
            zones.add_zone(zone, at);
            ready.insert(Arc::from(*zone), count(*r, *n));
        }
        zones.handle_disruption(&ready, at).1
    }

    #[test]
    fn a_partly_disrupted_small_zone_stops_and_a_large_one_slows() {
        let t = Instant::now();
        let mut zones = Zones::new(RATES);
        assert_eq!(
            pass(&mut zones, t, &[("a", 3, 0), ("b", 60, 0)]),
            Disruption::None
        );
        assert_eq!(zones.state("a"), Some(ZoneState::Normal));
        assert_eq!(zones.queues["a"].qps(), 0.1);
        pass(&mut zones, t, &[("a", 1, 3), ("b", 20, 40)]);
        assert_eq!(zones.state("a"), Some(ZoneState::PartialDisruption));
        assert_eq!(zones.queues["a"].qps(), 0.0, "small zone: taints stop");
        assert_eq!(zones.queues["b"].qps(), 0.01, "large zone: secondary rate");
        pass(&mut zones, t, &[("a", 4, 0), ("b", 60, 0)]);
        assert_eq!(zones.queues["a"].qps(), 0.1);
        assert_eq!(zones.queues["b"].qps(), 0.1);
    }

    #[test]
    fn one_fully_disrupted_zone_among_healthy_ones_keeps_the_normal_rate() {
        let t = Instant::now();
        let mut zones = Zones::new(RATES);
        pass(&mut zones, t, &[("a", 3, 0), ("b", 3, 0)]);
        assert_eq!(
            pass(&mut zones, t, &[("a", 0, 3), ("b", 3, 0)]),
            Disruption::None
        );
        assert_eq!(zones.state("a"), Some(ZoneState::FullDisruption));
        assert_eq!(zones.queues["a"].qps(), 0.1);
    }

    #[test]
    fn every_zone_fully_disrupted_stops_all_taints_until_one_recovers() {
        let t = Instant::now();
        let mut zones = Zones::new(RATES);
        pass(&mut zones, t, &[("a", 3, 0), ("b", 3, 0)]);
        assert_eq!(
            pass(&mut zones, t, &[("a", 0, 3), ("b", 0, 3)]),
            Disruption::EnteredFull
        );
        assert_eq!(zones.queues["a"].qps(), 0.0);
        assert_eq!(zones.queues["b"].qps(), 0.0);
        assert_eq!(
            pass(&mut zones, t, &[("a", 0, 3), ("b", 0, 3)]),
            Disruption::None,
            "still fully disrupted: nothing new"
        );
        assert_eq!(
            pass(&mut zones, t, &[("a", 1, 2), ("b", 0, 3)]),
            Disruption::ExitedFull
        );
        assert_eq!(zones.state("a"), Some(ZoneState::Normal));
        assert_eq!(zones.state("b"), Some(ZoneState::FullDisruption));
        assert_eq!(zones.queues["a"].qps(), 0.1);
        assert_eq!(zones.queues["b"].qps(), 0.1);
    }

    #[test]
    fn a_single_zone_cluster_whose_nodes_all_fail_stops_its_taints() {
        let t = Instant::now();
        let mut zones = Zones::new(RATES);
        pass(&mut zones, t, &[("", 2, 0)]);
        assert_eq!(pass(&mut zones, t, &[("", 0, 2)]), Disruption::EnteredFull);
        assert_eq!(zones.queues[""].qps(), 0.0);
    }
}
