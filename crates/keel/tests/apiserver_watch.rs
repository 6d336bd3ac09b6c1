//! Watches as kubectl reads them from `keel up` and from `keel apiserver` on etcd 3.5.1, for
//! a kind served by the watch cache (configmaps) and one that is not (events, as
//! kube-apiserver leaves them out): a watch from a resourceVersion in the store's history
//! delivers every change after it in order, and one from a compacted resourceVersion is
//! answered 200 with one ERROR event carrying a 410 Expired Status, as kube-apiserver answers
//! it, however the watch is served.
//!
//! Streaming lists and bookmarks, on both stacks, for the cached kind and the uncached one: a
//! watch with `sendInitialEvents=true` (or a watch from "" that says nothing, as 1.34
//! defaults it) sends the current objects as ADDED and then one BOOKMARK annotated
//! `k8s.io/initial-events-end: "true"` at a revision not older than a list made before;
//! the watch cache serves those initial objects as a consistent read (its list and
//! consistent-read counts move);
//! `sendInitialEvents=false` sends only the changes after the resourceVersion; one from a
//! resourceVersion the store has not reached gets an ERROR event with a 504 Status; options
//! combined wrongly are refused 422 with kube-apiserver's message; and a cached watch with
//! `allowWatchBookmarks=true` gets a BOOKMARK 2 s before its end, after the changes it sent
//! and not older than them.

use std::process::Command;

use keel_testkit::CtlVersion;
use keel_testkit::kube::{Kube, Stack};
use serde_json::Value;

/// The events a `kubectl get --raw` of `path` printed (a watch that ends after its
/// timeoutSeconds).
fn events_of(kube: &Kube, path: &str) -> Vec<Value> {
    let out = kube.kubectl_ok(&["get", "--raw", path]);
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON watch event"))
        .collect()
}

/// The events a `kubectl get --raw` of `path` printed (a watch that ends after its
/// timeoutSeconds), as (type, name, resourceVersion or the Status's code).
fn watch(kube: &Kube, path: &str) -> Vec<(String, String, String)> {
    events_of(kube, path)
        .iter()
        .map(|event| {
            let object = &event["object"];
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let rv_or_code = match object["metadata"]["resourceVersion"].as_str() {
                Some(rv) => rv.to_string(),
                None => format!("{} {}", object["code"], object["reason"]),
            };
            let kind = event["type"].as_str().unwrap_or_default().to_string();
            (kind, name.to_string(), rv_or_code)
        })
        .collect()
}

/// The configmaps lists the watch cache served (`apiserver_cache_list_total`) and its
/// consistent reads that did not fall back to the store, from `/metrics`.
fn cache_reads(kube: &Kube) -> (u64, u64) {
    let metrics = kube.kubectl_ok(&["get", "--raw", "/metrics"]);
    let sum = |name: &str, labels: &[&str]| -> u64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(name) && labels.iter().all(|label| l.contains(label)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    let configmaps = "resource=\"configmaps\"";
    (
        sum("apiserver_cache_list_total{", &[configmaps]),
        sum(
            "apiserver_watch_cache_consistent_read_total{",
            &[configmaps, "success=\"true\"", "fallback=\"false\""],
        ),
    )
}

fn rv(kube: &Kube, args: &[&str]) -> String {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "jsonpath={.metadata.resourceVersion}"]);
    kube.kubectl_ok(&all).trim().to_string()
}

fn run(stack: Stack) {
    let kube = Kube::start(stack);
    kube.kubectl_ok(&["create", "namespace", "w"]);
    kube.kubectl_ok(&["create", "configmap", "c", "-n", "w"]);
    let start = rv(&kube, &["configmap", "c", "-n", "w"]);
    kube.kubectl_ok(&["label", "configmap", "c", "-n", "w", "a=b"]);
    let labelled = rv(&kube, &["configmap", "c", "-n", "w"]);
    let event = r#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"e","namespace":"w"},
        "involvedObject":{"kind":"ConfigMap","name":"c","namespace":"w"},"reason":"R"}"#;
    let path = "/api/v1/namespaces/w/events";
    let file = kube.scratch.join("event.json");
    std::fs::write(&file, event).unwrap();
    kube.kubectl_ok(&["create", "--raw", path, "-f", file.to_str().unwrap()]);
    let event_rv = rv(&kube, &["event", "e", "-n", "w"]);
    kube.kubectl_ok(&["delete", "configmap", "c", "-n", "w"]);
    let list = kube.kubectl_ok(&["get", "--raw", "/api/v1/namespaces/w/configmaps"]);
    let list: Value = serde_json::from_str(&list).expect("a list");
    let deleted = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    let configmaps = |from: &str| {
        watch(
            &kube,
            &format!(
                "/api/v1/namespaces/w/configmaps?watch=1&resourceVersion={from}&timeoutSeconds=1"
            ),
        )
    };
    let events = |from: &str| {
        watch(
            &kube,
            &format!("/api/v1/namespaces/w/events?watch=1&resourceVersion={from}&timeoutSeconds=1"),
        )
    };
    let e = |t: &str, n: &str, rv: &str| (t.to_string(), n.to_string(), rv.to_string());
    assert_eq!(
        configmaps(&start),
        [e("MODIFIED", "c", &labelled), e("DELETED", "c", &deleted)],
        "{stack:?}"
    );
    assert_eq!(events(&start), [e("ADDED", "e", &event_rv)], "{stack:?}");

    // Compact past the start: both watches answer 200 and one ERROR event.
    let compact = Command::new(CtlVersion::V35.bin())
        .args([
            &format!("--endpoints={}", kube.store_url),
            "compact",
            &deleted,
        ])
        .output()
        .expect("run etcdctl");
    assert!(compact.status.success(), "{compact:?}");
    let expired = [e("ERROR", "", "410 \"Expired\"")];
    assert_eq!(configmaps(&start), expired, "{stack:?}");
    assert_eq!(events(&start), expired, "{stack:?}");
    // From the compaction's own revision a watch goes on as before: it delivers a change
    // made after it (an empty answer would not tell a served watch from a refused one).
    kube.kubectl_ok(&["create", "configmap", "d", "-n", "w"]);
    let recreated = rv(&kube, &["configmap", "d", "-n", "w"]);
    assert_eq!(
        configmaps(&deleted),
        [e("ADDED", "d", &recreated)],
        "{stack:?}"
    );
}

/// The resourceVersion of `event`'s object, as a number.
fn revision(event: &Value) -> i64 {
    let rv = event["object"]["metadata"]["resourceVersion"].as_str();
    rv.and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {event}"))
}

/// Checks that `events` are ADDED events of `names` (in order) followed by the bookmark that
/// ends the initial events, an object of `kind` with only its resourceVersion (not older
/// than `listed`) and the annotation.
fn streamed_list(events: &[Value], names: &[&str], kind: &str, listed: i64, stack: Stack) {
    let added: Vec<_> = events
        .iter()
        .map(|e| (e["type"].as_str(), e["object"]["metadata"]["name"].as_str()))
        .collect();
    let mut want: Vec<_> = names.iter().map(|n| (Some("ADDED"), Some(*n))).collect();
    want.push((Some("BOOKMARK"), None));
    assert_eq!(added, want, "{stack:?}: {events:?}");
    let end = events.last().unwrap();
    let rv = revision(end);
    assert!(
        rv >= listed,
        "{stack:?}: the bookmark's {rv} before {listed}"
    );
    assert!(
        events[..names.len()].iter().all(|e| revision(e) <= rv),
        "{stack:?}: {events:?}"
    );
    let mut bookmark = serde_json::json!({
        "kind": kind,
        "apiVersion": "v1",
        "metadata": {
            "resourceVersion": rv.to_string(),
            "creationTimestamp": null,
            "annotations": {"k8s.io/initial-events-end": "true"}
        }
    });
    if kind == "Event" {
        // core/v1 Event's zero value: the structs and strings Go always writes.
        for (field, zero) in [
            ("involvedObject", serde_json::json!({})),
            ("source", serde_json::json!({})),
            ("reportingComponent", serde_json::json!("")),
            ("reportingInstance", serde_json::json!("")),
        ] {
            bookmark[field] = zero;
        }
    }
    assert_eq!(end["object"], bookmark, "{stack:?}");
}

fn streaming_lists_and_bookmarks(stack: Stack) {
    let kube = Kube::start(stack);
    kube.kubectl_ok(&["create", "namespace", "s"]);
    kube.kubectl_ok(&["create", "configmap", "one", "-n", "s"]);
    kube.kubectl_ok(&["label", "configmap", "one", "-n", "s", "t=s"]);
    let before_two = rv(&kube, &["configmap", "one", "-n", "s"]);
    kube.kubectl_ok(&["create", "configmap", "two", "-n", "s"]);
    kube.kubectl_ok(&["label", "configmap", "two", "-n", "s", "t=s"]);
    let two = rv(&kube, &["configmap", "two", "-n", "s"]);
    let event = r#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"e","namespace":"s"},
        "involvedObject":{"kind":"ConfigMap","name":"one","namespace":"s"},"reason":"R"}"#;
    let file = kube.scratch.join("event.json");
    std::fs::write(&file, event).unwrap();
    let events_path = "/api/v1/namespaces/s/events";
    kube.kubectl_ok(&["create", "--raw", events_path, "-f", file.to_str().unwrap()]);
    let list = kube.kubectl_ok(&["get", "--raw", "/api/v1/namespaces/s/configmaps"]);
    let list: Value = serde_json::from_str(&list).expect("a list");
    let listed: i64 = list["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .expect("the list's resourceVersion");

    // Only the labelled configmaps: keel up's controllers add kube-root-ca.crt.
    let configmaps = "/api/v1/namespaces/s/configmaps?watch=1&labelSelector=t%3Ds&timeoutSeconds=1";
    let streaming =
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";
    let served_before = cache_reads(&kube);
    let list = events_of(&kube, &format!("{configmaps}&{streaming}"));
    streamed_list(&list, &["one", "two"], "ConfigMap", listed, stack);
    // From "" without sendInitialEvents, as kube-apiserver 1.34 defaults it.
    let defaulted = events_of(&kube, &format!("{configmaps}&allowWatchBookmarks=true"));
    streamed_list(&defaulted, &["one", "two"], "ConfigMap", listed, stack);
    // Both initial lists were consistent reads served by the watch cache, as kube-apiserver's
    // Cacher serves them, not store lists.
    let (lists, consistent) = served_before;
    assert_eq!(
        cache_reads(&kube),
        (lists + 2, consistent + 2),
        "{stack:?}: the watch cache's list and consistent read counts"
    );
    // Not cached (events): the same.
    let events = events_of(
        &kube,
        &format!("{events_path}?watch=1&timeoutSeconds=1&{streaming}"),
    );
    streamed_list(&events, &["e"], "Event", listed, stack);

    // sendInitialEvents=false: the changes after the resourceVersion alone (two's label
    // brings it into the selection: ADDED).
    let after = watch(
        &kube,
        &format!(
            "{configmaps}&sendInitialEvents=false&resourceVersionMatch=NotOlderThan\
             &resourceVersion={before_two}"
        ),
    );
    let e = |t: &str, n: &str, rv: &str| (t.to_string(), n.to_string(), rv.to_string());
    assert_eq!(after, [e("ADDED", "two", &two)], "{stack:?}");
    // A resourceVersion the store has not reached: 504 in the stream.
    let ahead = events_of(
        &kube,
        &format!("{configmaps}&{streaming}&resourceVersion=999999999"),
    );
    assert_eq!(ahead.len(), 1, "{stack:?}: {ahead:?}");
    assert_eq!(ahead[0]["type"], "ERROR", "{stack:?}");
    assert_eq!(ahead[0]["object"]["code"], 504, "{stack:?}");
    let message = ahead[0]["object"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Too large resource version: 999999999, current: "),
        "{stack:?}: {message}"
    );
    // Options combined wrongly: 422, as kube-apiserver's validation words it.
    let refused = kube.kubectl(&[
        "get",
        "--raw",
        "/api/v1/namespaces/s/configmaps?watch=1&sendInitialEvents=true",
    ]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && stderr.contains(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
            ),
        "{stack:?}: {stderr}"
    );

    // A bookmark 2 s before the end (1 s into a 3 s watch), after the change it follows.
    let marked = events_of(
        &kube,
        &format!(
            "/api/v1/namespaces/s/configmaps?watch=1&labelSelector=t%3Ds&timeoutSeconds=3\
             &allowWatchBookmarks=true&resourceVersion={before_two}"
        ),
    );
    let types: Vec<_> = marked.iter().map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types,
        [Some("ADDED"), Some("BOOKMARK")],
        "{stack:?}: {marked:?}"
    );
    let two: i64 = two.parse().unwrap();
    assert!(revision(&marked[1]) >= two, "{stack:?}: {marked:?}");
    assert!(
        marked[1]["object"]["metadata"]["annotations"].is_null(),
        "{stack:?}: {marked:?}"
    );
}

#[test]
fn streaming_lists_and_bookmarks_on_keel_up() {
    streaming_lists_and_bookmarks(Stack::Up);
}

#[test]
fn streaming_lists_and_bookmarks_on_etcd() {
    streaming_lists_and_bookmarks(Stack::OnEtcd);
}

#[test]
fn watches_deliver_or_expire_in_the_stream_on_keel_up() {
    run(Stack::Up);
}

#[test]
fn watches_deliver_or_expire_in_the_stream_on_etcd() {
    run(Stack::OnEtcd);
}
