//! The watch cache against keel store and a real etcd 3.5.1: watchers served from one store
//! watch see exactly the events a store watch of their own would (their prefix, in order,
//! after their start), a watcher that falls out of the buffer or starts before it is told
//! so, and the cache follows the store across a restart without a silent gap.

use std::sync::Arc;
use std::time::Duration;

use keel_apiserver::metrics::CacheMetrics;
use keel_apiserver::storage::cacher::{Behind, CacheWatch, Cached, Cacher, Limits};
use keel_apiserver::storage::{Etcd3, Event, KeyLayout};
use keel_proto::etcdserverpb::CompactionRequest;
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_testkit::{Flavor, Server};

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
async fn started(storage: &Etcd3, capacity: usize) -> (Cacher<String>, i64, CacheMetrics) {
    let prefix = KeyLayout::default().collection("configmaps", None);
    let metrics = CacheMetrics::default();
    let limits = Limits {
        events: capacity,
        bytes: usize::MAX,
    };
    let cacher = Cacher::start(
        storage.clone(),
        prefix.clone(),
        limits,
        metrics.clone(),
        describe,
    );
    for _ in 0..200 {
        let (_, revision) = storage.get(&prefix, "").await.unwrap();
        if cacher.watch(&prefix, revision).is_some() {
            return (cacher, revision, metrics);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the watch cache did not start");
}

/// The next `n` events of `watch` (each as `revision line`), failing after 10 s.
async fn take(watch: &mut CacheWatch<String>, n: usize) -> Result<Vec<String>, Behind> {
    let mut out: Vec<Arc<Cached<String>>> = Vec::new();
    while out.len() < n {
        tokio::time::timeout(Duration::from_secs(10), watch.next_batch(&mut out))
            .await
            .expect("events within 10 s")?;
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
            .guaranteed_update(&key("a", "x"), |_| Ok(b"2".to_vec()))
            .await
            .unwrap()
            .mod_revision;
        // Not a configmap: never seen.
        storage
            .create(&layout.object("secrets", Some("a"), "x"), vec![])
            .await
            .unwrap();
        let a3 = storage.delete(&key("a", "x"), |_| Ok(())).await.unwrap();
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
        let ended = tokio::time::timeout(Duration::from_secs(10), take(&mut open, 1)).await;
        assert_eq!(ended.expect("the watcher ends"), Err(Behind::Reset));
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

/// The cache follows the store across a restart of the store: a watcher sees every event
/// after its start in order, or ends (when the store compacted past the cache while it was
/// down); it never skips one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_follows_a_restarted_store_without_a_gap() {
    for compact in [false, true] {
        let mut server = Server::start(Flavor::Keel);
        let storage = Etcd3::new(server.channel().await);
        let (cacher, start, _) = started(&storage, 1024).await;
        let all = KeyLayout::default().collection("configmaps", None);
        let mut watch = cacher.watch(&all, start).unwrap();
        let mut written = Vec::new();
        written.push(storage.create(&key("a", "before"), vec![]).await.unwrap());
        server.kill();
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.restart();
        let storage = Etcd3::new(server.channel().await);
        for i in 0..3 {
            let name = format!("after{i}");
            written.push(storage.create(&key("a", &name), vec![]).await.unwrap());
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
            written.push(storage.create(&key("a", name), vec![]).await.unwrap());
        }
        let revisions = |lines: &[String]| -> Vec<i64> {
            lines
                .iter()
                .map(|l| l.split(' ').next().unwrap().parse().unwrap())
                .collect()
        };
        match take(&mut watch, written.len()).await {
            Ok(lines) => assert_eq!(revisions(&lines), written, "compact={compact}"),
            Err(behind) => assert!(
                compact && behind == Behind::Reset,
                "a watcher ended ({behind:?}) with compact={compact}"
            ),
        }
        // Whatever happened, a watch from the last write is served once the cache is back.
        let last = *written.last().unwrap();
        let mut again = None;
        for _ in 0..300 {
            again = cacher.watch(&all, last);
            if again.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut again = again.expect("the cache serves again");
        let next = storage.create(&key("a", "next"), vec![]).await.unwrap();
        assert_eq!(revisions(&take(&mut again, 1).await.unwrap()), [next]);
    }
}
