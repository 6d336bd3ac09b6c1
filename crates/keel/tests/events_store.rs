//! Events in a store of their own: `keel up --events-store` (a second embedded store in
//! `DIR/events`) and `keel apiserver --etcd-servers-overrides=/events#...` on two real etcd
//! 3.5.1 stores. Events land only in the events store and everything else only in the main
//! one (read with etcdctl on both); they expire with their store lease (`--event-ttl`
//! shortened); `/readyz?verbose` has kube-apiserver's `etcd-override-0` and
//! `etcd-override-readiness-0` checks (skipped by `?exclude=etcd`); `/metrics` has a
//! `apiserver_storage_size_bytes` per store; and a flood of events written through the
//! apiserver never stops a Lease renewal on the main store from succeeding, while one store
//! lease serves up to 1,000 of its events (`etcd_lease_object_counts`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use keel_testkit::kube::{Kube, Stack, events_store_flags};
use keel_testkit::{CtlVersion, Flavor, Server, etcdctl, etcdctl_keys as keys};

/// The number of leases the store at `endpoint` holds.
fn leases(endpoint: &str) -> usize {
    let out = etcdctl(
        CtlVersion::V35,
        endpoint,
        &["lease".into(), "list".into()],
        None,
    );
    assert_eq!(out.code, 0, "etcdctl lease list: {}", out.stderr);
    // "found N leases", then one hex lease id per line.
    out.stdout
        .lines()
        .filter(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_hexdigit()))
        .count()
}

/// Creates the core/v1 Event `name` in `default`.
fn create_event(kube: &Kube, name: &str) {
    let file = kube.scratch.join(format!("{name}.json"));
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p1"},
        "reason": "Scheduled", "message": "assigned to n1", "type": "Normal",
    });
    std::fs::write(&file, event.to_string()).expect("write the event");
    kube.kubectl_ok(&["create", "-f", &file.display().to_string()]);
}

/// Checks where an Event and a ConfigMap written through `kube` landed: the event only in
/// the store at `events`, the ConfigMap only in the one at `main`.
fn events_are_kept_apart(kube: &Kube, main: &str, events: &str) {
    create_event(kube, "e1");
    // events.k8s.io/v1 Events are stored with core/v1 ones: in the events store too.
    let file = kube.scratch.join("e2.json");
    let event = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e2", "namespace": "default"},
        "eventTime": "2026-12-06T10:00:00.000000Z",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "p1"},
        "reason": "Scheduled", "note": "assigned to n1", "type": "Normal",
        "action": "Binding", "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-n0",
    });
    std::fs::write(&file, event.to_string()).expect("write the event");
    kube.kubectl_ok(&["create", "-f", &file.display().to_string()]);
    kube.kubectl_ok(&["create", "configmap", "c1", "--from-literal=a=b"]);
    assert_eq!(
        keys(events, "/registry/events/"),
        ["/registry/events/default/e1", "/registry/events/default/e2"]
    );
    assert!(
        keys(main, "/registry/events/").is_empty(),
        "an event in the main store"
    );
    assert_eq!(
        keys(main, "/registry/configmaps/default/c1"),
        ["/registry/configmaps/default/c1"]
    );
    assert!(
        keys(events, "/registry/configmaps/").is_empty(),
        "a ConfigMap in the events store"
    );
    assert!(
        leases(events) >= 1,
        "the event's TTL is a lease of the events store"
    );
    // Read back through the API, listed and watched from its store.
    let listed = kube.kubectl_ok(&["get", "events", "-o", "name"]);
    assert!(listed.contains("event/e1"), "{listed}");
}

/// `/readyz?verbose` has a check for each store, and `?exclude=etcd` skips both.
fn health_checks_name_each_store(kube: &Kube) {
    let verbose = kube.kubectl_ok(&["get", "--raw", "/readyz?verbose"]);
    for check in [
        "[+]etcd ok",
        "[+]etcd-readiness ok",
        "[+]etcd-override-0 ok",
        "[+]etcd-override-readiness-0 ok",
    ] {
        assert!(verbose.contains(check), "{check} missing:\n{verbose}");
    }
    let excluded = kube.kubectl_ok(&["get", "--raw", "/healthz?verbose&exclude=etcd"]);
    assert!(
        excluded.contains("[+]etcd-override-0 excluded: ok"),
        "{excluded}"
    );
    assert!(excluded.contains("[+]etcd excluded: ok"), "{excluded}");
    assert_eq!(
        kube.kubectl_ok(&["get", "--raw", "/readyz/etcd-override-0"]),
        "ok"
    );
}

/// `/metrics` shows the size of both stores.
fn sizes_are_reported_per_store(kube: &Kube) {
    let metrics = kube.kubectl_ok(&["get", "--raw", "/metrics"]);
    for id in ["etcd-0", "etcd-1"] {
        let line = format!("apiserver_storage_size_bytes{{storage_cluster_id=\"{id}\"}} ");
        let size: f64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(line.as_str()))
            .unwrap_or_else(|| panic!("no {line} in /metrics"))
            .parse()
            .expect("a size");
        assert!(size > 0.0, "{line}{size}");
    }
}

/// Waits until the Event `name` is gone through the API and from the store at `events`.
fn event_expires(kube: &Kube, events: &str, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let gone = !kube.kubectl(&["get", "event", name]).status.success()
            && keys(events, "/registry/events/").is_empty();
        if gone {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the event outlived its TTL by a minute"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn keel_up_keeps_events_in_a_store_of_their_own() {
    let (flags, events) = events_store_flags("5s");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let kube = Kube::start_with(Stack::Up, &flags);
    events_are_kept_apart(&kube, &kube.store_url, &events);
    health_checks_name_each_store(&kube);
    sizes_are_reported_per_store(&kube);
    event_expires(&kube, &events, "e1");
    let data = kube.scratch.join("keel.data");
    assert!(
        data.join("events/keel.lock").exists(),
        "the events store has its own lock"
    );
    assert!(
        data.join("events/member/wal").is_dir(),
        "the events store has its own WAL"
    );
}

#[test]
fn keel_apiserver_routes_events_to_their_override_on_etcd() {
    let main = Server::start(Flavor::Etcd);
    let events = Server::start(Flavor::Etcd);
    let flags = [
        format!("--etcd-servers-overrides=/events#{}", events.client_url),
        "--event-ttl=5s".to_string(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let kube = Kube::start_on_with(&main.client_url, &flags);
    events_are_kept_apart(&kube, &main.client_url, &events.client_url);
    health_checks_name_each_store(&kube);
    sizes_are_reported_per_store(&kube);
    event_expires(&kube, &events.client_url, "e1");
}

/// What `keel` says on stderr when it refuses to start with `args`.
fn refusal(args: &[&str]) -> String {
    let out = std::process::Command::new(keel_testkit::keel_bin())
        .args(args)
        .output()
        .expect("run keel");
    assert!(!out.status.success(), "keel {args:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_malformed_override_is_refused_with_kube_apiservers_words() {
    let err = refusal(&[
        "apiserver",
        "--etcd-servers=http://127.0.0.1:1",
        "--etcd-servers-overrides=events#http://127.0.0.1:2",
    ]);
    assert!(
        err.contains("--etcd-servers-overrides invalid, must be of format: group/resource#servers"),
        "{err}"
    );
    let err = refusal(&[
        "up",
        "--events-store",
        "--etcd-servers-overrides=/events#http://127.0.0.1:2",
    ]);
    assert!(
        err.contains("--events-store and an --etcd-servers-overrides entry"),
        "{err}"
    );
}

#[test]
fn a_flood_of_events_never_stops_lease_renewals() {
    let (flags, events) = events_store_flags("1h");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let kube = Arc::new(Kube::start_with(Stack::Up, &flags));
    let lease = kube.scratch.join("lease.json");
    std::fs::write(
        &lease,
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "n1", "namespace": "default"},
            "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40},
        })
        .to_string(),
    )
    .expect("write the lease");
    kube.kubectl_ok(&["create", "-f", &lease.display().to_string()]);
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    // Four writers, each creating events in batches of 50 through kubectl.
    let flood: Vec<_> = (0..4)
        .map(|w| {
            let (kube, stop, written) = (kube.clone(), stop.clone(), written.clone());
            std::thread::spawn(move || {
                let file = kube.scratch.join(format!("flood-{w}.json"));
                for round in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let items: Vec<_> = (0..50)
                        .map(|i| {
                            json!({
                                "apiVersion": "v1", "kind": "Event",
                                "metadata": {"name": format!("f{w}-{round}-{i}"), "namespace": "default"},
                                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p1"},
                                "reason": "Flood", "message": "x".repeat(512), "type": "Normal",
                            })
                        })
                        .collect();
                    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
                    std::fs::write(&file, list.to_string()).expect("write the events");
                    if kube
                        .kubectl(&["create", "-f", &file.display().to_string()])
                        .status
                        .success()
                    {
                        written.fetch_add(50, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    // Renew the Lease as a kubelet would for 20 s, while the flood runs.
    let started = Instant::now();
    let mut renewals = 0;
    while started.elapsed() < Duration::from_secs(20) {
        let at = Instant::now();
        let now = format!("{:?}", std::time::SystemTime::now());
        let patch =
            json!({"spec": {"renewTime": "2026-12-06T10:00:00.000000Z", "holderIdentity": now}});
        let out = kube.kubectl(&[
            "patch",
            "lease",
            "n1",
            "--type=merge",
            "-p",
            &patch.to_string(),
        ]);
        assert!(
            out.status.success(),
            "a renewal failed during the flood: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            at.elapsed() < Duration::from_secs(10),
            "a renewal waited {:?} behind the flood",
            at.elapsed()
        );
        renewals += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for writer in flood {
        writer.join().expect("a flood writer");
    }
    let written = written.load(Ordering::Relaxed);
    assert!(written >= 200, "the flood wrote only {written} events");
    assert!(renewals >= 10, "only {renewals} renewals in 20 s");
    assert!(
        keys(&kube.store_url, "/registry/events/").is_empty(),
        "flooded events reached the main store"
    );
    // One store lease serves up to 1,000 events written within its reuse window (60 s).
    let leases = leases(&events);
    let metrics = kube.kubectl_ok(&["get", "--raw", "/metrics"]);
    let counts: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("etcd_lease_object_counts"))
        .collect();
    assert!(
        leases >= 1 && leases as u64 <= written / 1000 + 1,
        "{leases} leases for {written} events; {counts:?}"
    );
    assert!(
        !counts.is_empty(),
        "no etcd_lease_object_counts in /metrics"
    );
}

#[test]
fn turning_the_events_store_on_or_off_for_a_folder_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let with_events = tmp.path().join("with");
    let (flags, _) = events_store_flags("1h");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut kube = Kube::start_up_in_with(&with_events, &flags);
    kube.kill();
    let err = refusal(&["up", &format!("--data-dir={}", with_events.display())]);
    assert!(err.contains("start it with --events-store"), "{err}");

    let without = tmp.path().join("without");
    let mut kube = Kube::start_up_in(&without);
    kube.kill();
    let mut args = vec![
        "up".to_string(),
        format!("--data-dir={}", without.display()),
    ];
    args.extend(flags.iter().map(|f| f.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let err = refusal(&args);
    assert!(err.contains("was created without --events-store"), "{err}");
}
