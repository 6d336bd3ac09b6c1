//! A CRD's life as operators live it, with the real kubectl on `keel up` and on `keel
//! apiserver --controllers=*` over etcd 3.5.1: a default added to the schema shows on the
//! objects stored before it (apiextensions-apiserver defaults what it reads); a version
//! retired (`served: false`) while the garbage collector follows its objects leaves the
//! collector working (it follows the version still served); a CRD deleted while it serves
//! no version takes its stored objects with it, without serving any version meanwhile (404
//! in discovery and for requests while a finalizer holds an object), so a CRD of the same
//! name made again finds none.

use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, Stack, fails, get_json, ok, text, write};
use keel_testkit::{CtlVersion, etcdctl};
use serde_json::{Value, json};

/// `gadgets.example.com`: v1alpha1 and v1 served, v1 stored; `spec.size` defaults to `s`.
fn crd(color_default: bool) -> Value {
    let mut spec = json!({"type": "object", "properties": {
        "size": {"type": "string", "default": "s"},
        "color": {"type": "string"},
    }});
    if color_default {
        spec["properties"]["color"]["default"] = json!("blue");
    }
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false, "schema": schema},
                {"name": "v1", "served": true, "storage": true, "schema": schema},
            ],
        },
    })
}

/// Waits until `check` holds (30 s at most).
fn eventually(kube: &Kube, what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "{what}\n{}", kube.log());
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn apply(kube: &Kube, name: &str, manifest: &Value) {
    let path = write(kube, name, &manifest.to_string());
    ok(kube, None, &["apply", "-f", &path]);
}

fn served(kube: &Kube) -> bool {
    kube.kubectl(&["get", "gadgets.v1.example.com"])
        .status
        .success()
}

/// The value stored at `key` (empty when there is none), read with etcdctl.
fn stored(kube: &Kube, key: &str) -> String {
    let args = ["get", key, "--print-value-only"].map(String::from);
    let out = etcdctl(CtlVersion::V35, &kube.store_url, &args, None);
    assert_eq!(out.code, 0, "etcdctl get: {}", out.stderr);
    out.stdout
}

fn gadget(kube: &Kube, name: &str) -> Option<Value> {
    let out = kube.kubectl(&["get", "gadgets", name, "-o", "json", "--ignore-not-found"]);
    let body = text(&out.stdout);
    (!body.trim().is_empty()).then(|| serde_json::from_str(&body).expect("JSON"))
}

fn lifecycle(stack: Stack) {
    let flags: &[&str] = if stack == Stack::Up {
        &[]
    } else {
        &["--controllers=*"]
    };
    let kube = Kube::start_with(stack, flags);
    apply(&kube, "crd.json", &crd(false));
    eventually(&kube, "the CRD is served", || served(&kube));

    // A default added later shows on an object stored before it.
    let owner = ok(
        &kube,
        None,
        &["create", "cm", "owner", "-o", "jsonpath={.metadata.uid}"],
    );
    let g = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g", "namespace": "default", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner}]},
        "spec": {}});
    apply(&kube, "g.json", &g);
    let before = get_json(&kube, None, &["gadget", "g"]);
    assert_eq!(before["spec"], json!({"size": "s"}));
    apply(&kube, "crd.json", &crd(true));
    eventually(&kube, "the new default shows on a stored object", || {
        gadget(&kube, "g").is_some_and(|g| g["spec"]["color"] == "blue")
    });
    let old_version = get_json(&kube, None, &["gadgets.v1alpha1.example.com", "g"]);
    assert_eq!(old_version["spec"], json!({"size": "s", "color": "blue"}));

    // v1alpha1 retired: the collector still follows the gadgets (through v1), and still
    // works for every kind.
    let mut retired = crd(true);
    retired["spec"]["versions"][0]["served"] = json!(false);
    apply(&kube, "crd.json", &retired);
    eventually(&kube, "v1alpha1 is no longer served", || {
        !kube
            .kubectl(&["get", "gadgets.v1alpha1.example.com"])
            .status
            .success()
    });
    std::thread::sleep(Duration::from_secs(4));
    ok(&kube, None, &["delete", "cm", "owner"]);
    eventually(&kube, "the gadget whose owner went is collected", || {
        gadget(&kube, "g").is_none()
    });
    ok(&kube, None, &["create", "deployment", "d", "--image=nginx"]);
    ok(
        &kube,
        None,
        &[
            "delete",
            "deployment",
            "d",
            "--cascade=orphan",
            "--timeout=20s",
        ],
    );

    // A CRD that serves no version, deleted: its objects go with it, deleted through storage
    // with no version served meanwhile (one held by a finalizer: it is marked in the store,
    // while discovery and requests still answer 404 for every version).
    apply(&kube, "g2.json", &{
        let mut g = g.clone();
        g["metadata"] = json!({"name": "kept", "namespace": "default",
            "finalizers": ["example.com/hold"]});
        g
    });
    let mut none_served = retired.clone();
    none_served["spec"]["versions"][1]["served"] = json!(false);
    apply(&kube, "crd.json", &none_served);
    eventually(&kube, "no version is served", || !served(&kube));
    ok(
        &kube,
        None,
        &["delete", "crd", "gadgets.example.com", "--wait=false"],
    );
    eventually(
        &kube,
        "the cleanup marks the held gadget in the store",
        || {
            stored(&kube, "/registry/example.com/gadgets/default/kept")
                .contains("deletionTimestamp")
        },
    );
    for path in [
        "/apis/example.com/v1",
        "/apis/example.com/v1alpha1",
        "/apis/example.com/v1/namespaces/default/gadgets/kept",
        "/apis/example.com/v1/gadgets",
    ] {
        let refused = fails(&kube, None, &["get", "--raw", path]);
        assert!(
            refused.contains("Error from server (NotFound)"),
            "{path}: {refused}"
        );
    }
    let groups = ok(&kube, None, &["get", "--raw", "/apis"]);
    assert!(!groups.contains("example.com"), "{groups}");
    assert!(!served(&kube));
    // v1 served again (the CRD may still be changed): the finalizer can be taken off.
    apply(&kube, "crd.json", &retired);
    eventually(&kube, "v1 is served again", || served(&kube));
    ok(
        &kube,
        None,
        &[
            "patch",
            "gadgets.v1.example.com",
            "kept",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    ok(
        &kube,
        None,
        &[
            "wait",
            "--for=delete",
            "crd/gadgets.example.com",
            "--timeout=30s",
        ],
    );
    apply(&kube, "crd.json", &crd(false));
    eventually(&kube, "the CRD is served again", || served(&kube));
    assert!(
        gadget(&kube, "kept").is_none(),
        "an object of a deleted CRD came back\n{}",
        kube.log()
    );

    // The system priority classes cannot be deleted (a deletecollection does not ask, as
    // upstream's).
    let refused = fails(
        &kube,
        None,
        &["delete", "priorityclass", "system-node-critical"],
    );
    assert!(
        refused.contains(
            "priorityclasses.scheduling.k8s.io \"system-node-critical\" is forbidden: \
             this is a system priority class and cannot be deleted"
        ),
        "{refused}"
    );
}

#[test]
fn crd_lifecycle_on_keel_up() {
    lifecycle(Stack::Up);
}

#[test]
fn crd_lifecycle_on_keel_apiserver_on_etcd() {
    lifecycle(Stack::OnEtcd);
}
