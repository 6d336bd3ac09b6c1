//! `keel sim nodes` against `keel up` (against `keel apiserver` on etcd 3.5.1 with
//! `KEEL_TEST_TARGET=etcd`): a short run renews every lease about once a renewal interval
//! with no error, posts node status, reports one JSON object and deletes its Nodes and Leases;
//! with `--keep` the Nodes carry a kubelet's labels and status and their Leases are held by
//! the node with an owner reference to it, a node stopped by `--fail` stops renewing, and a
//! second run adopts the kept nodes and cleans them up; a node of the same name that is not
//! a simulated one is refused and left alone. Against the node lifecycle controller with a
//! short grace period, the nodes `--fail` stops are all seen NotReady within a grace period
//! and two monitor periods of their last heartbeat, and no other node is. With
//! `--event-writers`, against `keel up --events-store` (`keel apiserver` with an events
//! override on two etcd 3.5.1), the Events reported created are all in the events store and
//! none in the main one, counted apart from the renewals, and `--event-rate` is never
//! exceeded.

use std::process::{Command, Output};

use keel_testkit::kube::{Kube, Stack, events_store_flags};
use keel_testkit::{Flavor, Server, etcdctl_keys, keel_bin, target_flavor};
use serde_json::Value;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn start() -> Kube {
    start_with(&[])
}

/// [`start`] with `flags` for `keel up` or `keel apiserver`.
fn start_with(flags: &[&str]) -> Kube {
    match target_flavor() {
        Flavor::Keel => Kube::start_with(Stack::Up, flags),
        Flavor::Etcd => Kube::start_with(Stack::OnEtcd, flags),
    }
}

fn sim(kube: &Kube, args: &[&str]) -> Output {
    Command::new(keel_bin())
        .args(["sim", "nodes", "--kubeconfig"])
        .arg(&kube.kubeconfig)
        .args(args)
        .output()
        .expect("run keel sim nodes")
}

/// The JSON summary of a run that must succeed.
fn summary(kube: &Kube, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = sim(kube, &all);
    assert!(
        out.status.success(),
        "keel sim nodes {args:?} failed ({}):\n{}\n{}\nserver log:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr),
        kube.log()
    );
    serde_json::from_str(text(&out.stdout).trim()).expect("one JSON object")
}

fn count(report: &Value, field: &str) -> u64 {
    report[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} missing in {report}"))
}

fn number(report: &Value, field: &str) -> f64 {
    report[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} missing in {report}"))
}

/// The items of `kubectl get <what> -o json`.
fn items(kube: &Kube, what: &[&str]) -> Vec<Value> {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json"]);
    let list: Value = serde_json::from_str(&kube.kubectl_ok(&args)).expect("a JSON list");
    list["items"].as_array().cloned().unwrap_or_default()
}

fn names_with_prefix(items: &[Value], prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = items
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

#[test]
fn sim_nodes_renews_reports_and_cleans_up() {
    let kube = start();
    let (nodes, seconds, interval) = (20u64, 10u64, 1u64);
    let report = summary(
        &kube,
        &[
            "--count",
            "20",
            "--renew-interval",
            "1s",
            "--status-interval",
            "3s",
            "--duration",
            "10s",
        ],
    );
    assert_eq!(count(&report, "nodes"), nodes, "{report}");
    // About one renewal a node an interval (less jitter and latency, so a loose floor); never
    // more than one an interval (the next starts an interval after the last one ended), plus
    // one already due and one started before the steady phase that ends within it.
    let renewals = count(&report, "renewals");
    let expected = nodes * seconds / interval;
    assert!(
        renewals >= expected / 4 && renewals <= nodes * (seconds / interval + 2),
        "{renewals} renewals, about {expected} expected: {report}"
    );
    for zero in [
        "errors",
        "conflicts",
        "throttled",
        "failed_renewals",
        "failed_nodes",
        "false_not_ready",
    ] {
        assert_eq!(count(&report, zero), 0, "{zero}: {report}");
    }
    // Every node posts its status at least twice in ten seconds with a 3 s period.
    assert!(count(&report, "status_updates") >= 2 * nodes, "{report}");
    let (p50, p99) = (number(&report, "p50_ms"), number(&report, "p99_ms"));
    assert!(p50 > 0.0 && p99 >= p50, "{report}");
    assert!(number(&report, "renewals_per_s") > 0.0, "{report}");
    assert!(number(&report, "cpu_us_per_renewal") > 0.0, "{report}");
    assert!(report["not_ready_seconds_p50"].is_null(), "{report}");
    assert_eq!(report["protocol"], "HTTP/2", "{report}");

    // Everything it made is gone.
    let prefix = "keel-sim-node-";
    let nodes = items(&kube, &["nodes", "-l", "type=keel-sim"]);
    assert_eq!(names_with_prefix(&nodes, prefix), Vec::<String>::new());
    let leases = items(&kube, &["leases", "-n", "kube-node-lease"]);
    assert_eq!(names_with_prefix(&leases, prefix), Vec::<String>::new());
}

#[test]
fn sim_nodes_keep_adopt_and_refuse() {
    let kube = start();
    let prefix = "kept-";
    let report = summary(
        &kube,
        &[
            "--count",
            "5",
            "--name-prefix",
            prefix,
            "--renew-interval",
            "500ms",
            "--duration",
            "4s",
            "--fail",
            "1",
            "--fail-after",
            "1s",
            "--keep",
        ],
    );
    assert_eq!(count(&report, "nodes"), 5, "{report}");
    assert_eq!(count(&report, "failed_nodes"), 1, "{report}");
    assert_eq!(count(&report, "errors"), 0, "{report}");
    assert_eq!(report["kept"], true);

    // The nodes, as a kubelet registers them.
    let nodes = items(&kube, &["nodes", "-l", "type=keel-sim"]);
    let names = names_with_prefix(&nodes, prefix);
    assert_eq!(names, ["kept-0", "kept-1", "kept-2", "kept-3", "kept-4"]);
    let mut uids = std::collections::HashMap::new();
    let mut zones = std::collections::BTreeSet::new();
    for node in &nodes {
        let name = node["metadata"]["name"].as_str().unwrap();
        uids.insert(name.to_string(), node["metadata"]["uid"].clone());
        let labels = &node["metadata"]["labels"];
        assert_eq!(labels["kubernetes.io/hostname"], name, "{node}");
        assert_eq!(labels["kubernetes.io/os"], "linux", "{node}");
        zones.insert(labels["topology.kubernetes.io/zone"].to_string());
        let status = &node["status"];
        for field in ["cpu", "memory", "pods"] {
            assert!(status["capacity"][field].is_string(), "{field}: {node}");
            assert!(status["allocatable"][field].is_string(), "{field}: {node}");
        }
        let ready = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap_or_else(|| panic!("no Ready condition: {node}"));
        assert_eq!(ready["status"], "True", "{node}");
        assert_eq!(ready["reason"], "KubeletReady", "{node}");
        assert!(ready["lastHeartbeatTime"].is_string(), "{node}");
        assert_eq!(status["addresses"][1]["address"], name, "{node}");
        assert_eq!(status["nodeInfo"]["operatingSystem"], "linux", "{node}");
        assert!(status["nodeInfo"]["kubeletVersion"].is_string(), "{node}");
    }
    assert_eq!(zones.len(), 3, "{zones:?}");
    let table = kube.kubectl_ok(&["get", "nodes", "-l", "type=keel-sim"]);
    assert!(table.contains("kept-3   Ready"), "{table}");

    // The leases: held by their node for 40 s, owned by it.
    let leases = items(&kube, &["leases", "-n", "kube-node-lease"]);
    assert_eq!(names_with_prefix(&leases, prefix), names);
    let mut renewed = Vec::new();
    for lease in leases.iter().filter(|l| {
        l["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with(prefix))
    }) {
        let name = lease["metadata"]["name"].as_str().unwrap();
        assert_eq!(lease["spec"]["holderIdentity"], name, "{lease}");
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 40, "{lease}");
        let owner = &lease["metadata"]["ownerReferences"][0];
        assert_eq!(owner["apiVersion"], "v1", "{lease}");
        assert_eq!(owner["kind"], "Node", "{lease}");
        assert_eq!(owner["name"], name, "{lease}");
        assert_eq!(owner["uid"], uids[name], "{lease}");
        let renew_time = lease["spec"]["renewTime"].as_str().unwrap().to_string();
        renewed.push((renew_time, name.to_string()));
    }
    // The node stopped by --fail (the middle one) renewed last before the others stopped.
    renewed.sort();
    assert_eq!(renewed[0].1, "kept-2", "{renewed:?}");

    // A second run adopts the kept nodes and deletes them at the end.
    let report = summary(
        &kube,
        &[
            "--count",
            "5",
            "--name-prefix",
            prefix,
            "--renew-interval",
            "500ms",
            "--duration",
            "2s",
        ],
    );
    assert_eq!(count(&report, "nodes"), 5, "{report}");
    assert_eq!(count(&report, "errors"), 0, "{report}");
    let nodes = items(&kube, &["nodes", "-l", "type=keel-sim"]);
    assert_eq!(names_with_prefix(&nodes, prefix), Vec::<String>::new());
    let leases = items(&kube, &["leases", "-n", "kube-node-lease"]);
    assert_eq!(names_with_prefix(&leases, prefix), Vec::<String>::new());

    // A node of the same name that is not a simulated one: refused, and left alone.
    let manifest = kube.scratch.join("foreign.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Node\nmetadata: {name: foreign-0}\n",
    )
    .expect("write manifest");
    kube.kubectl_ok(&[
        "create",
        "--validate=false",
        "-f",
        &manifest.display().to_string(),
    ]);
    let out = sim(
        &kube,
        &[
            "--count",
            "1",
            "--name-prefix",
            "foreign-",
            "--duration",
            "2s",
        ],
    );
    assert!(!out.status.success(), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("node foreign-0 already exists and is not a simulated node"),
        "{stderr}"
    );
    kube.kubectl_ok(&["get", "node", "foreign-0"]);

    // Flags it cannot honour.
    let out = sim(
        &kube,
        &["--fail", "1", "--fail-after", "10s", "--duration", "5s"],
    );
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--fail-after (10s) must be shorter than --duration (5s)"),
        "{stderr}"
    );
}

#[test]
fn sim_nodes_times_not_ready_against_the_node_lifecycle_controller() {
    // A pass a second and five seconds of grace; the nodes renew every second.
    let (period, grace) = (1.0, 5.0);
    let kube = start_with(&[
        "--controllers=*",
        "--node-monitor-period=1s",
        "--node-monitor-grace-period=5s",
    ]);
    let args = "--count 20 --renew-interval 1s --duration 16s --fail 25% --fail-after 3s";
    let report = summary(&kube, &args.split(' ').collect::<Vec<_>>());
    // A quarter of the nodes stopped, each seen NotReady, and no other.
    for (field, want) in [
        ("nodes", 20),
        ("failed_nodes", 5),
        ("not_ready_nodes", 5),
        ("false_not_ready", 0),
    ] {
        assert_eq!(count(&report, field), want, "{field}: {report}");
    }
    // The controller judges a node by when it saw its last heartbeat, which is after the
    // simulator wrote it, so no stopped node goes NotReady sooner than a grace period after
    // it. It sees a heartbeat at its next pass, and marks the node at the first pass a grace
    // period after that: two periods late at most, plus the writes and the watch event
    // (generous: the machine is shared).
    let (p50, max) = (
        number(&report, "not_ready_seconds_p50"),
        number(&report, "not_ready_seconds_max"),
    );
    eprintln!(
        "sim_nodes: NotReady {p50} s (median) and {max} s (longest) after the last heartbeat"
    );
    assert!(
        grace <= p50 && p50 <= max && max <= grace + 2.0 * period + 5.0,
        "NotReady after {p50} s (median), {max} s (longest): {report}"
    );
}

/// An API server whose Events go to a store of their own: `keel up --events-store`, or
/// `keel apiserver` with an `/events` override on a second etcd 3.5.1. Also the main and the
/// events stores' client URLs, and the etcd servers to keep running.
fn start_with_events_store() -> (Kube, String, String, Vec<Server>) {
    match target_flavor() {
        Flavor::Keel => {
            let (flags, events) = events_store_flags("1h");
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            let kube = Kube::start_with(Stack::Up, &flags);
            let main = kube.store_url.clone();
            (kube, main, events, Vec::new())
        }
        Flavor::Etcd => {
            let (main, events) = (Server::start(Flavor::Etcd), Server::start(Flavor::Etcd));
            let flag = format!("--etcd-servers-overrides=/events#{}", events.client_url);
            let kube = Kube::start_on_with(&main.client_url, &[&flag]);
            let urls = (main.client_url.clone(), events.client_url.clone());
            (kube, urls.0, urls.1, vec![main, events])
        }
    }
}

#[test]
fn sim_nodes_event_writers_fill_the_events_store() {
    let (kube, main, events, _stores) = start_with_events_store();
    let nodes = "--count 10 --renew-interval 1s --duration 6s --event-writers 2";
    let report = summary(&kube, &nodes.split(' ').collect::<Vec<_>>());
    assert_eq!(count(&report, "nodes"), 10, "{report}");
    assert_eq!(count(&report, "event_writers"), 2, "{report}");
    let created = count(&report, "events_created");
    assert!(created > 0, "{report}");
    for zero in ["events_errors", "errors", "failed_renewals"] {
        assert_eq!(count(&report, zero), 0, "{zero}: {report}");
    }
    // The renewals are measured as without writers, the events apart.
    assert!(count(&report, "renewals") > 0, "{report}");
    let (p50, p99) = (
        number(&report, "events_p50_ms"),
        number(&report, "events_p99_ms"),
    );
    assert!(p50 > 0.0 && p99 >= p50, "{report}");
    let rate = number(&report, "events_per_s");
    assert!(rate > 0.0, "{report}");
    eprintln!(
        "sim_nodes: 2 writers created {created} events, {rate:.0}/s, p50 {p50} ms, p99 {p99} ms"
    );

    // Every event created is in the events store (a few more may have been answered after
    // the measured phase), about a simulated node; none is in the main store.
    let stored = etcdctl_keys(&events, "/registry/events/");
    assert!(
        stored.len() as u64 >= created,
        "{} events in the events store, {created} reported created",
        stored.len()
    );
    let prefix = "/registry/events/default/keel-sim-node-";
    let stray: Vec<_> = stored.iter().filter(|k| !k.starts_with(prefix)).collect();
    assert!(stray.is_empty(), "not simulated node events: {stray:?}");
    assert_eq!(
        etcdctl_keys(&main, "/registry/events/"),
        Vec::<String>::new(),
        "events in the main store"
    );
    // The nodes' cleanup is untouched by the writers: their Leases are gone.
    let leases = items(&kube, &["leases", "-n", "kube-node-lease"]);
    assert_eq!(
        names_with_prefix(&leases, "keel-sim-node-"),
        Vec::<String>::new()
    );

    // Paced: never more than the rate offered over the measured phase (plus the writers'
    // first events), and not far below it.
    let paced = "--count 10 --duration 6s --event-writers 2 --event-rate 20 --name-prefix paced-";
    let report = summary(&kube, &paced.split(' ').collect::<Vec<_>>());
    let (created, seconds) = (
        count(&report, "events_created"),
        number(&report, "duration_s"),
    );
    assert_eq!(count(&report, "event_rate"), 20, "{report}");
    assert!(
        created as f64 <= 20.0 * seconds + 2.0 && created as f64 >= 20.0 * seconds / 4.0,
        "{created} events in {seconds} s at 20/s: {report}"
    );
    assert_eq!(count(&report, "events_errors"), 0, "{report}");
}
