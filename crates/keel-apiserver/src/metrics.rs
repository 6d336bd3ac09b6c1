//! `/metrics`, with kube-apiserver's names and labels, so the dashboards and alerts written
//! for it work unchanged: requests by verb, resource, subresource and scope
//! (`apiserver_request_total`, `apiserver_request_duration_seconds`), what is in flight
//! (`apiserver_current_inflight_requests`, `apiserver_longrunning_requests`,
//! `apiserver_registered_watchers`), the store's share of each request
//! (`etcd_request_duration_seconds` by operation and resource; `apiserver_storage_objects`),
//! and the watch caches (`apiserver_watch_cache_events_received_total`,
//! `apiserver_watch_cache_resource_version`, `apiserver_watch_cache_initializations_total`,
//! `apiserver_terminated_watchers_total`). `etcd_request_duration_seconds` tells an operator
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

/// kube-apiserver's `apiserver_request_duration_seconds` buckets.
const REQUEST_BUCKETS: [f64; 24] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 50.0, 60.0,
];

/// kube-apiserver's `etcd_request_duration_seconds` buckets.
const ETCD_BUCKETS: [f64; 18] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0,
];

/// The apiserver's metrics.
pub struct Metrics {
    registry: Prometheus,
    requests: Family<Labels, Counter>,
    durations: Family<Labels, Histogram>,
    /// `apiserver_current_inflight_requests{request_kind}`.
    pub inflight: Family<Labels, Gauge>,
    /// `apiserver_longrunning_requests`.
    pub longrunning: Family<Labels, Gauge>,
    /// `apiserver_registered_watchers{group, kind, version}`.
    pub watchers: Family<Labels, Gauge>,
    etcd: Family<Labels, Histogram>,
    /// `apiserver_storage_objects{resource}`, set by the background count
    /// ([`crate::registry::object_count`]), never by a scrape.
    pub objects: Family<Labels, Gauge>,
    cache_received: Family<Labels, Counter>,
    cache_revision: Family<Labels, Gauge>,
    cache_initializations: Family<Labels, Counter>,
    terminated_watchers: Family<Labels, Counter>,
    /// The node lifecycle controller's (`node_collector_*`).
    pub node_lifecycle: NodeLifecycleMetrics,
}

/// One watch cache's metrics, labelled with its group and resource.
#[derive(Debug, Clone, Default)]
pub struct CacheMetrics {
    /// `apiserver_watch_cache_events_received_total`: events taken from the store.
    pub received: Counter,
    /// `apiserver_watch_cache_resource_version`: the revision the cache has reflected.
    pub resource_version: Gauge,
    /// `apiserver_watch_cache_initializations_total`: (re)starts from the store's revision.
    pub initializations: Counter,
    /// `apiserver_terminated_watchers_total`: watchers ended for falling behind.
    pub terminated_watchers: Counter,
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
            (|| Histogram::new(REQUEST_BUCKETS)) as fn() -> Histogram,
        );
        let etcd = Family::<Labels, Histogram>::new_with_constructor(
            (|| Histogram::new(ETCD_BUCKETS)) as fn() -> Histogram,
        );
        let (inflight, longrunning, watchers, objects) = Default::default();
        let (cache_received, cache_revision, cache_initializations, terminated_watchers) =
            Default::default();
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
            "apiserver_watch_cache_events_received",
            "Counter of events received in watch cache broken by resource type.",
            Family::clone(&cache_received),
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
        let node_lifecycle = NodeLifecycleMetrics::register(&mut registry);
        Metrics {
            registry,
            requests,
            durations,
            inflight,
            longrunning,
            watchers,
            etcd,
            objects,
            cache_received,
            cache_revision,
            cache_initializations,
            terminated_watchers,
            node_lifecycle,
        }
    }

    /// The metrics of the watch cache of `resource` in `group`.
    pub fn watch_cache(&self, group: &str, resource: &str) -> CacheMetrics {
        let labels = vec![("group", group.to_string()), ("resource", resource.into())];
        CacheMetrics {
            received: self.cache_received.get_or_create(&labels).clone(),
            resource_version: self.cache_revision.get_or_create(&labels).clone(),
            initializations: self.cache_initializations.get_or_create(&labels).clone(),
            terminated_watchers: self.terminated_watchers.get_or_create(&labels).clone(),
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
