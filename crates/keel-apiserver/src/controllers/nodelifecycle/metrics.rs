//! The node lifecycle controller's metrics: kube-controller-manager's `node_collector_*`
//! (per zone: size, health, unhealthy nodes, NoExecute taints set; the monitor pass's
//! duration), and keel's own pause metrics, which tell the two failure axes of a NotReady
//! storm apart:
//!
//! - Lease axis (the nodes stopped renewing): `node_collector_unhealthy_nodes_in_zone` rises
//!   while `keel_node_lifecycle_monitor_paused` stays 0;
//! - Raft axis (the store has no leader, or cannot be reached):
//!   `keel_node_lifecycle_monitor_paused` is 1 and `keel_node_lifecycle_monitor_pauses_total`
//!   counts the outages; no node is marked while it lasts.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry as Prometheus;

use crate::metrics::Labels;

/// The node lifecycle controller's metrics.
#[derive(Debug, Clone)]
pub struct NodeLifecycleMetrics {
    /// `node_collector_zone_health{zone}`: the percentage of Ready nodes.
    pub zone_health: Family<Labels, Gauge<f64, AtomicU64>>,
    /// `node_collector_zone_size{zone}`: the nodes counted.
    pub zone_size: Family<Labels, Gauge>,
    /// `node_collector_unhealthy_nodes_in_zone{zone}`: the nodes not Ready.
    pub unhealthy_nodes: Family<Labels, Gauge>,
    /// `node_collector_evictions_total{zone}`: NoExecute taints set.
    pub evictions: Family<Labels, Counter>,
    /// `node_collector_update_all_nodes_health_duration_seconds`: one monitor pass.
    pub pass_duration: Histogram,
    /// `keel_node_lifecycle_monitor_paused`: 1 while the store's health check fails and no
    /// grace period runs.
    pub paused: Gauge,
    /// `keel_node_lifecycle_monitor_pauses_total`: how many times the monitor paused.
    pub pauses: Counter,
}

impl NodeLifecycleMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(registry: &mut Prometheus) -> NodeLifecycleMetrics {
        let metrics = NodeLifecycleMetrics {
            zone_health: Family::default(),
            zone_size: Family::default(),
            unhealthy_nodes: Family::default(),
            evictions: Family::default(),
            pass_duration: Histogram::new(exponential_buckets(0.01, 4.0, 8)),
            paused: Gauge::default(),
            pauses: Counter::default(),
        };
        registry.register(
            "node_collector_zone_health",
            "Gauge measuring percentage of healthy nodes per zone.",
            metrics.zone_health.clone(),
        );
        registry.register(
            "node_collector_zone_size",
            "Gauge measuring number of registered Nodes per zones.",
            metrics.zone_size.clone(),
        );
        registry.register(
            "node_collector_unhealthy_nodes_in_zone",
            "Gauge measuring number of not Ready Nodes per zones.",
            metrics.unhealthy_nodes.clone(),
        );
        registry.register(
            "node_collector_evictions",
            "Number of Node evictions that happened since current instance of NodeController started.",
            metrics.evictions.clone(),
        );
        registry.register(
            "node_collector_update_all_nodes_health_duration_seconds",
            "Duration in seconds for NodeController to update the health of all nodes.",
            metrics.pass_duration.clone(),
        );
        registry.register(
            "keel_node_lifecycle_monitor_paused",
            "1 while the store fails the apiserver's health check and no node's grace period runs.",
            metrics.paused.clone(),
        );
        registry.register(
            "keel_node_lifecycle_monitor_pauses",
            "Times the node lifecycle controller paused its grace periods for the store's health.",
            metrics.pauses.clone(),
        );
        metrics
    }

    /// The label set of `zone`.
    pub fn zone(zone: &str) -> Labels {
        vec![("zone", zone.to_string())]
    }
}
