//! apps/v1 with the real `kubectl` (the current one and 1.27) against `keel up` and against
//! `keel apiserver` on a real etcd 3.5.1: `kubectl create deployment` stores upstream's
//! defaulted spec (checked field by field against `SetDefaults_Deployment` and the pod spec's
//! defaults); a StatefulSet and a DaemonSet applied get theirs; `kubectl scale` (a
//! deployment and a statefulset, through the scale subresource), `set image` and `rollout
//! pause`/`resume` change the spec and bump the generation; the tables are upstream's;
//! `explain` and `api-resources` know the kinds; an invalid Deployment and a selector change
//! are refused in upstream's words. The Python client's `AppsV1Api` is in
//! `tests/python/apps.py`, run from here.

use keel_testkit::kube::{Kube, Stack, fails, get_json, ok, table, write};
use serde_json::{Value, json};

const STATEFULSET: &str = r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: db
        image: postgres:16
        ports:
        - containerPort: 5432
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
"#;

const DAEMONSET: &str = r#"apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      nodeSelector: {disk: ssd}
      containers:
      - name: agent
        image: busybox:1.36
"#;

const REVISION: &str = r#"apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: db-1
  ownerReferences:
  - apiVersion: apps/v1
    kind: StatefulSet
    name: db
    uid: 6d0e4b1c-0000-4000-8000-000000000001
    controller: true
data:
  spec: {}
revision: 1
"#;

const INVALID: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: bad
spec:
  selector:
    matchLabels: {app: bad}
  template:
    metadata:
      labels: {app: other}
    spec:
      containers:
      - name: c
        image: nginx
"#;

/// What `kubectl create deployment web --image=nginx` stores, from upstream's defaulting.
fn check_created_deployment(d: &Value) {
    let spec = &d["spec"];
    assert_eq!(spec["replicas"], 1, "{d}");
    assert_eq!(spec["selector"], json!({"matchLabels": {"app": "web"}}));
    assert_eq!(spec["strategy"]["type"], "RollingUpdate");
    assert_eq!(
        spec["strategy"]["rollingUpdate"],
        json!({"maxSurge": "25%", "maxUnavailable": "25%"})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["securityContext"], json!({}));
    let c = &pod["containers"][0];
    assert_eq!(c["name"], "nginx");
    assert_eq!(c["image"], "nginx");
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert_eq!(d["metadata"]["generation"], 1);
    assert_eq!(d["status"], json!({}));
}

fn apps(kube: &Kube, version: Option<&str>) {
    ok(
        kube,
        version,
        &["create", "deployment", "web", "--image=nginx"],
    );
    check_created_deployment(&get_json(kube, version, &["deployment/web"]));

    // A StatefulSet and a DaemonSet applied get their defaults.
    let sts = write(kube, "sts.yaml", STATEFULSET);
    ok(kube, version, &["apply", "-f", &sts]);
    let db = get_json(kube, version, &["statefulset/db"]);
    assert_eq!(db["spec"]["podManagementPolicy"], "OrderedReady", "{db}");
    assert_eq!(
        db["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(
        db["spec"]["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    assert_eq!(db["spec"]["replicas"], 1);
    assert_eq!(db["spec"]["revisionHistoryLimit"], 10);
    let claim = &db["spec"]["volumeClaimTemplates"][0];
    assert_eq!(claim["apiVersion"], "v1");
    assert_eq!(claim["kind"], "PersistentVolumeClaim");
    assert_eq!(claim["spec"]["volumeMode"], "Filesystem");
    assert_eq!(claim["status"], json!({"phase": "Pending"}));
    assert_eq!(
        db["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"],
        "TCP"
    );
    assert_eq!(db["status"], json!({"replicas": 0, "availableReplicas": 0}));
    let ds = write(kube, "ds.yaml", DAEMONSET);
    ok(kube, version, &["apply", "-f", &ds]);
    let agent = get_json(kube, version, &["daemonset/agent"]);
    assert_eq!(
        agent["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
        "{agent}"
    );
    assert_eq!(agent["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        agent["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "1"
    );
    // Applied again with a new image: the next template generation.
    ok(
        kube,
        version,
        &[
            "apply",
            "-f",
            &write(kube, "ds2.yaml", &DAEMONSET.replace("1.36", "1.37")),
        ],
    );
    let agent = get_json(kube, version, &["daemonset/agent"]);
    assert_eq!(
        agent["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "2"
    );
    assert_eq!(agent["metadata"]["generation"], 2);

    // Scale, set image, pause and resume.
    ok(
        kube,
        version,
        &["scale", "deployment", "web", "--replicas=3"],
    );
    let web = get_json(kube, version, &["deployment/web"]);
    assert_eq!(web["spec"]["replicas"], 3);
    assert_eq!(web["metadata"]["generation"], 2);
    ok(
        kube,
        version,
        &["scale", "statefulset", "db", "--replicas=2"],
    );
    assert_eq!(
        get_json(kube, version, &["statefulset/db"])["spec"]["replicas"],
        2
    );
    let scale: Value = serde_json::from_str(&ok(
        kube,
        version,
        &[
            "get",
            "--raw",
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
        ],
    ))
    .expect("a Scale");
    assert_eq!(scale["spec"]["replicas"], 3);
    assert_eq!(scale["status"]["selector"], "app=web");
    ok(
        kube,
        version,
        &["set", "image", "deployment/web", "nginx=nginx:1.27"],
    );
    let web = get_json(kube, version, &["deployment/web"]);
    assert_eq!(
        web["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(
        web["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "Always",
        "kept from the stored object"
    );
    assert_eq!(web["metadata"]["generation"], 3);
    ok(kube, version, &["rollout", "pause", "deployment/web"]);
    assert_eq!(
        get_json(kube, version, &["deployment/web"])["spec"]["paused"],
        true
    );
    ok(kube, version, &["rollout", "resume", "deployment/web"]);
    let web = get_json(kube, version, &["deployment/web"]);
    assert_ne!(web["spec"]["paused"], true, "{web}");
    assert_eq!(web["metadata"]["generation"], 5);

    // The tables.
    let (header, row) = table(kube, version, &["get", "deploy"], "web");
    assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    assert_eq!(row[..4], ["web", "0/3", "0", "0"]);
    let (header, row) = table(kube, version, &["get", "deploy", "-o", "wide"], "web");
    assert_eq!(
        header,
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    assert_eq!(row[5..], ["nginx", "nginx:1.27", "app=web"]);
    let (header, row) = table(kube, version, &["get", "sts"], "db");
    assert_eq!(header, ["NAME", "READY", "AGE"]);
    assert_eq!(row[..2], ["db", "0/2"]);
    let (header, row) = table(kube, version, &["get", "ds"], "agent");
    assert_eq!(
        header,
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE SELECTOR",
            "AGE"
        ]
    );
    assert_eq!(row[..7], ["agent", "0", "0", "0", "0", "0", "disk=ssd"]);
    // Owned by the StatefulSet itself: on keel up the garbage collector deletes a revision
    // whose owner does not exist.
    let uid = ok(
        kube,
        version,
        &["get", "sts", "db", "-o", "jsonpath={.metadata.uid}"],
    );
    let revision = REVISION.replace("6d0e4b1c-0000-4000-8000-000000000001", uid.trim());
    ok(
        kube,
        version,
        &["apply", "-f", &write(kube, "rev.yaml", &revision)],
    );
    let (header, row) = table(kube, version, &["get", "controllerrevisions"], "db-1");
    assert_eq!(header, ["NAME", "CONTROLLER", "REVISION", "AGE"]);
    assert_eq!(row[..3], ["db-1", "statefulset.apps/db", "1"]);
    let (header, _) = table(kube, version, &["get", "rs"], "none");
    assert!(header.is_empty(), "no replica sets: {header:?}");

    // Discovery and explain.
    let resources = ok(kube, version, &["api-resources", "--api-group=apps"]);
    for (resource, short) in [
        ("deployments", "deploy"),
        ("replicasets", "rs"),
        ("statefulsets", "sts"),
        ("daemonsets", "ds"),
        ("controllerrevisions", ""),
    ] {
        let line = resources
            .lines()
            .find(|l| l.starts_with(resource))
            .unwrap_or_else(|| panic!("{resource} in {resources}"));
        assert!(line.contains(short) && line.contains("apps/v1"), "{line}");
    }
    let explain = ok(kube, version, &["explain", "deployment.spec.strategy"]);
    assert!(
        explain.contains("rollingUpdate") && explain.contains("DeploymentStrategy"),
        "{explain}"
    );
    let all = ok(kube, version, &["get", "all"]);
    assert!(
        all.contains("deployment.apps/web")
            && all.contains("statefulset.apps/db")
            && all.contains("daemonset.apps/agent"),
        "{all}"
    );

    // Refused in upstream's words.
    let err = fails(
        kube,
        version,
        &["apply", "-f", &write(kube, "bad.yaml", INVALID)],
    );
    assert!(
        err.contains(
            "The Deployment \"bad\" is invalid: spec.template.metadata.labels: Invalid value: \
             {\"app\":\"other\"}: `selector` does not match template `labels`"
        ),
        "{err}"
    );
    let patch = r#"{"spec":{"selector":{"matchLabels":{"app":"web","tier":"x"}},"template":{"metadata":{"labels":{"app":"web","tier":"x"}}}}}"#;
    let err = fails(
        kube,
        version,
        &["patch", "deployment", "web", "--type=merge", "-p", patch],
    );
    assert!(
        err.contains(
            r#"spec.selector: Invalid value: {"matchLabels":{"app":"web","tier":"x"}}: field is immutable"#
        ),
        "{err}"
    );
    // Neither the service name nor (updatable only after 1.34) the revision history limit
    // may change: refused in 1.34's words.
    for patch in [
        r#"{"spec":{"serviceName":"other"}}"#,
        r#"{"spec":{"revisionHistoryLimit":3}}"#,
    ] {
        let err = fails(
            kube,
            version,
            &["patch", "statefulset", "db", "--type=merge", "-p", patch],
        );
        assert!(
            err.contains(
                "The StatefulSet \"db\" is invalid: spec: Forbidden: updates to statefulset \
                 spec for fields other than 'replicas', 'ordinals', 'template', \
                 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and \
                 'minReadySeconds' are forbidden"
            ),
            "{patch}: {err}"
        );
    }

    ok(
        kube,
        version,
        &[
            "delete",
            "deployment/web",
            "statefulset/db",
            "daemonset/agent",
        ],
    );
}

#[test]
fn apps_on_keel_up() {
    let kube = Kube::start(Stack::Up);
    apps(&kube, None);
}

#[test]
fn apps_on_keel_apiserver_on_etcd_with_kubectl_1_27() {
    let kube = Kube::start(Stack::OnEtcd);
    apps(&kube, Some("1.27"));
}

#[test]
fn apps_with_python_on_keel_up() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/apps.py");
    Kube::start(Stack::Up).python_ok(script, &[]);
}

#[test]
fn apps_with_python_on_keel_apiserver_on_etcd() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/apps.py");
    Kube::start(Stack::OnEtcd).python_ok(script, &[]);
}
