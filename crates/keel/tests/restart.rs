//! Members restarted on their data directories and clusters grown from one member, as an
//! operator does it, checked with the real `etcdctl`:
//! - `member add` on a one-member cluster answers at once.
//!
//! Runs against keel (default) or a real etcd 3.5 cluster (`KEEL_TEST_TARGET=etcd`).

mod common;

use std::time::{Duration, Instant};

use common::{Cluster, CtlOutput, CtlVersion, Server, etcdctl, target_flavor};

/// How long a member may take to catch up or to start.
const LIMIT: Duration = Duration::from_secs(30);

/// etcdctl 3.5 against `m`, retried while a membership change finds the cluster unhealthy
/// (etcd wants every voter connected for 5 s first).
fn ctl(m: &Server, args: &[&str]) -> CtlOutput {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let deadline = Instant::now() + LIMIT;
    loop {
        let out = etcdctl(CtlVersion::V35, &m.endpoint, &args, None);
        if !out.stderr.contains("unhealthy cluster") || Instant::now() > deadline {
            return out;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// etcdctl that must succeed; its standard output.
fn ctl_ok(m: &Server, args: &[&str]) -> String {
    let out = ctl(m, args);
    assert_eq!(
        out.code, 0,
        "etcdctl {args:?} on {}: {}{}",
        m.endpoint, out.stdout, out.stderr
    );
    out.stdout
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
