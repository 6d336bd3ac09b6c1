//! The monitoring shipped in `deploy/`: every metric an alert rule or a dashboard panel reads
//! is one `keel up` exports (its apiserver's `/metrics` or its store's), and Prometheus's own
//! `promtool check rules` accepts the rules.

use std::collections::BTreeSet;
use std::path::PathBuf;

use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, Stack};
use keel_testkit::{Cluster, Flavor, http_get, keel_bin, skip};

fn deploy(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(path)
}

/// The PromQL expressions of the rules file and of the dashboard's panels.
fn expressions() -> Vec<String> {
    let rules = std::fs::read_to_string(deploy("prometheus/keel-rules.yaml")).unwrap();
    let mut exprs: Vec<String> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr: "))
        .map(str::to_string)
        .collect();
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(deploy("grafana/keel-triage.json")).unwrap())
            .expect("the dashboard is JSON");
    assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 36);
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(target["expr"].as_str().unwrap().to_string());
        }
    }
    assert!(exprs.len() > 20, "{exprs:?}");
    exprs
}

/// The metric names `expr` reads (a histogram's series named by its family).
fn metrics_of(expr: &str) -> BTreeSet<String> {
    let names = regex::Regex::new(r"[a-zA-Z_][a-zA-Z0-9_]*").unwrap();
    const PREFIXES: [&str; 6] = [
        "etcd_",
        "apiserver_",
        "node_collector_",
        "keel_",
        "process_",
        "grpc_",
    ];
    names
        .find_iter(expr)
        .map(|m| m.as_str())
        .filter(|n| PREFIXES.iter().any(|p| n.starts_with(p)))
        .map(|n| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| n.strip_suffix(s))
                .unwrap_or(n)
                .to_string()
        })
        .collect()
}

/// Whether `text` (one or more `/metrics` pages) exports `name`, exactly: a sample named
/// `name` (or a histogram's `name_bucket`, `name_sum`, `name_count`), or a `# TYPE` line of
/// the family `name`; a counter is read as `NAME_total`, its family written with or without
/// the `_total` (Prometheus's text format, OpenMetrics).
fn exports(text: &str, name: &str) -> bool {
    text.lines().any(|l| match l.strip_prefix("# TYPE ") {
        Some(t) => {
            let mut words = t.split(' ');
            let (family, kind) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
            match kind {
                "counter" => {
                    name.ends_with("_total")
                        && (family == name || name.strip_suffix("_total") == Some(family))
                }
                _ => family == name,
            }
        }
        None if l.starts_with('#') => false,
        None => {
            let sample = l.split(['{', ' ']).next().unwrap_or("");
            sample == name
                || ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|suffix| sample.strip_suffix(suffix) == Some(name))
        }
    })
}

#[test]
fn every_rule_and_panel_reads_a_metric_keel_exports() {
    let wanted: BTreeSet<String> = expressions().iter().flat_map(|e| metrics_of(e)).collect();
    // A labelled family is exported once it has a sample: give each something to count. The
    // apiserver: requests, a watch held open, a Node for the lifecycle controller's zones.
    let kube = Kube::start(Stack::Up);
    kube.kubectl_ok(&["get", "namespaces"]);
    let node = kube.scratch.join("node.json");
    let manifest = serde_json::json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
    });
    std::fs::write(&node, manifest.to_string()).unwrap();
    kube.kubectl_ok(&["create", "-f", &node.display().to_string()]);
    let _watch = kube.watch("/api/v1/configmaps?watch=1");
    // The store: peers, with messages lost for a moment.
    let cluster = Cluster::start(Flavor::Keel, 3, &[]);
    let endpoints = cluster.endpoints();
    let fault = |args: &[&str]| {
        let out = std::process::Command::new(keel_bin())
            .arg("fault")
            .args(args)
            .args(["--etcd-servers", &endpoints])
            .output()
            .expect("keel fault");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    fault(&["set", "peer.drop=0.3"]);
    std::thread::sleep(Duration::from_secs(1));
    fault(&["clear"]);

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut exported = kube.kubectl_ok(&["get", "--raw", "/metrics"]);
        let (status, store) = http_get(kube.store_url.trim_start_matches("http://"), "/metrics");
        assert_eq!(status, 200);
        exported.push_str(&store);
        for member in &cluster.members {
            exported.push_str(&member.metrics());
        }
        let missing: Vec<_> = wanted.iter().filter(|n| !exports(&exported, n)).collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "read by a rule or panel but not exported: {missing:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn a_metric_is_exported_by_its_exact_name() {
    let text = "# TYPE etcd_disk_wal_fsync_duration_seconds histogram\n\
                etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 3\n\
                # TYPE etcd_server_slow_apply counter\n\
                etcd_server_slow_apply_total 2\n\
                etcd_network_peer_sent_failures_total{To=\"a\"} 1\n";
    for name in [
        "etcd_disk_wal_fsync_duration_seconds",
        "etcd_server_slow_apply_total",
        "etcd_network_peer_sent_failures_total",
    ] {
        assert!(exports(text, name), "{name}");
    }
    // Only a prefix of a real name, a counter read without `_total`, or a suffix that is
    // not a histogram's: not exported.
    for name in [
        "etcd_disk_wal_fsync",
        "etcd_disk_wal_fsync_duration",
        "etcd_server_slow",
        "etcd_server_slow_apply",
        "etcd_network_peer_sent_failures",
    ] {
        assert!(!exports(text, name), "{name}");
    }
}

#[test]
fn promtool_accepts_the_rules() {
    let Ok(out) = std::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(deploy("prometheus/keel-rules.yaml"))
        .output()
    else {
        skip(
            "promtool_accepts_the_rules",
            "no promtool (apt-get install prometheus)",
        );
        return;
    };
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
