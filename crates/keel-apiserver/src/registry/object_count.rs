//! `apiserver_storage_objects` (and each store's `apiserver_storage_size_bytes`), kept as kube-apiserver keeps it (`startObservingCount` in
//! its generic registry store, `--etcd-count-metric-poll-period`): a background task counts
//! each resource's objects in the store (one count-only Range per resource) when the server
//! starts and then once every period, and sets the gauges; `/metrics` only reads the last
//! values. A scrape therefore never waits on the store: while the store is slow, frozen or
//! gone, `/metrics` answers at once with the counts of the last round that finished, which
//! is what an operator needs to look at in that moment.
//!
//! One task counts every resource in turn (kube-apiserver runs one goroutine per resource,
//! with jitter): a round waits on the store, never a scrape, and the next round starts one
//! period after the previous one started, or at once when the previous one took longer. A
//! count the store answers with an error, or does not answer within [`COUNT_TIMEOUT`] (or the
//! period, if shorter), is set to -1 until a later round counts it, as kube-apiserver marks a
//! failed count; so a hung store stalls no round for long and shows as -1, not as old counts.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;

use super::store::Registry;
use crate::metrics::Metrics;

/// The longest one resource's count may take before it counts as failed (-1).
pub const COUNT_TIMEOUT: Duration = Duration::from_secs(10);

/// `apiserver_storage_objects`' `resource` label: the plural, then `.group` for a named
/// group (`configmaps`, `leases.coordination.k8s.io`), as `GroupResource.String()` reads.
fn resource_label(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// Counts the objects of every kind of `registry` into `metrics` every `period`, the first
/// round at once; returns at once when `period` is zero (the metric disabled).
pub async fn observe(registry: Arc<Registry>, metrics: Arc<Metrics>, period: Duration) {
    if period.is_zero() {
        return;
    }
    let limit = period.min(COUNT_TIMEOUT);
    let mut rounds = tokio::time::interval(period);
    rounds.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        rounds.tick().await;
        for kind in registry.kinds().iter().filter(|k| k.stored()) {
            let info = kind.info();
            let count = match tokio::time::timeout(limit, registry.count(*kind)).await {
                Ok(Ok(count)) => count,
                Ok(Err(status)) => {
                    tracing::debug!(
                        resource = info.resource,
                        message = %status.message,
                        "counting objects for apiserver_storage_objects failed"
                    );
                    -1
                }
                Err(_) => {
                    tracing::debug!(
                        resource = info.resource,
                        ?limit,
                        "counting objects for apiserver_storage_objects timed out"
                    );
                    -1
                }
            };
            metrics
                .objects
                .get_or_create(&vec![(
                    "resource",
                    resource_label(info.group, info.resource),
                )])
                .set(count);
        }
        for (i, backend) in registry.backends().all().iter().enumerate() {
            let id = vec![("storage_cluster_id", format!("etcd-{i}"))];
            match tokio::time::timeout(limit, backend.storage.db_size()).await {
                Ok(Ok(size)) => {
                    metrics.storage_size.get_or_create(&id).set(size);
                }
                _ => {
                    // As kube-apiserver, a store that does not answer has no size shown.
                    metrics.storage_size.remove(&id);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_are_labelled_as_group_resources_print() {
        assert_eq!(resource_label("", "configmaps"), "configmaps");
        assert_eq!(
            resource_label("coordination.k8s.io", "leases"),
            "leases.coordination.k8s.io"
        );
    }
}
