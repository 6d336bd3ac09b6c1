//! Faults injected for diagnosis drills, driven with `keel fault` as an operator would: set
//! on a running keel store and keel up without a restart, seen in `/metrics`
//! (`keel_fault_active{name}`) and in the metric of the path they slow, refused with a clear
//! error when the name, the value or the server is wrong, and cleared, on every member that
//! answers even when one is down or frozen.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, Stack};
use keel_testkit::{Cluster, CtlVersion, Flavor, Server, etcdctl, keel_bin, run_keel, run_keel_ok};

fn keel_fault(args: &[&str]) -> Output {
    run_keel(&[&["fault"], args].concat())
}

fn keel_fault_ok(args: &[&str]) -> String {
    run_keel_ok(&[&["fault"], args].concat())
}

/// `keel fault` fails, saying `expected`.
fn keel_fault_refused(args: &[&str], expected: &str) {
    let out = keel_fault(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "keel fault {args:?} succeeded");
    assert!(
        stderr.contains(expected),
        "keel fault {args:?}: {stderr:?} does not say {expected:?}"
    );
}

fn active(server: &Server, name: &str) -> Option<f64> {
    server.metric(&format!("keel_fault_active{{name=\"{name}\"}}"))
}

fn put(server: &Server, key: &str) {
    let out = etcdctl(
        CtlVersion::V35,
        &server.client_url,
        &["put".into(), key.into(), "v".into()],
        None,
    );
    assert_eq!(out.code, 0, "etcdctl put: {}", out.stderr);
}

/// `(sum, count)` of an unlabelled histogram on the server's `/metrics`.
fn histogram(server: &Server, name: &str) -> (f64, f64) {
    let sum = server.metric(&format!("{name}_sum")).unwrap_or(0.0);
    let count = server.metric(&format!("{name}_count")).unwrap_or(0.0);
    (sum, count)
}

#[test]
fn store_faults_are_set_seen_in_their_metrics_and_cleared() {
    let server = Server::start(Flavor::Keel);
    let url = server.client_url.as_str();
    let listing = keel_fault_ok(&["list", "--etcd-servers", url]);
    assert!(listing.contains("no fault is on"), "{listing}");
    assert!(listing.contains("wal.fsync.delay"), "{listing}");
    assert_eq!(active(&server, "wal.fsync.delay"), Some(0.0));

    let out = keel_fault_ok(&[
        "set",
        "wal.fsync.delay=100ms",
        "backend.commit.delay=50ms",
        "--etcd-servers",
        url,
    ]);
    assert!(out.contains("wal.fsync.delay=100ms on"), "{out}");
    assert_eq!(active(&server, "wal.fsync.delay"), Some(1.0));
    assert_eq!(active(&server, "backend.commit.delay"), Some(1.0));
    let listing = keel_fault_ok(&["list", "--etcd-servers", url]);
    assert!(
        listing.contains("ON wal.fsync.delay=100ms backend.commit.delay=50ms"),
        "{listing}"
    );

    // Each fsync and each commit now weighs at least the delay, in the metrics an operator
    // reads: the fault looks like a slow disk, not like anything else.
    let (fsync_sum, fsync_count) = histogram(&server, "etcd_disk_wal_fsync_duration_seconds");
    let (commit_sum, commit_count) =
        histogram(&server, "etcd_disk_backend_commit_duration_seconds");
    for i in 0..5 {
        put(&server, &format!("k{i}"));
    }
    let (fsync_sum2, fsync_count2) = histogram(&server, "etcd_disk_wal_fsync_duration_seconds");
    let (commit_sum2, commit_count2) =
        histogram(&server, "etcd_disk_backend_commit_duration_seconds");
    assert!(fsync_count2 - fsync_count >= 5.0);
    assert!(fsync_sum2 - fsync_sum >= 0.1 * (fsync_count2 - fsync_count));
    assert!(commit_count2 - commit_count >= 5.0);
    assert!(commit_sum2 - commit_sum >= 0.05 * (commit_count2 - commit_count));

    // A slow apply is counted as etcd counts one (over 100 ms), and a keep-alive is
    // answered only after its delay.
    keel_fault_ok(&[
        "set",
        "apply.delay=150ms",
        "lease.keepalive.delay=300ms",
        "--etcd-servers",
        url,
    ]);
    let slow = server.metric("etcd_server_slow_apply_total").unwrap_or(0.0);
    put(&server, "slow");
    assert!(server.metric("etcd_server_slow_apply_total").unwrap_or(0.0) > slow);
    let granted = etcdctl(
        CtlVersion::V35,
        url,
        &["lease".into(), "grant".into(), "60".into()],
        None,
    );
    let id = granted
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("lease id")
        .to_string();
    let started = Instant::now();
    let out = etcdctl(
        CtlVersion::V35,
        url,
        &["lease".into(), "keep-alive".into(), "--once".into(), id],
        None,
    );
    assert_eq!(out.code, 0, "etcdctl lease keep-alive: {}", out.stderr);
    assert!(started.elapsed() >= Duration::from_millis(300));
    keel_fault_ok(&[
        "clear",
        "apply.delay",
        "lease.keepalive.delay",
        "--etcd-servers",
        url,
    ]);

    // Wrong names, values and servers are refused and change nothing.
    for (pair, expected) in [
        ("wal.fsync=1s", "no fault is named"),
        ("wal.fsync.delay=100", "Go syntax"),
        (
            "wal.fsync.delay=20m",
            "20m is too long: a delay is at most 1m0s",
        ),
        ("peer.drop=2", "fraction from 0 to 1"),
        ("apiserver.request.delay=1s", "a fault of the apiserver"),
        ("wal.fsync.delay", "NAME=VALUE"),
    ] {
        keel_fault_refused(&["set", pair, "--etcd-servers", url], expected);
    }
    keel_fault_refused(&["list"], "--etcd-servers URLS");
    assert!(keel_fault_ok(&["list", "--etcd-servers", url]).contains("wal.fsync.delay=100ms"));

    keel_fault_ok(&["clear", "wal.fsync.delay", "--etcd-servers", url]);
    assert_eq!(active(&server, "wal.fsync.delay"), Some(0.0));
    assert_eq!(active(&server, "backend.commit.delay"), Some(1.0));
    keel_fault_ok(&["clear", "--etcd-servers", url]);
    assert_eq!(active(&server, "backend.commit.delay"), Some(0.0));
    assert!(keel_fault_ok(&["list", "--etcd-servers", url]).contains("no fault is on"));
}

/// The lease IDs the store at `url` holds.
fn leases(url: &str) -> Vec<String> {
    let out = etcdctl(CtlVersion::V35, url, &["lease".into(), "list".into()], None);
    assert_eq!(out.code, 0, "etcdctl lease list: {}", out.stderr);
    out.stdout
        .lines()
        .filter(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_hexdigit()))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_lease_storm_expires_that_many_leases_at_once_on_the_leader() {
    let cluster = Cluster::start(Flavor::Keel, 3, &[]);
    let endpoints = cluster.endpoints();
    let leader = cluster
        .members
        .iter()
        .position(|m| m.metric("etcd_server_is_leader") == Some(1.0))
        .expect("a leader");
    let follower = (leader + 1) % 3;
    let url = cluster.members[leader].client_url.as_str();
    for i in 0..20 {
        let out = etcdctl(
            CtlVersion::V35,
            url,
            &["lease".into(), "grant".into(), "600".into()],
            None,
        );
        assert_eq!(out.code, 0, "etcdctl lease grant: {}", out.stderr);
        let id = out
            .stdout
            .split_whitespace()
            .nth(1)
            .expect("lease id")
            .to_string();
        let out = etcdctl(
            CtlVersion::V35,
            url,
            &[
                "put".into(),
                format!("k{i}"),
                "v".into(),
                format!("--lease={id}"),
            ],
            None,
        );
        assert_eq!(out.code, 0, "etcdctl put: {}", out.stderr);
    }
    assert_eq!(leases(url).len(), 20);

    // On a follower alone: refused, saying where it acts, and nothing expires.
    keel_fault_refused(
        &[
            "set",
            "lease.expire.storm=5",
            "--etcd-servers",
            &cluster.members[follower].endpoint,
        ],
        &format!(
            "lease.expire.storm=5: m{follower} is not the leader; the leader expires leases: \
             set it on the leader, or on every member"
        ),
    );
    assert_eq!(leases(url).len(), 20);

    // On every member: the leader acts and says so; the followers' replies are notes.
    let out = keel_fault_ok(&["set", "lease.expire.storm=5", "--etcd-servers", &endpoints]);
    assert!(
        out.contains(&format!(
            "lease.expire.storm=5: 5 leases expired on m{leader}"
        )),
        "{out}"
    );
    assert_eq!(out.matches("is not the leader").count(), 2, "{out}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while leases(url).len() != 15 {
        assert!(
            Instant::now() < deadline,
            "{} leases left",
            leases(url).len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Their keys went with them, as in an expiry.
    let out = etcdctl(
        CtlVersion::V35,
        url,
        &[
            "get".into(),
            "k".into(),
            "--prefix".into(),
            "--keys-only".into(),
        ],
        None,
    );
    assert_eq!(
        out.stdout.lines().filter(|l| !l.is_empty()).count(),
        15,
        "{}",
        out.stdout
    );
    // A storm is one-shot: done, it is off again, and no alert on active faults fires.
    for member in &cluster.members {
        assert_eq!(active(member, "lease.expire.storm"), Some(0.0));
    }
    assert_eq!(
        keel_fault_ok(&["list", "--etcd-servers", &endpoints])
            .matches("no fault is on")
            .count(),
        3
    );
}

/// `keel fault ARGS`, which must end within 30 s: a deadline for a command that hangs, not
/// a timing.
fn keel_fault_within_30s(args: &[&str]) -> Output {
    let mut child = Command::new(keel_bin())
        .arg("fault")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("keel fault");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("keel fault").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("keel fault {args:?} still runs after 30 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().expect("keel fault")
}

#[test]
fn faults_are_cleared_on_every_member_that_answers() {
    let mut cluster = Cluster::start(Flavor::Keel, 3, &[]);
    let endpoints = cluster.endpoints();
    const FAULT: &str = "lease.keepalive.delay";
    keel_fault_ok(&[
        "set",
        "lease.keepalive.delay=1s",
        "--etcd-servers",
        &endpoints,
    ]);
    for member in &cluster.members {
        assert_eq!(active(member, FAULT), Some(1.0));
    }

    // A frozen member takes the connection and answers nothing: the others are cleared, and
    // the command fails naming it.
    cluster.members[2].pause();
    let out = keel_fault_within_30s(&["clear", "--etcd-servers", &endpoints]);
    cluster.members[2].resume();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let frozen = cluster.members[2].endpoint.clone();
    assert!(
        stderr.contains(&format!("every fault on {frozen}: no answer within")),
        "{stderr}"
    );
    for member in &cluster.members[..2] {
        assert_eq!(active(member, FAULT), Some(0.0));
    }
    // It may still serve the request it took once it runs again: clearing once more settles it.
    keel_fault_ok(&["clear", "--etcd-servers", &endpoints]);
    assert_eq!(active(&cluster.members[2], FAULT), Some(0.0));

    // A member that is down refuses the connection: the others are still set and listed.
    cluster.members[2].kill();
    let out = keel_fault(&["set", "watch.send.stall=10ms", "--etcd-servers", &endpoints]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "watch.send.stall=10ms on {frozen}: cannot connect"
        )),
        "{stderr}"
    );
    for member in &cluster.members[..2] {
        assert_eq!(active(member, "watch.send.stall"), Some(1.0));
    }
    let out = keel_fault(&["list", "--etcd-servers", &endpoints]);
    assert!(!out.status.success());
    let listing = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        listing.matches("ON watch.send.stall=10ms").count(),
        2,
        "{listing}"
    );
}

/// The sum of the samples of `prefix` with `label` on `server`'s `/metrics`.
fn metric_sum(server: &Server, prefix: &str, label: &str) -> f64 {
    server
        .metrics()
        .lines()
        .filter(|l| l.starts_with(prefix) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn peer_faults_slow_or_cut_the_links_of_one_member() {
    let cluster = Cluster::start(Flavor::Keel, 3, &[]);
    let endpoints = cluster.endpoints();
    // Set on every member: each delays what it sends to m1, and m1 what it sends to all.
    keel_fault_ok(&["set", "peer.delay=60ms@m1", "--etcd-servers", &endpoints]);
    let listing = keel_fault_ok(&["list", "--etcd-servers", &endpoints]);
    assert_eq!(
        listing.matches("ON peer.delay=60ms@m1").count(),
        3,
        "{listing}"
    );
    keel_fault_refused(
        &["set", "peer.delay=60ms@m7", "--etcd-servers", &endpoints],
        "no member is named \"m7\"",
    );
    // Heartbeats keep going: the leader's round trips to m1 (or, if it is m1, to every
    // peer) now take more than the delay.
    let leader = cluster
        .members
        .iter()
        .find(|m| m.metric("etcd_server_is_leader") == Some(1.0))
        .expect("a leader");
    const RTT: &str = "etcd_network_peer_round_trip_time_seconds";
    // (round trips, those within 0.0512 s), over every peer.
    let round_trips = || {
        (
            metric_sum(leader, &format!("{RTT}_count"), ""),
            metric_sum(leader, &format!("{RTT}_bucket"), "le=\"0.0512\""),
        )
    };
    let (count, quick) = round_trips();
    std::thread::sleep(Duration::from_secs(2));
    let (count2, quick2) = round_trips();
    assert!(count2 > count, "no round trip measured");
    assert!(
        count2 - count > quick2 - quick,
        "no round trip took longer than the delay"
    );

    // Every message to m1 lost: the failures are counted, as etcd counts them.
    let failures = || {
        cluster
            .members
            .iter()
            .map(|m| metric_sum(m, "etcd_network_peer_sent_failures_total", ""))
            .sum::<f64>()
    };
    let before = failures();
    keel_fault_ok(&["set", "peer.drop=1@m1", "--etcd-servers", &endpoints]);
    std::thread::sleep(Duration::from_secs(1));
    assert!(failures() > before + 5.0, "{before} -> {}", failures());

    keel_fault_ok(&["clear", "--etcd-servers", &endpoints]);
    assert_eq!(
        keel_fault_ok(&["list", "--etcd-servers", &endpoints])
            .matches("no fault is on")
            .count(),
        3
    );
}

#[test]
fn keel_up_takes_faults_of_both_servers_from_an_administrator() {
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens.csv");
    std::fs::write(
        &file,
        "admin-token,admin,admin,\"system:masters\"\nbob-token,bob,2,devs\n",
    )
    .unwrap();
    let file = file.display().to_string();
    let kube = Kube::start_with(Stack::Up, &["--token-auth-file", &file]);
    let kubeconfig = kube.kubeconfig.display().to_string();
    keel_fault_ok(&[
        "set",
        "apiserver.request.delay=300ms",
        "wal.fsync.delay=10ms",
        "--kubeconfig",
        &kubeconfig,
    ]);
    let listing = keel_fault_ok(&["list", "--kubeconfig", &kubeconfig]);
    assert!(
        listing.contains("ON wal.fsync.delay=10ms apiserver.request.delay=300ms"),
        "{listing}"
    );
    let metrics = kube.kubectl_ok(&["get", "--raw", "/metrics"]);
    assert!(metrics.contains("keel_fault_active{name=\"apiserver.request.delay\"} 1"));
    // A request now spends the delay in the apiserver, not in the store.
    let before = kube.metric_sum(
        "apiserver_request_duration_seconds_sum",
        "resource=\"configmaps\"",
    );
    kube.kubectl_ok(&["get", "configmaps", "-A"]);
    let after = kube.metric_sum(
        "apiserver_request_duration_seconds_sum",
        "resource=\"configmaps\"",
    );
    assert!(after - before >= 0.3, "{before} -> {after}");

    // Only an administrator sets faults: any other user is refused, with kube-apiserver's
    // 403, and nothing changes.
    let curl = |token: &str| {
        let out = std::process::Command::new("curl")
            .args(["-sk", "-X", "DELETE", "-H"])
            .arg(format!("Authorization: Bearer {token}"))
            .arg(format!("{}/debug/faults", kube_server(&kube)))
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let refused = curl("bob-token");
    assert!(
        refused.contains("\"code\":403") && refused.contains("cannot set faults"),
        "{refused}"
    );
    assert!(curl("not-a-token").contains("Unauthorized"));
    assert!(
        keel_fault_ok(&["list", "--kubeconfig", &kubeconfig])
            .contains("apiserver.request.delay=300ms")
    );
    keel_fault_ok(&["clear", "--kubeconfig", &kubeconfig]);
    assert!(keel_fault_ok(&["list", "--kubeconfig", &kubeconfig]).contains("no fault is on"));
}

/// The server URL of `kube`'s kubeconfig.
fn kube_server(kube: &Kube) -> String {
    let text = std::fs::read_to_string(&kube.kubeconfig).expect("kubeconfig");
    text.lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("server")
        .trim()
        .to_string()
}
