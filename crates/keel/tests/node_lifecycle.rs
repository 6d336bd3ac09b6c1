//! The node lifecycle controller, on `keel apiserver --controllers=*` with short periods, on
//! `keel store` (or etcd 3.5.1 with `KEEL_TEST_TARGET=etcd`). Nodes and their Leases are
//! written as a kubelet writes them, and renewed by the test while it plays a live kubelet:
//!
//! - the beta OS and architecture labels follow the GA ones;
//! - a node whose renewals stop goes Unknown (reason `NodeStatusUnknown`, message `Kubelet
//!   stopped posting node status.`), NotReady in `kubectl get nodes`, tainted
//!   `node.kubernetes.io/unreachable` NoSchedule and NoExecute, while `kubectl wait
//!   --for=condition=Ready=Unknown` returns, with the node controller's `RegisteredNode` and
//!   `NodeNotReady` events; when it posts Ready again the taints go;
//! - zone disruption: a partly disrupted small zone sets no NoExecute taint while a healthy
//!   zone does, and once every zone is fully disrupted every NoExecute taint is lifted;
//! - a store that answers nothing for longer than the grace period marks no node NotReady.

use std::fs;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use keel_apiserver::apimachinery::time::{MicroTime, Time};
use keel_testkit::kube::{Kube, kubectl_bin};
use keel_testkit::wait::until;
use keel_testkit::{Server, target_flavor};
use serde_json::{Value, json};

/// How long the controller may take to act (generous: the machine is shared).
const LIMIT: Duration = Duration::from_secs(90);

/// The controller's flags for these tests: a pass a second, six seconds of grace.
const FLAGS: [&str; 4] = [
    "--controllers=*",
    "--node-monitor-period=1s",
    "--node-monitor-grace-period=6s",
    "--node-startup-grace-period=1h",
];

/// A MicroTime for now (`2026-12-05T10:00:00.123456Z`).
fn micro_now() -> String {
    MicroTime::now().rfc3339()
}

/// Applies `obj` with kubectl.
fn apply(kube: &Kube, obj: &Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("obj.json");
    fs::write(&file, obj.to_string()).unwrap();
    kube.kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);
}

/// A node condition of `kind` as a kubelet posts it at `now`.
fn kubelet_condition(kind: &str, status: &str, now: &str) -> Value {
    let (reason, message) = match kind {
        "Ready" => ("KubeletReady", "kubelet is posting ready status"),
        "MemoryPressure" => (
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        "DiskPressure" => ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        _ => (
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
    };
    json!({"type": kind, "status": status, "reason": reason, "message": message,
           "lastHeartbeatTime": now, "lastTransitionTime": now})
}

/// Registers node `name` in `zone` as a kubelet does: the node, Ready (or, with
/// `ready: None`, without any status yet), and its Lease.
fn register(kube: &Kube, name: &str, zone: &str, ready: Option<&str>) {
    let now = Time::now().rfc3339();
    let mut node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/region": "test",
            "topology.kubernetes.io/zone": zone,
        }},
    });
    if let Some(status) = ready {
        node["status"] = json!({"conditions": [
            kubelet_condition("MemoryPressure", "False", &now),
            kubelet_condition("Ready", status, &now),
        ]});
    }
    apply(kube, &node);
    apply(
        kube,
        &json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": micro_now()},
        }),
    );
}

/// Renews the Leases of the nodes in `renewing` every half second, as kubelets do (all at
/// once, each with its own kubectl), until dropped.
struct Kubelets {
    renewing: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Kubelets {
    fn start(kube: &Kube) -> Kubelets {
        let renewing = Arc::new(Mutex::new(Vec::<String>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (list, stopped, kubeconfig) = (renewing.clone(), stop.clone(), kube.kubeconfig.clone());
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                let nodes = list.lock().unwrap().clone();
                let renewals: Vec<_> = nodes
                    .iter()
                    .filter_map(|node| {
                        let patch = json!({"spec": {"renewTime": micro_now()}}).to_string();
                        Command::new(kubectl_bin(None))
                            .arg("--kubeconfig")
                            .arg(&kubeconfig)
                            .args(["-n", "kube-node-lease", "patch", "lease", node])
                            .args(["--type=merge", "-p", &patch, "--request-timeout=2s"])
                            .stdin(Stdio::null())
                            .stdout(Stdio::null())
                            .stderr(Stdio::null())
                            .spawn()
                            .ok()
                    })
                    .collect();
                // A renewal may fail (the store is down): the next one tries again.
                for mut renewal in renewals {
                    let _ = renewal.wait();
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        Kubelets {
            renewing,
            stop,
            thread: Some(thread),
        }
    }

    /// Registers node `name` in `zone`, Ready, and renews its Lease from now on.
    fn join(&self, kube: &Kube, name: &str, zone: &str) {
        register(kube, name, zone, Some("True"));
        self.renew(name);
    }

    /// Stops renewing `node`'s Lease.
    fn stop_renewing(&self, node: &str) {
        self.renewing.lock().unwrap().retain(|n| n != node);
    }

    /// Renews `node`'s Lease again.
    fn renew(&self, node: &str) {
        self.renewing.lock().unwrap().push(node.to_string());
    }
}

impl Drop for Kubelets {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The node as JSON.
fn node(kube: &Kube, name: &str) -> Value {
    serde_json::from_str(&kube.kubectl_ok(&["get", "node", name, "-o", "json"])).unwrap()
}

fn condition<'a>(node: &'a Value, kind: &str) -> &'a Value {
    node["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

/// The node's taints as `key:effect`.
fn taints(node: &Value) -> Vec<String> {
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{}:{}",
                t["key"].as_str().unwrap(),
                t["effect"].as_str().unwrap()
            )
        })
        .collect()
}

const UNREACHABLE_NO_SCHEDULE: &str = "node.kubernetes.io/unreachable:NoSchedule";
const UNREACHABLE_NO_EXECUTE: &str = "node.kubernetes.io/unreachable:NoExecute";

/// Waits until `name`'s taints satisfy `want`; the node then.
fn until_taints(kube: &Kube, name: &str, what: &str, want: impl Fn(&[String]) -> bool) -> Value {
    until(&format!("{name}: {what}"), LIMIT, || {
        let node = node(kube, name);
        let t = taints(&node);
        if want(&t) {
            Ok(node)
        } else {
            Err(format!("{t:?}"))
        }
    })
}

fn start() -> (Server, Kube) {
    let store = Server::start(target_flavor());
    let kube = Kube::start_on_with(&store.client_url, &FLAGS);
    (store, kube)
}

#[test]
fn a_node_whose_renewals_stop_goes_unknown_and_tainted_and_comes_back_when_it_posts_ready() {
    let (_store, kube) = start();
    let kubelets = Kubelets::start(&kube);
    // Another zone stays healthy: were every zone lost, no NoExecute taint would be set.
    kubelets.join(&kube, "other-node", "z2");
    kubelets.join(&kube, "lost-node", "z1");

    // The beta OS and architecture labels follow the GA ones.
    until("the beta labels", LIMIT, || {
        let labels = node(&kube, "lost-node")["metadata"]["labels"].clone();
        match (
            &labels["beta.kubernetes.io/os"],
            &labels["beta.kubernetes.io/arch"],
        ) {
            (os, arch) if os == "linux" && arch == "amd64" => Ok(()),
            _ => Err(labels.to_string()),
        }
    });

    // Renewed every half second, the node outlives several grace periods as Ready.
    std::thread::sleep(Duration::from_secs(10));
    let alive = node(&kube, "lost-node");
    assert_eq!(condition(&alive, "Ready")["status"], "True", "{alive}");
    assert!(taints(&alive).is_empty(), "{alive}");

    let wait = Command::new(kubectl_bin(None))
        .arg("--kubeconfig")
        .arg(&kube.kubeconfig)
        .args([
            "wait",
            "--for=condition=Ready=Unknown",
            "node/lost-node",
            "--timeout=90s",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    kubelets.stop_renewing("lost-node");

    let lost = until_taints(
        &kube,
        "lost-node",
        "unreachable NoSchedule and NoExecute",
        |t| {
            t.iter().any(|t| t == UNREACHABLE_NO_SCHEDULE)
                && t.iter().any(|t| t == UNREACHABLE_NO_EXECUTE)
        },
    );
    let ready = condition(&lost, "Ready");
    assert_eq!(ready["status"], "Unknown", "{lost}");
    assert_eq!(ready["reason"], "NodeStatusUnknown");
    assert_eq!(ready["message"], "Kubelet stopped posting node status.");
    let memory = condition(&lost, "MemoryPressure");
    assert_eq!(memory["status"], "Unknown");
    assert_eq!(memory["reason"], "NodeStatusUnknown");
    for never in ["DiskPressure", "PIDPressure"] {
        let c = condition(&lost, never);
        assert_eq!(c["status"], "Unknown", "{never}: {lost}");
        assert_eq!(c["reason"], "NodeStatusNeverUpdated");
        assert_eq!(c["message"], "Kubelet never posted node status.");
    }
    for taint in lost["spec"]["taints"].as_array().unwrap() {
        assert!(taint["timeAdded"].is_string(), "{taint}");
    }
    let out = wait.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl wait: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "node/lost-node condition met"
    );
    let table = kube.kubectl_ok(&["get", "nodes", "lost-node", "--no-headers"]);
    assert_eq!(table.split_whitespace().nth(1), Some("NotReady"), "{table}");
    let events: Value =
        serde_json::from_str(&kube.kubectl_ok(&["get", "events", "-n", "default", "-o", "json"]))
            .unwrap();
    let about: Vec<(String, String)> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == "lost-node")
        .map(|e| {
            assert_eq!(e["source"]["component"], "node-controller", "{e}");
            assert_eq!(e["involvedObject"]["uid"], lost["metadata"]["uid"], "{e}");
            (
                e["reason"].as_str().unwrap().into(),
                e["message"].as_str().unwrap().into(),
            )
        })
        .collect();
    for (reason, message) in [
        (
            "RegisteredNode",
            "Node lost-node event: Registered Node lost-node in Controller",
        ),
        ("NodeNotReady", "Node lost-node status is now: NodeNotReady"),
    ] {
        assert!(
            about.contains(&(reason.to_string(), message.to_string())),
            "no {reason} event: {about:?}"
        );
    }
    let metrics = kube.kubectl_ok(&["get", "--raw", "/metrics"]);
    assert!(
        metrics.lines().any(
            |l| l.starts_with("node_collector_evictions_total{zone=\"test:") && !l.ends_with(" 0")
        ),
        "no eviction counted"
    );

    // The kubelet posts Ready again (a new heartbeat), and renews: the taints go.
    let now = Time::now().rfc3339();
    let status = json!({"status": {"conditions": [
        kubelet_condition("Ready", "True", &now),
        kubelet_condition("MemoryPressure", "False", &now),
        kubelet_condition("DiskPressure", "False", &now),
        kubelet_condition("PIDPressure", "False", &now),
    ]}});
    kube.kubectl_ok(&[
        "patch",
        "node",
        "lost-node",
        "--subresource=status",
        "--type=strategic",
        "-p",
        &status.to_string(),
    ]);
    kubelets.renew("lost-node");
    let back = until_taints(&kube, "lost-node", "no taints", <[String]>::is_empty);
    assert_eq!(condition(&back, "Ready")["status"], "True", "{back}");
    let table = kube.kubectl_ok(&["get", "nodes", "lost-node", "--no-headers"]);
    assert_eq!(table.split_whitespace().nth(1), Some("Ready"), "{table}");
}

#[test]
fn zone_disruption_stops_evictions_as_upstream_does() {
    let (_store, kube) = start();
    // Zone "small": five nodes, three of which have never posted their status (not Ready,
    // in their startup grace): partly disrupted, and small, so it sets no NoExecute taint.
    for name in ["small-new-1", "small-new-2", "small-new-3"] {
        register(&kube, name, "small", None);
    }
    let kubelets = Kubelets::start(&kube);
    for name in ["small-ok", "small-lost"] {
        kubelets.join(&kube, name, "small");
    }
    // Zone "healthy": two Ready nodes.
    for name in ["healthy-ok", "healthy-lost"] {
        kubelets.join(&kube, name, "healthy");
    }
    std::thread::sleep(Duration::from_secs(6));

    kubelets.stop_renewing("small-lost");
    kubelets.stop_renewing("healthy-lost");
    // The healthy zone's lost node is tainted NoExecute at the normal rate...
    until_taints(&kube, "healthy-lost", "unreachable NoExecute", |t| {
        t.iter().any(|t| t == UNREACHABLE_NO_EXECUTE)
    });
    let small = until_taints(&kube, "small-lost", "unreachable NoSchedule", |t| {
        t.iter().any(|t| t == UNREACHABLE_NO_SCHEDULE)
    });
    assert_eq!(condition(&small, "Ready")["status"], "Unknown", "{small}");
    // ...the partly disrupted zone's is not, however long it stays lost.
    std::thread::sleep(Duration::from_secs(5));
    let small = node(&kube, "small-lost");
    assert!(
        !taints(&small).iter().any(|t| t.ends_with(":NoExecute")),
        "a partly disrupted small zone set a NoExecute taint: {small}"
    );

    // Every zone fully disrupted: every NoExecute taint is lifted (the trouble is taken to
    // be the control plane's), the NoSchedule ones stay.
    kubelets.stop_renewing("small-ok");
    kubelets.stop_renewing("healthy-ok");
    let lifted = until_taints(&kube, "healthy-lost", "its NoExecute taint lifted", |t| {
        !t.iter().any(|t| t.ends_with(":NoExecute"))
    });
    assert!(
        taints(&lifted).iter().any(|t| t == UNREACHABLE_NO_SCHEDULE),
        "{lifted}"
    );
    for name in ["small-ok", "healthy-ok"] {
        until_taints(&kube, name, "unreachable NoSchedule", |t| {
            t.iter().any(|t| t == UNREACHABLE_NO_SCHEDULE)
        });
    }
    std::thread::sleep(Duration::from_secs(5));
    for name in ["small-ok", "small-lost", "healthy-ok", "healthy-lost"] {
        let n = node(&kube, name);
        assert_eq!(condition(&n, "Ready")["status"], "Unknown", "{n}");
        assert!(
            !taints(&n).iter().any(|t| t.ends_with(":NoExecute")),
            "a NoExecute taint while every zone is fully disrupted: {n}"
        );
    }
}

#[test]
fn a_store_that_answers_nothing_for_longer_than_the_grace_period_marks_no_node_not_ready() {
    let (store, kube) = start();
    let kubelets = Kubelets::start(&kube);
    kubelets.join(&kube, "steady-node", "z1");
    std::thread::sleep(Duration::from_secs(3));

    // Frozen for two grace periods: no renewal gets through, and no grace period runs.
    store.pause();
    std::thread::sleep(Duration::from_secs(12));
    store.resume();
    until("the controller to see the store back", LIMIT, || {
        let metrics = kube.kubectl(&["get", "--raw", "/metrics"]);
        let text = String::from_utf8_lossy(&metrics.stdout).into_owned();
        let paused = text
            .lines()
            .find(|l| l.starts_with("keel_node_lifecycle_monitor_paused "));
        let pauses = text
            .lines()
            .find(|l| l.starts_with("keel_node_lifecycle_monitor_pauses_total "));
        match (paused, pauses) {
            (Some(p), Some(n)) if p.ends_with(" 0") && !n.ends_with(" 0") => Ok(()),
            _ => Err(format!("{paused:?} {pauses:?}")),
        }
    });
    // Several passes later, with the renewals flowing again, the node never went Unknown.
    std::thread::sleep(Duration::from_secs(6));
    let steady = node(&kube, "steady-node");
    let ready = condition(&steady, "Ready");
    assert_eq!(ready["status"], "True", "{steady}");
    assert_eq!(ready["reason"], "KubeletReady", "{steady}");
    assert!(taints(&steady).is_empty(), "{steady}");
}
