//! The apiserver's watch gauges as an operator reads them on `/metrics`: an open
//! `kubectl get -w` counts in `apiserver_registered_watchers` and
//! `apiserver_longrunning_requests` while it runs and stops counting when it ends, and the
//! configmaps' watch cache counts the events it took from the store, those it handed to its
//! watchers and the revision it reflects, and the watch counts the event it sent and its size
//! (`apiserver_watch_events_total`, `apiserver_watch_events_sizes`).
//!
//! A watch from a compacted resourceVersion is answered 200 with one 410 Expired event, so
//! `apiserver_request_total{code="410"}` does not see it: each such watch counts once in
//! `keel_apiserver_watch_expired_total` of its resource, with the watch cache and without.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, Stack, kubectl_bin};
use keel_testkit::{CtlVersion, etcdctl};
use serde_json::Value;

const WATCHERS: &str =
    "apiserver_registered_watchers{group=\"\",kind=\"ConfigMap\",version=\"v1\"}";

/// The value of the sample named `series` (its full name with labels), if it is there.
fn sample(kube: &Kube, series: &str) -> Option<f64> {
    let out = kube.kubectl(&["get", "--raw", "/metrics"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

fn wait_for(kube: &Kube, series: &str, want: f64) {
    let started = Instant::now();
    loop {
        let got = sample(kube, series);
        if got == Some(want) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{series} is {got:?}, not {want}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_open_watch_counts_as_a_registered_watcher_until_it_ends() {
    let kube = Kube::start(Stack::Up);
    let mut watch = Command::new(kubectl_bin(None))
        .arg("--kubeconfig")
        .arg(&kube.kubeconfig)
        .args(["get", "configmaps", "-A", "-w"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kubectl get -w");
    wait_for(&kube, WATCHERS, 1.0);
    let long = "apiserver_longrunning_requests{";
    let out = kube.kubectl(&["get", "--raw", "/metrics"]);
    let metrics = String::from_utf8_lossy(&out.stdout);
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with(long) && l.contains("verb=\"WATCH\"") && l.ends_with(" 1")),
        "no long-running WATCH counted:\n{metrics}"
    );
    let cache = |name: &str| format!("{name}{{group=\"\",resource=\"configmaps\"}}");
    let received = cache("apiserver_watch_cache_events_received_total");
    let before = sample(&kube, &received).expect("the configmaps' watch cache is counted");
    let dispatched = cache("apiserver_watch_cache_events_dispatched_total");
    let dispatched_before = sample(&kube, &dispatched).expect("dispatched events are counted");
    let sent = |name: &str| format!("{name}{{group=\"\",version=\"v1\",resource=\"configmaps\"}}");
    let events = sent("apiserver_watch_events_total");
    let sent_before = sample(&kube, &events).expect("the open watch's events are counted");
    kube.kubectl_ok(&["create", "configmap", "counted", "-n", "default"]);
    let created = kube.kubectl_ok(&[
        "get",
        "configmap",
        "counted",
        "-n",
        "default",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let created: f64 = created.trim().parse().expect("a resourceVersion");
    wait_for(&kube, &received, before + 1.0);
    wait_for(&kube, &dispatched, dispatched_before + 1.0);
    // The open watch sent the ADDED event (a Table), its size in upstream's buckets (1 KiB
    // doubling to 128 KiB).
    wait_for(&kube, &events, sent_before + 1.0);
    let sizes = sent("apiserver_watch_events_sizes_count");
    assert_eq!(sample(&kube, &sizes), Some(sent_before + 1.0));
    let bytes = sample(&kube, &sent("apiserver_watch_events_sizes_sum"));
    assert!(bytes.is_some_and(|b| b > 100.0), "{bytes:?}");
    for le in ["1024.0", "131072.0", "+Inf"] {
        let bucket = format!(
            "apiserver_watch_events_sizes_bucket{{le=\"{le}\",group=\"\",version=\"v1\",resource=\"configmaps\"}}"
        );
        assert!(sample(&kube, &bucket).is_some(), "no {bucket}");
    }
    let revision = cache("apiserver_watch_cache_resource_version");
    let reflected = sample(&kube, &revision).expect("the cache's resourceVersion");
    assert!(reflected >= created, "{reflected} < {created}");
    assert_eq!(
        sample(&kube, &cache("apiserver_watch_cache_initializations_total")),
        Some(1.0)
    );
    watch.kill().expect("stop the watch");
    let _ = watch.wait();
    wait_for(&kube, WATCHERS, 0.0);
}

const EXPIRED: &str = "keel_apiserver_watch_expired_total";

/// The store's current revision, as `etcdctl endpoint status` reports it.
fn store_revision(kube: &Kube) -> i64 {
    let args = ["endpoint", "status", "-w", "json"].map(String::from);
    let status = etcdctl(CtlVersion::V35, &kube.store_url, &args, None);
    assert_eq!(status.code, 0, "etcdctl endpoint status: {}", status.stderr);
    serde_json::from_str::<Value>(&status.stdout).expect("a JSON status")[0]["Status"]["header"]
        ["revision"]
        .as_i64()
        .expect("a revision")
}

/// A watch of `resource` in `default` from `from`: the events it printed.
fn watch_from(kube: &Kube, resource: &str, from: &str) -> Vec<Value> {
    let path = format!("/api/v1/namespaces/default/{resource}?watch=1&resourceVersion={from}");
    let out = kube.kubectl_ok(&["get", "--raw", &path, "--request-timeout=10s"]);
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON watch event"))
        .collect()
}

fn expired_watches_are_counted(flags: &[&str]) {
    let kube = Kube::start_with(Stack::Up, flags);
    kube.kubectl_ok(&["create", "configmap", "first", "-n", "default"]);
    let list = kube.kubectl_ok(&["get", "--raw", "/api/v1/namespaces/default/configmaps"]);
    let list: Value = serde_json::from_str(&list).expect("a list");
    let old = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("the list's resourceVersion")
        .to_string();
    for name in ["second", "third"] {
        kube.kubectl_ok(&["create", "configmap", name, "-n", "default"]);
    }
    let revision = store_revision(&kube);
    let compact = etcdctl(
        CtlVersion::V35,
        &kube.store_url,
        &["compact".into(), revision.to_string()],
        None,
    );
    assert_eq!(compact.code, 0, "etcdctl compact: {}", compact.stderr);

    let configmaps = "resource=\"configmaps\"";
    let before = kube.metric_sum(EXPIRED, configmaps);
    for n in 1..=3 {
        let events = watch_from(&kube, "configmaps", &old);
        assert_eq!(events.len(), 1, "{flags:?}: {events:?}");
        let (event, status) = (&events[0], &events[0]["object"]);
        assert_eq!(event["type"], "ERROR", "{flags:?}: {event}");
        assert_eq!(
            (&status["code"], &status["reason"]),
            (&Value::from(410), &Value::from("Expired")),
            "{flags:?}: {event}"
        );
        assert_eq!(
            kube.metric_sum(EXPIRED, configmaps),
            before + f64::from(n),
            "{flags:?}"
        );
    }
    // Labelled with the watch's resource: an expired watch of events counts there alone.
    let events = "resource=\"events\"";
    let events_before = kube.metric_sum(EXPIRED, events);
    let answered = watch_from(&kube, "events", &old);
    assert_eq!(
        answered[0]["object"]["code"], 410,
        "{flags:?}: {answered:?}"
    );
    assert_eq!(kube.metric_sum(EXPIRED, events), events_before + 1.0);
    assert_eq!(kube.metric_sum(EXPIRED, configmaps), before + 3.0);
    // The watches were answered 200: the request counter has no 410 for them.
    assert_eq!(
        kube.metric_sum("apiserver_request_total", "code=\"410\""),
        0.0,
        "{flags:?}"
    );
}

#[test]
fn watches_from_a_compacted_resource_version_count_as_expired() {
    expired_watches_are_counted(&[]);
}

#[test]
fn watches_from_a_compacted_resource_version_count_as_expired_without_the_watch_cache() {
    expired_watches_are_counted(&["--watch-cache=false"]);
}
