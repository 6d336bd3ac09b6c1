//! Reads served by the watch cache, against keel store through a gRPC relay that counts the
//! store requests and can delay, drop or hold back what the store's watches answer: a list
//! with resourceVersion unset always contains the writes acknowledged before it, with
//! concurrent writers and with the store's progress notifications delayed; when they stop it
//! falls back to the store after 3 s and counts it; a resourceVersion the cache has not
//! reached is 504 "Too large resource version"; resourceVersion "0" and NotOlderThan are
//! served by the cache, Exact and continue by the store; pods are listed by node through the
//! index; and an update starts from the cached object, so a lease renewal is one Txn, and a
//! stale cached object costs a failed Txn but never writes or answers anything wrong.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use keel_apiserver::metrics::{CacheMetrics, Metrics};
use keel_apiserver::registry::Strategy;
use keel_apiserver::registry::selector::Selection;
use keel_apiserver::registry::store::{ListQuery, Registry};
use keel_apiserver::storage::{Etcd3, KeyLayout, Status};
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::kv_server::{Kv, KvServer};
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::maintenance_server::{Maintenance, MaintenanceServer};
use keel_proto::etcdserverpb::watch_client::WatchClient;
use keel_proto::etcdserverpb::watch_server::{Watch, WatchServer};
use keel_proto::etcdserverpb::*;
use keel_testkit::{Flavor, Server};
use serde_json::{Value, json};
use tonic::transport::Channel;
use tonic::{Request, Response, Status as GrpcStatus};

/// How long any awaited condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

type Answer<T> = Result<Response<T>, GrpcStatus>;
type Responses<T> = Pin<Box<dyn Stream<Item = Result<T, GrpcStatus>> + Send>>;

/// What the relay does to the store's watch responses.
#[derive(Default)]
struct Faults {
    /// Progress notifications are sent this many milliseconds late.
    progress_delay_ms: AtomicU64,
    /// Progress notifications are dropped.
    drop_progress: AtomicBool,
    /// Every watch response waits until this is false again.
    hold: AtomicBool,
}

/// The store requests the relay saw.
#[derive(Default)]
struct Counts {
    range: AtomicU64,
    txn: AtomicU64,
}

/// A gRPC relay in front of a store (KV, Watch and Maintenance).
#[derive(Clone)]
struct Relay {
    store: Channel,
    faults: Arc<Faults>,
    counts: Arc<Counts>,
}

impl Relay {
    /// Serves a relay to `store`; the URL to reach it.
    async fn start(store: Channel) -> (Relay, String) {
        let relay = Relay {
            store,
            faults: Arc::default(),
            counts: Arc::default(),
        };
        let port = keel_testkit::free_port();
        let addr = format!("127.0.0.1:{port}").parse().unwrap();
        let router = tonic::transport::Server::builder()
            .add_service(KvServer::new(relay.clone()))
            .add_service(WatchServer::new(relay.clone()))
            .add_service(MaintenanceServer::new(relay.clone()));
        tokio::spawn(router.serve(addr));
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + PATIENCE;
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(Instant::now() < deadline, "the relay did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (relay, url)
    }

    fn kv(&self) -> KvClient<Channel> {
        KvClient::new(self.store.clone())
    }

    fn maintenance(&self) -> MaintenanceClient<Channel> {
        MaintenanceClient::new(self.store.clone())
    }
}

fn unused<T>() -> Answer<T> {
    Err(GrpcStatus::unimplemented("not relayed"))
}

#[tonic::async_trait]
impl Kv for Relay {
    type RangeStreamStream = Responses<RangeStreamResponse>;

    async fn range(&self, r: Request<RangeRequest>) -> Answer<RangeResponse> {
        self.counts.range.fetch_add(1, Ordering::SeqCst);
        self.kv().range(r.into_inner()).await
    }
    async fn range_stream(&self, _: Request<RangeRequest>) -> Answer<Self::RangeStreamStream> {
        unused()
    }
    async fn put(&self, r: Request<PutRequest>) -> Answer<PutResponse> {
        self.kv().put(r.into_inner()).await
    }
    async fn delete_range(&self, r: Request<DeleteRangeRequest>) -> Answer<DeleteRangeResponse> {
        self.kv().delete_range(r.into_inner()).await
    }
    async fn txn(&self, r: Request<TxnRequest>) -> Answer<TxnResponse> {
        self.counts.txn.fetch_add(1, Ordering::SeqCst);
        self.kv().txn(r.into_inner()).await
    }
    async fn compact(&self, r: Request<CompactionRequest>) -> Answer<CompactionResponse> {
        self.kv().compact(r.into_inner()).await
    }
}

#[tonic::async_trait]
impl Maintenance for Relay {
    type SnapshotStream = Responses<SnapshotResponse>;

    async fn status(&self, r: Request<StatusRequest>) -> Answer<StatusResponse> {
        self.maintenance().status(r.into_inner()).await
    }
    async fn alarm(&self, _: Request<AlarmRequest>) -> Answer<AlarmResponse> {
        unused()
    }
    async fn defragment(&self, _: Request<DefragmentRequest>) -> Answer<DefragmentResponse> {
        unused()
    }
    async fn hash(&self, _: Request<HashRequest>) -> Answer<HashResponse> {
        unused()
    }
    async fn hash_kv(&self, _: Request<HashKvRequest>) -> Answer<HashKvResponse> {
        unused()
    }
    async fn snapshot(&self, _: Request<SnapshotRequest>) -> Answer<Self::SnapshotStream> {
        unused()
    }
    async fn move_leader(&self, _: Request<MoveLeaderRequest>) -> Answer<MoveLeaderResponse> {
        unused()
    }
    async fn downgrade(&self, _: Request<DowngradeRequest>) -> Answer<DowngradeResponse> {
        unused()
    }
}

/// etcd's `IsProgressNotify`.
fn is_progress(resp: &WatchResponse) -> bool {
    resp.events.is_empty() && !resp.created && !resp.canceled && resp.compact_revision == 0
}

#[tonic::async_trait]
impl Watch for Relay {
    type WatchStream = Responses<WatchResponse>;

    async fn watch(&self, r: Request<tonic::Streaming<WatchRequest>>) -> Answer<Self::WatchStream> {
        let mut upstream = Request::new(
            r.into_inner()
                .filter_map(|r| futures::future::ready(r.ok())),
        );
        upstream.metadata_mut().insert(
            "hasleader",
            tonic::metadata::MetadataValue::from_static("true"),
        );
        let responses = WatchClient::new(self.store.clone())
            .watch(upstream)
            .await?
            .into_inner();
        let faults = self.faults.clone();
        let (out, answers) = futures::channel::mpsc::unbounded();
        // Received responses with the time each is due; a late progress notification holds
        // back what follows it, so the order stays the store's.
        let (due, mut queued) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some((at, resp)) = queued.recv().await {
                tokio::time::sleep_until(at).await;
                if out.unbounded_send(resp).is_err() {
                    return;
                }
            }
        });
        tokio::spawn(async move {
            let mut responses = responses;
            while let Some(resp) = responses.next().await {
                while faults.hold.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let progress = resp.as_ref().is_ok_and(is_progress);
                if progress && faults.drop_progress.load(Ordering::SeqCst) {
                    continue;
                }
                let mut at = tokio::time::Instant::now();
                if progress {
                    at += Duration::from_millis(faults.progress_delay_ms.load(Ordering::SeqCst));
                }
                if due.send((at, resp)).is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(answers)))
    }
}

/// A store, a relay to it, and a registry (namespaces, configmaps, pods, leases) on the relay.
struct Setup {
    _server: Server,
    relay: Relay,
    /// The store, reached directly.
    direct: Etcd3,
    registry: Registry,
    metrics: Arc<Metrics>,
}

impl Setup {
    async fn start() -> Setup {
        let server = Server::start(Flavor::Keel);
        let (relay, url) = Relay::start(server.channel().await).await;
        let channel = Channel::from_shared(url).unwrap().connect_lazy();
        let metrics = Arc::new(Metrics::new());
        let kinds = keel_apiserver::registry::kinds()
            .into_iter()
            .filter(|k| {
                let info = k.info();
                ["namespaces", "configmaps", "pods", "leases"].contains(&info.resource)
            })
            .collect();
        let registry = Registry::new(
            Etcd3::new(channel).into(),
            KeyLayout::default(),
            kinds,
            Duration::from_secs(3600),
            true,
            metrics.clone(),
        );
        let setup = Setup {
            direct: Etcd3::new(server.channel().await),
            _server: server,
            relay,
            registry,
            metrics,
        };
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}});
        let namespaces = setup.registry.core("namespaces");
        setup
            .registry
            .create(namespaces, None, ns, false)
            .await
            .unwrap();
        // Every cache has listed, and consistent reads are on (the store reports 3.5.13).
        for resource in ["configmaps", "pods"] {
            let cache = setup.cache(resource);
            let deadline = Instant::now() + PATIENCE;
            while cache.consistent_reads(true, false) == 0 {
                assert!(
                    Instant::now() < deadline,
                    "the {resource} cache did not start"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
                setup.list(resource, &ListQuery::default()).await.unwrap();
            }
        }
        setup
    }

    /// The cache metrics of the core `resource`.
    fn cache(&self, resource: &str) -> CacheMetrics {
        self.metrics.watch_cache("", resource)
    }

    fn kind(&self, resource: &str) -> &'static dyn Strategy {
        self.registry
            .kinds()
            .iter()
            .copied()
            .find(|k| k.info().resource == resource)
            .unwrap()
    }

    /// The list as the API answers it.
    async fn list(&self, resource: &str, query: &ListQuery<'_>) -> Result<Value, Status> {
        self.registry
            .list(self.kind(resource), Some("default"), query)
            .await
            .map(|list| list.to_value())
    }

    async fn put_configmap(&self, name: &str, value: &str) -> i64 {
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"value": value},
        });
        let (written, _) = self
            .registry
            .update_or_create(
                self.kind("configmaps"),
                Some("default"),
                name,
                None,
                false,
                None,
                |_| Ok(cm.clone()),
            )
            .await
            .unwrap();
        rv(&written)
    }

    /// A write the configmaps cache never sees: the store's revision moves past it.
    async fn write_elsewhere(&self, i: u64) {
        let key = format!("/registry/secrets/default/elsewhere-{i}");
        self.direct.create(&key, b"{}".to_vec()).await.unwrap();
    }

    fn counts(&self) -> (u64, u64) {
        let c = &self.relay.counts;
        (c.range.load(Ordering::SeqCst), c.txn.load(Ordering::SeqCst))
    }
}

fn rv(object: &Value) -> i64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// The value each configmap of a list holds.
fn values(list: &Value) -> Vec<(String, String)> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let name = i["metadata"]["name"].as_str().unwrap().to_string();
            let value = i["data"]["value"].as_str().unwrap_or_default().to_string();
            (name, value)
        })
        .collect()
}

/// Writers that each write their own configmap and then list with resourceVersion unset
/// find their write, while another writer moves the store's revision on elsewhere; with the
/// store's progress notifications on time and then 300 ms late. Every list is a consistent
/// read served by the cache (none falls back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_list_contains_every_write_acknowledged_before_it() {
    const WRITERS: usize = 3;
    const ROUNDS: usize = 40;
    let setup = Arc::new(Setup::start().await);
    let probe = setup.cache("configmaps");
    for delay in [0, 300] {
        setup
            .relay
            .faults
            .progress_delay_ms
            .store(delay, Ordering::SeqCst);
        let served = probe.consistent_reads(true, false);
        let stop = Arc::new(AtomicBool::new(false));
        let elsewhere = {
            let (setup, stop) = (setup.clone(), stop.clone());
            tokio::spawn(async move {
                let mut i = delay * 1_000_000;
                while !stop.load(Ordering::SeqCst) {
                    setup.write_elsewhere(i).await;
                    i += 1;
                }
            })
        };
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            let setup = setup.clone();
            writers.push(tokio::spawn(async move {
                let name = format!("writer-{w}");
                for round in 0..ROUNDS {
                    let value = format!("{delay}-{round}");
                    let written = setup.put_configmap(&name, &value).await;
                    let list = setup
                        .list("configmaps", &ListQuery::default())
                        .await
                        .unwrap();
                    let mine = values(&list).into_iter().find(|(n, _)| *n == name);
                    assert_eq!(
                        mine,
                        Some((name.clone(), value)),
                        "delay {delay} ms: a list after the write at {written} (list at {})",
                        list["metadata"]["resourceVersion"]
                    );
                    assert!(rv(&list) >= written);
                }
            }));
        }
        for writer in writers {
            writer.await.unwrap();
        }
        stop.store(true, Ordering::SeqCst);
        elsewhere.await.unwrap();
        let reads = (WRITERS * ROUNDS) as u64;
        assert_eq!(
            probe.consistent_reads(true, false) - served,
            reads,
            "delay {delay} ms"
        );
        assert_eq!(probe.consistent_reads(true, true), 0, "delay {delay} ms");
    }
}

/// With the store's progress notifications stopped, a consistent list waits the cache's 3 s,
/// then reads the store (the right answer), counted as a fallback; a resourceVersion the
/// cache has not reached is 504 "Too large resource version" after those 3 s, for a list and
/// for a get, with kube-apiserver's Status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_progress_a_consistent_list_falls_back_and_a_newer_version_is_too_large() {
    let setup = Setup::start().await;
    let probe = setup.cache("configmaps");
    let written = setup.put_configmap("a", "1").await;
    setup
        .relay
        .faults
        .drop_progress
        .store(true, Ordering::SeqCst);
    setup.write_elsewhere(0).await;
    let (_, current) = setup.direct.get("/registry/", "").await.unwrap();
    assert!(current > written);

    let list = setup
        .list("configmaps", &ListQuery::default())
        .await
        .unwrap();
    assert_eq!(values(&list), [("a".to_string(), "1".to_string())]);
    assert_eq!(rv(&list), current, "the store's list is at its revision");
    assert_eq!(probe.consistent_reads(true, true), 1);

    let too_new = (current + 100).to_string();
    let check = |status: Status| {
        let v = serde_json::to_value(&status).unwrap();
        assert_eq!(v["code"], 504, "{v}");
        assert_eq!(v["reason"], "Timeout", "{v}");
        assert_eq!(
            v["message"],
            format!(
                "Too large resource version: {}, current: {written}",
                current + 100
            )
        );
        assert_eq!(
            v["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge"
        );
        assert_eq!(
            v["details"]["causes"][0]["message"],
            "Too large resource version"
        );
        assert_eq!(v["details"]["retryAfterSeconds"], 1);
    };
    let query = ListQuery {
        resource_version: &too_new,
        ..ListQuery::default()
    };
    check(setup.list("configmaps", &query).await.unwrap_err());
    let cm = setup.kind("configmaps");
    check(
        setup
            .registry
            .get(cm, Some("default"), "a", &too_new)
            .await
            .unwrap_err(),
    );
    // Progress again: the cache catches up with the store's revision.
    setup
        .relay
        .faults
        .drop_progress
        .store(false, Ordering::SeqCst);
    setup
        .list("configmaps", &ListQuery::default())
        .await
        .unwrap();
    assert_eq!(probe.consistent_reads(true, false), 2);
}

/// resourceVersion "0" and NotOlderThan lists, and gets with a resourceVersion, are served
/// by the cache without a store request; a consistent list with a limit is the cache's first
/// page, its continue token read from the store, as are Exact lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_serves_what_kube_apiservers_does_and_the_store_the_rest() {
    let setup = Setup::start().await;
    let probe = setup.cache("configmaps");
    let mut last = 0;
    for name in ["a", "b", "c"] {
        last = setup.put_configmap(name, name).await;
    }
    let names =
        |list: &Value| -> Vec<String> { values(list).into_iter().map(|(n, _)| n).collect() };
    // Let the cache see the last write.
    let at_last = last.to_string();
    let not_older = ListQuery {
        resource_version: &at_last,
        resource_version_match: "NotOlderThan",
        ..ListQuery::default()
    };
    setup.list("configmaps", &not_older).await.unwrap();

    let (ranges, _) = setup.counts();
    let lists = probe.lists_served("");
    let any = ListQuery {
        resource_version: "0",
        limit: 1,
        ..ListQuery::default()
    };
    let list = setup.list("configmaps", &any).await.unwrap();
    assert_eq!(
        names(&list),
        ["a", "b", "c"],
        "resourceVersion 0 ignores the limit"
    );
    setup.list("configmaps", &not_older).await.unwrap();
    let cm = setup.kind("configmaps");
    let got = setup
        .registry
        .get(cm, Some("default"), "b", "0")
        .await
        .unwrap();
    assert_eq!(got["data"]["value"], "b");
    assert_eq!(setup.counts().0, ranges, "no store request");
    assert_eq!(probe.lists_served("") - lists, 2);

    // A consistent list with a limit: the cache's page (one Range for the revision), and
    // the rest from the store by the token, at the page's revision.
    let page = ListQuery {
        limit: 2,
        ..ListQuery::default()
    };
    let first = setup.list("configmaps", &page).await.unwrap();
    assert_eq!(names(&first), ["a", "b"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 1);
    assert_eq!(probe.lists_served("") - lists, 3);
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    let (ranges, _) = setup.counts();
    let rest = ListQuery {
        limit: 2,
        continue_token: Some(&token),
        ..ListQuery::default()
    };
    let second = setup.list("configmaps", &rest).await.unwrap();
    assert_eq!(names(&second), ["c"]);
    assert_eq!(
        second["metadata"]["resourceVersion"],
        first["metadata"]["resourceVersion"]
    );
    assert_eq!(
        setup.counts().0,
        ranges + 1,
        "the continuation reads the store"
    );
    let exact = ListQuery {
        resource_version: &at_last,
        resource_version_match: "Exact",
        ..ListQuery::default()
    };
    let list = setup.list("configmaps", &exact).await.unwrap();
    assert_eq!(names(&list), ["a", "b", "c"]);
    assert_eq!(setup.counts().0, ranges + 2, "Exact reads the store");
    assert_eq!(
        probe.lists_served("") - lists,
        3,
        "neither is served by the cache"
    );
}

/// A list of the pods on one node reads them through the cache's `spec.nodeName` index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_on_a_node_are_listed_through_the_index() {
    let setup = Setup::start().await;
    let probe = setup.cache("pods");
    let mut last = 0;
    for (name, node) in [("p1", "n1"), ("p2", "n2"), ("p3", "n1")] {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        });
        let key = format!("/registry/pods/default/{name}");
        last = setup
            .direct
            .create(&key, serde_json::to_vec(&pod).unwrap())
            .await
            .unwrap();
    }
    let on_n1 = Selection {
        filter: Box::new(|pod: &Value| pod["spec"]["nodeName"] == "n1"),
        exact: vec![("spec.nodeName".into(), "n1".into())],
    };
    let at_last = last.to_string();
    let query = ListQuery {
        resource_version: &at_last,
        selection: Some(&on_n1),
        ..ListQuery::default()
    };
    let list = setup.list("pods", &query).await.unwrap();
    let names: Vec<_> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["p1", "p3"]);
    assert_eq!(probe.lists_served("f:spec.nodeName"), 1);
}

/// A lease renewal (an update of the whole object) costs one Txn: it starts from the cached
/// lease. When the cache is stale (the store's watch answers held back while another writer
/// changes the lease), the update costs a failed Txn, then applies to the stored lease (the
/// other writer's change kept); and an update naming the stale resourceVersion is refused
/// with 409, as it would be from the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_starts_from_the_cache_and_a_stale_one_never_writes_wrong() {
    let setup = Setup::start().await;
    let leases = setup.kind("leases");
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "node-1", "namespace": "default"},
        "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40},
    });
    let created = setup
        .registry
        .create(leases, Some("default"), lease, false)
        .await
        .unwrap();
    let created_rv = meta_rv(&created);
    // The cache has the lease once a read at its resourceVersion finds it.
    setup
        .registry
        .get(leases, Some("default"), "node-1", &created_rv)
        .await
        .unwrap();
    let renew = |holder: Option<&'static str>, time: &'static str| {
        move |current: Option<&Value>| -> Result<Value, Status> {
            let mut lease = current.unwrap().clone();
            lease["spec"]["renewTime"] = json!(time);
            if let Some(holder) = holder {
                lease["spec"]["holderIdentity"] = json!(holder);
            }
            Ok(lease)
        }
    };
    let before = setup.counts();
    let (renewed, _) = setup
        .registry
        .update(
            leases,
            Some("default"),
            "node-1",
            None,
            false,
            renew(None, "2024-01-01T00:00:01.000000Z"),
        )
        .await
        .unwrap();
    assert_eq!(
        setup.counts(),
        (before.0, before.1 + 1),
        "one Txn, no Range"
    );

    // The cache falls behind: another writer changes the holder meanwhile.
    setup.relay.faults.hold.store(true, Ordering::SeqCst);
    let key = "/registry/leases/default/node-1";
    let other = setup
        .direct
        .guaranteed_update(key, None, |o| {
            let mut v: Value = serde_json::from_slice(&o.value).unwrap();
            v["spec"]["holderIdentity"] = json!("other");
            Ok(serde_json::to_vec(&v).unwrap())
        })
        .await
        .unwrap();
    let before = setup.counts();
    let (updated, _) = setup
        .registry
        .update(
            leases,
            Some("default"),
            "node-1",
            None,
            false,
            renew(None, "2024-01-01T00:00:02.000000Z"),
        )
        .await
        .unwrap();
    assert_eq!(
        updated["spec"]["holderIdentity"], "other",
        "the stored lease, updated"
    );
    assert_eq!(updated["spec"]["renewTime"], "2024-01-01T00:00:02.000000Z");
    assert!(meta_rv(&updated).parse::<i64>().unwrap() > other.mod_revision);
    assert_eq!(
        setup.counts(),
        (before.0, before.1 + 2),
        "a failed Txn, then the write"
    );

    // An update naming the resourceVersion the stale cache holds is a conflict.
    let stale_rv = meta_rv(&renewed);
    let refused = setup
        .registry
        .update(leases, Some("default"), "node-1", None, false, |current| {
            let mut lease = current.unwrap().clone();
            lease["metadata"]["resourceVersion"] = json!(stale_rv);
            lease["spec"]["holderIdentity"] = json!("node-1");
            Ok(lease)
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code, 409, "{refused:?}");
    setup.relay.faults.hold.store(false, Ordering::SeqCst);
    let stored = setup.direct.get(key, "").await.unwrap().0.unwrap();
    let stored: Value = serde_json::from_slice(&stored.value).unwrap();
    assert_eq!(stored["spec"]["holderIdentity"], "other");
    assert_eq!(stored["spec"]["renewTime"], "2024-01-01T00:00:02.000000Z");
}

fn meta_rv(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}
