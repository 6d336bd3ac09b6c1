//! The garbage collector with the real kubectl, on `keel up` and on `keel apiserver
//! --controllers=*` over etcd 3.5.1: a dependent whose owner is deleted (kubectl's default
//! background cascade) is deleted after it; `--cascade=foreground` keeps the owner (with
//! the `foregroundDeletion` finalizer) until the dependents that block it are gone, and a
//! dependent held by a finalizer of its own holds the owner too; `--cascade=orphan` removes
//! the owner and leaves the dependent without its reference; a dependent created naming an
//! owner that never existed is deleted; a foreground deletion interrupted by a kill -9
//! finishes after the restart; deleting a Deployment removes the ReplicaSet it owns and the
//! pods that ReplicaSet owns, as kube-controller-manager's collector does. Without a collector
//! (`keel apiserver`'s default controllers) a foreground delete waits, as kube-apiserver's
//! does without kube-controller-manager, unless `--enable-garbage-collector=false`.

use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, Stack, ok, text, write};
use serde_json::{Value, json};

fn get(kube: &Kube, name: &str) -> Option<Value> {
    let out = kube.kubectl(&["get", "cm", name, "-o", "json", "--ignore-not-found"]);
    let body = text(&out.stdout);
    (!body.trim().is_empty()).then(|| serde_json::from_str(&body).expect("JSON"))
}

/// Creates ConfigMap `name`, owned by the objects `owners` (name, uid, blockOwnerDeletion),
/// with `finalizers`; its uid.
fn create(kube: &Kube, name: &str, owners: &[(&str, &str, bool)], finalizers: &[&str]) -> String {
    let refs: Vec<Value> = owners
        .iter()
        .map(|(owner, uid, block)| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid,
                   "blockOwnerDeletion": block})
        })
        .collect();
    let mut metadata = json!({"name": name, "namespace": "default"});
    if !refs.is_empty() {
        metadata["ownerReferences"] = refs.into();
    }
    if !finalizers.is_empty() {
        metadata["finalizers"] = json!(finalizers);
    }
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata});
    let path = write(kube, &format!("{name}.json"), &manifest.to_string());
    // The uid from the create's answer: the collector may take a dependent at once.
    ok(
        kube,
        None,
        &["create", "-f", &path, "-o", "jsonpath={.metadata.uid}"],
    )
}

/// Waits until `check` holds (20 s at most).
fn eventually(kube: &Kube, what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "{what}\n{}", kube.log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn collects(stack: Stack) {
    let flags: &[&str] = if stack == Stack::Up {
        &[]
    } else {
        &["--controllers=*"]
    };
    let mut kube = Kube::start_with(stack, flags);

    // Background: the owner goes at once, its dependent after it.
    let owner = create(&kube, "bg-owner", &[], &[]);
    create(&kube, "bg-dependent", &[("bg-owner", &owner, false)], &[]);
    ok(&kube, None, &["delete", "cm", "bg-owner"]);
    eventually(&kube, "the dependent is collected", || {
        get(&kube, "bg-dependent").is_none()
    });

    // Foreground: the owner waits for its blocking dependent, which waits for its own
    // finalizer.
    let owner = create(&kube, "fg-owner", &[], &[]);
    create(
        &kube,
        "fg-dependent",
        &[("fg-owner", &owner, true)],
        &["example.com/hold"],
    );
    ok(
        &kube,
        None,
        &[
            "delete",
            "cm",
            "fg-owner",
            "--cascade=foreground",
            "--wait=false",
        ],
    );
    eventually(&kube, "the dependent is being deleted", || {
        get(&kube, "fg-dependent").is_some_and(|d| d["metadata"]["deletionTimestamp"].is_string())
    });
    let held = get(&kube, "fg-owner").expect("the owner waits for its dependent");
    assert_eq!(
        held["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    assert!(held["metadata"]["deletionTimestamp"].is_string());

    // Killed mid-deletion: the collector picks it up again from the store.
    kube.kill_and_restart();
    std::thread::sleep(Duration::from_secs(1));
    assert!(get(&kube, "fg-owner").is_some(), "the owner still waits");
    ok(
        &kube,
        None,
        &[
            "patch",
            "cm",
            "fg-dependent",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    eventually(&kube, "the owner goes after its dependent", || {
        get(&kube, "fg-owner").is_none() && get(&kube, "fg-dependent").is_none()
    });

    // Orphan: the owner goes, the dependent stays without its reference.
    let owner = create(&kube, "or-owner", &[], &[]);
    create(
        &kube,
        "or-dependent",
        &[("or-owner", &owner, true), ("other", "no-such-uid", false)],
        &[],
    );
    // The reference to an owner that never existed is dropped, the solid one kept.
    eventually(&kube, "the dangling reference is dropped", || {
        get(&kube, "or-dependent").is_some_and(|d| {
            d["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|r| r.len() == 1)
        })
    });
    ok(
        &kube,
        None,
        &["delete", "cm", "or-owner", "--cascade=orphan"],
    );
    eventually(&kube, "the owner is gone", || {
        get(&kube, "or-owner").is_none()
    });
    let orphan = get(&kube, "or-dependent").expect("the dependent stays");
    assert!(
        orphan["metadata"].get("ownerReferences").is_none(),
        "{orphan}"
    );

    // A dependent of an owner that does not exist is deleted.
    create(
        &kube,
        "stray",
        &[("nobody", "0000-no-such-uid", false)],
        &[],
    );
    eventually(&kube, "the stray dependent is collected", || {
        get(&kube, "stray").is_none()
    });

    cascades_through_workloads(&kube);
    cycles_and_misnamed_owners(&kube);
}

/// A Deployment owning a ReplicaSet owning a pod (written as the deployment and replicaset
/// controllers would write them); deleting the Deployment takes all three.
/// A cycle of blocking references ends (upstream's collector makes a dependent's references
/// non-blocking when it and its owner both wait for their dependents); a reference that
/// names an owner's uid with another kind is dangling, as upstream looks the owner up by the
/// reference's kind.
fn cycles_and_misnamed_owners(kube: &Kube) {
    let a = create(kube, "cycle-a", &[], &[]);
    let b = create(kube, "cycle-b", &[("cycle-a", &a, true)], &[]);
    let refs = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1",
        "kind": "ConfigMap", "name": "cycle-b", "uid": b, "blockOwnerDeletion": true}]}});
    ok(
        kube,
        None,
        &[
            "patch",
            "cm",
            "cycle-a",
            "--type=merge",
            "-p",
            &refs.to_string(),
        ],
    );
    ok(
        kube,
        None,
        &[
            "delete",
            "cm",
            "cycle-a",
            "--cascade=foreground",
            "--wait=false",
        ],
    );
    eventually(kube, "both ends of a cycle are deleted", || {
        get(kube, "cycle-a").is_none() && get(kube, "cycle-b").is_none()
    });

    let owner = create(kube, "real-owner", &[], &[]);
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "wrong-kind", "namespace": "default", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Secret", "name": "real-owner", "uid": owner}]}});
    let path = write(kube, "wrong-kind.json", &manifest.to_string());
    ok(kube, None, &["create", "-f", &path]);
    eventually(kube, "a reference of another kind is dangling", || {
        get(kube, "wrong-kind").is_none()
    });
    assert!(get(kube, "real-owner").is_some());
}

fn cascades_through_workloads(kube: &Kube) {
    ok(
        kube,
        None,
        &["create", "deployment", "web", "--image=nginx"],
    );
    let uid = ok(
        kube,
        None,
        &["get", "deploy", "web", "-o", "jsonpath={.metadata.uid}"],
    );
    let owned_by = |kind: &str, api: &str, name: &str, uid: &str| {
        json!([{"apiVersion": api, "kind": kind, "name": name, "uid": uid,
                "controller": true, "blockOwnerDeletion": true}])
    };
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"},
            "ownerReferences": owned_by("Deployment", "apps/v1", "web", &uid)},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}});
    let path = write(kube, "rs.json", &rs.to_string());
    let rs_uid = ok(
        kube,
        None,
        &["create", "-f", &path, "-o", "jsonpath={.metadata.uid}"],
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1-a", "namespace": "default", "labels": {"app": "web"},
            "ownerReferences": owned_by("ReplicaSet", "apps/v1", "web-1", &rs_uid)},
        "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}});
    let path = write(kube, "pod.json", &pod.to_string());
    ok(kube, None, &["create", "-f", &path]);
    ok(kube, None, &["delete", "deployment", "web"]);
    let gone = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--ignore-not-found", "-o", "name"]);
        ok(kube, None, &all).trim().is_empty()
    };
    eventually(kube, "the ReplicaSet and its pod are collected", || {
        gone(&["get", "rs", "web-1"]) && gone(&["get", "pod", "web-1-a"])
    });
}

#[test]
fn garbage_collector_on_keel_up() {
    collects(Stack::Up);
}

#[test]
fn garbage_collector_on_keel_apiserver_on_etcd() {
    collects(Stack::OnEtcd);
}

#[test]
fn without_a_collector_deletes_wait_unless_it_is_turned_off() {
    let kube = Kube::start_with(Stack::OnEtcd, &[]);
    create(&kube, "held", &[], &[]);
    ok(
        &kube,
        None,
        &[
            "delete",
            "cm",
            "held",
            "--cascade=foreground",
            "--wait=false",
        ],
    );
    let held = get(&kube, "held").expect("waits for a collector");
    assert_eq!(
        held["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    drop(kube);

    let kube = Kube::start_with(Stack::OnEtcd, &["--enable-garbage-collector=false"]);
    create(&kube, "gone", &[], &[]);
    ok(
        &kube,
        None,
        &["delete", "cm", "gone", "--cascade=foreground"],
    );
    assert!(get(&kube, "gone").is_none());
}
