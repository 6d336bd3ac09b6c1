//! Leases used through a follower of a 3-member cluster, with the real etcdctl and the gRPC
//! client, as etcd serves them (it forwards keepalives and TimeToLive to its leader):
//!
//! - a lease kept alive only through a follower (`etcdctl lease keep-alive`) for 3x its TTL
//!   keeps its key, and LeaseLeases lists it on every member;
//! - TimeToLive through a follower right after a renewal reports the renewed TTL, as the
//!   leader does (`etcdctl lease timetolive --keys`);
//! - a lease kept alive through a follower survives the leader's kill (the follower forwards
//!   to the new leader);
//! - an unknown lease through a follower: a keepalive answers TTL 0 (etcdctl `lease keep-alive
//!   --once`: "etcdserver: requested lease not found"), TimeToLive TTL -1 ("already
//!   expired");
//! - with the other two members stopped, a keepalive ends with `etcdserver: no leader`, and a
//!   watch stream opened with `hasleader=true` ends with that error (Unavailable) within a
//!   few election timeouts.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::lease_client::LeaseClient;
use keel_proto::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseLeasesRequest, LeaseTimeToLiveRequest,
    PutRequest, RangeRequest, WatchCreateRequest,
};
use keel_testkit::kv::{agreed_leader, watch};
use keel_testkit::{Cluster, CtlVersion, Server, etcdctl, etcdctl_command, target_flavor, wait};
use tokio_stream::StreamExt;

/// How long a 3-member cluster may take to agree on a leader.
const ELECTION_LIMIT: Duration = Duration::from_secs(15);

/// Grants a lease of `ttl` seconds through `m` and puts `key` with it; the lease ID.
async fn leased_key(m: &Server, ttl: i64, key: &str) -> i64 {
    let mut leases = LeaseClient::new(m.channel().await);
    let id = leases
        .lease_grant(LeaseGrantRequest { ttl, id: 0 })
        .await
        .expect("grant")
        .into_inner()
        .id;
    KvClient::new(m.channel().await)
        .put(PutRequest {
            key: key.as_bytes().to_vec(),
            value: b"v".to_vec(),
            lease: id,
            ..Default::default()
        })
        .await
        .expect("put with the lease");
    id
}

/// Whether `key` exists, read (linearizably) through `m`.
async fn exists(m: &Server, key: &str) -> bool {
    let resp = KvClient::new(m.channel().await)
        .range(RangeRequest {
            key: key.as_bytes().to_vec(),
            ..Default::default()
        })
        .await
        .expect("range")
        .into_inner();
    resp.count == 1
}

/// `etcdctl lease keep-alive` of `id` against `m`, running until killed.
fn keep_alive(m: &Server, id: i64) -> KeepAlive {
    let mut child = etcdctl_command(
        CtlVersion::V35,
        &m.endpoint,
        &["lease".into(), "keep-alive".into(), format!("{id:x}")],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn etcdctl lease keep-alive");
    let printed: Arc<Mutex<String>> = Arc::default();
    let readers = [
        child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|pipe| {
        let printed = printed.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let mut p = printed.lock().unwrap();
                p.push_str(&line);
                p.push('\n');
            }
        })
    })
    .collect();
    KeepAlive {
        child,
        printed,
        readers,
    }
}

/// A running `etcdctl lease keep-alive`, killed on drop; what it prints is collected as it
/// comes.
struct KeepAlive {
    child: Child,
    printed: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl KeepAlive {
    /// The renewals it has printed so far (`lease ... keepalived with TTL(n)`).
    fn renewals(&self) -> usize {
        self.printed
            .lock()
            .unwrap()
            .matches("keepalived with TTL(")
            .count()
    }

    /// Waits until it has printed `n` renewals in all; fails after [`ELECTION_LIMIT`] more,
    /// saying `what`.
    fn wait_renewals(&self, n: usize, what: &str) {
        wait::until(
            &format!("{n} renewals printed by etcdctl lease keep-alive ({what})"),
            ELECTION_LIMIT,
            || {
                let got = self.renewals();
                if got >= n {
                    Ok(())
                } else {
                    Err(format!("{got}: {}", self.printed.lock().unwrap()))
                }
            },
        );
    }

    /// Stops it; what it printed.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for reader in std::mem::take(&mut self.readers) {
            let _ = reader.join();
        }
        self.printed.lock().unwrap().clone()
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `etcdctl lease timetolive --keys` of `id` through `m`: (remaining, granted) seconds and
/// the output line.
fn ctl_time_to_live(m: &Server, id: i64) -> (i64, i64, String) {
    let out = etcdctl(
        CtlVersion::V35,
        &m.endpoint,
        &[
            "lease".into(),
            "timetolive".into(),
            "--keys".into(),
            format!("{id:x}"),
        ],
        None,
    );
    assert_eq!(out.code, 0, "etcdctl lease timetolive: {out:?}");
    let line = out.stdout.trim().to_string();
    let number_after = |prefix: &str| -> i64 {
        let rest = &line[line
            .find(prefix)
            .unwrap_or_else(|| panic!("{prefix} in {line}"))
            + prefix.len()..];
        rest[..rest.find('s').unwrap()].parse().unwrap()
    };
    (number_after("remaining("), number_after("TTL("), line)
}

/// The remaining TTL of lease `id` as `m` reports it (gRPC).
async fn time_to_live(m: &Server, id: i64) -> i64 {
    LeaseClient::new(m.channel().await)
        .lease_time_to_live(LeaseTimeToLiveRequest { id, keys: false })
        .await
        .expect("LeaseTimeToLive")
        .into_inner()
        .ttl
}

/// The lease IDs `m` lists, sorted.
async fn leases(m: &Server) -> Vec<i64> {
    let mut ids: Vec<i64> = LeaseClient::new(m.channel().await)
        .lease_leases(LeaseLeasesRequest {})
        .await
        .expect("LeaseLeases")
        .into_inner()
        .leases
        .into_iter()
        .map(|l| l.id)
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_kept_alive_through_a_follower_lives_3_ttls() {
    const TTL: i64 = 4;
    let cluster = Cluster::start(target_flavor(), 3, &[]);
    let leader = agreed_leader(&cluster, &[0, 1, 2], ELECTION_LIMIT).await;
    let follower = &cluster.members[(leader + 1) % 3];
    let id = leased_key(follower, TTL, "k/kept").await;

    let kept = keep_alive(follower, id);
    // A fixed period is the claim itself (the lease outlives 3 TTLs). It is anchored on the
    // renewals: etcdctl renews every third of the TTL, and at least one renewal per TTL must
    // have gone through the follower for the key to be there at the end.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3 * TTL as u64) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            exists(follower, "k/kept").await,
            "the key of a lease kept alive through a follower is gone after {:?}",
            started.elapsed()
        );
    }
    let renewals = kept.renewals();
    let printed = kept.stop();
    assert!(
        renewals >= 3,
        "{renewals} renewals in {:?} through the follower:\n{printed}",
        started.elapsed()
    );
    assert!(
        printed.contains(&format!("lease {id:016x} keepalived with TTL({TTL})")),
        "{printed}"
    );
    assert!(!printed.contains("no leader"), "{printed}");
    // Every member lists it.
    for m in &cluster.members {
        assert_eq!(leases(m).await, vec![id]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_to_live_through_a_follower_reports_the_renewed_ttl() {
    let cluster = Cluster::start(target_flavor(), 3, &[]);
    let leader = agreed_leader(&cluster, &[0, 1, 2], ELECTION_LIMIT).await;
    let follower = &cluster.members[(leader + 1) % 3];
    // A 30 s lease, idle for a while, then renewed once (on the leader): the follower reports
    // the renewed TTL at once, as the leader does, with the key attached.
    let id = leased_key(follower, 30, "k/renewed").await;
    for round in 0..3 {
        // Idle until the leader counts at least 3 s gone, so the renewal shows.
        let leader_member = &cluster.members[leader];
        wait::until_async(
            &format!("round {round}: the leader to report at most 27 s left of the lease"),
            wait::LIMIT,
            || async {
                match time_to_live(leader_member, id).await {
                    ttl if ttl <= 27 => Ok(()),
                    ttl => Err(format!("{ttl} s left")),
                }
            },
        )
        .await;
        let renewed = LeaseClient::new(cluster.members[leader].channel().await)
            .lease_keep_alive(tokio_stream::iter([LeaseKeepAliveRequest { id }]))
            .await
            .expect("keepalive")
            .into_inner()
            .next()
            .await
            .expect("a keepalive answer")
            .expect("no keepalive error");
        assert_eq!(renewed.ttl, 30);
        let (remaining, granted, line) = ctl_time_to_live(follower, id);
        let on_leader = time_to_live(&cluster.members[leader], id).await;
        assert_eq!(granted, 30, "{line}");
        assert!(
            remaining >= 29 && (remaining - on_leader).abs() <= 1,
            "round {round}: just renewed, the follower says {line:?}, the leader {on_leader} s"
        );
        assert!(line.contains("attached keys([k/renewed])"), "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_kept_alive_through_a_follower_survives_a_leader_kill() {
    const TTL: i64 = 5;
    let mut cluster = Cluster::start(target_flavor(), 3, &[]);
    let leader = agreed_leader(&cluster, &[0, 1, 2], ELECTION_LIMIT).await;
    let f = (leader + 1) % 3;
    let id = leased_key(&cluster.members[f], TTL, "k/kept").await;
    let kept = keep_alive(&cluster.members[f], id);
    // Renewed through the follower at least twice before the kill (the first renewal is
    // sent at once, the next a third of the TTL later).
    tokio::task::block_in_place(|| kept.wait_renewals(2, "before the leader's kill"));
    let before_kill = kept.renewals();

    cluster.members[leader].kill();
    let killed = Instant::now();
    let survivors: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let new_leader = agreed_leader(&cluster, &survivors, ELECTION_LIMIT).await;
    eprintln!("new leader after {:?}", killed.elapsed());
    // A fixed period is the claim itself (the lease outlives the old leader by two TTLs);
    // it is anchored on renewals answered after the kill, checked below.
    while killed.elapsed() < Duration::from_secs(2 * TTL as u64) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            exists(&cluster.members[f], "k/kept").await,
            "the lease kept alive through a follower expired {:?} after the leader's kill",
            killed.elapsed()
        );
    }
    let after_kill = kept.renewals() - before_kill;
    let printed = kept.stop();
    assert!(
        after_kill >= 2,
        "{after_kill} renewals through the follower in {:?} after the leader's kill:\n{printed}",
        killed.elapsed()
    );
    assert!(!printed.contains("no leader"), "{printed}");
    let (remaining, _, line) = ctl_time_to_live(&cluster.members[f], id);
    let on_leader = time_to_live(&cluster.members[new_leader], id).await;
    assert!(
        remaining > 0 && (remaining - on_leader).abs() <= 1,
        "the follower says {line:?}, the new leader {on_leader} s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_leases_through_a_follower_answer_as_etcd() {
    let cluster = Cluster::start(target_flavor(), 3, &[]);
    let leader = agreed_leader(&cluster, &[0, 1, 2], ELECTION_LIMIT).await;
    let follower = &cluster.members[(leader + 1) % 3];

    // An unknown lease: TTL 0 on a keepalive, -1 on TimeToLive, as etcdctl prints them.
    let once = etcdctl(
        CtlVersion::V35,
        &follower.endpoint,
        &[
            "lease".into(),
            "keep-alive".into(),
            "--once".into(),
            "1234".into(),
        ],
        None,
    );
    assert_eq!(
        (once.code, once.stderr.trim()),
        (2, "Error: etcdserver: requested lease not found"),
        "{once:?}"
    );
    let ttl = etcdctl(
        CtlVersion::V35,
        &follower.endpoint,
        &["lease".into(), "timetolive".into(), "1234".into()],
        None,
    );
    assert_eq!(
        (ttl.code, ttl.stdout.trim()),
        (0, "lease 0000000000001234 already expired"),
        "{ttl:?}"
    );
    assert_eq!(time_to_live(follower, 0x1234).await, -1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_leader_hasleader_watches_and_keepalives_end_with_no_leader() {
    let mut cluster = Cluster::start(target_flavor(), 3, &[]);
    let leader = agreed_leader(&cluster, &[0, 1, 2], ELECTION_LIMIT).await;
    let f = (leader + 1) % 3;
    let follower = &cluster.members[f];
    // A watch that requires a leader, open while there is one.
    let create = WatchCreateRequest {
        key: b"k/".to_vec(),
        range_end: b"k0".to_vec(),
        ..Default::default()
    };
    let (tx, mut watch) = watch(follower.channel().await, create, true)
        .await
        .expect("a hasleader watch while there is a leader");
    let created = watch.next().await.expect("created").expect("created");
    assert!(created.created);

    // The other two stop: no leader any more.
    for i in (0..3).filter(|i| *i != f) {
        cluster.members[i].kill();
    }
    let stopped = Instant::now();
    let follower = &cluster.members[f];
    let ended = tokio::time::timeout(Duration::from_secs(15), watch.next())
        .await
        .expect("the hasleader watch ended within 15 s of losing the leader");
    let waited = stopped.elapsed();
    let status = match ended {
        Some(Err(status)) => status,
        other => panic!("the hasleader watch ended with {other:?}, not an error"),
    };
    assert_eq!(
        (status.code(), status.message()),
        (tonic::Code::Unavailable, "etcdserver: no leader"),
        "{status:?}"
    );
    eprintln!("hasleader watch ended {waited:?} after the other members stopped");
    assert!(
        waited >= Duration::from_secs(2),
        "ended only {waited:?} after the leader was lost: a short election must not end it"
    );
    drop(tx);

    // A keepalive without a leader: etcd's `no leader`, once the request timeout has passed.
    let mut leases = LeaseClient::new(follower.channel().await);
    let asked = Instant::now();
    let answer = leases
        .lease_keep_alive(tokio_stream::iter([LeaseKeepAliveRequest { id: 0x1234 }]))
        .await;
    let status = match answer {
        Err(status) => status,
        Ok(stream) => match stream.into_inner().next().await {
            Some(Err(status)) => status,
            other => panic!("a keepalive without a leader answered {other:?}"),
        },
    };
    assert_eq!(
        (status.code(), status.message()),
        (tonic::Code::Unavailable, "etcdserver: no leader"),
        "{status:?} after {:?}",
        asked.elapsed()
    );
}
