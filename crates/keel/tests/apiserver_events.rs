//! events.k8s.io/v1 and core/v1 Events are one resource, stored once as core/v1 Events as
//! kube-apiserver stores them: an Event written through either API is read through the
//! other with its fields renamed, and the store holds the core/v1 form.

use std::process::Command;

use serde_json::{Value, json};

use keel_testkit::CtlVersion;
use keel_testkit::kube::{Kube, Stack};

fn raw(kube: &Kube, args: &[&str]) -> Value {
    serde_json::from_str(&kube.kubectl_ok(args)).expect("a JSON answer")
}

fn create(kube: &Kube, path: &str, body: &Value) -> Value {
    let file = kube.scratch.join("event.json");
    std::fs::write(&file, body.to_string()).expect("write the event");
    raw(
        kube,
        &["create", "--raw", path, "-f", &file.display().to_string()],
    )
}

/// The stored value of `key`, read with etcdctl.
fn stored(kube: &Kube, key: &str) -> Value {
    let out = Command::new(CtlVersion::V35.bin())
        .args([
            &format!("--endpoints={}", kube.store_url),
            "get",
            key,
            "--print-value-only",
        ])
        .output()
        .expect("run etcdctl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON value in the store")
}

#[test]
fn an_event_written_through_either_api_is_read_through_the_other() {
    let kube = Kube::start(Stack::Up);
    let new_api = "/apis/events.k8s.io/v1/namespaces/default/events";
    let core_api = "/api/v1/namespaces/default/events";

    create(
        &kube,
        new_api,
        &json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1"},
            "eventTime": "2026-12-04T10:00:00.000000Z",
            "regarding": {"kind": "Pod", "namespace": "default", "name": "p1"},
            "reason": "Scheduled", "note": "assigned to n1", "type": "Normal",
            "action": "Binding", "reportingController": "default-scheduler",
            "reportingInstance": "default-scheduler-n0",
        }),
    );
    let core = raw(&kube, &["get", "--raw", &format!("{core_api}/e1")]);
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["involvedObject"]["name"], "p1");
    assert_eq!(core["message"], "assigned to n1");
    assert_eq!(core["reportingComponent"], "default-scheduler");
    assert!(core.get("regarding").is_none(), "{core}");

    let in_store = stored(&kube, "/registry/events/default/e1");
    assert_eq!(in_store["apiVersion"], "v1", "{in_store}");
    assert_eq!(in_store["involvedObject"]["name"], "p1", "{in_store}");
    assert!(in_store.get("note").is_none(), "{in_store}");

    create(
        &kube,
        core_api,
        &json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e2"},
            "involvedObject": {"kind": "Node", "name": "n1"},
            "reason": "Starting", "message": "kubelet started", "type": "Normal",
            "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2026-12-04T10:00:00Z", "lastTimestamp": "2026-12-04T10:00:00Z",
            "count": 1,
        }),
    );
    let new = raw(&kube, &["get", "--raw", &format!("{new_api}/e2")]);
    assert_eq!(new["apiVersion"], "events.k8s.io/v1");
    assert_eq!(new["regarding"]["name"], "n1");
    assert_eq!(new["note"], "kubelet started");
    assert_eq!(new["deprecatedSource"]["component"], "kubelet");
    assert_eq!(new["deprecatedCount"], 1);

    // Both lists hold both events, each in its own shape.
    for (api, field) in [(new_api, "note"), (core_api, "message")] {
        let listed = raw(&kube, &["get", "--raw", api]);
        let texts: Vec<&str> = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e[field].as_str().unwrap_or(""))
            .collect();
        assert_eq!(texts, ["assigned to n1", "kubelet started"], "{api}");
    }
}
