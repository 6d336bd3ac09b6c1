//! Graceful deletion of pods as a kubelet and kubectl see it, on `keel up`: a pod bound to a
//! node stays, Terminating, with its grace period until the kubelet confirms (a delete with
//! grace 0); a shorter grace period replaces a longer one but never the other way; an
//! unbound pod goes at once; a watch sees the Terminating state and then the deletion. A
//! delete that leaves the pod Terminating answers 200 with the pod, and 202 only when asked
//! with `orphanDependents=false`, as kube-apiserver's delete handler answers.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use keel_testkit::kube::{Kube, Stack, kubectl_bin};

fn apply(kube: &Kube, name: &str, node: Option<&str>) {
    let node = node.map_or(String::new(), |n| format!("  nodeName: {n}\n"));
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{node}  \
         terminationGracePeriodSeconds: 30\n  containers:\n  - name: c\n    image: busybox\n"
    );
    let file = kube.scratch.join(format!("{name}.yaml"));
    std::fs::write(&file, manifest).expect("write the manifest");
    kube.kubectl_ok(&["apply", "-f", &file.display().to_string()]);
}

fn field(kube: &Kube, pod: &str, path: &str) -> String {
    kube.kubectl_ok(&["get", "pod", pod, "-o", &format!("jsonpath={{{path}}}")])
}

fn exists(kube: &Kube, pod: &str) -> bool {
    let out = kube.kubectl(&["get", "pod", pod, "--ignore-not-found", "-o", "name"]);
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

/// Seconds since the epoch of an RFC 3339 UTC timestamp (`2026-12-04T10:00:00Z`).
fn seconds(ts: &str) -> i64 {
    let n = |range: std::ops::Range<usize>| -> i64 { ts[range].parse().expect("a timestamp") };
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)
}

#[test]
fn a_negative_grace_period_reads_as_one_second() {
    let kube = Kube::start(Stack::Up);
    apply(&kube, "short", Some("n1"));
    // kubectl reads --grace-period=-1 as "the default": ask the API directly.
    let path = "/api/v1/namespaces/default/pods/short?gracePeriodSeconds=-1";
    kube.kubectl_ok(&["delete", "--raw", path]);
    assert_eq!(
        field(&kube, "short", ".metadata.deletionGracePeriodSeconds"),
        "1"
    );
}

#[test]
fn a_bound_pod_terminates_gracefully_until_its_kubelet_confirms() {
    let kube = Kube::start(Stack::Up);
    apply(&kube, "bound", Some("n1"));
    apply(&kube, "unbound", None);

    // A watch from now on, as a kubelet's on its pods.
    let rv = field(&kube, "bound", ".metadata.resourceVersion");
    let mut watch = Command::new(kubectl_bin(None))
        .arg("--kubeconfig")
        .arg(&kube.kubeconfig)
        .args([
            "get",
            "--raw",
            &format!("/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a watch");
    let mut events = BufReader::new(watch.stdout.take().expect("the watch's output")).lines();

    assert_eq!(
        kube.kubectl_ok(&["delete", "pod", "unbound", "--wait=false"]),
        "pod \"unbound\" deleted\n"
    );
    assert!(!exists(&kube, "unbound"), "an unbound pod goes at once");

    // kubectl -v=6 logs each request's code.
    let answered = |args: &[&str]| {
        let out = kube.kubectl(&[args, &["-v=6"][..]].concat());
        assert!(out.status.success(), "{out:?}");
        let log = String::from_utf8_lossy(&out.stderr).into_owned();
        let delete = log.lines().find(|l| l.contains("DELETE https://"));
        delete
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no DELETE in {log}"))
    };
    let marked = answered(&["delete", "pod", "bound", "--wait=false"]);
    assert!(marked.contains(" 200 OK "), "{marked}");
    assert!(exists(&kube, "bound"), "a bound pod waits for its kubelet");
    let path = "/api/v1/namespaces/default/pods/bound?orphanDependents=false";
    let accepted = answered(&["delete", "--raw", path]);
    assert!(accepted.contains(" 202 Accepted "), "{accepted}");
    assert_eq!(
        field(&kube, "bound", ".metadata.deletionGracePeriodSeconds"),
        "30"
    );
    assert!(!field(&kube, "bound", ".metadata.deletionTimestamp").is_empty());
    let listed = kube.kubectl_ok(&["get", "pods"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("bound") && l.contains("Terminating")),
        "{listed}"
    );

    // A shorter grace period replaces the running one, the deletion time moved up by the
    // difference; a longer one changes nothing.
    let at = |kube: &Kube| seconds(&field(kube, "bound", ".metadata.deletionTimestamp"));
    let first = at(&kube);
    for (asked, left) in [("5", "5"), ("20", "5")] {
        let grace = format!("--grace-period={asked}");
        kube.kubectl_ok(&["delete", "pod", "bound", "--wait=false", &grace]);
        let now = field(&kube, "bound", ".metadata.deletionGracePeriodSeconds");
        assert_eq!(now, left, "after a delete with {grace}");
        assert_eq!(at(&kube), first - 25, "after a delete with {grace}");
    }

    // The kubelet confirms: grace 0 removes it.
    let confirm = ["--grace-period=0", "--force", "--wait=false"];
    kube.kubectl_ok(&[&["delete", "pod", "bound"][..], &confirm].concat());
    assert!(!exists(&kube, "bound"), "gone once confirmed");

    // The watch saw: unbound created and deleted; bound modified with a deletionTimestamp
    // (grace 30, then 5, then 0 when confirmed), then deleted, as kube-apiserver writes the
    // shortened grace period before it deletes.
    let mut seen = Vec::new();
    for line in events.by_ref() {
        let event: serde_json::Value =
            serde_json::from_str(&line.expect("a watch line")).expect("a JSON event");
        let meta = &event["object"]["metadata"];
        seen.push(format!(
            "{} {} {}",
            event["type"].as_str().unwrap_or(""),
            meta["name"].as_str().unwrap_or(""),
            meta["deletionGracePeriodSeconds"]
        ));
        if seen.last().is_some_and(|s| s.starts_with("DELETED bound")) {
            break;
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(
        seen,
        [
            "ADDED unbound null",
            "DELETED unbound null",
            "MODIFIED bound 30",
            "MODIFIED bound 5",
            "MODIFIED bound 0",
            "DELETED bound 0",
        ]
    );
}
