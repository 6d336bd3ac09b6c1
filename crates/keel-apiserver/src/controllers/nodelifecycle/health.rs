//! A node's health as the controller last saw it, and what a monitor pass makes of a node
//! (`tryUpdateNodeHealth`). The controller keeps its own probe timestamp per node, taken
//! from its own clock when it sees a heartbeat, never from the times the kubelet wrote (the
//! clocks of a cluster are not trusted to agree). A heartbeat is either:
//!
//! - the node's Lease (`kube-node-lease/<node>`) with a later `spec.renewTime`, or
//! - the node's Ready condition with another `lastHeartbeatTime`.
//!
//! Once a node has gone longer than its grace period without one
//! (`--node-monitor-grace-period`, or `--node-startup-grace-period` while it has never
//! posted a Ready condition), its Ready, MemoryPressure, DiskPressure and PIDPressure
//! conditions become Unknown: reason `NodeStatusUnknown`, message `Kubelet stopped posting
//! node status.`; a condition never posted is added as Unknown with `NodeStatusNeverUpdated`
//! and `Kubelet never posted node status.`.
//!
//! Sans I/O: [`observe`] says what to write; the caller writes it.

use std::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::taints::condition;
use crate::apimachinery::time::{MicroTime, Time};
use crate::registry::meta_str;

/// Wall-clock milliseconds since the Unix epoch.
pub type Millis = i64;

/// Now, in [`Millis`].
pub fn now_millis() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// The conditions a lost node has set to Unknown (NetworkUnavailable is the network's).
const CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// The grace periods.
#[derive(Debug, Clone, Copy)]
pub struct Grace {
    /// `--node-monitor-grace-period`.
    pub monitor: Duration,
    /// `--node-startup-grace-period`.
    pub startup: Duration,
}

/// What the controller last saw of a node.
#[derive(Debug, Clone)]
pub struct NodeHealth {
    /// When the controller last saw a heartbeat (its own clock).
    pub probe: Millis,
    /// When the controller last saw the Ready condition change.
    pub ready_transition: Millis,
    /// The Ready condition last seen.
    ready: Option<Value>,
    /// The Lease's renewTime last seen.
    renewed: Option<MicroTime>,
}

/// The status of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
    /// Anything else, or none.
    Other,
}

impl ConditionStatus {
    /// The status of `condition`.
    pub fn of(condition: &Value) -> ConditionStatus {
        match condition["status"].as_str() {
            Some("True") => ConditionStatus::True,
            Some("False") => ConditionStatus::False,
            Some("Unknown") => ConditionStatus::Unknown,
            _ => ConditionStatus::Other,
        }
    }
}

/// What one pass made of a node.
#[derive(Debug, Clone)]
pub struct Observation {
    /// The status of the Ready condition as read (Unknown, a stand-in's since creation, if
    /// there is none).
    pub observed_ready: ConditionStatus,
    /// The status of the Ready condition after this pass (None: never posted, and still in
    /// grace).
    pub current_ready: Option<ConditionStatus>,
    /// The node with its conditions set to Unknown, to write through `status`.
    pub update: Option<Value>,
}

impl NodeHealth {
    /// The health after `written` (this pass's [`Observation::update`]) was stored.
    pub fn after_update(mut self, written: &Value, now: Millis) -> NodeHealth {
        self.ready = condition(written, "Ready").cloned();
        self.ready_transition = now;
        self
    }

    /// Restarts the grace period (after a full disruption).
    pub fn restart(&mut self, now: Millis) {
        self.probe = now;
        self.ready_transition = now;
    }

    /// Restarts the grace period at `resumed` if it began before: a store outage ended then
    /// ([`super::pause`]).
    pub fn resume(&mut self, resumed: Millis) {
        if self.probe < resumed {
            self.restart(resumed);
        }
    }
}

/// A node's health at `now`, from what was `saved` of it, the node and its Lease. Nothing
/// is copied from the node unless its Ready condition changed or it is written.
pub fn observe(
    saved: Option<NodeHealth>,
    node: &Value,
    lease: Option<&Value>,
    now: Millis,
    grace: Grace,
) -> (NodeHealth, Observation) {
    let current = condition(node, "Ready");
    let grace = match current {
        Some(_) => grace.monitor,
        None => grace.startup,
    };
    let fresh = |probe: Millis| NodeHealth {
        probe,
        ready_transition: probe,
        ready: current.cloned(),
        renewed: None,
    };
    let mut health = match (saved, current) {
        (None, None) => {
            let created = Time::parse(meta_str(node, "creationTimestamp"));
            fresh(created.map(|t| t.0 * 1000).unwrap_or(now))
        }
        (None, Some(_)) => fresh(now),
        (Some(saved), None) if saved.ready.is_none() => saved,
        (Some(saved), None) => {
            // The Ready condition was removed: start over, as from a first sight.
            NodeHealth {
                renewed: saved.renewed,
                ..fresh(now)
            }
        }
        (Some(saved), Some(ready)) => match &saved.ready {
            None => NodeHealth {
                renewed: saved.renewed,
                ..fresh(now)
            },
            Some(old) if old["lastHeartbeatTime"] != ready["lastHeartbeatTime"] => {
                let ready_transition = if old["lastTransitionTime"] != ready["lastTransitionTime"] {
                    now
                } else {
                    saved.ready_transition
                };
                NodeHealth {
                    probe: now,
                    ready_transition,
                    ready: Some(ready.clone()),
                    renewed: saved.renewed,
                }
            }
            Some(_) => saved,
        },
    };
    if let Some(renewed) = lease
        .and_then(|l| l.get("spec")?.get("renewTime"))
        .and_then(Value::as_str)
    {
        let renewed = MicroTime::parse(renewed);
        if renewed.is_some() && (health.renewed.is_none() || health.renewed < renewed) {
            health.renewed = renewed;
            health.probe = now;
        }
    }
    let mut observation = Observation {
        observed_ready: current.map_or(ConditionStatus::Unknown, ConditionStatus::of),
        current_ready: current.map(ConditionStatus::of),
        update: None,
    };
    if now <= health.probe + grace.as_millis() as i64 {
        return (health, observation);
    }
    let created = meta_str(node, "creationTimestamp");
    let mut lost = node.clone();
    let stamp = Time(now.div_euclid(1000)).rfc3339();
    let conditions = lost
        .as_object_mut()
        .map(|o| o.entry("status").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
        .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
    let Some(Value::Array(conditions)) = conditions else {
        return (health, observation);
    };
    for kind in CONDITIONS {
        match conditions.iter_mut().find(|c| c["type"] == kind) {
            None => conditions.push(json!({
                "type": kind,
                "status": "Unknown",
                "lastHeartbeatTime": created,
                "lastTransitionTime": stamp,
                "reason": "NodeStatusNeverUpdated",
                "message": "Kubelet never posted node status.",
            })),
            Some(c) if c["status"] != "Unknown" => {
                c["status"] = "Unknown".into();
                c["reason"] = "NodeStatusUnknown".into();
                c["message"] = "Kubelet stopped posting node status.".into();
                c["lastTransitionTime"] = stamp.clone().into();
            }
            Some(_) => {}
        }
    }
    // Written only if Ready changed: it was added, or it was not Unknown.
    if current.is_none_or(|ready| ready["status"] != "Unknown") {
        observation.current_ready = Some(ConditionStatus::Unknown);
        observation.update = Some(lost);
    }
    (health, observation)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Grace = Grace {
        monitor: Duration::from_secs(50),
        startup: Duration::from_secs(60),
    };

    fn node(ready: Option<&str>, heartbeat: &str) -> Value {
        let mut node =
            json!({"metadata": {"name": "n1", "creationTimestamp": "1970-01-01T00:00:00Z"}});
        if let Some(status) = ready {
            node["status"] = json!({"conditions": [
                {"type": "Ready", "status": status, "reason": "KubeletReady",
                 "lastHeartbeatTime": heartbeat, "lastTransitionTime": "1970-01-01T00:00:00Z"},
                {"type": "MemoryPressure", "status": "False",
                 "lastHeartbeatTime": heartbeat, "lastTransitionTime": "1970-01-01T00:00:00Z"},
            ]});
        }
        node
    }

    fn lease(renew: &str) -> Value {
        json!({"spec": {"renewTime": renew}})
    }

    #[test]
    fn a_node_whose_heartbeats_stop_goes_unknown_after_the_grace_period() {
        let n = node(Some("True"), "1970-01-01T00:00:10Z");
        let (h, o) = observe(None, &n, None, 10_000, GRACE);
        assert!(o.update.is_none());
        let (h, o) = observe(Some(h), &n, None, 60_000, GRACE);
        assert!(o.update.is_none(), "50 s are not past the grace period");
        let (_, o) = observe(Some(h), &n, None, 60_001, GRACE);
        let lost = o.update.expect("past the grace period");
        let ready = condition(&lost, "Ready").unwrap();
        assert_eq!(ready["status"], "Unknown");
        assert_eq!(ready["reason"], "NodeStatusUnknown");
        assert_eq!(ready["message"], "Kubelet stopped posting node status.");
        assert_eq!(ready["lastTransitionTime"], "1970-01-01T00:01:00Z");
        assert_eq!(
            ready["lastHeartbeatTime"], "1970-01-01T00:00:10Z",
            "the kubelet's heartbeat is kept"
        );
        assert_eq!(
            condition(&lost, "MemoryPressure").unwrap()["status"],
            "Unknown"
        );
        let never = condition(&lost, "DiskPressure").unwrap();
        assert_eq!(never["reason"], "NodeStatusNeverUpdated");
        assert_eq!(never["message"], "Kubelet never posted node status.");
        assert_eq!(o.observed_ready, ConditionStatus::True);
        assert_eq!(o.current_ready, Some(ConditionStatus::Unknown));
    }

    #[test]
    fn lease_renewals_and_status_heartbeats_both_count() {
        let n = node(Some("True"), "1970-01-01T00:00:10Z");
        let (h, _) = observe(
            None,
            &n,
            Some(&lease("1970-01-01T00:00:10.000000Z")),
            10_000,
            GRACE,
        );
        let (h, _) = observe(
            Some(h),
            &n,
            Some(&lease("1970-01-01T00:00:40.500000Z")),
            40_000,
            GRACE,
        );
        let (h, o) = observe(
            Some(h),
            &n,
            Some(&lease("1970-01-01T00:00:40.500000Z")),
            89_000,
            GRACE,
        );
        assert!(o.update.is_none(), "the lease was renewed 49 s ago");
        assert_eq!(h.probe, 40_000);
        let posted = node(Some("True"), "1970-01-01T00:01:20Z");
        let (h, o) = observe(Some(h), &posted, None, 89_500, GRACE);
        assert!(o.update.is_none());
        assert_eq!(h.probe, 89_500, "a new heartbeat time is a heartbeat");
        // A lease renewed at the same time again is no heartbeat.
        let (_, o) = observe(
            Some(h),
            &posted,
            Some(&lease("1970-01-01T00:00:40.5Z")),
            140_000,
            GRACE,
        );
        assert!(o.update.is_some());
    }

    #[test]
    fn a_grace_period_that_began_before_an_outage_ended_starts_over_at_its_end() {
        let n = node(Some("True"), "1970-01-01T00:00:10Z");
        let (mut h, _) = observe(None, &n, None, 10_000, GRACE);
        // The store was out from 20 s to 70 s: judged at 100 s, the node has 50 s from 70 s.
        h.resume(70_000);
        let (mut h, o) = observe(Some(h), &n, None, 100_000, GRACE);
        assert!(o.update.is_none(), "30 s since the outage ended");
        assert_eq!(h.probe, 70_000);
        // An outage that ended before the last heartbeat changes nothing.
        h.resume(60_000);
        assert_eq!(h.probe, 70_000);
        let (_, o) = observe(Some(h), &n, None, 120_001, GRACE);
        assert!(o.update.is_some(), "50 s since the outage ended");
    }

    #[test]
    fn a_node_that_never_posts_gets_the_startup_grace_and_never_updated_conditions() {
        let n = node(None, "");
        let (h, o) = observe(None, &n, None, 59_000, GRACE);
        assert!(o.update.is_none());
        assert!(o.current_ready.is_none());
        let (_, o) = observe(Some(h), &n, None, 61_000, GRACE);
        let lost = o.update.unwrap();
        let ready = condition(&lost, "Ready").unwrap();
        assert_eq!(ready["reason"], "NodeStatusNeverUpdated");
        assert_eq!(ready["lastHeartbeatTime"], "1970-01-01T00:00:00Z");
        assert_eq!(o.observed_ready, ConditionStatus::Unknown);
    }

    #[test]
    fn a_node_already_unknown_is_not_written_again() {
        let n = node(Some("Unknown"), "1970-01-01T00:00:10Z");
        let (h, _) = observe(None, &n, None, 10_000, GRACE);
        let (_, o) = observe(Some(h), &n, None, 100_000, GRACE);
        assert!(o.update.is_none(), "only a change of Ready is written");
        assert_eq!(o.current_ready, Some(ConditionStatus::Unknown));
    }
}
