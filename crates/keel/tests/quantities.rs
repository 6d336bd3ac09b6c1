//! Resource quantities stored and served in canonical form, as kube-apiserver stores them,
//! with the real `kubectl` (the current one and 1.27) against `keel up` and against `keel
//! apiserver` on a real etcd 3.5.1: a Pod, a ResourceQuota, a PersistentVolumeClaim and a
//! LimitRange applied with `0.5`, `1.5Gi`, `1000m` read back as `500m`, `1536Mi`, `1` (the
//! examples of `resource.Quantity`'s own documentation and tests), and are stored so (read
//! with etcdctl); merge, JSON and strategic merge patches leave theirs canonical too (read,
//! stored and watched); a
//! server-side apply of `0.5` applied again is a no-op; a quantity that is not one is
//! refused with upstream's words; a custom resource keeps a quantity-like string as written.
//! An object stored before keel wrote quantities canonical (`cpu: 0.5` put in the store as
//! an older keel left it) is still updated and gracefully deleted, its immutable fields
//! compared by value as upstream compares them; a value sent again in another spelling (`0.5`
//! over `500m`) changes nothing, writes nothing and takes no field from its manager.

use std::time::Duration;

use keel_testkit::kube::{Kube, Stack, fails, get_json, ok, text, write};
use keel_testkit::{CtlVersion, etcdctl};
use serde_json::{Value, json};

/// `resource.ErrFormatWrong`.
const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// The objects, their quantities written as people write them (`0.5` and `1.5Gi` unquoted
/// are a YAML float and a string; kubectl sends the float as the JSON number 0.5).
fn manifest(ns: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: {ns}
spec:
  containers:
  - name: c
    image: busybox
    resources:
      limits:
        cpu: "1000m"
        memory: 1.5Gi
      requests:
        cpu: 0.5
        memory: "1e3"
---
apiVersion: v1
kind: ResourceQuota
metadata:
  name: rq
  namespace: {ns}
spec:
  hard:
    cpu: "1000m"
    memory: 1.5Gi
    pods: "10"
    requests.storage: 0.5Gi
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: pvc
  namespace: {ns}
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1.5Gi
"#
    )
}

const LIMIT_RANGE: &str = r#"apiVersion: v1
kind: LimitRange
metadata:
  name: lr
spec:
  limits:
  - type: Container
    default:
      cpu: 0.5
    defaultRequest:
      memory: 1.5Gi
"#;

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sizes.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: sizes
    kind: Size
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: string
              free:
                x-kubernetes-int-or-string: true
"#;

/// The object at `key` as the store holds it (keel stores JSON).
fn stored(kube: &Kube, key: &str) -> Value {
    let args = ["get", key, "--print-value-only"].map(String::from);
    let got = etcdctl(CtlVersion::V35, &kube.store_url, &args, None);
    assert_eq!(got.code, 0, "etcdctl get {key}: {}", got.stderr);
    serde_json::from_str(got.stdout.trim()).unwrap_or_else(|e| panic!("{key}: {e}: {}", got.stdout))
}

fn quantities(kube: &Kube, version: Option<&str>, s: &str) {
    let ns = format!("q-{s}");
    let k = |args: &[&str]| ok(kube, version, args);
    k(&["create", "namespace", &ns]);
    let objects = write(kube, &format!("q-{s}.yaml"), &manifest(&ns));
    k(&["apply", "-f", &objects]);

    let pod = get_json(kube, version, &["pod", "p", "-n", &ns]);
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "1", "memory": "1536Mi"}, "requests": {"cpu": "500m", "memory": "1e3"}})
    );
    let rq = get_json(kube, version, &["resourcequota", "rq", "-n", &ns]);
    assert_eq!(
        rq["spec"]["hard"],
        json!({"cpu": "1", "memory": "1536Mi", "pods": "10", "requests.storage": "512Mi"})
    );
    let pvc = get_json(kube, version, &["pvc", "pvc", "-n", &ns]);
    assert_eq!(pvc["spec"]["resources"]["requests"]["storage"], "1536Mi");
    // Stored so, not as written (kubectl's last-applied annotation keeps what it sent).
    let pod = stored(kube, &format!("/registry/pods/{ns}/p"));
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["limits"],
        json!({"cpu": "1", "memory": "1536Mi"})
    );
    let pvc = stored(kube, &format!("/registry/persistentvolumeclaims/{ns}/pvc"));
    assert_eq!(pvc["spec"]["resources"]["requests"]["storage"], "1536Mi");

    // Every patch's object is made canonical too, as stored, answered and watched.
    let rv = rq["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let watch = kube.watch(&format!(
        "/api/v1/namespaces/{ns}/resourcequotas?watch=1&resourceVersion={rv}"
    ));
    let patch = |kind: &str, args: &[&str]| {
        let mut all = vec![
            "patch",
            "resourcequota",
            "rq",
            "-n",
            &ns,
            "--type",
            kind,
            "-p",
        ];
        all.extend_from_slice(args);
        k(&all);
    };
    patch("merge", &[r#"{"spec":{"hard":{"memory":"2048Mi"}}}"#]);
    patch(
        "json",
        &[r#"[{"op":"replace","path":"/spec/hard/cpu","value":"0.25"}]"#],
    );
    patch("strategic", &[r#"{"spec":{"hard":{"pods":"20000m"}}}"#]);
    let rq = get_json(kube, version, &["resourcequota", "rq", "-n", &ns]);
    assert_eq!(
        rq["spec"]["hard"],
        json!({"cpu": "250m", "memory": "2Gi", "pods": "20", "requests.storage": "512Mi"})
    );
    let rq = stored(kube, &format!("/registry/resourcequotas/{ns}/rq"));
    assert_eq!(rq["spec"]["hard"]["memory"], "2Gi");
    let watched: Vec<Value> = std::iter::from_fn(|| watch.next(Duration::from_secs(10)))
        .map(|event| event["object"]["spec"]["hard"].clone())
        .take(3)
        .collect();
    assert_eq!(
        watched,
        [
            json!({"cpu": "1", "memory": "2Gi", "pods": "10", "requests.storage": "512Mi"}),
            json!({"cpu": "250m", "memory": "2Gi", "pods": "10", "requests.storage": "512Mi"}),
            json!({"cpu": "250m", "memory": "2Gi", "pods": "20", "requests.storage": "512Mi"}),
        ]
    );

    // A server-side apply of `0.5`, then the same again: the second changes nothing.
    let lr = write(kube, &format!("lr-{s}.yaml"), LIMIT_RANGE);
    let apply = || {
        k(&[
            "apply",
            "--server-side",
            "--field-manager=q",
            "-n",
            &ns,
            "-f",
            &lr,
        ])
    };
    apply();
    let first = get_json(kube, version, &["limitrange", "lr", "-n", &ns]);
    assert_eq!(
        first["spec"]["limits"][0]["default"],
        json!({"cpu": "500m"})
    );
    assert_eq!(
        first["spec"]["limits"][0]["defaultRequest"],
        json!({"memory": "1536Mi"})
    );
    // A second later, so a time stamped on the field manager's entry would show.
    std::thread::sleep(Duration::from_millis(1100));
    apply();
    let second = get_json(kube, version, &["limitrange", "lr", "-n", &ns]);
    assert_eq!(
        first["metadata"]["resourceVersion"],
        second["metadata"]["resourceVersion"]
    );
    assert_eq!(
        first["metadata"]["managedFields"],
        second["metadata"]["managedFields"]
    );

    // A quantity that is none is refused as kube-apiserver's decoder refuses it.
    let bad = write(
        kube,
        &format!("bad-{s}.yaml"),
        &manifest(&ns)
            .split("---")
            .next()
            .unwrap()
            .replace("name: p\n", "name: bad\n")
            .replace("cpu: 0.5", "cpu: abc"),
    );
    let err = fails(kube, version, &["apply", "-f", &bad]);
    assert!(
        err.contains(&format!(
            "Error from server (BadRequest): error when creating \"{bad}\": Pod in version \
             \"v1\" cannot be handled as a Pod: {FORMAT_WRONG}"
        )),
        "{err}"
    );

    // A custom resource keeps what it was given.
    let cr = write(
        kube,
        &format!("cr-{s}.yaml"),
        &format!(
            "apiVersion: example.com/v1\nkind: Size\nmetadata:\n  name: s\n  namespace: {ns}\n\
             spec:\n  size: \"1.5Gi\"\n  free: \"1000m\"\n"
        ),
    );
    k(&["apply", "-f", &cr]);
    let got: Value = get_json(kube, version, &["sizes", "s", "-n", &ns]);
    assert_eq!(got["spec"], json!({"size": "1.5Gi", "free": "1000m"}));
    k(&["delete", "namespace", &ns, "--wait=false"]);
}

/// Objects written before quantities were canonical, and values sent in another spelling.
fn stored_as_written(kube: &Kube, version: Option<&str>, s: &str) {
    let ns = format!("w-{s}");
    let k = |args: &[&str]| ok(kube, version, args);
    k(&["create", "namespace", &ns]);
    let pod = write(
        kube,
        &format!("w-{s}.yaml"),
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: old\n  namespace: {ns}\nspec:\n  \
             nodeName: n1\n  containers:\n  - name: c\n    image: nginx\n    resources:\n      \
             requests:\n        cpu: 500m\n        memory: 1Gi\n"
        ),
    );
    k(&["apply", "-f", &pod]);
    // As a keel that kept quantities as written stored it.
    let key = format!("/registry/pods/{ns}/old");
    let mut old = stored(kube, &key);
    old["spec"]["containers"][0]["resources"]["requests"] =
        json!({"cpu": "0.5", "memory": "1024Mi"});
    let args = ["put".to_string(), key.clone(), old.to_string()];
    let put = etcdctl(CtlVersion::V35, &kube.store_url, &args, None);
    assert_eq!(put.code, 0, "etcdctl put: {}", put.stderr);
    let wait_for = |want: &str| {
        for _ in 0..100 {
            let got = get_json(kube, version, &["pod", "old", "-n", &ns]);
            if got["spec"]["containers"][0]["resources"]["requests"]["cpu"] == want {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the pod's cpu never read {want}");
    };
    wait_for("0.5");
    k(&["label", "pod", "old", "-n", &ns, "a=b"]);
    let labeled = stored(kube, &key);
    assert_eq!(
        labeled["spec"]["containers"][0]["resources"]["requests"],
        json!({"cpu": "500m", "memory": "1Gi"})
    );
    assert_eq!(labeled["metadata"]["labels"]["a"], "b");
    // Put back as written, then deleted gracefully: the pod is bound, so it is marked.
    let put = etcdctl(CtlVersion::V35, &kube.store_url, &args, None);
    assert_eq!(put.code, 0, "etcdctl put: {}", put.stderr);
    wait_for("0.5");
    k(&["delete", "pod", "old", "-n", &ns, "--wait=false"]);
    let marked = get_json(kube, version, &["pod", "old", "-n", &ns]);
    assert!(
        marked["metadata"]["deletionTimestamp"].is_string(),
        "{marked}"
    );

    // Applied by one manager as `500m`, sent again as `0.5` by another: no change.
    let quota = write(
        kube,
        &format!("wq-{s}.yaml"),
        &format!(
            "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: q\n  namespace: {ns}\n\
             spec:\n  hard:\n    cpu: 500m\n"
        ),
    );
    k(&[
        "apply",
        "--server-side",
        "--field-manager=argo",
        "-f",
        &quota,
    ]);
    let before = get_json(kube, version, &["resourcequota", "q", "-n", &ns]);
    for (form, patch) in [
        ("merge", r#"{"spec":{"hard":{"cpu":"0.5"}}}"#),
        ("strategic", r#"{"spec":{"hard":{"cpu":0.5}}}"#),
        (
            "json",
            r#"[{"op":"replace","path":"/spec/hard/cpu","value":"0.5"}]"#,
        ),
    ] {
        k(&[
            "patch",
            "resourcequota",
            "q",
            "-n",
            &ns,
            "--field-manager=p",
            "--type",
            form,
            "-p",
            patch,
        ]);
        let after = get_json(kube, version, &["resourcequota", "q", "-n", &ns]);
        assert_eq!(
            (
                &after["metadata"]["resourceVersion"],
                &after["metadata"]["managedFields"]
            ),
            (
                &before["metadata"]["resourceVersion"],
                &before["metadata"]["managedFields"]
            ),
            "a {form} patch of the same value in another spelling"
        );
    }
    k(&[
        "delete",
        "pod",
        "old",
        "-n",
        &ns,
        "--grace-period=0",
        "--force",
    ]);
    k(&["delete", "namespace", &ns, "--wait=false"]);
}

fn run(stack: Stack) {
    let kube = Kube::start(stack);
    let crd = write(&kube, "crd.yaml", CRD);
    ok(&kube, None, &["apply", "-f", &crd]);
    let out = kube.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=20s",
        "crd/sizes.example.com",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    quantities(&kube, None, "cur");
    quantities(&kube, Some("1.27"), "old");
    stored_as_written(&kube, None, "cur");
    stored_as_written(&kube, Some("1.27"), "old");
}

#[test]
fn quantities_are_canonical_on_keel_up() {
    run(Stack::Up);
}

#[test]
fn quantities_are_canonical_on_keel_apiserver_on_etcd() {
    run(Stack::OnEtcd);
}
