//! Watches as kubectl reads them from `keel up` and from `keel apiserver` on etcd 3.5.1, for
//! a kind served by the watch cache (configmaps) and one that is not (events, as
//! kube-apiserver leaves them out): a watch from a resourceVersion in the store's history
//! delivers every change after it in order, and one from a compacted resourceVersion is
//! answered 200 with one ERROR event carrying a 410 Expired Status, as kube-apiserver answers
//! it, however the watch is served.

use std::process::Command;

use keel_testkit::CtlVersion;
use keel_testkit::kube::{Kube, Stack};
use serde_json::Value;

/// The events a `kubectl get --raw` of `path` printed (a watch that ends after its
/// timeoutSeconds), as (type, name, resourceVersion or the Status's code).
fn watch(kube: &Kube, path: &str) -> Vec<(String, String, String)> {
    let out = kube.kubectl_ok(&["get", "--raw", path]);
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let event: Value = serde_json::from_str(l).expect("a JSON watch event");
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

#[test]
fn watches_deliver_or_expire_in_the_stream_on_keel_up() {
    run(Stack::Up);
}

#[test]
fn watches_deliver_or_expire_in_the_stream_on_etcd() {
    run(Stack::OnEtcd);
}
