//! Membership changes on a running cluster, made with the real `etcdctl` as an operator makes
//! them:
//! - a member added with `member add` and started with `--initial-cluster-state existing`
//!   catches up (on keel from a snapshot the leader streams: its log is purged behind it);
//! - a removed member stops on its own, and is added again with a fresh data directory and a
//!   new id;
//! - a learner is added, catches up, refuses what etcd's learners refuse, and is promoted;
//! - a member's peer URLs are updated and it keeps replicating from its new address;
//! - the leader itself is removed: it stops and the others elect a new one;
//! - every refused change gets etcd's error;
//! - `--strict-reconfig-check` (on by default) refuses a voter added or a live voter removed
//!   while a member is down, where the change would leave the cluster without a quorum of
//!   connected members; off, the same add is made.
//!
//! Every member ends with the same HashKV. Runs against keel (default) or a real etcd 3.5
//! cluster (`KEEL_TEST_TARGET=etcd`).

use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::cluster_client::ClusterClient;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::{Member, MemberAddRequest, MemberListRequest, StatusRequest};
use keel_testkit::kv::{agreed_leader, assert_same_hashkv, keys, leader_of, put};
use keel_testkit::{
    Cluster, CtlOutput, CtlVersion, Flavor, Server, ctl, ctl_ok, etcdctl, free_port, target_flavor,
    wait,
};

/// How long a new member may take to catch up, or a removed one to stop.
const CATCH_UP: Duration = Duration::from_secs(20);

/// etcdctl that must fail with `error` in its message.
fn ctl_refused(m: &Server, args: &[&str], error: &str) {
    assert_refused(&ctl(m, args), args, error);
}

/// Checks that etcdctl `args` failed with `error` in its message.
fn assert_refused(out: &CtlOutput, args: &[&str], error: &str) {
    assert_ne!(out.code, 0, "etcdctl {args:?} succeeded: {}", out.stdout);
    assert!(
        out.stderr.contains(error),
        "etcdctl {args:?}: expected {error:?}, got {}",
        out.stderr
    );
}

/// The members `m` lists (linearizable, as etcdctl asks).
async fn members(m: &Server) -> Vec<Member> {
    let mut c = ClusterClient::new(m.channel().await);
    c.member_list(MemberListRequest { linearizable: true })
        .await
        .unwrap_or_else(|e| panic!("member list on {}: {e}", m.endpoint))
        .into_inner()
        .members
}

/// The id of the member named `name`, as `m` lists it.
async fn id_of(m: &Server, name: &str) -> u64 {
    members(m)
        .await
        .into_iter()
        .find(|x| x.name == name)
        .unwrap_or_else(|| panic!("no member named {name}"))
        .id
}

/// Puts `k/<i>` for every `i` in `range` through `m`.
async fn write(m: &Server, range: std::ops::Range<usize>) {
    for i in range {
        put(m, &format!("k/{i:04}"))
            .await
            .unwrap_or_else(|e| panic!("put k/{i:04} via {}: {e}", m.endpoint));
    }
}

/// Waits until `m` serves `n` keys under `k/` (serializable, so a learner answers too).
async fn wait_for_keys(m: &Server, n: usize) {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let got = keys(m, true).await.map(|k| k.len());
        if got.as_ref().is_ok_and(|got| *got == n) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} has {got:?} of {n} keys",
            m.endpoint
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The index of a member that is not the leader, and not `except`.
async fn a_follower(cluster: &Cluster, except: &[usize]) -> usize {
    let leader = leader_of(&cluster.members[0]).await.expect("a leader");
    for (i, m) in cluster.members.iter().enumerate() {
        if !except.contains(&i) && m.ids().await.1 != leader {
            return i;
        }
    }
    panic!("no follower")
}

/// `member add NAME --peer-urls=URL [--learner]` on `via`, with etcd's output checked.
fn add(via: &Server, new: &Server, name: &str, learner: bool) {
    let peer_urls = format!("--peer-urls={}", new.peer_url);
    let mut args = vec!["member", "add", name, &peer_urls];
    if learner {
        args.push("--learner");
    }
    let out = ctl_ok(via, &args);
    assert!(out.contains(" added to cluster "), "{out}");
    assert!(out.contains(&format!("ETCD_NAME=\"{name}\"")), "{out}");
    assert!(
        out.contains(&format!("{name}={}", new.peer_url)),
        "ETCD_INITIAL_CLUSTER names the new member: {out}"
    );
    assert!(
        out.contains("ETCD_INITIAL_CLUSTER_STATE=\"existing\""),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_added_removed_readded_promoted_and_updated() {
    let flavor = target_flavor();
    // A snapshot every 100 entries: by the time members join, the log is purged behind them.
    let mut cluster = Cluster::start(flavor, 3, &["--snapshot-count=100"]);
    write(&cluster.members[0], 0..600).await;
    let mut written = 600;

    // A voter joins and catches up.
    let m3 = cluster.new_member(flavor, "m3");
    add(&cluster.members[1], &m3, "m3", false);
    let listed = members(&cluster.members[0]).await;
    assert_eq!(listed.len(), 4, "{listed:?}");
    let unstarted = listed
        .iter()
        .find(|m| m.peer_ur_ls == [m3.peer_url.clone()])
        .expect("the added member is listed");
    assert!(unstarted.name.is_empty() && unstarted.client_ur_ls.is_empty());
    assert!(!unstarted.is_learner);
    cluster.join(m3);
    let m3 = 3;
    wait_for_keys(&cluster.members[m3], written).await;
    if flavor == Flavor::Keel {
        assert!(
            cluster.members[m3]
                .log()
                .contains("installed a snapshot from the leader"),
            "the new member caught up from a snapshot"
        );
    }
    write(&cluster.members[m3], written..written + 20).await;
    written += 20;
    let listed = members(&cluster.members[m3]).await;
    let mut names: Vec<&str> = listed.iter().map(|m| m.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["m0", "m1", "m2", "m3"]);
    assert!(listed.iter().all(|m| !m.client_ur_ls.is_empty()));

    // etcd's refusals.
    let taken = format!("--peer-urls={}", cluster.members[1].peer_url);
    ctl_refused(
        &cluster.members[0],
        &["member", "add", "dup", &taken],
        "Peer URLs already exists",
    );
    ctl_refused(
        &cluster.members[0],
        &["member", "remove", "1234abcd"],
        "member not found",
    );
    let voter = format!("{:x}", id_of(&cluster.members[0], "m3").await);
    ctl_refused(
        &cluster.members[0],
        &["member", "promote", &voter],
        "can only promote a learner member",
    );
    let mut c = ClusterClient::new(cluster.members[0].channel().await);
    let bad = c
        .member_add(MemberAddRequest {
            peer_ur_ls: vec!["http://no-port".into()],
            is_learner: false,
        })
        .await
        .expect_err("a URL without a port is refused");
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    assert_eq!(bad.message(), "etcdserver: given member URLs are invalid");

    // A follower is removed through another member: it stops on its own, exit code 0.
    let victim = a_follower(&cluster, &[]).await;
    let via = (victim + 1) % cluster.members.len();
    let (cluster_id, victim_id) = cluster.members[victim].ids().await;
    let out = ctl_ok(
        &cluster.members[via],
        &["member", "remove", &format!("{victim_id:x}")],
    );
    assert!(
        out.contains(&format!(
            "Member {victim_id:16x} removed from cluster {cluster_id:16x}"
        )),
        "{out}"
    );
    let code = cluster.members[victim].wait_exit(CATCH_UP);
    assert_eq!(
        code,
        Some(0),
        "the removed member stops: {}",
        keel_testkit::tail(&cluster.members[victim].log(), 20)
    );
    cluster.members.remove(victim);
    assert_eq!(members(&cluster.members[0]).await.len(), 3);
    write(&cluster.members[0], written..written + 20).await;
    written += 20;

    // Added again under its name, with a fresh data directory: a new id.
    let again = cluster.new_member(flavor, "again");
    add(&cluster.members[0], &again, "again", false);
    cluster.join(again);
    let again = cluster.members.len() - 1;
    wait_for_keys(&cluster.members[again], written).await;
    let (_, again_id) = cluster.members[again].ids().await;
    assert_ne!(again_id, victim_id, "a re-added member gets a new id");

    // A learner: added, caught up, refuses writes and linearizable reads, promoted.
    let learner = cluster.new_member(flavor, "learner");
    add(&cluster.members[0], &learner, "learner", true);
    let second = format!("--peer-urls=http://127.0.0.1:{}", keel_testkit::free_port());
    ctl_refused(
        &cluster.members[0],
        &["member", "add", "second", &second, "--learner"],
        "too many learner members in cluster",
    );
    cluster.join(learner);
    let learner = cluster.members.len() - 1;
    wait_for_keys(&cluster.members[learner], written).await;
    {
        let l = &cluster.members[learner];
        let mut status = MaintenanceClient::new(l.channel().await);
        let st = status.status(StatusRequest {}).await.unwrap().into_inner();
        assert!(st.is_learner, "Status says learner");
        let err = put(l, "k/refused")
            .await
            .expect_err("a learner refuses writes");
        assert_eq!(err.code(), tonic::Code::Unavailable);
        assert_eq!(err.message(), "etcdserver: rpc not supported for learner");
        let err = keys(l, false).await.expect_err("and linearizable reads");
        assert_eq!(err.message(), "etcdserver: rpc not supported for learner");
    }
    let learner_id = cluster.members[learner].ids().await.1;
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let out = ctl(
            &cluster.members[0],
            &["member", "promote", &format!("{learner_id:x}")],
        );
        if out.code == 0 {
            assert!(
                out.stdout
                    .contains(&format!("Member {learner_id:16x} promoted in cluster")),
                "{}",
                out.stdout
            );
            break;
        }
        assert!(
            out.stderr.contains("in sync with leader") && Instant::now() < deadline,
            "promote: {}",
            out.stderr
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        members(&cluster.members[0])
            .await
            .iter()
            .all(|m| !m.is_learner)
    );
    let deadline = Instant::now() + CATCH_UP;
    while put(&cluster.members[learner], &format!("k/{written:04}"))
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "the promoted member takes writes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    written += 1;

    // A member's peer URLs are updated; restarted on them, it keeps replicating.
    let moved = a_follower(&cluster, &[]).await;
    let moved_id = cluster.members[moved].ids().await.1;
    let fresh = format!("http://127.0.0.1:{}", keel_testkit::free_port());
    let via = (moved + 1) % cluster.members.len();
    let out = ctl_ok(
        &cluster.members[via],
        &[
            "member",
            "update",
            &format!("{moved_id:x}"),
            &format!("--peer-urls={fresh}"),
        ],
    );
    assert!(
        out.contains(&format!("Member {moved_id:16x} updated in cluster")),
        "{out}"
    );
    let listed = members(&cluster.members[via]).await;
    let updated = listed.iter().find(|m| m.id == moved_id).unwrap();
    assert_eq!(updated.peer_ur_ls, std::slice::from_ref(&fresh));
    cluster.members[moved].move_peer_url(&fresh);
    write(&cluster.members[via], written..written + 20).await;
    written += 20;
    wait_for_keys(&cluster.members[moved], written).await;

    // The leader itself is removed: it stops, the others elect a leader and take writes.
    let leader_id = leader_of(&cluster.members[0]).await.expect("a leader");
    let mut leader = None;
    for (i, m) in cluster.members.iter().enumerate() {
        if m.ids().await.1 == leader_id {
            leader = Some(i);
        }
    }
    let leader = leader.unwrap_or_else(|| panic!("the leader {leader_id:x} is not a member"));
    // Asked through a follower: etcd's leader may stop before it answers its own removal.
    let out = ctl_ok(
        &cluster.members[(leader + 1) % cluster.members.len()],
        &["member", "remove", &format!("{leader_id:x}")],
    );
    assert!(
        out.contains(&format!("Member {leader_id:16x} removed")),
        "{out}"
    );
    let code = cluster.members[leader].wait_exit(CATCH_UP);
    assert_eq!(code, Some(0), "the removed leader stops");
    cluster.members.remove(leader);
    let deadline = Instant::now() + CATCH_UP;
    while put(&cluster.members[0], &format!("k/{written:04}"))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "a new leader takes writes");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    written += 1;
    for m in &cluster.members {
        wait_for_keys(m, written).await;
        let listed = members(m).await;
        assert_eq!(listed.len(), cluster.members.len(), "{listed:?}");
        assert!(listed.iter().all(|x| x.id != leader_id));
    }

    let all: Vec<&Server> = cluster.members.iter().collect();
    assert_same_hashkv(&all, CATCH_UP).await;
}

/// etcd's `HealthInterval`: a member not heard from for this long is not connected.
const HEALTH_INTERVAL: Duration = Duration::from_secs(5);

/// With a member of three down, the strict check (the default) refuses to add a voter (the
/// four would need three connected) and to remove a live one (the two left would need both),
/// each with etcd's `unhealthy cluster`, and the membership stays as it was; with
/// `--strict-reconfig-check=false` the same add is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_reconfig_check_refuses_changes_that_would_lose_quorum() {
    let flavor = target_flavor();
    for strict in [true, false] {
        let args: &[&str] = if strict {
            &[]
        } else {
            &["--strict-reconfig-check=false"]
        };
        let mut cluster = Cluster::start(flavor, 3, args);
        let leader = agreed_leader(&cluster, &[0, 1, 2], CATCH_UP).await;
        let down = (leader + 1) % 3;
        let live = (leader + 2) % 3;
        let (_, down_id) = cluster.members[down].ids().await;
        let live_id = cluster.members[live].ids().await.1;
        cluster.members[down].kill();
        // "Down" is a rule about elapsed time: the leader has heard nothing from the member
        // for etcd's health interval, measured from the last bytes it took in from it.
        let from_down = format!("etcd_network_peer_received_bytes_total{{From=\"{down_id:x}\"}}");
        let via = &cluster.members[leader];
        tokio::task::block_in_place(|| {
            wait::metric_quiet_for(
                via,
                &from_down,
                HEALTH_INTERVAL + Duration::from_secs(1),
                wait::LIMIT,
            )
        });
        let before = members(via).await.len();
        let peer_urls = format!("--peer-urls=http://127.0.0.1:{}", free_port());
        let endpoint = via.endpoint.clone();
        let run = |args: &[&str]| {
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            etcdctl(CtlVersion::V35, &endpoint, &args, None)
        };
        // etcdctl alone: `ctl` retries an unhealthy cluster, the very answer expected here.
        let add = ["member", "add", "extra", &peer_urls];
        let added = run(&add);
        if strict {
            assert_refused(&added, &add, "etcdserver: unhealthy cluster");
            let live_hex = format!("{live_id:x}");
            let remove = ["member", "remove", &live_hex];
            assert_refused(&run(&remove), &remove, "etcdserver: unhealthy cluster");
            assert_eq!(members(via).await.len(), before, "the membership changed");
        } else {
            // Not refused by a check. etcd commits the add at once under the old
            // configuration, and the four then lack a quorum until a member comes back; keel
            // changes membership by joint consensus, which needs a quorum of the new
            // configuration too, so the add waits for one and the caller's deadline answers.
            match flavor {
                Flavor::Etcd => {
                    assert_eq!(added.code, 0, "member add, not strict: {}", added.stderr);
                    assert!(
                        added.stdout.contains(" added to cluster "),
                        "{}",
                        added.stdout
                    );
                }
                Flavor::Keel => assert!(
                    added.code != 0 && added.stderr.contains("etcdserver: request timed out"),
                    "member add, not strict, with no quorum of four up: {}{}",
                    added.stdout,
                    added.stderr
                ),
            }
            // Either way, once the member is back the cluster has four members, the new one
            // not started yet.
            cluster.members[down].respawn();
            let via = &cluster.members[leader];
            let url = peer_urls.trim_start_matches("--peer-urls=").to_string();
            let deadline = Instant::now() + CATCH_UP;
            loop {
                let mut c = ClusterClient::new(via.channel().await);
                let listed = c
                    .member_list(MemberListRequest { linearizable: true })
                    .await;
                if let Ok(listed) = &listed
                    && listed
                        .get_ref()
                        .members
                        .iter()
                        .any(|m| m.peer_ur_ls.contains(&url))
                {
                    assert_eq!(listed.get_ref().members.len(), 4);
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the added member is not listed {CATCH_UP:?} after the member came back: {listed:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
