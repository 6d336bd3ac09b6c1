//! Members restarted on their data directories and clusters grown from one member, as an
//! operator does it, checked with the real `etcdctl`:
//! - a follower killed (SIGKILL) with thousands of applied entries its backend had not made
//!   durable answers, from its very first answer after the restart, at a revision no lower
//!   than the one it answered before, with every key;
//! - a client reads its own writes, serializably, on the follower it wrote through;
//! - a member killed after it bootstrapped but before its cluster's first commit starts again;
//! - the founding member of a cluster grown with `member add` restarts with the flags it was
//!   first started with (one member in `--initial-cluster`);
//! - `member add` on a one-member cluster answers at once.
//!
//! Runs against keel (default) or a real etcd 3.5 cluster (`KEEL_TEST_TARGET=etcd`).

use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::{PutRequest, RangeRequest};
use keel_testkit::kv::leader_of;
use keel_testkit::{Cluster, CtlVersion, Flavor, Server, ctl, ctl_ok, etcdctl, target_flavor};

/// How long a member may take to catch up or to start.
const LIMIT: Duration = Duration::from_secs(30);

/// `(header revision, count)` of a serializable `get k/ --prefix` on `m` (one attempt; `None`
/// when etcdctl fails, e.g. while `m` is not serving yet).
fn serializable_count(m: &Server) -> Option<(i64, i64)> {
    let args: Vec<String> = [
        "get",
        "k/",
        "--prefix",
        "--limit=1",
        "--consistency=s",
        "-w",
        "json",
        "--dial-timeout=1s",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let out = etcdctl(CtlVersion::V35, &m.endpoint, &args, None);
    if out.code != 0 {
        return None;
    }
    let json: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("etcdctl -w json: {e}: {}", out.stdout));
    let revision = json["header"]["revision"]
        .as_i64()
        .expect("a header revision");
    Some((revision, json["count"].as_i64().unwrap_or(0)))
}

/// The index of a member of `cluster` that does not lead.
async fn a_follower(cluster: &Cluster) -> usize {
    let leader = leader_of(&cluster.members[0]).await.expect("a leader");
    for (i, m) in cluster.members.iter().enumerate() {
        if m.ids().await.1 != leader {
            return i;
        }
    }
    panic!("no follower")
}

/// Puts `n` keys `k/<i>` with 1 KiB values through `m`, 16 at a time.
async fn load(m: &Server, n: usize) {
    let kv = KvClient::new(m.channel().await);
    let value = vec![b'x'; 1024];
    let mut puts = tokio::task::JoinSet::new();
    for worker in 0..16 {
        let (mut kv, value) = (kv.clone(), value.clone());
        puts.spawn(async move {
            for i in (worker..n).step_by(16) {
                let put = PutRequest {
                    key: format!("k/{i:05}").into_bytes(),
                    value: value.clone(),
                    ..Default::default()
                };
                kv.put(put)
                    .await
                    .unwrap_or_else(|e| panic!("put k/{i:05}: {e}"));
            }
        });
    }
    while let Some(done) = puts.join_next().await {
        done.expect("a writer");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_follower_never_answers_an_older_revision_than_before() {
    const KEYS: usize = 3000;
    let flavor = target_flavor();
    let mut cluster = Cluster::start(flavor, 3, &[]);
    let f = a_follower(&cluster).await;
    load(&cluster.members[(f + 1) % 3], KEYS).await;

    // What the follower answers once it has applied every write.
    let deadline = Instant::now() + LIMIT;
    let before = loop {
        let answer = serializable_count(&cluster.members[f]);
        if let Some((revision, count)) = answer
            && count == KEYS as i64
        {
            break revision;
        }
        assert!(Instant::now() < deadline, "the follower answers {answer:?}");
        std::thread::sleep(Duration::from_millis(100));
    };

    // Killed, and asked again from the moment it starts: its first answer is the test.
    let follower = &mut cluster.members[f];
    follower.kill();
    follower.spawn().expect("start the follower again");
    let deadline = Instant::now() + LIMIT;
    let first = loop {
        if let Some(answer) = serializable_count(follower) {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted follower does not answer: {}",
            follower.process_state()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        first.0 >= before && first.1 == KEYS as i64,
        "the follower answered revision {before} with {KEYS} keys before it was killed, \
         and revision {} with {} keys as it came back",
        first.0,
        first.1
    );
    follower.wait_ready().expect("the follower serves");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reads_its_own_writes_on_the_follower_it_wrote_through() {
    let flavor = target_flavor();
    let cluster = Cluster::start(flavor, 3, &[]);
    let f = &cluster.members[a_follower(&cluster).await];
    // One connection, as a client pinned to a member has: each read follows its write at once.
    let mut kv = KvClient::new(f.channel().await);
    for i in 0..200 {
        let key = format!("ryw/{i:03}").into_bytes();
        let put = PutRequest {
            key: key.clone(),
            value: b"v".to_vec(),
            ..Default::default()
        };
        let written = kv.put(put).await.expect("put through the follower");
        let written = written.into_inner().header.expect("a header").revision;
        let read = RangeRequest {
            key: key.clone(),
            serializable: true,
            ..Default::default()
        };
        let read = kv.range(read).await.expect("serializable get").into_inner();
        let revision = read.header.expect("a header").revision;
        assert!(
            read.kvs.len() == 1 && revision >= written,
            "write {i} at revision {written}, then read at revision {revision} with {} keys",
            read.kvs.len()
        );
    }
    // And as etcdctl does it, one process per command.
    for i in 0..5 {
        let key = format!("ctl/{i}");
        ctl_ok(f, &["put", &key, "v"]);
        let got = ctl_ok(f, &["get", &key, "--consistency=s", "--print-value-only"]);
        assert_eq!(got.trim(), "v", "{key} read back on the follower");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_killed_before_the_first_commit_starts_again() {
    let flavor = target_flavor();
    let mut cluster = Cluster::unstarted(flavor, 3, &[]);
    // The first member bootstraps (its log holds the initial membership) but cannot commit
    // anything: the others are not started.
    let m0 = &mut cluster.members[0];
    m0.spawn().expect("start m0");
    wait_for_campaign(m0, "m0's first start");
    m0.kill();
    m0.spawn().expect("start m0 again");
    // Past its start-up (where a member that bootstraps again on an initialized log exits),
    // and still running.
    wait_for_campaign(m0, "m0's restart");
    for m in &mut cluster.members[1..] {
        m.spawn().expect("start a member");
    }
    for m in &mut cluster.members {
        m.wait_ready().unwrap_or_else(|e| panic!("{e}"));
    }
    ctl_ok(&cluster.members[0], &["put", "k", "v"]);
    let got = ctl_ok(&cluster.members[2], &["get", "k", "--print-value-only"]);
    assert_eq!(got.trim(), "v");
}

/// Waits until `m`, started alone among members that are not running, campaigns for
/// leadership (its log says it asked for votes): it is then past its start-up, and it has
/// made its initial log durable (etcd writes its bootstrap entries before its Raft node
/// runs; keel's WAL thread writes in order, and openraft asks for votes only after keel's
/// `save_vote` returned from its fsync, which comes after the membership entry's). Fails if
/// `m` exits first, saying `what`.
fn wait_for_campaign(m: &mut Server, what: &str) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let log = m.log();
        // keel: openraft's warning for a vote request no one answered; etcd: its election.
        if log.contains("while requesting vote") || log.contains("is starting a new election") {
            return;
        }
        assert!(
            m.is_running(),
            "{what}: the member stopped before it campaigned ({}):\n{}",
            m.process_state(),
            keel_testkit::tail(&log, 20)
        );
        assert!(
            Instant::now() < deadline,
            "{what}: the member did not campaign within {LIMIT:?}:\n{}",
            keel_testkit::tail(&log, 20)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `member add NAME --peer-urls=URL` through `via` for `new`, then starts it.
fn grow(cluster: &mut Cluster, flavor: Flavor, name: &str) {
    let new = cluster.new_member(flavor, name);
    let peer_urls = format!("--peer-urls={}", new.peer_url);
    let out = ctl_ok(&cluster.members[0], &["member", "add", name, &peer_urls]);
    assert!(out.contains(" added to cluster "), "{out}");
    cluster.join(new);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_founder_of_a_grown_cluster_restarts_with_its_first_flags() {
    let flavor = target_flavor();
    // m0 alone: `--initial-cluster` names only m0, and stays so on every restart of m0.
    let mut cluster = Cluster::start(flavor, 1, &[]);
    ctl_ok(&cluster.members[0], &["put", "k/before", "1"]);
    grow(&mut cluster, flavor, "m1");
    grow(&mut cluster, flavor, "m2");
    ctl_ok(&cluster.members[1], &["put", "k/grown", "2"]);

    // The founder alone, then every member, restarted with the flags they started with.
    cluster.members[0].restart();
    if flavor == Flavor::Keel {
        let log = cluster.members[0].log();
        assert!(
            log.contains("--initial-cluster"),
            "a log line says the flags are ignored"
        );
    }
    let got = ctl_ok(
        &cluster.members[0],
        &["get", "k/", "--prefix", "--keys-only"],
    );
    assert_eq!(
        got.split_whitespace().collect::<Vec<_>>(),
        ["k/before", "k/grown"]
    );
    ctl_ok(&cluster.members[0], &["put", "k/after", "3"]);
    cluster.restart_all();
    let listed = ctl_ok(&cluster.members[0], &["member", "list"]);
    assert_eq!(listed.lines().count(), 3, "{listed}");
    let got = ctl_ok(
        &cluster.members[2],
        &["get", "k/after", "--print-value-only"],
    );
    assert_eq!(got.trim(), "3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_add_on_a_one_member_cluster_answers_at_once() {
    let flavor = target_flavor();
    let mut cluster = Cluster::start(flavor, 1, &[]);
    let new = cluster.new_member(flavor, "m1");
    let peer_urls = format!("--peer-urls={}", new.peer_url);
    let started = Instant::now();
    let out = ctl(&cluster.members[0], &["member", "add", "m1", &peer_urls]);
    let took = started.elapsed();
    assert_eq!(out.code, 0, "member add: {}{}", out.stdout, out.stderr);
    assert!(took < Duration::from_secs(3), "member add took {took:?}");
    // The change is made: the new member joins with what `member add` told it.
    cluster.join(new);
    ctl_ok(&cluster.members[1], &["put", "k", "v"]);
    let listed = ctl_ok(&cluster.members[0], &["member", "list"]);
    assert_eq!(listed.lines().count(), 2, "{listed}");
}
