//! The node lifecycle controller (kube-controller-manager's `nodelifecycle`): it watches
//! every node's heartbeats and marks a node that has stopped sending them as lost, taints it
//! so nothing new is scheduled there and its pods are evicted, and lifts the taints when it
//! comes back.
//!
//! Every `--node-monitor-period` a monitor pass ([`health`]) sets the conditions of nodes
//! past their grace period to Unknown; a node whose Ready condition is not True is queued
//! for `node.kubernetes.io/unreachable:NoExecute` (Unknown) or
//! `node.kubernetes.io/not-ready:NoExecute` (False; the two are swapped, never both), which
//! a tainting pass sets every 100 ms at each zone's pace ([`zones`], [`queue`]); pods on a
//! node that stops being Ready are marked not Ready. Every node change also runs the
//! NoSchedule pass: the condition taints (`unreachable`, `not-ready`, `memory-pressure`,
//! ...) follow the conditions at once ([`taints`]), and the beta OS and architecture labels
//! the GA ones ([`labels`]).
//!
//! Unlike kube-controller-manager, no grace period runs while the store fails the
//! apiserver's health check (no leader, or unreachable: [`crate::storage::health`]): the
//! nodes' renewals fail then too, through no fault of theirs. The passes pause, and when the
//! store is back every node's grace period starts again, as upstream restarts them when a
//! full disruption ends ([`pause`], which follows the store's health in a task of its own).
//! So a store election never marks a node NotReady. The pause is visible in [`metrics`].
//!
//! The controller reads nodes and their Leases from [`Informer`]s and writes through the
//! registry, as `kube-controller-manager` (its field manager).

pub mod health;
pub mod labels;
pub mod metrics;
pub mod pause;
pub mod queue;
pub mod taints;
pub mod zones;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::events::EventRecorder;
use super::informer::Informer;
use crate::apimachinery::time::Time;
use crate::config::ControllerManagerConfig;
use crate::fieldmanager::FieldManager;
use crate::json_pointer::At;
use crate::registry::selector::Selection;
use crate::registry::store::{ListQuery, Registry};
use crate::registry::{Strategy, meta_str};
use crate::storage::Status;
use health::{ConditionStatus, Grace, NodeHealth, now_millis};
use metrics::NodeLifecycleMetrics;
use pause::Pause;
use taints::{NOT_READY_NO_EXECUTE, Taint, UNREACHABLE_NO_EXECUTE, condition};
use zones::{Disruption, NodeZone, Rates, ZoneCount, Zones, zone_key};

/// The field manager of the controller's writes.
const MANAGER: &str = "kube-controller-manager";
/// How often the NoExecute tainting pass runs (`NodeEvictionPeriod`).
const TAINTING_PERIOD: Duration = Duration::from_millis(100);
/// How often a node's status write is tried on conflicts (`NodeHealthUpdateRetry`).
const UPDATE_RETRIES: usize = 5;
/// The namespace of the nodes' Leases.
const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The controller's settings, from kube-controller-manager's flags.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// `--node-monitor-period`.
    pub monitor_period: Duration,
    /// The grace periods.
    pub grace: Grace,
    /// The eviction rates and zone thresholds.
    pub rates: Rates,
}

impl Options {
    /// The settings the flags give.
    pub fn new(config: &ControllerManagerConfig) -> Options {
        Options {
            monitor_period: config.node_monitor_period,
            grace: Grace {
                monitor: config.node_monitor_grace_period,
                startup: config.node_startup_grace_period,
            },
            rates: Rates {
                eviction: config.node_eviction_rate,
                secondary: config.secondary_node_eviction_rate,
                large_cluster_threshold: config.large_cluster_size_threshold,
                unhealthy_zone_threshold: config.unhealthy_zone_threshold,
            },
        }
    }
}

/// Runs the controller until the process ends.
pub async fn run(registry: Arc<Registry>, options: Options, metrics: NodeLifecycleMetrics) {
    let nodes_kind = registry.core("nodes");
    let Some(leases_kind) = registry.kind("coordination.k8s.io", "v1", "leases") else {
        tracing::error!("node lifecycle controller: coordination.k8s.io/v1 leases are not served");
        return;
    };
    let (changed, mut changes) = mpsc::unbounded_channel();
    let nodes = Informer::spawn(registry.clone(), nodes_kind, None, None, Some(changed));
    let leases = Informer::spawn(
        registry.clone(),
        leases_kind,
        Some(LEASE_NAMESPACE),
        None,
        None,
    );
    let zones = Arc::new(Mutex::new(Zones::new(options.rates)));
    let pause = Arc::new(Pause::default());
    tokio::spawn(pause::follow(
        registry.clone(),
        pause.clone(),
        options.monitor_period,
        metrics.clone(),
    ));
    let writer = Writer {
        registry: registry.clone(),
        nodes: nodes_kind,
        events: EventRecorder::spawn(registry.clone(), "node-controller"),
    };
    let no_schedule = writer.clone();
    let cache = nodes.clone();
    tokio::spawn(async move {
        while let Some(name) = changes.recv().await {
            if let Some(node) = cache.get(&name) {
                no_schedule.no_schedule_pass(&node).await;
            }
        }
    });
    tokio::spawn(tainting_loop(
        writer.clone(),
        nodes.clone(),
        zones.clone(),
        metrics.clone(),
    ));
    let mut monitor = Monitor {
        writer,
        nodes,
        leases,
        zones,
        options,
        metrics,
        known: HashMap::new(),
        retry_pods: BTreeSet::new(),
        pause,
        lease_key: format!("{LEASE_NAMESPACE}/"),
    };
    let mut tick = tokio::time::interval(options.monitor_period.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if monitor.nodes.has_synced() && monitor.leases.has_synced() {
            monitor.pass().await;
        }
    }
}

/// The controller's writes, through the registry.
#[derive(Clone)]
struct Writer {
    registry: Arc<Registry>,
    nodes: &'static dyn Strategy,
    events: EventRecorder,
}

impl Writer {
    /// Writes the node as `change` makes it from the stored one (None: nothing to change).
    async fn update_node(
        &self,
        name: &str,
        subresource: Option<&str>,
        mut change: impl FnMut(&Value) -> Option<Value>,
    ) -> Result<Value, Status> {
        let fields = FieldManager::new(self.nodes, subresource, Time::now());
        let (written, _) = self
            .registry
            .update(self.nodes, None, name, subresource, false, |current| {
                let current = current.cloned().unwrap_or_default();
                let mut new = change(&current).unwrap_or_else(|| current.clone());
                if new != current {
                    fields.update(Some(&current), &mut new, MANAGER);
                }
                Ok(new)
            })
            .await?;
        Ok(written)
    }

    /// Adds `add` and removes `remove` (`SwapNodeControllerTaint`).
    async fn swap_taints(&self, name: &str, add: &[Taint], remove: &[Taint]) -> bool {
        let result = self
            .update_node(name, None, |node| {
                let mut node = node.clone();
                taints::swap(&mut node, add, remove, Time::now()).then_some(node)
            })
            .await;
        match result {
            Ok(_) => true,
            Err(status) => {
                tracing::warn!(node = name, error = %status.message, "node lifecycle: updating the node's taints");
                false
            }
        }
    }

    /// The condition taints follow the node's conditions (`doNoScheduleTaintingPass`), and
    /// the beta labels the GA ones ([`labels`]).
    async fn no_schedule_pass(&self, node: &Value) {
        let name = meta_str(node, "name");
        let (add, remove) = taints::no_schedule_diff(node);
        if !add.is_empty() || !remove.is_empty() {
            self.swap_taints(name, &add, &remove).await;
        }
        if labels::to_reconcile(node).is_empty() {
            return;
        }
        let written = self
            .update_node(name, None, |node| {
                let set = labels::to_reconcile(node);
                let mut node = node.clone();
                let labels = node["metadata"]["labels"].as_object_mut()?;
                labels.extend(set);
                Some(node)
            })
            .await;
        if let Err(status) = written {
            tracing::warn!(node = name, error = %status.message, "node lifecycle: reconciling the node's labels");
        }
    }

    /// Records a Normal event about `node` from the `node-controller` (queued: the pass
    /// does not wait for it).
    fn node_event(&self, node: &Value, reason: &'static str, message: String) {
        let involved = json!({"kind": "Node", "name": meta_str(node, "name"),
                              "uid": meta_str(node, "uid"), "apiVersion": "v1"});
        self.events.event(involved, "Normal", reason, message);
    }

    /// Marks the Ready condition of every pod on the node False (`MarkPodsNotReady`).
    async fn mark_pods_not_ready(&self, node: &str) -> Result<(), Status> {
        let pods = self.registry.core("pods");
        let node_name = node.to_string();
        let on_node = move |pod: &Value| {
            pod.at("/spec/nodeName").and_then(Value::as_str) == Some(node_name.as_str())
        };
        // Through the pods' `spec.nodeName` index when the watch cache serves the list.
        let selection = Selection {
            filter: Box::new(on_node),
            exact: vec![("spec.nodeName".to_string(), node.to_string())],
        };
        let query = ListQuery {
            selection: Some(&selection),
            ..ListQuery::default()
        };
        let list = self.registry.list(pods, None, &query).await?;
        let fields = FieldManager::new(pods, Some("status"), Time::now());
        for pod in list.objects() {
            let ready = |p: &Value| {
                p.at("/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|c| c.iter().position(|c| c["type"] == "Ready"))
            };
            if ready(pod).is_none_or(|i| pod["status"]["conditions"][i]["status"] == "False") {
                continue;
            }
            let (ns, name) = (meta_str(pod, "namespace"), meta_str(pod, "name"));
            let written = self
                .registry
                .update(pods, Some(ns), name, Some("status"), false, |current| {
                    let mut new = current.cloned().unwrap_or_default();
                    if let Some(i) = ready(&new) {
                        let c = &mut new["status"]["conditions"][i];
                        if c["status"] != "False" {
                            c["status"] = "False".into();
                            c["lastTransitionTime"] = Time::now().rfc3339().into();
                        }
                    }
                    fields.update(current, &mut new, MANAGER);
                    Ok(new)
                })
                .await;
            match written {
                Ok(_) => {
                    tracing::info!(pod = %format!("{ns}/{name}"), "updating ready status of pod to false")
                }
                Err(status) if status.code == 404 => {}
                Err(status) => return Err(status),
            }
        }
        Ok(())
    }
}

/// The monitor pass and what it keeps between passes.
struct Monitor {
    writer: Writer,
    nodes: Arc<Informer>,
    leases: Arc<Informer>,
    zones: Arc<Mutex<Zones>>,
    options: Options,
    metrics: NodeLifecycleMetrics,
    /// The nodes seen so far, by name.
    known: HashMap<String, Known>,
    /// Nodes whose pods could not all be marked not Ready.
    retry_pods: BTreeSet<String>,
    /// Whether the store fails its health check, and when it last passed it again.
    pause: Arc<Pause>,
    /// `kube-node-lease/`, then the name of the node whose Lease is looked up: its key in
    /// `leases`, made without allocating.
    lease_key: String,
}

/// What the monitor keeps of a node it has seen.
struct Known {
    uid: String,
    /// Its zone, as last read.
    zone: NodeZone,
    /// Its health, once a pass has observed it.
    health: Option<NodeHealth>,
}

/// What a pass made of a node ([`Monitor::update_health`]).
struct Checked {
    /// The node as it now is.
    node: Arc<Value>,
    /// Its zone key.
    zone: Arc<str>,
    /// Whether it is left out of the disruption count.
    excluded: bool,
    /// The status of its Ready condition as read.
    observed: ConditionStatus,
    /// The status of its Ready condition after this pass (None: never posted, and still
    /// in grace).
    current: Option<ConditionStatus>,
}

impl Monitor {
    fn zones(&self) -> std::sync::MutexGuard<'_, Zones> {
        self.zones.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One pass (`monitorNodeHealth`), unless the store is unhealthy; it stops at the next
    /// node if the store fails its health check meanwhile.
    async fn pass(&mut self) {
        if self.pause.paused() {
            return;
        }
        let started = Instant::now();
        let nodes = self.nodes.list();
        self.classify(&nodes).await;
        let mut zone_ready: BTreeMap<Arc<str>, ZoneCount> = BTreeMap::new();
        for node in &nodes {
            if self.pause.paused() {
                return;
            }
            let Some(checked) = self.update_health(node).await else {
                continue;
            };
            let Checked {
                node,
                zone,
                excluded,
                observed,
                current,
            } = checked;
            if !excluded {
                let ready = current == Some(ConditionStatus::True);
                zone_ready.entry(zone.clone()).or_default().add(ready);
            }
            let Some(current) = current else { continue };
            self.taint_based_eviction(&node, &zone, observed).await;
            let name = meta_str(&node, "name");
            let became_not_ready =
                current != ConditionStatus::True && observed == ConditionStatus::True;
            if became_not_ready {
                tracing::info!(node = %name, status = ?current, "node lifecycle: node is not ready");
                let message = format!("Node {name} status is now: NodeNotReady");
                self.writer.node_event(&node, "NodeNotReady", message);
            }
            let retry = self.retry_pods.contains(name) && observed != ConditionStatus::True;
            if (became_not_ready || retry)
                && let Err(status) = self.writer.mark_pods_not_ready(name).await
            {
                tracing::warn!(node = %name, error = %status.message, "node lifecycle: marking the node's pods not ready; will retry");
                self.retry_pods.insert(name.to_string());
                continue;
            }
            self.retry_pods.remove(name);
        }
        self.handle_disruption(&nodes, &zone_ready).await;
        self.metrics
            .pass_duration
            .observe(started.elapsed().as_secs_f64());
    }

    /// Takes in new and deleted nodes (`classifyNodes`): a new node starts with its
    /// NoExecute taints lifted (they are set again if it is still lost).
    async fn classify(&mut self, nodes: &[Arc<Value>]) {
        let now = Instant::now();
        for node in nodes {
            let (name, uid) = (meta_str(node, "name"), meta_str(node, "uid"));
            let (zone, new) = match self.known.get_mut(name) {
                Some(known) => {
                    if known.uid != uid {
                        known.uid = uid.to_string();
                    }
                    (known.zone.follow(node).key.clone(), false)
                }
                None => {
                    let zone = NodeZone::of(node);
                    let key = zone.key.clone();
                    let known = Known {
                        uid: uid.to_string(),
                        zone,
                        health: None,
                    };
                    self.known.insert(name.to_string(), known);
                    (key, true)
                }
            };
            if self.zones().add_zone(&zone, now) {
                tracing::info!(zone = %zone.replace('\0', ""), "node lifecycle: initializing eviction metric for zone");
                self.metrics
                    .evictions
                    .get_or_create(&NodeLifecycleMetrics::zone(&zone))
                    .inc_by(0);
            }
            if new {
                tracing::info!(node = name, "node lifecycle: observed a new node");
                let message = format!("Node {name} event: Registered Node {name} in Controller");
                self.writer.node_event(node, "RegisteredNode", message);
                let _ = self.mark_reachable(node, &zone).await;
            }
        }
        // Every listed node is known now: more known ones are gone.
        if self.known.len() == nodes.len() {
            return;
        }
        let listed: HashSet<&str> = nodes.iter().map(|n| meta_str(n, "name")).collect();
        let mut gone: Vec<(String, Known)> = self
            .known
            .extract_if(|name, _| !listed.contains(name.as_str()))
            .collect();
        gone.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, known) in gone {
            tracing::info!(node = %name, "node lifecycle: observed a node deletion");
            let message = format!("Node {name} event: Removing Node {name} from Controller");
            let node = json!({"metadata": {"name": name, "uid": known.uid}});
            self.writer.node_event(&node, "RemovingNode", message);
            self.retry_pods.remove(&name);
        }
    }

    /// The node's health this pass (`tryUpdateNodeHealth` with its retries); None if it
    /// could not be written (it is left out of this pass).
    async fn update_health(&mut self, listed: &Arc<Value>) -> Option<Checked> {
        let name = meta_str(listed, "name");
        let mut node = Arc::clone(listed);
        for attempt in 0..UPDATE_RETRIES {
            let lease = self.lease(name);
            let now = now_millis();
            // `classify` took in every listed node.
            let known = self.known.get_mut(name)?;
            let mut saved = known.health.take();
            if let Some(saved) = saved.as_mut() {
                saved.resume(self.pause.resumed_at());
            }
            let (health, observation) =
                health::observe(saved, &node, lease.as_deref(), now, self.options.grace);
            let checked = |known: &mut Known, node: Arc<Value>| {
                let zone = known.zone.follow(&node);
                Some(Checked {
                    zone: zone.key.clone(),
                    excluded: zone.excluded,
                    node,
                    observed: observation.observed_ready,
                    current: observation.current_ready,
                })
            };
            let Some(update) = &observation.update else {
                known.health = Some(health);
                return checked(known, node);
            };
            let written = self
                .writer
                .update_node(name, Some("status"), |_| Some(update.clone()))
                .await;
            let known = self.known.get_mut(name)?;
            match written {
                Ok(written) => {
                    tracing::info!(node = %name, "node lifecycle: kubelet stopped posting node status; marked Unknown");
                    known.health = Some(health.after_update(&written, now_millis()));
                    return checked(known, Arc::new(written));
                }
                Err(status) => {
                    known.health = Some(health);
                    if status.code != 409 || attempt + 1 == UPDATE_RETRIES {
                        tracing::warn!(node = %name, error = %status.message, "node lifecycle: updating the node's health; skipped this pass");
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    match self
                        .writer
                        .registry
                        .get(self.writer.nodes, None, name, "")
                        .await
                    {
                        Ok(fresh) => node = Arc::new(fresh),
                        Err(_) => return None,
                    }
                }
            }
        }
        None
    }

    /// The node's Lease (its key made in `lease_key`).
    fn lease(&mut self, name: &str) -> Option<Arc<Value>> {
        self.lease_key.truncate(LEASE_NAMESPACE.len() + 1);
        self.lease_key.push_str(name);
        self.leases.get(&self.lease_key)
    }

    /// Queues, swaps or lifts the NoExecute taint of the node (in `zone`) by its observed
    /// Ready condition (`processTaintBaseEviction`).
    async fn taint_based_eviction(&mut self, node: &Value, zone: &str, observed: ConditionStatus) {
        let name = meta_str(node, "name");
        let (taint, opposite) = match observed {
            ConditionStatus::False => (NOT_READY_NO_EXECUTE, UNREACHABLE_NO_EXECUTE),
            ConditionStatus::Unknown => (UNREACHABLE_NO_EXECUTE, NOT_READY_NO_EXECUTE),
            ConditionStatus::True => {
                let _ = self.mark_reachable(node, zone).await;
                return;
            }
            ConditionStatus::Other => return,
        };
        if taints::has(node, opposite) {
            // Already tainted the other way: swapped at once, not paced.
            self.writer.swap_taints(name, &[taint], &[opposite]).await;
            return;
        }
        let mut zones = self.zones();
        let queue = zones.queue(zone, Instant::now());
        if !taints::has(node, taint) {
            queue.remove(name);
        }
        queue.add(name, meta_str(node, "uid"), Instant::now());
    }

    /// Lifts the node's NoExecute taints and takes it out of the queue of `zone`, its zone
    /// (`markNodeAsReachable`).
    async fn mark_reachable(&mut self, node: &Value, zone: &str) -> bool {
        let name = meta_str(node, "name");
        let tainted = [UNREACHABLE_NO_EXECUTE, NOT_READY_NO_EXECUTE]
            .iter()
            .any(|t| taints::has(node, *t));
        if tainted
            && !self
                .writer
                .swap_taints(name, &[], &[UNREACHABLE_NO_EXECUTE, NOT_READY_NO_EXECUTE])
                .await
        {
            return false;
        }
        self.zones().queue(zone, Instant::now()).remove(name)
    }

    /// The zones' states and rates, and what a full disruption asks (`handleDisruption`).
    async fn handle_disruption(
        &mut self,
        nodes: &[Arc<Value>],
        zone_ready: &BTreeMap<Arc<str>, ZoneCount>,
    ) {
        let (health, disruption) = self.zones().handle_disruption(zone_ready, Instant::now());
        for (zone, h) in &health {
            let labels = NodeLifecycleMetrics::zone(zone);
            self.metrics
                .zone_size
                .get_or_create(&labels)
                .set(h.size as i64);
            self.metrics
                .unhealthy_nodes
                .get_or_create(&labels)
                .set(h.unhealthy as i64);
            let healthy = 100.0 * (h.size - h.unhealthy) as f64 / h.size.max(1) as f64;
            self.metrics.zone_health.get_or_create(&labels).set(healthy);
        }
        match disruption {
            Disruption::None => {}
            Disruption::EnteredFull => {
                tracing::info!(
                    "node lifecycle: every node is not Ready; entering master disruption mode (no NoExecute taints)"
                );
                for node in nodes {
                    self.mark_reachable(node, &zone_key(node)).await;
                }
            }
            Disruption::ExitedFull => {
                tracing::info!(
                    "node lifecycle: some nodes are Ready; exiting master disruption mode"
                );
                let now = now_millis();
                for health in self.known.values_mut().filter_map(|k| k.health.as_mut()) {
                    health.restart(now);
                }
            }
        }
    }
}

/// The NoExecute tainting pass, every 100 ms (`doNoExecuteTaintingPass`).
async fn tainting_loop(
    writer: Writer,
    nodes: Arc<Informer>,
    zones: Arc<Mutex<Zones>>,
    metrics: NodeLifecycleMetrics,
) {
    let lock = || zones.lock().unwrap_or_else(|e| e.into_inner());
    let mut tick = tokio::time::interval(TAINTING_PERIOD);
    loop {
        tick.tick().await;
        let zone_keys: Vec<String> = lock().queues.keys().cloned().collect();
        for zone in zone_keys {
            loop {
                let Some(value) = lock().queue(&zone, Instant::now()).next(Instant::now()) else {
                    break;
                };
                let retry = |wait: Duration| {
                    lock()
                        .queue(&zone, Instant::now())
                        .retry(&value, wait, Instant::now());
                };
                let Some(node) = nodes.get(&value.value) else {
                    lock().queue(&zone, Instant::now()).done(&value);
                    continue;
                };
                let (taint, opposite) = match condition(&node, "Ready").map(|c| &c["status"]) {
                    None => {
                        retry(Duration::from_millis(50));
                        continue;
                    }
                    Some(s) if s == "False" => (NOT_READY_NO_EXECUTE, UNREACHABLE_NO_EXECUTE),
                    Some(s) if s == "Unknown" => (UNREACHABLE_NO_EXECUTE, NOT_READY_NO_EXECUTE),
                    Some(_) => {
                        // Ready again: nothing to taint.
                        lock().queue(&zone, Instant::now()).done(&value);
                        continue;
                    }
                };
                if writer
                    .swap_taints(&value.value, &[taint], &[opposite])
                    .await
                {
                    metrics
                        .evictions
                        .get_or_create(&NodeLifecycleMetrics::zone(&zone_key(&node)))
                        .inc();
                    lock().queue(&zone, Instant::now()).done(&value);
                } else {
                    retry(Duration::ZERO);
                }
            }
        }
    }
}
