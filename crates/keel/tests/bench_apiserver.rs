//! `keel bench apiserver` against `keel up`: short, slow runs in which every acknowledged
//! lease update reaches every watcher (0 lost) and the command exits 0; its own namespace is
//! deleted afterwards, a namespace it is given is kept without the benchmark's leases; a
//! kubeconfig that cannot be read fails with a clear message.
//!
//! 1,000 watchers of leases cost the store one watch: `keel apiserver` on keel store and on
//! etcd 3.5.1 serves 1,000 HTTP/2 watches of a namespace's leases (100 to a connection) from
//! its watch cache, whose one store watch of leases was there before them, so the store's
//! `etcd_debugging_mvcc_watcher_total` rises by at most one while they are open; and every
//! update reaches all 1,000. The contrast shows what is measured: with `--watch-cache=false`
//! each client watch is a store watch of its own, and the store counts 1,000 more. Both stores
//! take the burst of small requests on the apiserver's one connection to them (a Range for
//! each cached watch's start, or 1,000 watch streams) without ending it.

use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, Stack};
use keel_testkit::{Flavor, Server, keel_bin};
use serde_json::Value;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn bench(kube: &Kube, extra: &[&str]) -> Output {
    Command::new(keel_bin())
        .args(["bench", "apiserver", "--kubeconfig"])
        .arg(&kube.kubeconfig)
        .args([
            "--clients",
            "4",
            "--watchers",
            "3",
            "--rate",
            "40",
            "--duration",
            "3s",
        ])
        .args(extra)
        .output()
        .expect("run keel bench apiserver")
}

fn succeeded(kube: &Kube, out: &Output) -> String {
    assert!(
        out.status.success(),
        "keel bench apiserver failed ({}):\n{}\n{}\nserver log:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr),
        kube.log()
    );
    text(&out.stdout)
}

/// Checks an HTTP/2 run's JSON report: every acknowledged update reached each of `watchers`
/// once.
fn delivered_to_all(report: &Value, watchers: u64, context: &str) {
    let count = |field: &str| {
        report[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{context}: {field} missing in {report}"))
    };
    assert_eq!(report["protocol"], "HTTP/2", "{context}");
    assert_eq!(count("watchers"), watchers, "{context}: {report}");
    assert!(count("updates") > 0, "{context}: {report}");
    assert_eq!(
        count("expected_events"),
        count("updates") * watchers,
        "{context}: {report}"
    );
    assert_eq!(
        count("received_events"),
        count("expected_events"),
        "{context}: {report}"
    );
    for field in ["lost", "duplicates", "mismatched", "failed_updates"] {
        assert_eq!(count(field), 0, "{context}: {field}: {report}");
    }
}

#[test]
fn bench_apiserver_against_keel_up() {
    let kube = Kube::start(Stack::Up);

    // A fresh namespace, JSON report.
    let out = bench(&kube, &["--json"]);
    let stdout = succeeded(&kube, &out);
    let report: Value = serde_json::from_str(stdout.trim()).expect("one JSON report");
    let count = |field: &str| {
        report[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field} missing in {report}"))
    };
    assert_eq!(report["op"], "apiserver");
    delivered_to_all(&report, 3, "keel up");
    assert_eq!(count("put_count"), count("updates") + count("conflicts"));

    // Its namespace goes away (the namespace controller deletes the leases first).
    let namespace = report["namespace"].as_str().expect("namespace").to_string();
    assert!(namespace.starts_with("keel-bench-"), "{namespace}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = kube.kubectl(&["get", "namespace", &namespace]);
        if !out.status.success() && text(&out.stderr).contains("NotFound") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "namespace {namespace} still there: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // A given namespace over HTTP/1.1, text report: kept, without the benchmark's leases.
    let manifest = kube.scratch.join("ns.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: given}\n",
    )
    .expect("write manifest");
    let manifest = manifest.display().to_string();
    let out = kube.kubectl(&["apply", "--validate=false", "-f", &manifest]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = bench(&kube, &["--namespace", "given", "--http1"]);
    let stdout = succeeded(&kube, &out);
    for needle in ["(HTTP/1.1), namespace given:", "  PUT\t"] {
        assert!(stdout.contains(needle), "{needle:?} missing in {stdout}");
    }
    let counted = |label: &str| {
        stdout.lines().find_map(|line| {
            let rest = line.trim().strip_prefix(label)?.strip_prefix(':')?;
            rest.trim().parse::<u64>().ok()
        })
    };
    assert_eq!(counted("Lost"), Some(0), "{stdout}");
    assert!(counted("Received").is_some_and(|n| n > 0), "{stdout}");
    let out = kube.kubectl(&["get", "leases", "-n", "given", "-o", "name"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "leases left behind");

    // A kubeconfig that cannot be read.
    let out = Command::new(keel_bin())
        .args([
            "bench",
            "apiserver",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ])
        .output()
        .expect("run keel bench apiserver");
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("cannot read the kubeconfig /nonexistent/kubeconfig"),
        "{stderr}"
    );
}

/// The lease watchers of the fan-out tests.
const WATCHERS: u64 = 1_000;

/// The store's watcher gauge (its watches of every client, the apiserver's included).
const GAUGE: &str = "etcd_debugging_mvcc_watcher_total";

fn gauge(store: &Server) -> f64 {
    store
        .metric(GAUGE)
        .unwrap_or_else(|| panic!("{} exports {GAUGE}", store.flavor.name()))
}

/// The gauge once the apiserver's own watches are all open: the same over a second.
fn settled(store: &Server) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = gauge(store);
    loop {
        thread::sleep(Duration::from_secs(1));
        let now = gauge(store);
        if now == last {
            return now;
        }
        assert!(Instant::now() < deadline, "{GAUGE} did not settle");
        last = now;
    }
}

/// Runs `keel bench apiserver` with 1,000 lease watchers against `kube`, sampling the
/// store's gauge meanwhile: its report and the highest sample.
fn fan_out(kube: &Kube, store: &Server) -> (Value, f64) {
    let per_conn = (WATCHERS / 10).to_string();
    let mut bench = Command::new(keel_bin())
        .args(["bench", "apiserver", "--json", "--kubeconfig"])
        .arg(&kube.kubeconfig)
        .args(["--watchers", &WATCHERS.to_string()])
        .args(["--watchers-per-conn", &per_conn])
        .args(["--clients", "2", "--rate", "20", "--duration", "3s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run keel bench apiserver");
    let mut highest = 0f64;
    while bench.try_wait().expect("the bench runs").is_none() {
        highest = highest.max(gauge(store));
        thread::sleep(Duration::from_millis(50));
    }
    let out = bench.wait_with_output().expect("the bench's output");
    let report = serde_json::from_str(succeeded(kube, &out).trim()).expect("one JSON report");
    (report, highest)
}

/// The rise of the store's watcher gauge while 1,000 clients watch leases through an
/// apiserver on a store of `flavor` started with `flags`.
fn store_watches_for_1000_watchers(flavor: Flavor, flags: &[&str]) -> f64 {
    let store = Server::start(flavor);
    let kube = Kube::start_on_with(&store.client_url, flags);
    let before = settled(&store);
    let (report, highest) = fan_out(&kube, &store);
    let context = format!("{} {flags:?}", flavor.name());
    delivered_to_all(&report, WATCHERS, &context);
    eprintln!("{context}: {GAUGE} {before}, at most {highest} while the watchers were open");
    highest - before
}

/// 1,000 lease watchers add at most one store watch on `flavor`, and without the watch cache
/// 1,000.
fn one_store_watch_with_the_cache_and_a_thousand_without(flavor: Flavor) {
    let rise = store_watches_for_1000_watchers(flavor, &[]);
    assert!(rise <= 1.0, "{}: {GAUGE} rose by {rise}", flavor.name());
    let uncached = store_watches_for_1000_watchers(flavor, &["--watch-cache=false"]);
    assert!(
        uncached >= WATCHERS as f64,
        "{}: without the watch cache {GAUGE} rose by {uncached}",
        flavor.name()
    );
}

#[test]
fn a_thousand_lease_watchers_cost_keel_store_one_watch() {
    one_store_watch_with_the_cache_and_a_thousand_without(Flavor::Keel);
}

#[test]
fn a_thousand_lease_watchers_cost_etcd_one_watch() {
    one_store_watch_with_the_cache_and_a_thousand_without(Flavor::Etcd);
}
