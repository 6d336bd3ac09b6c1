//! `keel bench apiserver` against `keel up`: short, slow runs in which every acknowledged
//! lease update reaches every watcher (0 lost) and the command exits 0; its own namespace is
//! deleted afterwards, a namespace it is given is kept without the benchmark's leases; a
//! kubeconfig that cannot be read fails with a clear message.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use keel_testkit::keel_bin;
use keel_testkit::kube::{Kube, Stack};
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
    assert_eq!(report["protocol"], "HTTP/2");
    assert!(count("updates") > 0, "{report}");
    assert_eq!(count("failed_updates"), 0, "{report}");
    assert_eq!(count("lost"), 0, "{report}");
    assert_eq!(count("duplicates"), 0, "{report}");
    assert_eq!(count("mismatched"), 0, "{report}");
    assert_eq!(count("expected_events"), count("updates") * 3, "{report}");
    assert_eq!(
        count("received_events"),
        count("expected_events"),
        "{report}"
    );
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
