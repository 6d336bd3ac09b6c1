//! A three-member cluster: static bootstrap, writes through any member (followers forward to
//! the leader), linearizable reads on every member, and the leader killed with SIGKILL under
//! writes: a new leader is elected, no acknowledged write is lost, the old leader catches up
//! after a restart and every member ends with the same HashKV at the same revision.
//!
//! Runs against keel (default) or a real etcd 3.5 cluster (`KEEL_TEST_TARGET=etcd`).

mod common;

use std::time::{Duration, Instant};

use common::{Cluster, Server, target_flavor};
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::{HashKvRequest, PutRequest, RangeRequest, StatusRequest};

/// How long the cluster may take to elect a new leader and accept a write after the kill (the
/// election timeout is 1 s; the measured time is printed).
const FAILOVER_LIMIT: Duration = Duration::from_secs(15);

async fn leader_of(m: &Server) -> Option<u64> {
    let mut c = MaintenanceClient::new(m.channel().await);
    let st = c.status(StatusRequest {}).await.ok()?.into_inner();
    (st.leader != 0).then_some(st.leader)
}

async fn put(m: &Server, key: &str) -> Result<i64, tonic::Status> {
    let mut kv = KvClient::new(m.channel().await);
    let resp = kv
        .put(PutRequest {
            key: key.as_bytes().to_vec(),
            value: format!("v-{key}").into_bytes(),
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok(resp.header.expect("put header").revision)
}

/// Every key under `k/` as `(key, value)`, read on `m`.
async fn keys(m: &Server, serializable: bool) -> Result<Vec<(String, String)>, tonic::Status> {
    let mut kv = KvClient::new(m.channel().await);
    let resp = kv
        .range(RangeRequest {
            key: b"k/".to_vec(),
            range_end: b"k0".to_vec(),
            serializable,
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok(resp
        .kvs
        .into_iter()
        .map(|kv| {
            (
                String::from_utf8(kv.key).unwrap(),
                String::from_utf8(kv.value).unwrap(),
            )
        })
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_replicate_forward_and_survive_a_leader_kill() {
    let flavor = target_flavor();
    let mut cluster = Cluster::start(flavor, 3, &[]);

    // One leader, seen by every member.
    let mut leaders = Vec::new();
    for m in &cluster.members {
        leaders.push(leader_of(m).await.expect("a leader after start"));
    }
    assert!(leaders.iter().all(|l| *l == leaders[0]), "{leaders:?}");
    let (_, first_id) = cluster.members[0].ids().await;
    let mut leader = None;
    for (i, m) in cluster.members.iter().enumerate() {
        if m.ids().await.1 == leaders[0] {
            leader = Some(i);
        }
    }
    let leader = leader.unwrap_or_else(|| panic!("leader {:x} is not a member", leaders[0]));
    assert_ne!(first_id, 0);

    // Writes through every member, followers included; each read back linearizably on
    // another member right after it is acknowledged.
    let mut acknowledged = Vec::new();
    let mut last_rev = 0;
    for i in 0..30 {
        let key = format!("k/{i:03}");
        let m = &cluster.members[i % 3];
        let rev = put(m, &key)
            .await
            .unwrap_or_else(|e| panic!("put via m{}: {e}", i % 3));
        assert!(rev > last_rev, "revisions grow: {rev} after {last_rev}");
        last_rev = rev;
        acknowledged.push(key.clone());
        let reader = &cluster.members[(i + 1) % 3];
        let seen = keys(reader, false).await.expect("linearizable read");
        assert!(
            seen.iter().any(|(k, _)| *k == key),
            "m{} did not see {key} acknowledged by m{}",
            (i + 1) % 3,
            i % 3
        );
    }

    // Kill the leader; the others elect a new one and keep accepting writes.
    cluster.members[leader].kill();
    let survivors: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let killed = Instant::now();
    let mut n = 30;
    loop {
        let key = format!("k/{n:03}");
        let m = &cluster.members[survivors[n % 2]];
        match tokio::time::timeout(Duration::from_secs(3), put(m, &key)).await {
            Ok(Ok(_)) => {
                acknowledged.push(key);
                n += 1;
                break;
            }
            _ if killed.elapsed() < FAILOVER_LIMIT => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("no write accepted {FAILOVER_LIMIT:?} after the kill: {other:?}"),
        }
    }
    eprintln!(
        "{}: first write accepted {:?} after the leader was killed",
        flavor.name(),
        killed.elapsed()
    );
    for _ in 0..30 {
        let key = format!("k/{n:03}");
        put(&cluster.members[survivors[n % 2]], &key)
            .await
            .unwrap_or_else(|e| panic!("put {key} after failover: {e}"));
        acknowledged.push(key);
        n += 1;
    }

    // The old leader comes back and catches up; every acknowledged write is everywhere.
    cluster.members[leader].restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    for (i, m) in cluster.members.iter().enumerate() {
        loop {
            let seen = keys(m, false).await;
            let got: Vec<String> = seen
                .as_ref()
                .map(|s| s.iter().map(|(k, _)| k.clone()).collect())
                .unwrap_or_default();
            if got == acknowledged {
                assert!(
                    seen.unwrap().iter().all(|(k, v)| *v == format!("v-{k}")),
                    "values on m{i}"
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "m{i} has {} of {} acknowledged keys ({seen:?})",
                got.len(),
                acknowledged.len()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // Same data at the same revision: HashKV agrees on every member.
    let mut hashes = Vec::new();
    let mut revision = 0;
    for m in &cluster.members {
        let mut c = MaintenanceClient::new(m.channel().await);
        let st = c.status(StatusRequest {}).await.unwrap().into_inner();
        revision = revision.max(st.header.unwrap().revision);
    }
    for m in &cluster.members {
        let mut c = MaintenanceClient::new(m.channel().await);
        let h = c
            .hash_kv(HashKvRequest { revision })
            .await
            .unwrap()
            .into_inner();
        hashes.push((h.hash, h.compact_revision));
    }
    assert!(hashes.iter().all(|h| *h == hashes[0]), "{hashes:?}");
}
