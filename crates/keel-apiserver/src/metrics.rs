//! `/metrics`, with kube-apiserver's names and labels, so the dashboards and alerts written
//! for it work unchanged: requests by verb, resource, subresource and scope
//! (`apiserver_request_total`, `apiserver_request_duration_seconds`), what is in flight
//! (`apiserver_current_inflight_requests`, `apiserver_current_inqueue_requests`,
//! `apiserver_longrunning_requests`,
//! `apiserver_registered_watchers`), the store's share of each request
//! (`etcd_request_duration_seconds` by operation and resource; `apiserver_storage_objects`;
//! `apiserver_storage_size_bytes` per store),
//! the watch caches (`apiserver_watch_cache_events_received_total`,
//! `apiserver_watch_cache_events_dispatched_total`, `apiserver_watch_cache_resource_version`,
//! `apiserver_watch_cache_initializations_total`, `apiserver_terminated_watchers_total`, and the
//! reads they serve: `apiserver_cache_list_{total,fetched_objects_total,returned_objects_total}`,
//! `apiserver_watch_cache_read_wait_seconds`, `apiserver_watch_cache_consistent_read_total`),
//! what watches send (`apiserver_watch_events_total`, `apiserver_watch_events_sizes`), and
//! keel's own `keel_apiserver_watch_expired_total`: watches answered 200 with a 410 Expired
//! event, which `apiserver_request_total{code="410"}` does not count (kube-apiserver has no
//! metric for them). `etcd_request_duration_seconds` tells an operator
//! at once whether a slow request reached the store; a watch cache's resourceVersion far
//! behind the store's revision, whether watchers wait on the cache.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry as Prometheus;

use crate::controllers::nodelifecycle::metrics::NodeLifecycleMetrics;

/// Label pairs.
pub type Labels = Vec<(&'static str, String)>;

/// kube-apiserver's `apiserver_request_duration_seconds` buckets, which its
/// `etcd_request_duration_seconds` shares (up to 60 s since kubernetes PR #94134).
const LATENCY_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// kube-apiserver's `apiserver_watch_events_sizes` buckets: 1 KiB doubling to 128 KiB.
const WATCH_EVENT_SIZE_BUCKETS: [f64; 8] = [
    1024.0, 2048.0, 4096.0, 8192.0, 16384.0, 32768.0, 65536.0, 131072.0,
];

/// `etcd_lease_object_counts`' buckets, as kube-apiserver's.
const LEASE_OBJECT_BUCKETS: [f64; 7] = [10.0, 50.0, 100.0, 500.0, 1000.0, 2500.0, 5000.0];

/// kube-apiserver's `apiserver_watch_cache_read_wait_seconds` buckets.
const READ_WAIT_BUCKETS: [f64; 13] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0,
];

/// The apiserver's metrics.
pub struct Metrics {
    registry: Prometheus,
    requests: Family<Labels, Counter>,
    durations: Family<Labels, Histogram>,
    /// `apiserver_current_inflight_requests{request_kind}`.
    pub inflight: Family<Labels, Gauge>,
    /// `apiserver_current_inqueue_requests{request_kind}`: Event writes waiting for a slot.
    pub inqueue: Family<Labels, Gauge>,
    /// `apiserver_longrunning_requests`.
    pub longrunning: Family<Labels, Gauge>,
    /// `apiserver_registered_watchers{group, kind, version}`.
    pub watchers: Family<Labels, Gauge>,
    etcd: Family<Labels, Histogram>,
    /// `apiserver_storage_objects{resource}`, set by the background count
    /// ([`crate::registry::object_count`]), never by a scrape.
    pub objects: Family<Labels, Gauge>,
    /// `apiserver_storage_size_bytes{storage_cluster_id}`: each store's database size
    /// (`etcd-0` the main store, then the overrides' in order), set by the same background
    /// round as the counts.
    pub storage_size: Family<Labels, Gauge>,
    /// `etcd_lease_object_counts`: how many TTL writes each store lease served (observed when
    /// the next lease is granted, as kube-apiserver's lease manager observes it).
    pub lease_object_counts: Histogram,
    cache_received: Family<Labels, Counter>,
    cache_dispatched: Family<Labels, Counter>,
    cache_revision: Family<Labels, Gauge>,
    cache_initializations: Family<Labels, Counter>,
    terminated_watchers: Family<Labels, Counter>,
    cache_reads: CacheReadFamilies,
    watch_events: Family<Labels, Counter>,
    watch_event_sizes: Family<Labels, Histogram>,
    watch_expired: Family<Labels, Counter>,
    /// The node lifecycle controller's (`node_collector_*`).
    pub node_lifecycle: NodeLifecycleMetrics,
}

/// The families of the reads the watch caches serve.
#[derive(Debug, Clone)]
struct CacheReadFamilies {
    lists: Family<Labels, Counter>,
    fetched: Family<Labels, Counter>,
    returned: Family<Labels, Counter>,
    read_wait: Family<Labels, Histogram>,
    consistent_reads: Family<Labels, Counter>,
}

impl Default for CacheReadFamilies {
    fn default() -> Self {
        CacheReadFamilies {
            lists: Family::default(),
            fetched: Family::default(),
            returned: Family::default(),
            read_wait: Family::new_with_constructor(
                (|| Histogram::new(READ_WAIT_BUCKETS)) as fn() -> Histogram,
            ),
            consistent_reads: Family::default(),
        }
    }
}

/// One watch cache's metrics, labelled with its group and resource.
#[derive(Debug, Clone)]
pub struct CacheMetrics {
    /// `apiserver_watch_cache_events_received_total`: events taken from the store.
    pub received: Counter,
    /// `apiserver_watch_cache_events_dispatched_total`: events handed to the watchers.
    pub dispatched: Counter,
    /// `apiserver_watch_cache_resource_version`: the revision the cache has reflected.
    pub resource_version: Gauge,
    /// `apiserver_watch_cache_initializations_total`: (re)starts from the store's revision.
    pub initializations: Counter,
    /// `apiserver_terminated_watchers_total`: watchers ended for falling behind.
    pub terminated_watchers: Counter,
    /// `apiserver_watch_cache_read_wait_seconds`: how long reads waited for the cache to be
    /// fresh enough.
    pub read_wait: Histogram,
    /// The group and resource labels.
    labels: Labels,
    reads: CacheReadFamilies,
}

impl Default for CacheMetrics {
    fn default() -> Self {
        let reads = CacheReadFamilies::default();
        let read_wait = reads.read_wait.get_or_create(&Vec::new()).clone();
        CacheMetrics {
            received: Counter::default(),
            dispatched: Counter::default(),
            resource_version: Gauge::default(),
            initializations: Counter::default(),
            terminated_watchers: Counter::default(),
            read_wait,
            labels: Vec::new(),
            reads,
        }
    }
}

impl CacheMetrics {
    /// Counts one list served from the cache (`apiserver_cache_list_total` and its fetched
    /// and returned objects), `index` the index it used ("" for none).
    pub fn list_served(&self, index: &str, fetched: usize, returned: usize) {
        let mut labels = self.labels.clone();
        self.reads
            .returned
            .get_or_create(&labels)
            .inc_by(returned as u64);
        labels.push(("index", index.to_string()));
        self.reads.lists.get_or_create(&labels).inc();
        self.reads
            .fetched
            .get_or_create(&labels)
            .inc_by(fetched as u64);
    }

    /// Counts one consistent read (`apiserver_watch_cache_consistent_read_total`): whether it
    /// succeeded and whether it fell back to the store.
    pub fn consistent_read(&self, success: bool, fallback: bool) {
        let mut labels = self.labels.clone();
        labels.push(("success", success.to_string()));
        labels.push(("fallback", fallback.to_string()));
        self.reads.consistent_reads.get_or_create(&labels).inc();
    }

    /// The lists served from the cache with `index` ("" for none).
    pub fn lists_served(&self, index: &str) -> u64 {
        let mut labels = self.labels.clone();
        labels.push(("index", index.to_string()));
        self.reads.lists.get_or_create(&labels).get()
    }

    /// The consistent reads counted with these labels.
    pub fn consistent_reads(&self, success: bool, fallback: bool) -> u64 {
        let mut labels = self.labels.clone();
        labels.push(("success", success.to_string()));
        labels.push(("fallback", fallback.to_string()));
        self.reads.consistent_reads.get_or_create(&labels).get()
    }
}

/// What the watches of one resource send, labelled with its group, version and resource
/// (`expired` with its group and resource).
#[derive(Debug, Clone)]
pub struct WatchEventMetrics {
    /// `apiserver_watch_events_total`: events sent (bookmarks and errors too).
    pub sent: Counter,
    /// `apiserver_watch_events_sizes`: each sent event's size in bytes.
    pub sizes: Histogram,
    /// `keel_apiserver_watch_expired_total`: watches answered with a 410 Expired event.
    pub expired: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Registers every family.
    pub fn new() -> Metrics {
        let mut registry = Prometheus::default();
        let requests = Family::<Labels, Counter>::default();
        let durations = Family::<Labels, Histogram>::new_with_constructor(
            (|| Histogram::new(LATENCY_BUCKETS)) as fn() -> Histogram,
        );
        let etcd = Family::<Labels, Histogram>::new_with_constructor(
            (|| Histogram::new(LATENCY_BUCKETS)) as fn() -> Histogram,
        );
        let (inflight, inqueue, longrunning, watchers, objects, storage_size) = Default::default();
        let lease_object_counts = Histogram::new(LEASE_OBJECT_BUCKETS);
        let cache_reads = CacheReadFamilies::default();
        let (cache_received, cache_dispatched, cache_revision) = Default::default();
        let (cache_initializations, terminated_watchers, watch_events) = Default::default();
        let watch_expired = Family::<Labels, Counter>::default();
        let watch_event_sizes = Family::<Labels, Histogram>::new_with_constructor(
            (|| Histogram::new(WATCH_EVENT_SIZE_BUCKETS)) as fn() -> Histogram,
        );
        registry.register(
            "apiserver_request",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
            requests.clone(),
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
            durations.clone(),
        );
        registry.register(
            "apiserver_current_inflight_requests",
            "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
            Family::clone(&inflight),
        );
        registry.register(
            "apiserver_current_inqueue_requests",
            "Maximal number of queued requests in this apiserver per request kind in last second.",
            Family::clone(&inqueue),
        );
        registry.register(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
            Family::clone(&longrunning),
        );
        registry.register(
            "apiserver_registered_watchers",
            "Number of currently registered watchers for a given resources",
            Family::clone(&watchers),
        );
        registry.register(
            "etcd_request_duration_seconds",
            "Etcd request latency in seconds for each operation and object type.",
            etcd.clone(),
        );
        registry.register(
            "apiserver_storage_objects",
            "Number of stored objects at the time of last check split by kind.",
            Family::clone(&objects),
        );
        registry.register(
            "apiserver_storage_size_bytes",
            "Size of the storage database file physically allocated in bytes.",
            Family::clone(&storage_size),
        );
        registry.register(
            "etcd_lease_object_counts",
            "Number of objects attached to a single etcd lease.",
            lease_object_counts.clone(),
        );
        registry.register(
            "apiserver_watch_cache_events_received",
            "Counter of events received in watch cache broken by resource type.",
            Family::clone(&cache_received),
        );
        registry.register(
            "apiserver_watch_cache_events_dispatched",
            "Counter of events dispatched in watch cache broken by resource type.",
            Family::clone(&cache_dispatched),
        );
        registry.register(
            "apiserver_watch_cache_resource_version",
            "Current resource version of watch cache broken by resource type.",
            Family::clone(&cache_revision),
        );
        registry.register(
            "apiserver_watch_cache_initializations",
            "Counter of watch cache initializations broken by resource type.",
            Family::clone(&cache_initializations),
        );
        registry.register(
            "apiserver_terminated_watchers",
            "Counter of watchers closed due to unresponsiveness broken by resource type.",
            Family::clone(&terminated_watchers),
        );
        registry.register(
            "apiserver_cache_list",
            "Number of LIST requests served from watch cache",
            cache_reads.lists.clone(),
        );
        registry.register(
            "apiserver_cache_list_fetched_objects",
            "Number of objects read from watch cache in the course of serving a LIST request",
            cache_reads.fetched.clone(),
        );
        registry.register(
            "apiserver_cache_list_returned_objects",
            "Number of objects returned for a LIST request from watch cache",
            cache_reads.returned.clone(),
        );
        registry.register(
            "apiserver_watch_cache_read_wait_seconds",
            "Histogram of time spent waiting for a watch cache to become fresh.",
            cache_reads.read_wait.clone(),
        );
        registry.register(
            "apiserver_watch_cache_consistent_read",
            "Number of consistent reads from cache.",
            cache_reads.consistent_reads.clone(),
        );
        registry.register(
            "apiserver_watch_events",
            "Number of events sent in watch clients",
            Family::clone(&watch_events),
        );
        registry.register(
            "apiserver_watch_events_sizes",
            "Watch event size distribution in bytes",
            watch_event_sizes.clone(),
        );
        registry.register(
            "keel_apiserver_watch_expired",
            "Number of watches started from a compacted resourceVersion, answered with a 410 Expired event; their clients relist.",
            watch_expired.clone(),
        );
        registry.register_collector(Box::new(keel_process::ProcessCollector));
        registry.register_collector(Box::new(keel_process::faults::FaultMetrics(
            keel_process::faults::process(),
        )));
        let node_lifecycle = NodeLifecycleMetrics::register(&mut registry);
        Metrics {
            registry,
            requests,
            durations,
            inflight,
            inqueue,
            longrunning,
            watchers,
            etcd,
            objects,
            storage_size,
            lease_object_counts,
            cache_received,
            cache_dispatched,
            cache_revision,
            cache_initializations,
            terminated_watchers,
            cache_reads,
            watch_events,
            watch_event_sizes,
            watch_expired,
            node_lifecycle,
        }
    }

    /// The metrics of the watch cache of `resource` in `group`.
    pub fn watch_cache(&self, group: &str, resource: &str) -> CacheMetrics {
        let labels = vec![("group", group.to_string()), ("resource", resource.into())];
        CacheMetrics {
            received: self.cache_received.get_or_create(&labels).clone(),
            dispatched: self.cache_dispatched.get_or_create(&labels).clone(),
            resource_version: self.cache_revision.get_or_create(&labels).clone(),
            initializations: self.cache_initializations.get_or_create(&labels).clone(),
            terminated_watchers: self.terminated_watchers.get_or_create(&labels).clone(),
            read_wait: self.cache_reads.read_wait.get_or_create(&labels).clone(),
            labels,
            reads: self.cache_reads.clone(),
        }
    }

    /// What the watches of `resource` in `group`/`version` send.
    pub fn watch_events(&self, group: &str, version: &str, resource: &str) -> WatchEventMetrics {
        let labels = vec![
            ("group", group.to_string()),
            ("version", version.to_string()),
            ("resource", resource.to_string()),
        ];
        let expired = vec![
            ("group", group.to_string()),
            ("resource", resource.to_string()),
        ];
        WatchEventMetrics {
            sent: self.watch_events.get_or_create(&labels).clone(),
            sizes: self.watch_event_sizes.get_or_create(&labels).clone(),
            expired: self.watch_expired.get_or_create(&expired).clone(),
        }
    }

    /// Counts one finished request (`labels` are verb, dry_run, group, version, resource,
    /// subresource, scope; the component and code are added).
    pub fn request(&self, labels: &Labels, code: u16, elapsed: Duration) {
        let mut with_code = labels.clone();
        with_code.push(("component", "apiserver".into()));
        let mut timed = with_code.clone();
        with_code.push(("code", code.to_string()));
        // apiserver_request_total carries no subresource label in kube-apiserver.
        with_code.retain(|(k, _)| *k != "subresource");
        self.requests.get_or_create(&with_code).inc();
        timed.retain(|(k, _)| *k != "code");
        self.durations
            .get_or_create(&timed)
            .observe(elapsed.as_secs_f64());
    }

    /// Times one store request.
    pub fn etcd_request(&self, operation: &str, resource: &str, elapsed: Duration) {
        self.etcd
            .get_or_create(&vec![
                ("operation", operation.into()),
                ("type", resource.into()),
            ])
            .observe(elapsed.as_secs_f64());
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expired_watch_counts_in_keels_own_family_by_group_and_resource() {
        let metrics = Metrics::new();
        metrics
            .watch_events("apps", "v1", "deployments")
            .expired
            .inc();
        let text = metrics.encode();
        let line =
            "keel_apiserver_watch_expired_total{group=\"apps\",resource=\"deployments\"} 1\n";
        assert!(text.contains(line), "{text}");
        assert!(
            text.contains("# TYPE keel_apiserver_watch_expired counter"),
            "{text}"
        );
    }
}
