//! The fault matrix: each kind of fault made for real on a 3-member keel store under
//! `keel apiserver`, with `keel sim nodes` renewing node Leases through it as kubelets do, and
//! `keel doctor` must name the layer, the axis and (where one is at fault) the member. Half
//! the kinds use the fault hooks (`keel fault`); the others are made without them: a slow
//! disk under one member (keel-lazyfs delaying fsync), a member frozen with SIGSTOP, 1,000
//! watchers that never read, 10,000 short leases expiring at once, an apiserver flooded with
//! lists while its store is idle, compaction while clients are away, nodes that stop
//! renewing. The three classic mistakes are kinds of their own, named as such. With no fault
//! the doctor says `none`.
//!
//! CI runs each kind once. `scripts/fault-matrix.sh --runs 3` runs the matrix three times and
//! prints the table the README reports; each verdict is appended to the file named by
//! `KEEL_FAULT_MATRIX_LOG` when it is set.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use http::Method;
use keel_bench::https::Endpoint;
use keel_proto::etcdserverpb::lease_client::LeaseClient;
use keel_proto::etcdserverpb::{LeaseGrantRequest, LeaseKeepAliveRequest};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use keel_testkit::disk::Disk;
use keel_testkit::kube::Kube;
use keel_testkit::{
    Cluster, CtlVersion, Flavor, Server, ServerOpts, etcdctl, keel_bin, run_keel_ok, skip,
};

/// Nodes the simulator runs, and how often each renews its Lease: 100 writes a second.
const NODES: &str = "200";
const RENEW: &str = "2s";

/// A 3-member keel store, `keel apiserver` on it, and `keel sim nodes` driving it.
struct Drill {
    // Dropped in this order: the load, the apiserver, the members, then the disk under one.
    _sim: Sim,
    kube: Kube,
    cluster: Cluster,
    disk: Option<Disk>,
}

impl Drill {
    /// The standard drill.
    fn start() -> Drill {
        Drill::start_with(None, &[], &[])
    }

    /// A drill with member m1's data folder on `disk`, `apiserver` flags added to `keel
    /// apiserver` and `sim` flags to `keel sim nodes` (which renews [`NODES`] Leases every
    /// [`RENEW`] unless `sim` says otherwise).
    fn start_with(disk: Option<Disk>, apiserver: &[&str], sim: &[&str]) -> Drill {
        let mut cluster = Cluster::unstarted(Flavor::Keel, 3, &[]);
        if let Some(disk) = &disk {
            cluster.members[1].data_dir = disk.mnt.join("m1");
        }
        cluster.spawn_all();
        let endpoints = cluster
            .members
            .iter()
            .map(|m| m.client_url.clone())
            .collect::<Vec<_>>()
            .join(",");
        // The controllers too, as kube-controller-manager would run them beside it.
        let flags = [&["--controllers=*"], apiserver].concat();
        let kube = Kube::start_on_with(&endpoints, &flags);
        Drill {
            _sim: Sim::start(&kube, sim),
            kube,
            cluster,
            disk,
        }
    }

    /// Every member's client URL, comma separated.
    fn endpoints(&self) -> String {
        self.cluster.endpoints()
    }

    /// `keel fault set spec` on member `member`, or on every member.
    fn fault(&self, spec: &str, member: Option<usize>) {
        let servers = match member {
            Some(i) => self.cluster.members[i].client_url.clone(),
            None => self.endpoints(),
        };
        run_keel_ok(&["fault", "set", spec, "--etcd-servers", &servers]);
    }

    /// `keel fault set spec` on the apiserver.
    fn apiserver_fault(&self, spec: &str) {
        let kubeconfig = self.kube.kubeconfig.display().to_string();
        run_keel_ok(&["fault", "set", spec, "--kubeconfig", &kubeconfig]);
    }

    /// `keel doctor --json` on the apiserver and the store over `interval`.
    fn doctor(&self, interval: &str) -> Value {
        let kubeconfig = self.kube.kubeconfig.display().to_string();
        doctor(&[
            "--interval",
            interval,
            "--kubeconfig",
            &kubeconfig,
            "--etcd-servers",
            &self.endpoints(),
        ])
    }

    /// [`Drill::doctor`] on a thread of its own, started now.
    fn doctor_meanwhile(&self, interval: &str) -> std::thread::JoinHandle<Value> {
        let kubeconfig = self.kube.kubeconfig.display().to_string();
        let endpoints = self.endpoints();
        let interval = interval.to_string();
        std::thread::spawn(move || {
            doctor(&[
                "--interval",
                &interval,
                "--kubeconfig",
                &kubeconfig,
                "--etcd-servers",
                &endpoints,
            ])
        })
    }
}

impl Drop for Drill {
    fn drop(&mut self) {
        // A frozen member must run again to die cleanly.
        for m in &self.cluster.members {
            m.resume();
        }
    }
}

/// `keel sim nodes` renewing [`NODES`] Leases every [`RENEW`] (unless `flags` say otherwise)
/// through `kube`'s apiserver; killed on drop.
struct Sim(Child);

impl Sim {
    /// Starts it and waits until it has registered its first nodes: the load is on.
    fn start(kube: &Kube, flags: &[&str]) -> Sim {
        let child = Command::new(keel_bin())
            .args(["sim", "nodes", "--duration", "10m", "--kubeconfig"])
            .arg(&kube.kubeconfig)
            .args(["--count", NODES, "--renew-interval", RENEW])
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("keel sim nodes");
        let sim = Sim(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let out = kube.kubectl(&["get", "leases", "-n", "kube-node-lease"]);
            if String::from_utf8_lossy(&out.stdout).contains("keel-sim-node-") {
                // A few renewals' worth of load before the first scrape.
                std::thread::sleep(Duration::from_secs(2));
                return sim;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("keel sim nodes registered no node in 60 s");
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `keel doctor --json` with `args`.
fn doctor(args: &[&str]) -> Value {
    let out = run_keel_ok(&[&["doctor", "--json"], args].concat());
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// What the doctor should say: `layer / axis, member`.
struct Want {
    layer: &'static str,
    axis: Option<&'static str>,
    member: Option<&'static str>,
}

const NONE: Want = Want {
    layer: "none",
    axis: None,
    member: None,
};

/// The store, on `axis`.
fn store(axis: &'static str) -> Want {
    Want {
        layer: "store",
        axis: Some(axis),
        member: None,
    }
}

/// The apiserver, on `axis` (or on none of the store's).
fn apiserver(axis: Option<&'static str>) -> Want {
    Want {
        layer: "apiserver",
        axis,
        member: None,
    }
}

impl Want {
    /// The same, naming `member`.
    fn on(self, member: &'static str) -> Want {
        Want {
            member: Some(member),
            ..self
        }
    }

    fn describe(&self) -> String {
        verdict_text(self.layer, self.axis, self.member)
    }

    fn matches(&self, v: &Value) -> bool {
        v["layer"] == self.layer
            && v["axis"].as_str() == self.axis
            && self.member.is_none_or(|m| v["member"] == m)
    }
}

/// What a verdict says, as [`Want::describe`] writes it.
fn said(v: &Value) -> String {
    let layer = v["layer"].as_str().unwrap_or("?");
    verdict_text(layer, v["axis"].as_str(), v["member"].as_str())
}

/// `layer / axis, member m`, each part only when there is one.
fn verdict_text(layer: &str, axis: Option<&str>, member: Option<&str>) -> String {
    let mut s = layer.to_string();
    if let Some(axis) = axis {
        s += &format!(" / {axis}");
    }
    if let Some(member) = member {
        s += &format!(", member {member}");
    }
    s
}

/// Asserts that one of `attempts` verdicts of `doctor` (called again only after a miss)
/// matches `want`; each is logged for the matrix's table (the first is the one it reports).
fn expect(kind: &str, want: Want, attempts: usize, mut doctor: impl FnMut() -> Value) {
    let mut seen = Vec::new();
    for attempt in 1..=attempts {
        let v = doctor();
        log(kind, &want, attempt, &v);
        if want.matches(&v) {
            return;
        }
        seen.push(v);
    }
    panic!(
        "{kind}: the doctor did not say {} in {attempts} attempt(s): {seen:#?}",
        want.describe()
    );
}

fn log(kind: &str, want: &Want, attempt: usize, v: &Value) {
    eprintln!("{kind}: want {}, said {}", want.describe(), said(v));
    let Ok(path) = std::env::var("KEEL_FAULT_MATRIX_LOG") else {
        return;
    };
    let line = json!({
        "kind": kind,
        "want": want.describe(),
        "said": said(v),
        "right": want.matches(v),
        "attempt": attempt,
        "confidence": v["confidence"],
    });
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("KEEL_FAULT_MATRIX_LOG={path}: {e}"));
    writeln!(file, "{line}").expect("append to the matrix log");
}

/// Clients that send `GET path` to the apiserver, `clients` at a time, until dropped; the
/// answers (any status) are read and dropped.
struct Clients {
    stop: Arc<AtomicBool>,
    runtime: Option<Runtime>,
}

impl Clients {
    fn start(kube: &Kube, path: &str, clients: usize) -> Clients {
        let runtime = Runtime::new().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let target = keel_bench::kubeconfig::load(&kube.kubeconfig, None).unwrap();
        let endpoint = Endpoint::new(target, false, Duration::from_secs(15)).unwrap();
        for _ in 0..clients {
            let (endpoint, stop, path) = (endpoint.clone(), stop.clone(), path.to_string());
            runtime.spawn(async move {
                // A busy machine may take a while to finish 48 TLS handshakes: keep dialling.
                let mut conn = loop {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    match endpoint.connect().await {
                        Ok(conn) => break conn,
                        Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                };
                while !stop.load(Ordering::Relaxed) {
                    if conn.call(Method::GET, &path, None).await.is_err() {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            });
        }
        Clients {
            stop,
            runtime: Some(runtime),
        }
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// Grants `n` leases of `ttl` seconds on `member`, 256 at a time; returns their IDs.
fn grant_leases(runtime: &Runtime, member: &Server, n: usize, ttl: i64) -> Vec<i64> {
    runtime.block_on(async {
        let channel = member.channel().await;
        let mut ids = Vec::with_capacity(n);
        let mut pending = tokio::task::JoinSet::new();
        for i in 0..n {
            if pending.len() >= 256
                && let Some(done) = pending.join_next().await
            {
                ids.push(done.unwrap());
            }
            let mut lease = LeaseClient::new(channel.clone());
            pending.spawn(async move {
                let request = LeaseGrantRequest { ttl, id: 0 };
                let granted = lease.lease_grant(request).await;
                granted
                    .unwrap_or_else(|e| panic!("lease {i}: {e}"))
                    .into_inner()
                    .id
            });
        }
        while let Some(done) = pending.join_next().await {
            ids.push(done.unwrap());
        }
        ids
    })
}

/// The standard drill with the store fault `spec` set on member `on` (every member if None):
/// the doctor must say `want` within two intervals; `spec`'s name is the kind.
fn store_hook_drill(spec: &str, on: Option<usize>, want: Want) {
    let drill = Drill::start();
    drill.fault(spec, on);
    let kind = spec.split('=').next().unwrap_or(spec);
    expect(kind, want, 2, || drill.doctor("4s"));
}

#[test]
fn no_fault_is_none() {
    let drill = Drill::start();
    // The suite shares the disk with other tests, whose fsyncs can push a member's past
    // etcd's 10 ms for an interval: one of three must be clean.
    expect("none", NONE, 3, || drill.doctor("4s"));
}

#[test]
fn slow_wal_fsyncs_on_one_member_are_the_wal() {
    store_hook_drill("wal.fsync.delay=100ms", Some(1), store("wal").on("m1"));
}

#[test]
fn a_slow_disk_under_one_member_is_the_wal() {
    let disk = match Disk::new("fault-matrix") {
        Ok(disk) => disk,
        Err(e) => return skip("a_slow_disk_under_one_member_is_the_wal", &e),
    };
    let drill = Drill::start_with(Some(disk), &[], &[]);
    drill
        .disk
        .as_ref()
        .unwrap()
        .slow_fsync(Duration::from_millis(100));
    expect("slow disk (keel-lazyfs)", store("wal").on("m1"), 2, || {
        drill.doctor("4s")
    });
}

#[test]
fn slow_backend_commits_on_one_member_are_mvcc() {
    store_hook_drill(
        "backend.commit.delay=200ms",
        Some(1),
        store("mvcc").on("m1"),
    );
}

#[test]
fn slow_applies_on_one_member_are_mvcc() {
    store_hook_drill("apply.delay=300ms", Some(1), store("mvcc").on("m1"));
}

#[test]
fn slow_links_to_one_member_are_raft_and_name_it() {
    store_hook_drill("peer.delay=300ms@m2", None, store("raft").on("m2"));
}

#[test]
fn lost_messages_to_one_member_are_raft_and_name_it() {
    store_hook_drill("peer.drop=1@m2", None, store("raft").on("m2"));
}

#[test]
fn a_frozen_member_is_raft_and_named() {
    let drill = Drill::start();
    drill.cluster.members[2].pause();
    expect("SIGSTOP of a member", store("raft").on("m2"), 2, || {
        drill.doctor("4s")
    });
}

#[test]
fn stalled_watch_streams_are_watch() {
    store_hook_drill("watch.send.stall=3s", None, store("watch"));
}

/// Classic mistake 1: watch backpressure read as a Raft problem.
#[test]
fn watch_backpressure_is_watch_not_raft() {
    use keel_proto::etcdserverpb::kv_client::KvClient;
    use keel_proto::etcdserverpb::watch_client::WatchClient;
    use keel_proto::etcdserverpb::watch_request::RequestUnion;
    use keel_proto::etcdserverpb::{PutRequest, WatchCreateRequest, WatchRequest};
    use tokio_stream::wrappers::ReceiverStream;

    let drill = Drill::start();
    let member = &drill.cluster.members[0];
    let runtime = Runtime::new().unwrap();
    // 1,000 watchers of /bp/ on 10 streams whose answers are never read.
    let _never_read = runtime.block_on(async {
        let channel = member.channel().await;
        let mut streams = Vec::new();
        for _ in 0..10 {
            let (tx, rx) = tokio::sync::mpsc::channel(128);
            for _ in 0..100 {
                let create = WatchCreateRequest {
                    key: b"/bp/".to_vec(),
                    range_end: b"/bp0".to_vec(),
                    ..Default::default()
                };
                let request = WatchRequest {
                    request_union: Some(RequestUnion::CreateRequest(create)),
                };
                tx.send(request).await.unwrap();
            }
            let stream = WatchClient::new(channel.clone())
                .watch(ReceiverStream::new(rx))
                .await
                .unwrap()
                .into_inner();
            streams.push((tx, stream));
        }
        streams
    });
    // Writes under the prefix, each an event for all 1,000, on another connection.
    runtime.block_on(async {
        let mut kv = KvClient::new(member.channel().await);
        for i in 0..1000 {
            let put = PutRequest {
                key: format!("/bp/{}", i % 100).into_bytes(),
                value: vec![b'x'; 1024],
                ..Default::default()
            };
            kv.put(put).await.unwrap();
        }
    });
    expect("1,000 watchers that never read", store("watch"), 2, || {
        drill.doctor("4s")
    });
}

#[test]
fn a_lease_expiry_storm_is_lease() {
    let drill = Drill::start();
    let runtime = Runtime::new().unwrap();
    grant_leases(&runtime, &drill.cluster.members[0], 1000, 600);
    expect("lease.expire.storm", store("lease"), 1, || {
        // Well inside the interval: the doctor has listed the members and scraped once.
        let doctor = drill.doctor_meanwhile("6s");
        std::thread::sleep(Duration::from_secs(2));
        drill.fault("lease.expire.storm=1000", None);
        doctor.join().unwrap()
    });
}

#[test]
fn ten_thousand_short_leases_expiring_at_once_are_lease() {
    const TTL: Duration = Duration::from_secs(10);
    let drill = Drill::start();
    let runtime = Runtime::new().unwrap();
    let granted = Instant::now();
    grant_leases(
        &runtime,
        &drill.cluster.members[0],
        10_000,
        TTL.as_secs() as i64,
    );
    // The interval starts after the last grant (it sees none of them) and no sooner than 2 s
    // before the first lease expires: it sees the storm however long the grants took.
    let start = (granted + TTL - Duration::from_secs(2)).max(Instant::now());
    std::thread::sleep(start.saturating_duration_since(Instant::now()));
    expect("10,000 leases expiring at once", store("lease"), 1, || {
        drill.doctor("8s")
    });
}

#[test]
fn slow_lease_keepalives_are_lease() {
    let drill = Drill::start();
    let runtime = Runtime::new().unwrap();
    let member = &drill.cluster.members[0];
    let ids = grant_leases(&runtime, member, 300, 3);
    // One keep-alive stream renews all 300 every second, as a client library does.
    let channel = runtime.block_on(member.channel());
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    let _renewer = runtime.spawn(async move {
        loop {
            for &id in &ids {
                if tx.send(LeaseKeepAliveRequest { id }).await.is_err() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let _answers = runtime.spawn(async move {
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut answers = LeaseClient::new(channel)
            .lease_keep_alive(stream)
            .await
            .unwrap()
            .into_inner();
        while let Ok(Some(_)) = answers.message().await {}
    });
    std::thread::sleep(Duration::from_secs(3));
    drill.fault("lease.keepalive.delay=5s", None);
    expect("lease.keepalive.delay", store("lease"), 1, || {
        drill.doctor("6s")
    });
}

#[test]
fn a_slow_apiserver_is_the_apiserver_not_the_store() {
    let drill = Drill::start();
    drill.apiserver_fault("apiserver.request.delay=3s");
    let _clients = Clients::start(&drill.kube, "/api/v1/namespaces/default/configmaps", 4);
    expect("apiserver.request.delay", apiserver(None), 2, || {
        drill.doctor("4s")
    });
}

#[test]
fn a_stalled_watch_cache_is_the_apiservers_watch() {
    let drill = Drill::start();
    drill.apiserver_fault("apiserver.watchcache.stall=10s");
    // Consistent lists, served from the watch cache once it has caught up with the store.
    let _clients = Clients::start(&drill.kube, "/api/v1/nodes", 4);
    expect(
        "apiserver.watchcache.stall",
        apiserver(Some("watch")),
        2,
        || drill.doctor("4s"),
    );
}

#[test]
fn an_apiserver_flooded_with_lists_while_the_store_is_idle_is_the_apiserver() {
    let drill = Drill::start_with(None, &["--max-requests-inflight=4"], &[]);
    // Lists of every node from the watch cache (resourceVersion=0): the store never sees them.
    let _flood = Clients::start(&drill.kube, "/api/v1/nodes?resourceVersion=0", 96);
    expect("lists flood the apiserver", apiserver(None), 2, || {
        drill.doctor("4s")
    });
}

/// Classic mistake 2: nodes drifting to NotReady read as "the store has no leader".
#[test]
fn nodes_that_stop_renewing_are_lease_not_raft() {
    let drill = Drill::start_with(
        None,
        &["--node-monitor-period=1s", "--node-monitor-grace-period=5s"],
        &["--fail", "50%", "--fail-after", "2s"],
    );
    // Past the grace period the node lifecycle controller marks the stopped nodes NotReady,
    // and counts them at the end of its pass.
    let deadline = Instant::now() + Duration::from_secs(60);
    while drill
        .kube
        .metric_sum("node_collector_unhealthy_nodes_in_zone", "zone=")
        < 1.0
    {
        assert!(Instant::now() < deadline, "no node went NotReady in 60 s");
        std::thread::sleep(Duration::from_millis(500));
    }
    expect("nodes stop renewing", apiserver(Some("lease")), 2, || {
        drill.doctor("4s")
    });
}

/// Classic mistake 3: relists after a compaction read as a store outage.
#[test]
fn relists_after_a_compaction_are_watch_not_a_store_outage() {
    let drill = Drill::start();
    let kube = &drill.kube;
    kube.kubectl_ok(&["create", "configmap", "c0", "--from-literal=a=0"]);
    // The server's list (kubectl's own `get -o json` drops the list's resourceVersion).
    let list: Value = serde_json::from_str(&kube.kubectl_ok(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/configmaps",
    ]))
    .unwrap();
    let old = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    // The simulator's renewals move the revision on; the store compacts all but the latest.
    std::thread::sleep(Duration::from_secs(1));
    let member = &drill.cluster.members[0].client_url;
    let status = etcdctl(
        CtlVersion::V35,
        member,
        &["endpoint", "status", "-w", "json"].map(String::from),
        None,
    );
    let revision =
        serde_json::from_str::<Value>(&status.stdout).unwrap()[0]["Status"]["header"]["revision"]
            .as_i64()
            .unwrap();
    let out = etcdctl(
        CtlVersion::V35,
        member,
        &["compact".into(), revision.to_string()],
        None,
    );
    assert_eq!(out.code, 0, "etcdctl compact: {}", out.stderr);
    // Informers back from their break watch from before it: the watch answers an Expired
    // event (410 Gone), and they relist.
    let stale = format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={old}");
    let relists = || {
        // 15 informers, one after the other (a kubectl each), well inside the interval.
        let doctor = drill.doctor_meanwhile("15s");
        std::thread::sleep(Duration::from_secs(1));
        for _ in 0..15 {
            let gone = kube.kubectl_ok(&["get", "--raw", &stale, "--request-timeout=10s"]);
            assert!(gone.contains("\"code\":410"), "{gone}");
            kube.kubectl_ok(&["get", "configmaps"]);
        }
        doctor.join().unwrap()
    };
    expect(
        "compaction, then relists",
        apiserver(Some("watch")),
        1,
        relists,
    );
}

/// Not a keel store: the same doctor, on `keel apiserver` over a real etcd 3.5.1 whose data
/// folder is on a disk with slow fsyncs, names the store and the WAL.
#[test]
fn etcd_on_a_slow_disk_is_the_store_and_the_wal() {
    let disk = match Disk::new("fault-matrix-etcd") {
        Ok(disk) => disk,
        Err(e) => return skip("etcd_on_a_slow_disk_is_the_store_and_the_wal", &e),
    };
    let etcd = Server::start_with(
        Flavor::Etcd,
        ServerOpts {
            data_dir: Some(disk.mnt.join("etcd")),
            ..Default::default()
        },
    );
    let kube = Kube::start_on(&etcd.client_url);
    let kubeconfig = kube.kubeconfig.display().to_string();
    let _sim = Sim::start(&kube, &[]);
    disk.slow_fsync(Duration::from_millis(100));
    let args = [
        "--interval",
        "4s",
        "--kubeconfig",
        &kubeconfig,
        "--etcd-servers",
        &etcd.client_url,
    ];
    let want = store("wal").on("default");
    expect("etcd 3.5.1 on a slow disk", want, 2, || doctor(&args));
}
