//! The apiserver's watch gauges as an operator reads them on `/metrics`: an open
//! `kubectl get -w` counts in `apiserver_registered_watchers` and
//! `apiserver_longrunning_requests` while it runs and stops counting when it ends, and the
//! configmaps' watch cache counts the events it took from the store, those it handed to its
//! watchers and the revision it reflects, and the watch counts the event it sent and its size
//! (`apiserver_watch_events_total`, `apiserver_watch_events_sizes`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, Stack, kubectl_bin};

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
