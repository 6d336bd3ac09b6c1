//! The `status` subresource validated and prepared as kube-apiserver's status strategies do,
//! with the real `kubectl` (`patch --subresource=status`, `replace --subresource=status`;
//! the current one on `keel up`, 1.27 on `keel apiserver` on a real etcd 3.5.1): a
//! Deployment's negative or too large counts are refused in upstream's words, a status patch
//! that also changes the spec and the labels changes neither; a Pod's bad IP, condition type
//! and QoS change are refused and its spec kept; a Service's bad load balancer IP and an
//! ingress point on a ClusterIP service are refused and a good one gets `ipMode: VIP`; a
//! Namespace's phase must follow its deletion timestamp; a Job's counts and times are
//! checked; a custom resource's status is checked against its schema and keeps the stored
//! spec and labels. The Python client's `patch_namespaced_deployment_status` is in
//! `tests/python/status_updates.py`, run from here.

use std::time::Duration;

use keel_testkit::kube::{Kube, Stack, fails, get_json, ok, text, write};
use serde_json::{Value, json};

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
          status:
            type: object
            properties:
              ready: {type: boolean}
"#;

const GADGET: &str = r#"apiVersion: example.com/v1
kind: Gadget
metadata:
  name: g
  namespace: default
  labels: {app: g}
spec:
  color: red
"#;

/// `kubectl patch <what> --subresource=status --type=merge -p <patch>`, which must fail:
/// its error output.
fn patch_fails(kube: &Kube, version: Option<&str>, what: &str, patch: &Value) -> String {
    let patch = patch.to_string();
    let args = [
        "patch",
        what,
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch,
    ];
    fails(kube, version, &args)
}

/// The same patch, which must succeed: the object as it is then.
fn patch_ok(kube: &Kube, version: Option<&str>, what: &str, patch: &Value) -> Value {
    let patch = patch.to_string();
    let args = [
        "patch",
        what,
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch,
        "-o",
        "json",
    ];
    serde_json::from_str(&ok(kube, version, &args)).expect("kubectl prints JSON")
}

/// Asserts that `out` says `message`.
fn says(out: &str, message: &str) {
    assert!(out.contains(message), "expected {message:?} in {out:?}");
}

fn deployment(kube: &Kube, version: Option<&str>) {
    ok(
        kube,
        version,
        &["create", "deployment", "web", "--image=nginx:1.27"],
    );
    let out = patch_fails(
        kube,
        version,
        "deployment/web",
        &json!({"status": {"replicas": -1}}),
    );
    // Upstream's words, all of them: the other counts (0) are now above the replicas.
    says(
        &out,
        "The Deployment \"web\" is invalid: \n\
         * status.replicas: Invalid value: -1: must be greater than or equal to 0\n\
         * status.updatedReplicas: Invalid value: 0: cannot be greater than status.replicas\n\
         * status.readyReplicas: Invalid value: 0: cannot be greater than status.replicas\n\
         * status.availableReplicas: Invalid value: 0: cannot be greater than status.replicas\n",
    );
    let out = patch_fails(
        kube,
        version,
        "deployment/web",
        &json!({"status": {"replicas": 1, "readyReplicas": 2}}),
    );
    says(
        &out,
        "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
    );
    // The spec and the labels are the stored ones whatever the status patch says.
    let web = patch_ok(
        kube,
        version,
        "deployment/web",
        &json!({"metadata": {"labels": {"extra": "x"}}, "spec": {"replicas": 5},
            "status": {"replicas": 2, "readyReplicas": 1, "collisionCount": 3}}),
    );
    assert_eq!(web["spec"]["replicas"], 1, "{web}");
    assert_eq!(web["metadata"]["labels"], json!({"app": "web"}), "{web}");
    assert_eq!(web["status"]["replicas"], 2, "{web}");
    assert_eq!(web["metadata"]["generation"], 1, "{web}");
    // `replace --subresource=status` of the whole object: a collision count may not go down.
    let mut whole = get_json(kube, version, &["deployment/web"]);
    whole["status"]["collisionCount"] = json!(1);
    let file = write(kube, "web.json", &whole.to_string());
    let out = fails(
        kube,
        version,
        &["replace", "--subresource=status", "-f", &file],
    );
    says(
        &out,
        "status.collisionCount: Invalid value: 1: cannot be decremented",
    );
    whole["status"]["collisionCount"] = json!(4);
    whole["spec"]["replicas"] = json!(7);
    let file = write(kube, "web.json", &whole.to_string());
    ok(
        kube,
        version,
        &["replace", "--subresource=status", "-f", &file],
    );
    let web = get_json(kube, version, &["deployment/web"]);
    assert_eq!(web["status"]["collisionCount"], 4, "{web}");
    assert_eq!(web["spec"]["replicas"], 1, "{web}");
}

fn pod(kube: &Kube, version: Option<&str>) {
    ok(
        kube,
        version,
        &["run", "p", "--image=nginx:1.27", "--restart=Never"],
    );
    let out = patch_fails(
        kube,
        version,
        "pod/p",
        &json!({"status": {"podIP": "10.0.0.300"}}),
    );
    says(
        &out,
        "status.podIPs[0]: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. \
         10.9.8.7 or 2001:db8::ffff)",
    );
    let out = patch_fails(
        kube,
        version,
        "pod/p",
        &json!({"status": {"qosClass": "Guaranteed"}}),
    );
    says(
        &out,
        "status.qosClass: Invalid value: \"Guaranteed\": field is immutable",
    );
    let p = patch_ok(
        kube,
        version,
        "pod/p",
        &json!({"spec": {"activeDeadlineSeconds": 5},
            "status": {"phase": "Running", "podIP": "10.0.0.7"}}),
    );
    assert!(p["spec"].get("activeDeadlineSeconds").is_none(), "{p}");
    assert_eq!(p["status"]["phase"], "Running", "{p}");
    assert_eq!(p["status"]["podIP"], "10.0.0.7", "{p}");
    assert_eq!(p["status"]["qosClass"], "BestEffort", "{p}");
}

fn service(kube: &Kube, version: Option<&str>) {
    ok(
        kube,
        version,
        &["create", "service", "loadbalancer", "lb", "--tcp=80:80"],
    );
    ok(
        kube,
        version,
        &["create", "service", "clusterip", "plain", "--tcp=80:80"],
    );
    let ingress = |ip: &str| json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
    let out = patch_fails(kube, version, "service/lb", &ingress("1.2.3.256"));
    says(
        &out,
        "The Service \"lb\" is invalid: status.loadBalancer.ingress[0].ip: Invalid value: \
         \"1.2.3.256\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
    );
    let out = patch_fails(kube, version, "service/plain", &ingress("1.2.3.4"));
    says(
        &out,
        "status.loadBalancer.ingress: Forbidden: may only be used when `spec.type` is \
         'LoadBalancer'",
    );
    let lb = patch_ok(kube, version, "service/lb", &ingress("1.2.3.4"));
    assert_eq!(
        lb["status"]["loadBalancer"]["ingress"],
        json!([{"ip": "1.2.3.4", "ipMode": "VIP"}]),
        "{lb}"
    );
}

fn namespace(kube: &Kube, version: Option<&str>) {
    ok(kube, version, &["create", "namespace", "st"]);
    let out = patch_fails(
        kube,
        version,
        "namespace/st",
        &json!({"status": {"phase": "Terminating"}}),
    );
    says(
        &out,
        "The Namespace \"st\" is invalid: status.Phase: Invalid value: \"Terminating\": may \
         only be 'Active' if `deletionTimestamp` is empty",
    );
    let ns = patch_ok(
        kube,
        version,
        "namespace/st",
        &json!({"spec": {"finalizers": []}, "status": {"phase": "Active"}}),
    );
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]), "{ns}");
}

fn job(kube: &Kube, version: Option<&str>) {
    ok(
        kube,
        version,
        &["create", "job", "j", "--image=busybox:1.36"],
    );
    let out = patch_fails(kube, version, "job/j", &json!({"status": {"active": -1}}));
    says(
        &out,
        "The Job \"j\" is invalid: status.active: Invalid value: -1: must be greater than or \
         equal to 0",
    );
    let out = patch_fails(
        kube,
        version,
        "job/j",
        &json!({"status": {"startTime": "2024-01-02T00:00:00Z",
            "completionTime": "2024-01-01T00:00:00Z"}}),
    );
    says(
        &out,
        "status.completionTime: Invalid value: \"2024-01-01T00:00:00Z\": completionTime cannot \
         be set before startTime",
    );
    let j = patch_ok(
        kube,
        version,
        "job/j",
        &json!({"spec": {"parallelism": 3}, "status": {"active": 1, "ready": 1,
            "startTime": "2024-01-02T00:00:00Z"}}),
    );
    assert_eq!(j["spec"]["parallelism"], 1, "{j}");
    assert_eq!(j["status"]["active"], 1, "{j}");
}

fn custom_resource(kube: &Kube, version: Option<&str>) {
    let crd = write(kube, "crd.yaml", CRD);
    ok(kube, version, &["apply", "-f", &crd]);
    let out = kube.kubectl_version(
        version,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=20s",
            "crd/gadgets.example.com",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let gadget = write(kube, "gadget.yaml", GADGET);
    // Discovery may lag the CRD's establishment by a moment: retry the create briefly.
    let mut created = false;
    for _ in 0..50 {
        if kube
            .kubectl_version(version, &["create", "-f", &gadget])
            .status
            .success()
        {
            created = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(created, "the gadget is created");
    let out = patch_fails(
        kube,
        version,
        "gadget/g",
        &json!({"status": {"ready": "yes"}}),
    );
    says(&out, "status.ready: Invalid value: \"string\"");
    let g = patch_ok(
        kube,
        version,
        "gadget/g",
        &json!({"metadata": {"labels": {"app": "other"}}, "spec": {"color": "blue"},
            "status": {"ready": true}}),
    );
    assert_eq!(g["spec"]["color"], "red", "{g}");
    assert_eq!(g["metadata"]["labels"], json!({"app": "g"}), "{g}");
    assert_eq!(g["status"]["ready"], true, "{g}");
}

fn status_updates(kube: &Kube, version: Option<&str>) {
    deployment(kube, version);
    pod(kube, version);
    service(kube, version);
    namespace(kube, version);
    job(kube, version);
    custom_resource(kube, version);
}

#[test]
fn status_updates_on_keel_up() {
    let kube = Kube::start(Stack::Up);
    status_updates(&kube, None);
}

#[test]
fn status_updates_on_keel_apiserver_on_etcd_with_kubectl_1_27() {
    let kube = Kube::start(Stack::OnEtcd);
    status_updates(&kube, Some("1.27"));
}

#[test]
fn status_updates_with_python_on_keel_up() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/status_updates.py"
    );
    Kube::start(Stack::Up).python_ok(script, &[]);
}

#[test]
fn status_updates_with_python_on_keel_apiserver_on_etcd() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/status_updates.py"
    );
    Kube::start(Stack::OnEtcd).python_ok(script, &[]);
}
