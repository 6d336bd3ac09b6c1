//! A follower that falls behind the leader's purged log (frozen with SIGSTOP while the others
//! take 600 writes with a snapshot every 100 entries) catches up when it runs again: on keel
//! from a snapshot the leader streams, swapped in under a live watcher, which still receives
//! every event exactly once and in order. Every member ends with the same HashKV.
//!
//! Runs against keel (default) or a real etcd 3.5 cluster (`KEEL_TEST_TARGET=etcd`; etcd 3.5
//! keeps 5,000 entries for slow followers, so it catches up from its log instead).

use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::WatchCreateRequest;
use keel_testkit::kv::{assert_same_hashkv, keys, leader_of, put, watch};
use keel_testkit::{Cluster, Flavor, Server, target_flavor};
use tokio_stream::StreamExt;

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_the_purged_log_catches_up_and_its_watcher_misses_nothing() {
    let flavor = target_flavor();
    let cluster = Cluster::start(flavor, 3, &["--snapshot-count=100"]);
    let leader_id = leader_of(&cluster.members[0]).await.expect("a leader");
    let mut follower = None;
    let mut leader = None;
    for (i, m) in cluster.members.iter().enumerate() {
        if m.ids().await.1 == leader_id {
            leader = Some(i);
        } else {
            follower = Some(i);
        }
    }
    let (leader, follower) = (leader.unwrap(), follower.unwrap());
    let (l, f): (&Server, &Server) = (&cluster.members[leader], &cluster.members[follower]);

    // A watcher on the follower, on every key under k/.
    let create = WatchCreateRequest {
        key: b"k/".to_vec(),
        range_end: b"k0".to_vec(),
        ..Default::default()
    };
    let (tx, mut watch) = watch(f.channel().await, create, false)
        .await
        .expect("watch on the follower");
    let created = watch.next().await.unwrap().unwrap();
    assert!(created.created);

    let mut revisions = Vec::new();
    for i in 0..10 {
        revisions.push(put(l, &format!("k/{i:04}")).await.unwrap());
    }
    f.pause();
    for i in 10..610 {
        revisions.push(put(l, &format!("k/{i:04}")).await.unwrap());
    }
    f.resume();

    let mut seen = Vec::new();
    let deadline = Instant::now() + LIMIT;
    while seen.len() < revisions.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let resp = tokio::time::timeout(left, watch.next())
            .await
            .unwrap_or_else(|_| panic!("{} of {} events in time", seen.len(), revisions.len()))
            .expect("the watch stream is open")
            .expect("no watch error");
        assert!(!resp.canceled, "watch canceled: {}", resp.cancel_reason);
        seen.extend(
            resp.events
                .iter()
                .map(|e| e.kv.as_ref().unwrap().mod_revision),
        );
    }
    assert_eq!(seen, revisions, "every event once, in order");
    assert_eq!(keys(f, true).await.unwrap().len(), 610);
    if flavor == Flavor::Keel {
        assert!(
            f.log().contains("installed a snapshot from the leader"),
            "the follower caught up from a snapshot"
        );
    }
    drop(tx);
    let all: Vec<&Server> = cluster.members.iter().collect();
    assert_same_hashkv(&all, LIMIT).await;
}
