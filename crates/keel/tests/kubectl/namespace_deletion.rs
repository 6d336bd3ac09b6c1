//! A namespace held by finalizers, deleted: it stays Terminating with kube-controller-manager's
//! five deletion conditions in its status, worded as
//! `pkg/controller/namespace/deletion/status_condition_utils.go` words them and updated in
//! place (never duplicated; a condition's time moves only when its status does). Its pods go
//! first: while a pod is held, nothing else in the namespace is deleted (1.34's
//! `OrderedNamespaceDeletion`, upstream's conformance test "namespace deletion should delete
//! pod first"); then the ConfigMap held by its own finalizer is what remains; once that
//! finalizer is removed too the namespace goes.

use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, get_json, ok, write};
use serde_json::{Value, json};

/// The condition of `namespace` of type `kind` (null when it has none).
fn condition<'a>(namespace: &'a Value, kind: &str) -> &'a Value {
    namespace["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind)
        .unwrap_or(&Value::Null)
}

/// upstream's conditions for content left: `(type, status, reason, message)`.
fn expected(
    resources: &str,
    finalizers: &str,
) -> [(&'static str, &'static str, &'static str, String); 5] {
    [
        (
            "NamespaceDeletionDiscoveryFailure",
            "False",
            "ResourcesDiscovered",
            "All resources successfully discovered".into(),
        ),
        (
            "NamespaceDeletionGroupVersionParsingFailure",
            "False",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed".into(),
        ),
        (
            "NamespaceDeletionContentFailure",
            "False",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization".into(),
        ),
        (
            "NamespaceContentRemaining",
            "True",
            "SomeResourcesRemain",
            format!("Some resources are remaining: {resources}"),
        ),
        (
            "NamespaceFinalizersRemaining",
            "True",
            "SomeFinalizersRemain",
            format!("Some content in the namespace has finalizers remaining: {finalizers}"),
        ),
    ]
}

/// Waits (30 s at most) until namespace `ns` has the conditions `want`, exactly five: the
/// namespace.
fn until_conditions(
    kube: &Kube,
    version: Option<&str>,
    ns: &str,
    want: &[(&str, &str, &str, String)],
) -> Value {
    let matches = |namespace: &Value| {
        want.iter().all(|(kind, status, reason, message)| {
            let c = condition(namespace, kind);
            c["status"] == *status && c["reason"] == *reason && c["message"] == message.as_str()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut namespace = get_json(kube, version, &["namespace", ns]);
    while !matches(&namespace) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        namespace = get_json(kube, version, &["namespace", ns]);
    }
    assert!(matches(&namespace), "{namespace:#}\n{}", kube.log());
    assert_eq!(namespace["status"]["phase"], "Terminating", "{namespace}");
    let conditions = namespace["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 5, "{namespace}");
    for c in conditions {
        let time = c["lastTransitionTime"].as_str().unwrap_or_default();
        assert!(time.ends_with('Z'), "{c}");
    }
    namespace
}

fn drop_finalizers(kube: &Kube, version: Option<&str>, ns: &str, what: &str) {
    let out = ok(
        kube,
        version,
        &[
            "patch",
            what,
            "-n",
            ns,
            "--type=merge",
            "-p",
            &json!({"metadata": {"finalizers": null}}).to_string(),
        ],
    );
    assert!(out.contains("patched"), "{out}");
}

/// Deletes a namespace whose Pod and ConfigMap carry finalizers, checks its conditions as
/// each goes, then lets it go.
pub fn check(kube: &Kube, version: Option<&str>, base: &str) {
    let k = |args: &[&str]| ok(kube, version, args);
    let ns = format!("{base}-held");
    k(&["create", "namespace", &ns]);
    let held = write(
        kube,
        "held.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: {ns}\n  \
             finalizers: [example.com/x]\ndata:\n  a: b\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata:\n  name: runner\n  namespace: {ns}\n  \
             finalizers: [example.com/pod]\nspec:\n  containers:\n  - name: c\n    image: nginx\n"
        ),
    );
    k(&["create", "-f", &held]);
    k(&["delete", "namespace", &ns, "--wait=false"]);

    // The pod first: the ConfigMap is not touched while the pod is there.
    let first = until_conditions(
        kube,
        version,
        &ns,
        &expected(
            "pods. has 1 resource instances",
            "example.com/pod in 1 resource instances",
        ),
    );
    let cm = get_json(kube, version, &["configmap", "held", "-n", &ns]);
    assert!(cm["metadata"]["deletionTimestamp"].is_null(), "{cm}");
    // The controller tries again every two seconds: the same findings change nothing.
    std::thread::sleep(Duration::from_secs(5));
    let again = get_json(kube, version, &["namespace", &ns]);
    assert_eq!(
        again["status"]["conditions"], first["status"]["conditions"],
        "{again}"
    );

    // The pod let go: the ConfigMap is deleted and is what remains; the conditions are
    // updated in place, their status (so their time) unchanged.
    drop_finalizers(kube, version, &ns, "pod/runner");
    let second = until_conditions(
        kube,
        version,
        &ns,
        &expected(
            "configmaps. has 1 resource instances",
            "example.com/x in 1 resource instances",
        ),
    );
    for kind in ["NamespaceContentRemaining", "NamespaceFinalizersRemaining"] {
        assert_eq!(
            condition(&second, kind)["lastTransitionTime"],
            condition(&first, kind)["lastTransitionTime"],
            "{second}"
        );
    }

    drop_finalizers(kube, version, &ns, "configmap/held");
    k(&[
        "wait",
        "--for=delete",
        &format!("namespace/{ns}"),
        "--timeout=60s",
    ]);
}
