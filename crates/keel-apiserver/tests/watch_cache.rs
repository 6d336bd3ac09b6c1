//! The watch cache against keel store and a real etcd 3.5.1: watchers served from one store
//! watch see exactly the events a store watch of their own would (their prefix, in order,
//! after their start); a watcher that falls out of the buffer ends (`Behind::Overrun`, counted
//! in `apiserver_terminated_watchers_total`; its client's stream ends, as kube-apiserver ends
//! an unresponsive watcher) at the real limits, 8,192 events and 32 MiB of stored values, to
//! the event and to the byte, while a watcher within the buffer gets every event; a client
//! watch from before the buffer is served by a store watch of its own (every event; keel's
//! documented difference from kube-apiserver's 410 "too old resource version") and one from a
//! compacted revision gets one ERROR event with a 410 Expired Status; and the cache follows
//! the store across a restart: with its history intact it delivers every event after the
//! restart to its watchers, and when the store compacted past it while it was away it starts
//! over and ends every watcher (`Behind::Reset`). A TCP gate between the cache and the store
//! decides which of the two happens, so each case requires its one exact outcome. What a
//! writer hands over for its write is what the cache takes for exactly that write's event.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_apiserver::metrics::{CacheMetrics, Metrics};
use keel_apiserver::registry::store::Registry;
use keel_apiserver::storage::cacher::handoff::Make;
use keel_apiserver::storage::cacher::{self, Behind, CacheWatch, Cached, Cacher, Codec, Limits};
use keel_apiserver::storage::{Etcd3, Event, KeyLayout, Object};
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::{CompactionRequest, PutRequest, RequestOp, TxnRequest};
use keel_testkit::{Flavor, Server};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tonic::transport::Channel;

/// How long any awaited condition may take before the test fails: generous, since the
/// machine is shared.
const PATIENCE: Duration = Duration::from_secs(60);

/// Polls `done` until it holds, failing with `what` after [`PATIENCE`].
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A cache of lines: each event as its kind and value, each object as its value.
struct Lines;

impl Codec for Lines {
    type Event = String;
    type Object = String;

    fn event(&self, event: Event) -> String {
        describe(event)
    }

    fn object(&self, object: &Object) -> String {
        String::from_utf8_lossy(&object.value).into_owned()
    }

    fn object_of(&self, event: &String) -> String {
        event.rsplit(' ').next().unwrap_or_default().to_string()
    }

    /// The event with the object handed over in place of its value.
    fn event_with(&self, event: Event, object: &String) -> String {
        let line = describe(event);
        let (described, _) = line.rsplit_once(' ').unwrap_or_default();
        format!("{described} {object}")
    }
}

/// The cached value: the event's kind and value, as a line.
fn describe(event: Event) -> String {
    let (kind, o) = match &event {
        Event::Added(o) => ("ADDED", o),
        Event::Modified(o, _) => ("MODIFIED", o),
        Event::Deleted(o) => ("DELETED", o),
    };
    format!("{kind} {} {}", o.key, String::from_utf8_lossy(&o.value))
}

/// A cache of every configmap, started and serving (it answers a watch from the store's
/// current revision).
async fn started(storage: &Etcd3, capacity: usize) -> (Cacher<Lines>, i64, CacheMetrics) {
    started_with(
        storage,
        Limits {
            events: capacity,
            bytes: usize::MAX,
        },
    )
    .await
}

/// [`started`] with the given limits.
async fn started_with(storage: &Etcd3, limits: Limits) -> (Cacher<Lines>, i64, CacheMetrics) {
    let prefix = KeyLayout::default().collection("configmaps", None);
    let metrics = CacheMetrics::default();
    let cacher = Cacher::start(
        storage.clone(),
        prefix.clone(),
        limits,
        metrics.clone(),
        Arc::new(Lines),
    );
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (_, revision) = storage.get(&prefix, "").await.unwrap();
        if cacher.watch(&prefix, revision).is_some() {
            return (cacher, revision, metrics);
        }
        assert!(
            Instant::now() < deadline,
            "the watch cache did not start within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The next `n` events of `watch` (each as `revision line`), failing after [`PATIENCE`].
async fn take(watch: &mut CacheWatch<String>, n: usize) -> Result<Vec<String>, Behind> {
    let mut out: Vec<Arc<Cached<String>>> = Vec::new();
    while out.len() < n {
        tokio::time::timeout(PATIENCE, watch.next_batch(&mut out))
            .await
            .unwrap_or_else(|_| panic!("{} of {n} events within {PATIENCE:?}", out.len()))?;
    }
    Ok(out
        .iter()
        .map(|e| format!("{} {}", e.revision, e.value))
        .collect())
}

fn key(namespace: &str, name: &str) -> String {
    KeyLayout::default().object("configmaps", Some(namespace), name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_share_one_store_watch_and_each_sees_its_own_prefix_in_order() {
    for flavor in [Flavor::Keel, Flavor::Etcd] {
        let server = Server::start(flavor);
        let storage = Etcd3::new(server.channel().await);
        let (cacher, start, _) = started(&storage, 64).await;
        let layout = KeyLayout::default();
        let all = layout.collection("configmaps", None);
        let ns_a = layout.collection("configmaps", Some("a"));
        let mut everything = cacher.watch(&all, start).unwrap();
        let mut only_a = cacher.watch(&ns_a, start).unwrap();

        let a1 = storage.create(&key("a", "x"), b"1".to_vec()).await.unwrap();
        let b1 = storage.create(&key("b", "x"), b"1".to_vec()).await.unwrap();
        let a2 = storage
            .guaranteed_update(&key("a", "x"), None, |_| Ok(b"2".to_vec()))
            .await
            .unwrap()
            .mod_revision;
        // Not a configmap: never seen.
        storage
            .create(&layout.object("secrets", Some("a"), "x"), vec![])
            .await
            .unwrap();
        let a3 = storage
            .delete(&key("a", "x"), None, |_| Ok(()))
            .await
            .unwrap();
        let a3 = a3.mod_revision;

        let ka = key("a", "x");
        let kb = key("b", "x");
        assert_eq!(
            take(&mut everything, 4).await.unwrap(),
            [
                format!("{a1} ADDED {ka} 1"),
                format!("{b1} ADDED {kb} 1"),
                format!("{a2} MODIFIED {ka} 2"),
                format!("{a3} DELETED {ka} 2"),
            ],
            "{flavor:?}"
        );
        // What a bookmark may say: everything up to the last event read was handed out.
        assert_eq!(everything.progress(), a3, "{flavor:?}");
        assert_eq!(
            take(&mut only_a, 3).await.unwrap(),
            [
                format!("{a1} ADDED {ka} 1"),
                format!("{a2} MODIFIED {ka} 2"),
                format!("{a3} DELETED {ka} 2"),
            ],
            "{flavor:?}"
        );
        // A watch from a resourceVersion in the buffer starts after it.
        let mut from_b1 = cacher.watch(&all, b1).unwrap();
        assert_eq!(
            take(&mut from_b1, 2).await.unwrap(),
            [
                format!("{a2} MODIFIED {ka} 2"),
                format!("{a3} DELETED {ka} 2")
            ],
            "{flavor:?}"
        );
        // A watch from before the cache started is not the cache's to serve.
        assert!(cacher.watch(&all, start - 1).is_none(), "{flavor:?}");
        // A stopped cache ends its watchers and serves no new watch.
        let mut open = cacher.watch(&all, a3).unwrap();
        drop(cacher);
        let ended = tokio::time::timeout(PATIENCE, take(&mut open, 1)).await;
        assert_eq!(ended.expect("the watcher ends"), Err(Behind::Reset));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_takes_what_a_writer_handed_over_for_exactly_its_write() {
    fn made(label: &'static str) -> Make<String> {
        Box::new(move |revision| format!("{label}@{revision}"))
    }
    for flavor in [Flavor::Keel, Flavor::Etcd] {
        let server = Server::start(flavor);
        let storage = Etcd3::new(server.channel().await);
        let (cacher, start, _) = started(&storage, 64).await;
        let all = KeyLayout::default().collection("configmaps", None);
        let mut watch = cacher.watch(&all, start).unwrap();
        let (k, other) = (key("a", "x"), key("a", "y"));
        let update = |value: &'static [u8]| {
            let storage = storage.clone();
            let k = k.clone();
            async move {
                let stored = storage.guaranteed_update(&k, None, |_| Ok(value.to_vec()));
                stored.await.unwrap().mod_revision
            }
        };

        // Offered before the write, landed after it: taken, made at the event's revision.
        let mut handover = cacher.handover(&k);
        handover.offer(b"1", made("one"));
        let r1 = storage.create(&k, b"1".to_vec()).await.unwrap();
        handover.landed(r1);
        // Other bytes than the ones offered: decoded, and the offer dropped once the cache
        // has passed the revision it landed at.
        let mut handover = cacher.handover(&k);
        handover.offer(b"2", made("two"));
        let r2 = update(b"3").await;
        handover.landed(r2);
        assert_eq!(
            take(&mut watch, 2).await.unwrap(),
            [
                format!("{r1} ADDED {k} one@{r1}"),
                format!("{r2} MODIFIED {k} 3"),
            ],
            "{flavor:?}"
        );
        assert_eq!(cacher.handed_over(), 0, "{flavor:?}");

        // The same bytes offered for another key: decoded.
        let mut elsewhere = cacher.handover(&other);
        elsewhere.offer(b"4", made("elsewhere"));
        let r3 = update(b"4").await;
        // Taken whether or not its writer has heard where it landed.
        let mut handover = cacher.handover(&k);
        handover.offer(b"5", made("five"));
        let r4 = update(b"5").await;
        assert_eq!(
            take(&mut watch, 2).await.unwrap(),
            [
                format!("{r3} MODIFIED {k} 4"),
                format!("{r4} MODIFIED {k} five@{r4}"),
            ],
            "{flavor:?}"
        );
        assert_eq!(cacher.existing(&k).unwrap().1, format!("five@{r4}"));
        handover.landed(r4);
        // A writer that ends without saying where it landed withdraws its offer.
        assert_eq!(cacher.handed_over(), 1, "{flavor:?}");
        drop(elsewhere);
        assert_eq!(cacher.handed_over(), 0, "{flavor:?}");

        // An offer landing where the cache has passed goes at once.
        let mut handover = cacher.handover(&k);
        handover.offer(b"6", made("six"));
        let r5 = update(b"7").await;
        let seen = take(&mut watch, 1).await.unwrap();
        assert_eq!(seen, [format!("{r5} MODIFIED {k} 7")], "{flavor:?}");
        assert_eq!(cacher.handed_over(), 1, "{flavor:?}");
        handover.landed(r5);
        assert_eq!(cacher.handed_over(), 0, "{flavor:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_falls_out_of_the_buffer_ends() {
    let server = Server::start(Flavor::Keel);
    let storage = Etcd3::new(server.channel().await);
    let (cacher, start, metrics) = started(&storage, 4).await;
    assert_eq!(metrics.initializations.get(), 1);
    let all = KeyLayout::default().collection("configmaps", None);
    let mut slow = cacher.watch(&all, start).unwrap();
    let mut last = 0;
    for i in 0..6 {
        last = storage
            .create(&key("a", &format!("x{i}")), vec![])
            .await
            .unwrap();
    }
    // A watcher that keeps up sees the last event; the slow one then finds its first
    // events gone.
    let mut recent = cacher.watch(&all, last - 1).unwrap();
    assert_eq!(take(&mut recent, 1).await.unwrap().len(), 1);
    assert_eq!(take(&mut slow, 6).await, Err(Behind::Overrun));
    assert_eq!(metrics.terminated_watchers.get(), 1);
    assert_eq!(metrics.received.get(), 6);
    assert_eq!(metrics.resource_version.get(), last);
    assert!(
        cacher.watch(&all, start).is_none(),
        "history left the buffer"
    );
    assert!(cacher.watch(&all, last - 4).is_some());
}

/// A TCP relay between the cache and a store that the test opens and closes: closed, it cuts
/// every relayed connection and drops new ones as they arrive, so the cache cannot reach the
/// store until it opens again.
struct Gate {
    url: String,
    open: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Gate {
    async fn new(store: &str) -> Gate {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (open, opened) = watch::channel(true);
        let store = store.to_string();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                if !*opened.borrow() {
                    continue;
                }
                let mut opened = opened.clone();
                let store = store.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(&store).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = opened.wait_for(|open| !*open) => {}
                    }
                });
            }
        });
        Gate { url, open, task }
    }

    /// A channel to the store through the gate (connected when first used).
    fn channel(&self) -> Channel {
        Channel::from_shared(self.url.clone())
            .unwrap()
            .connect_timeout(Duration::from_secs(5))
            .connect_lazy()
    }

    fn set_open(&self, open: bool) {
        self.open.send_replace(open);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The cache follows the store across a restart of the store, in the one way its history
/// allows: while the cache is cut off from it (a closed [`Gate`]), the store is killed,
/// restarted and written to. With the store's history intact, the cache resumes from the last
/// revision it reflected and its watcher gets every event, in order, without a restart of the
/// cache. When the store compacted past that revision meanwhile, the cache starts over from
/// the store's revision (a second initialization) and its watcher ends with
/// [`Behind::Reset`] after the events it had (its client watches again), not counted as a
/// terminated watcher. Either way a watch from the last write is served afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_follows_a_restarted_store_without_a_gap() {
    for flavor in [Flavor::Keel, Flavor::Etcd] {
        for compact in [false, true] {
            let case = format!("{flavor:?}, compact={compact}");
            let mut server = Server::start(flavor);
            let gate = Gate::new(&server.endpoint).await;
            let storage = Etcd3::new(gate.channel());
            let (cacher, start, metrics) = started(&storage, 1024).await;
            let all = KeyLayout::default().collection("configmaps", None);
            let mut watch = cacher.watch(&all, start).unwrap();
            let before = storage.create(&key("a", "before"), vec![]).await.unwrap();
            let revisions = |lines: &[String]| -> Vec<i64> {
                lines
                    .iter()
                    .map(|l| l.split(' ').next().unwrap().parse().unwrap())
                    .collect()
            };
            // The cache reflected `before` when its watcher has it.
            assert_eq!(revisions(&take(&mut watch, 1).await.unwrap()), [before]);

            gate.set_open(false);
            server.kill();
            server.restart();
            let direct = Etcd3::new(server.channel().await);
            let mut written = Vec::new();
            for i in 0..3 {
                let name = format!("after{i}");
                written.push(direct.create(&key("a", &name), vec![]).await.unwrap());
            }
            if compact {
                KvClient::new(server.channel().await)
                    .compact(CompactionRequest {
                        revision: *written.last().unwrap(),
                        physical: true,
                    })
                    .await
                    .unwrap();
                let name = "after compaction";
                written.push(direct.create(&key("a", name), vec![]).await.unwrap());
            }
            gate.set_open(true);

            let got = take(&mut watch, written.len()).await;
            if compact {
                assert_eq!(got, Err(Behind::Reset), "{case}");
                wait_for(&format!("{case}: the cache starts over"), || {
                    metrics.initializations.get() == 2
                })
                .await;
            } else {
                assert_eq!(revisions(&got.unwrap()), written, "{case}");
                assert_eq!(metrics.initializations.get(), 1, "{case}");
            }
            assert_eq!(metrics.terminated_watchers.get(), 0, "{case}");

            let last = *written.last().unwrap();
            let mut again = cacher
                .watch(&all, last)
                .expect("a watch from the last write");
            let next = direct.create(&key("a", "next"), vec![]).await.unwrap();
            assert_eq!(
                revisions(&take(&mut again, 1).await.unwrap()),
                [next],
                "{case}"
            );
        }
    }
}

/// Puts `(key, value)` pairs in txns of at most 128 (etcd's limit), each txn one revision;
/// the revision of each pair, in order.
async fn put_all(kv: &mut KvClient<Channel>, pairs: &[(String, Vec<u8>)]) -> Vec<i64> {
    let mut revisions = Vec::new();
    for chunk in pairs.chunks(128) {
        let success = chunk
            .iter()
            .map(|(key, value)| RequestOp {
                request: Some(Request::RequestPut(PutRequest {
                    key: key.clone().into_bytes(),
                    value: value.clone(),
                    ..Default::default()
                })),
            })
            .collect();
        let resp = kv
            .txn(TxnRequest {
                success,
                ..Default::default()
            })
            .await
            .expect("txn of puts")
            .into_inner();
        let revision = resp.header.unwrap().revision;
        revisions.extend(std::iter::repeat_n(revision, chunk.len()));
    }
    revisions
}

/// A kv client that takes large answers.
async fn kv_client(server: &Server) -> KvClient<Channel> {
    KvClient::new(server.channel().await).max_decoding_message_size(64 << 20)
}

/// The buffer holds exactly 8,192 events: a watcher that has not read since its start
/// still gets all of 8,192 events, and one that has not read when the 8,193rd arrives ends
/// (counted as terminated) while a watcher that keeps up gets it; the buffer then serves
/// watches from the first event's revision on and none from before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_buffer_holds_8192_events() {
    assert_eq!(cacher::LIMITS.events, 8192);
    for flavor in [Flavor::Keel, Flavor::Etcd] {
        let server = Server::start(flavor);
        let storage = Etcd3::new(server.channel().await);
        let mut kv = kv_client(&server).await;
        let (cacher, start, metrics) = started_with(&storage, cacher::LIMITS).await;
        let all = KeyLayout::default().collection("configmaps", None);
        let mut reader = cacher.watch(&all, start).unwrap();
        let mut idle = cacher.watch(&all, start).unwrap();

        let pairs: Vec<(String, Vec<u8>)> = (0..8192)
            .map(|i| (key("a", &format!("cm-{i:05}")), b"v".to_vec()))
            .collect();
        let revisions = put_all(&mut kv, &pairs).await;
        let expected: Vec<String> = pairs
            .iter()
            .zip(&revisions)
            .map(|((k, _), r)| format!("{r} ADDED {k} v"))
            .collect();
        // A watcher 8,192 events behind is still within the buffer.
        assert!(
            take(&mut reader, 8192).await.unwrap() == expected,
            "{flavor:?}"
        );
        assert!(cacher.watch(&all, start).is_some(), "{flavor:?}");

        let one_more = storage.create(&key("b", "one-more"), vec![]).await.unwrap();
        let got = take(&mut reader, 1).await.unwrap();
        assert_eq!(got, [format!("{one_more} ADDED {} ", key("b", "one-more"))]);
        assert_eq!(take(&mut idle, 1).await, Err(Behind::Overrun), "{flavor:?}");
        assert_eq!(metrics.terminated_watchers.get(), 1, "{flavor:?}");
        assert_eq!(metrics.received.get(), 8193, "{flavor:?}");
        assert!(cacher.watch(&all, start).is_none(), "{flavor:?}");
        assert!(cacher.watch(&all, revisions[0]).is_some(), "{flavor:?}");
    }
}

/// The buffer holds at most 32 MiB of stored values, an event weighing its value and, for an
/// update, the value before it: 16 creates and 8 updates of 1 MiB values fill it exactly and
/// a watcher that has not read since its start still gets them all; one byte more and a
/// watcher that has not read ends (after 25 events, far from the event limit) while a watcher
/// that keeps up gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_buffer_holds_32_mib_of_values() {
    const MIB: usize = 1 << 20;
    assert_eq!(cacher::LIMITS.bytes, 32 * MIB);
    for flavor in [Flavor::Keel, Flavor::Etcd] {
        let server = Server::start(flavor);
        let storage = Etcd3::new(server.channel().await);
        let mut kv = kv_client(&server).await;
        let (cacher, start, metrics) = started_with(&storage, cacher::LIMITS).await;
        let all = KeyLayout::default().collection("configmaps", None);
        let mut reader = cacher.watch(&all, start).unwrap();
        let mut idle = cacher.watch(&all, start).unwrap();

        let mut first = None;
        for i in 0..24 {
            // Creates weigh 1 MiB, updates 2 MiB (the new value and the one before).
            let name = format!("big-{}", i % 16);
            let value = vec![b'a' + (i / 16) as u8; MIB];
            let revision = put_all(&mut kv, &[(key("a", &name), value)]).await[0];
            first.get_or_insert(revision);
        }
        let got = take(&mut reader, 24).await.unwrap();
        let kinds: Vec<&str> = got.iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
        assert_eq!(kinds[..16], ["ADDED"; 16], "{flavor:?}");
        assert_eq!(kinds[16..], ["MODIFIED"; 8], "{flavor:?}");
        assert!(
            cacher.watch(&all, start).is_some(),
            "{flavor:?}: exactly 32 MiB fits"
        );

        let one_byte = storage.create(&key("b", "x"), b"x".to_vec()).await.unwrap();
        let got = take(&mut reader, 1).await.unwrap();
        assert_eq!(got, [format!("{one_byte} ADDED {} x", key("b", "x"))]);
        assert_eq!(take(&mut idle, 1).await, Err(Behind::Overrun), "{flavor:?}");
        assert_eq!(metrics.terminated_watchers.get(), 1, "{flavor:?}");
        assert!(cacher.watch(&all, start).is_none(), "{flavor:?}");
        assert!(cacher.watch(&all, first.unwrap()).is_some(), "{flavor:?}");
    }
}

/// A configmap as kube-apiserver stores it.
fn configmap(namespace: &str, name: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")},
        "data": {"k": "v"},
    }))
    .unwrap()
}

/// The value of the series `name{group="",resource="configmaps"}` in `metrics`' text.
fn configmaps_series(metrics: &Metrics, name: &str) -> Option<f64> {
    let series = format!("{name}{{group=\"\",resource=\"configmaps\"}} ");
    metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(&series)?.trim().parse().ok())
}

/// What API clients see, through the registry's watch of configmaps with the real limits:
/// a client that keeps up while more than 8,192 events are written gets every one; a client
/// that does not read meanwhile has its stream ended (no error event, as kube-apiserver ends
/// an unresponsive watcher), counted in `apiserver_terminated_watchers_total`; a watch from
/// the start, now before the buffer, is served by a store watch of its own with every event;
/// one from within the buffer gets exactly the events after it; and after the store compacted
/// past the start, a watch from it gets one ERROR event, 410 Expired, and ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_falls_out_of_the_buffer_is_ended_and_one_within_it_gets_everything() {
    const EVENTS: usize = 8_192 + 500;
    for flavor in [Flavor::Keel, Flavor::Etcd] {
        let server = Server::start(flavor);
        let storage = Etcd3::new(server.channel().await);
        let mut kv = kv_client(&server).await;
        let metrics = Arc::new(Metrics::new());
        let kinds = keel_apiserver::registry::kinds()
            .into_iter()
            .filter(|k| k.info().resource == "configmaps")
            .collect();
        let registry = Registry::new(
            storage.clone().into(),
            KeyLayout::default(),
            kinds,
            Duration::from_secs(3600),
            true,
            metrics.clone(),
        );
        let cm = registry.core("configmaps");
        wait_for(&format!("{flavor:?}: the configmaps cache starts"), || {
            configmaps_series(&metrics, "apiserver_watch_cache_initializations_total") == Some(1.0)
        })
        .await;
        let (_, start) = storage.get(&key("a", "none"), "").await.unwrap();
        let start_rv = start.to_string();
        let mut keeping_up = registry.watch(cm, None, &start_rv, None).await.unwrap();
        let mut not_reading = registry.watch(cm, None, &start_rv, None).await.unwrap();

        // (name, resourceVersion) of every event, in order.
        let mut written: Vec<(String, String)> = Vec::new();
        let mut seen: Vec<(String, String)> = Vec::new();
        let describe = |events: Vec<keel_apiserver::registry::watching::WatchEvent>| {
            events
                .into_iter()
                .map(|e| {
                    assert_eq!(e.kind, "ADDED");
                    let meta = &e.object["metadata"];
                    (
                        meta["name"].as_str().unwrap().to_string(),
                        meta["resourceVersion"].as_str().unwrap().to_string(),
                    )
                })
                .collect::<Vec<_>>()
        };
        for chunk in 0..EVENTS.div_ceil(100) {
            let names: Vec<String> = (chunk * 100..(chunk * 100 + 100).min(EVENTS))
                .map(|i| format!("cm-{i:05}"))
                .collect();
            let pairs: Vec<(String, Vec<u8>)> = names
                .iter()
                .map(|n| (key("a", n), configmap("a", n)))
                .collect();
            let revisions = put_all(&mut kv, &pairs).await;
            written.extend(
                names
                    .into_iter()
                    .zip(revisions.iter().map(|r| r.to_string())),
            );
            // Keep up: at most one txn behind, far within the buffer.
            while seen.len() < written.len() {
                let batch = tokio::time::timeout(PATIENCE, keeping_up.next_batch())
                    .await
                    .expect("events within the patience")
                    .expect("the watch goes on")
                    .expect("no error");
                seen.extend(describe(batch));
            }
        }
        assert!(seen == written, "{flavor:?}: the watcher that kept up");

        let ended = tokio::time::timeout(PATIENCE, not_reading.next_batch())
            .await
            .expect("the stream ends within the patience");
        assert!(
            ended.is_none(),
            "{flavor:?}: the stream ends, without an event"
        );
        assert_eq!(
            configmaps_series(&metrics, "apiserver_terminated_watchers_total"),
            Some(1.0),
            "{flavor:?}"
        );

        let read = |mut watching: keel_apiserver::registry::watching::Watching, n: usize| async move {
            let mut got = Vec::new();
            while got.len() < n {
                let batch = tokio::time::timeout(PATIENCE, watching.next_batch())
                    .await
                    .expect("events within the patience")
                    .expect("the watch goes on")
                    .expect("no error");
                got.extend(describe(batch));
            }
            got
        };
        let from_start = registry.watch(cm, None, &start_rv, None).await.unwrap();
        assert!(
            read(from_start, EVENTS).await == written,
            "{flavor:?}: a watch from before the buffer"
        );
        let recent_rv = &written[EVENTS - 150].1;
        let recent = registry.watch(cm, None, recent_rv, None).await.unwrap();
        let after: Vec<_> = written
            .iter()
            .filter(|(_, rv)| rv.parse::<i64>().unwrap() > recent_rv.parse::<i64>().unwrap())
            .cloned()
            .collect();
        assert!(
            read(recent, after.len()).await == after,
            "{flavor:?}: a watch from within the buffer"
        );

        kv.compact(CompactionRequest {
            revision: start + 2,
            physical: true,
        })
        .await
        .unwrap();
        let mut compacted = registry.watch(cm, None, &start_rv, None).await.unwrap();
        let error = tokio::time::timeout(PATIENCE, compacted.next_batch())
            .await
            .expect("an answer within the patience")
            .expect("an ERROR event")
            .expect_err("a 410 Status");
        assert_eq!(
            (error.code, error.reason, error.message.as_str()),
            (
                410,
                "Expired",
                "The resourceVersion for the provided watch is too old."
            ),
            "{flavor:?}"
        );
        assert!(compacted.next_batch().await.is_none(), "{flavor:?}");
    }
}
