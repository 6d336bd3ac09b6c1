//! batch/v1 Jobs and CronJobs and core/v1 ReplicationControllers, PodTemplates,
//! PersistentVolumes and PersistentVolumeClaims with the real `kubectl` (the current one and
//! 1.27) against `keel up` and against `keel apiserver` on etcd 3.5.1, and with the Python
//! `kubernetes` client (`tests/python/batch.py`): `kubectl create job` gets upstream's
//! defaults field by field (values from `pkg/apis/batch/v1/defaults.go` and the pod spec's)
//! and the selector and labels generated from its uid; `kubectl create cronjob` gets
//! `SetDefaults_CronJob`'s, a schedule robfig/cron refuses and a `TZ=` are refused in
//! upstream's words, and `kubectl create job --from=cronjob/...` makes a Job of its
//! template; a Job applied from a manifest is defaulted, its template immutable and its
//! restart policy checked; `kubectl get jobs,cronjobs` (and the core kinds) print upstream's
//! columns; a PV, a PVC, an RC and a PodTemplate applied get their defaults, and
//! `kubectl scale rc` changes the RC's replicas through its scale subresource.

use keel_testkit::kube::{Kube, Stack, fails, get_json, ok, write};
use serde_json::{Value, json};

/// The pod spec defaults a template gets (`SetDefaults_PodSpec`), with `restart`.
fn pod_spec_defaults(spec: &Value, restart: &str) {
    assert_eq!(spec["restartPolicy"], restart, "{spec}");
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["schedulerName"], "default-scheduler");
    assert_eq!(spec["terminationGracePeriodSeconds"], 30);
    assert_eq!(spec["securityContext"], json!({}));
    let c = &spec["containers"][0];
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert!(spec.get("enableServiceLinks").is_none(), "{spec}");
}

const JOB: &str = "apiVersion: batch/v1
kind: Job
metadata:
  name: applied
spec:
  completions: 3
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: work
        image: busybox:1.36
        command: [\"true\"]
";

const CORE: &str = "apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-batch-test
spec:
  capacity:
    storage: 1Gi
  accessModes: [ReadWriteOnce]
  hostPath:
    path: /tmp/pv-batch-test
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
---
apiVersion: v1
kind: ReplicationController
metadata:
  name: web
spec:
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
---
apiVersion: v1
kind: PodTemplate
metadata:
  name: base
template:
  metadata:
    labels:
      app: base
  spec:
    containers:
    - name: main
      image: busybox
";

/// Jobs: `kubectl create job`, applied manifests, their defaults and validation.
fn jobs(kube: &Kube, v: Option<&str>) {
    ok(
        kube,
        v,
        &[
            "create",
            "job",
            "pi",
            "--image=perl",
            "--",
            "perl",
            "-e",
            "1",
        ],
    );
    let pi = get_json(kube, v, &["job", "pi"]);
    let uid = pi["metadata"]["uid"].as_str().expect("a uid").to_string();
    let spec = &pi["spec"];
    // SetDefaults_Job.
    assert_eq!(spec["completions"], 1, "{pi}");
    assert_eq!(spec["parallelism"], 1);
    assert_eq!(spec["backoffLimit"], 6);
    assert_eq!(spec["completionMode"], "NonIndexed");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
    assert_eq!(spec["manualSelector"], false);
    // generateSelector, and the Job's labels from its template's.
    assert_eq!(
        spec["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    );
    let labels = json!({"batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "pi", "controller-uid": uid, "job-name": "pi"});
    assert_eq!(spec["template"]["metadata"]["labels"], labels);
    assert_eq!(pi["metadata"]["labels"], labels);
    pod_spec_defaults(&spec["template"]["spec"], "Never");
    assert_eq!(
        spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    assert_eq!(pi["metadata"]["generation"], 1);
    assert_eq!(pi["status"], json!({}));

    // A manifest applied: defaulted, then its template may not change.
    let job = write(kube, "job.yaml", JOB);
    ok(kube, v, &["apply", "-f", &job]);
    let applied = get_json(kube, v, &["job", "applied"]);
    assert_eq!(applied["spec"]["backoffLimit"], 6, "{applied}");
    assert_eq!(applied["spec"]["parallelism"], 2);
    assert_eq!(
        applied["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    let changed = write(
        kube,
        "job2.yaml",
        &JOB.replace("busybox:1.36", "busybox:1.37"),
    );
    let err = fails(kube, v, &["apply", "-f", &changed]);
    assert!(
        err.contains("The Job \"applied\" is invalid: spec.template: Invalid value: ")
            && err.contains("field is immutable"),
        "{err}"
    );
    // Parallelism may change.
    let scaled = write(
        kube,
        "job3.yaml",
        &JOB.replace("parallelism: 2", "parallelism: 1"),
    );
    ok(kube, v, &["apply", "-f", &scaled]);
    let scaled = get_json(kube, v, &["job", "applied"]);
    assert_eq!(scaled["spec"]["parallelism"], 1);
    assert_eq!(scaled["metadata"]["generation"], 2);
    let always = write(
        kube,
        "always.yaml",
        &JOB.replace("applied", "always").replace("Never", "Always"),
    );
    let err = fails(kube, v, &["apply", "-f", &always]);
    assert!(
        err.contains(
            "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
        ),
        "{err}"
    );
}

/// CronJobs: created, refused schedules, and a Job made from one.
fn cronjobs(kube: &Kube, v: Option<&str>) {
    let schedule = "--schedule=*/5 * * * *";
    ok(
        kube,
        v,
        &[
            "create",
            "cronjob",
            "tick",
            "--image=busybox",
            schedule,
            "--",
            "date",
        ],
    );
    let tick = get_json(kube, v, &["cronjob", "tick"]);
    let spec = &tick["spec"];
    // SetDefaults_CronJob; the job template gets no Job defaults, only its pod template's.
    assert_eq!(spec["schedule"], "*/5 * * * *", "{tick}");
    assert_eq!(spec["concurrencyPolicy"], "Allow");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["successfulJobsHistoryLimit"], 3);
    assert_eq!(spec["failedJobsHistoryLimit"], 1);
    assert!(spec["jobTemplate"]["spec"].get("backoffLimit").is_none());
    pod_spec_defaults(
        &spec["jobTemplate"]["spec"]["template"]["spec"],
        "OnFailure",
    );
    assert_eq!(tick["metadata"]["generation"], 1);

    let err = fails(
        kube,
        v,
        &[
            "create",
            "cronjob",
            "bad",
            "--image=busybox",
            "--schedule=61 * * * *",
        ],
    );
    assert!(
        err.contains(
            "CronJob.batch \"bad\" is invalid: spec.schedule: Invalid value: \"61 * * * *\": end \
             of range (61) above maximum (59): 61"
        ),
        "{err}"
    );
    let err = fails(
        kube,
        v,
        &[
            "create",
            "cronjob",
            "tz",
            "--image=busybox",
            "--schedule=TZ=UTC 0 * * * *",
        ],
    );
    assert!(
        err.contains(
            "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in \
             schedule, use timeZone field instead"
        ),
        "{err}"
    );
    let err = fails(
        kube,
        v,
        &[
            "create",
            "cronjob",
            "few",
            "--image=busybox",
            "--schedule=* * *",
        ],
    );
    assert!(
        err.contains("expected exactly 5 fields, found 3: [* * *]"),
        "{err}"
    );
    ok(
        kube,
        v,
        &[
            "create",
            "cronjob",
            "daily",
            "--image=busybox",
            "--schedule=@daily",
        ],
    );

    ok(kube, v, &["create", "job", "manual", "--from=cronjob/tick"]);
    let manual = get_json(kube, v, &["job", "manual"]);
    assert_eq!(
        manual["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
        "manual"
    );
    assert_eq!(manual["metadata"]["ownerReferences"][0]["kind"], "CronJob");
    assert_eq!(manual["spec"]["backoffLimit"], 6);
    let uid = manual["metadata"]["uid"].clone();
    assert_eq!(
        manual["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
        uid
    );
}

/// `kubectl get` tables of the batch kinds.
fn batch_tables(kube: &Kube, v: Option<&str>) {
    let table = ok(kube, v, &["get", "jobs,cronjobs"]);
    let lines: Vec<&str> = table.lines().collect();
    let header = |prefix: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(prefix))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| panic!("no {prefix} in {table}"))
    };
    assert_eq!(
        header("NAME      "),
        "NAME STATUS COMPLETIONS DURATION AGE",
        "{table}"
    );
    assert!(
        table.contains("NAME") && table.contains("SCHEDULE") && table.contains("TIMEZONE"),
        "{table}"
    );
    let row = |name: &str| header(name);
    assert!(
        row("job.batch/pi ").starts_with("job.batch/pi Running 0/1 "),
        "{table}"
    );
    assert!(
        row("job.batch/applied ").starts_with("job.batch/applied Running 0/3 "),
        "{table}"
    );
    assert!(
        row("cronjob.batch/tick ")
            .starts_with("cronjob.batch/tick */5 * * * * <none> False 0 <none> "),
        "{table}"
    );
    let cronjob_header = lines
        .iter()
        .find(|l| l.contains("SCHEDULE"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "));
    assert_eq!(
        cronjob_header.as_deref(),
        Some("NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE")
    );
    let wide = ok(kube, v, &["get", "job", "pi", "-o", "wide"]);
    let words: Vec<&str> = wide
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        words,
        [
            "NAME",
            "STATUS",
            "COMPLETIONS",
            "DURATION",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let row = wide
        .lines()
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>();
    assert_eq!(row[0], "pi", "{wide}");
    assert_eq!(row[row.len() - 3..row.len() - 1], ["pi", "perl"], "{wide}");
    assert!(
        row[row.len() - 1].starts_with("batch.kubernetes.io/controller-uid="),
        "{wide}"
    );
    let resources = ok(kube, v, &["api-resources", "--api-group=batch"]);
    assert!(
        resources.contains("cronjobs") && resources.contains("cj") && resources.contains("jobs"),
        "{resources}"
    );
}

/// The core kinds: applied, defaulted, printed, scaled.
fn core_kinds(kube: &Kube, v: Option<&str>) {
    let core = write(kube, "core.yaml", CORE);
    ok(kube, v, &["apply", "-f", &core]);
    let pv = get_json(kube, v, &["pv", "pv-batch-test"]);
    assert_eq!(
        pv["spec"]["persistentVolumeReclaimPolicy"], "Retain",
        "{pv}"
    );
    assert_eq!(pv["spec"]["volumeMode"], "Filesystem");
    assert_eq!(
        pv["spec"]["hostPath"],
        json!({"path": "/tmp/pv-batch-test", "type": ""})
    );
    assert_eq!(pv["status"]["phase"], "Pending");
    assert!(pv["status"]["lastPhaseTransitionTime"].is_string(), "{pv}");
    let pvc = get_json(kube, v, &["pvc", "data"]);
    assert_eq!(pvc["spec"]["volumeMode"], "Filesystem", "{pvc}");
    assert_eq!(pvc["status"], json!({"phase": "Pending"}));
    let rc = get_json(kube, v, &["rc", "web"]);
    assert_eq!(rc["spec"]["replicas"], 1, "{rc}");
    assert_eq!(rc["spec"]["selector"], json!({"app": "web"}));
    assert_eq!(rc["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(rc["status"], json!({"replicas": 0}));
    pod_spec_defaults(&rc["spec"]["template"]["spec"], "Always");
    let pt = get_json(kube, v, &["podtemplate", "base"]);
    pod_spec_defaults(&pt["template"]["spec"], "Always");

    ok(kube, v, &["scale", "rc", "web", "--replicas=3"]);
    let rc = get_json(kube, v, &["rc", "web"]);
    assert_eq!(rc["spec"]["replicas"], 3);
    assert_eq!(rc["metadata"]["generation"], 2);

    let table = ok(kube, v, &["get", "rc,pvc,podtemplates"]);
    let squeezed: Vec<String> = table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    for want in [
        "NAME DESIRED CURRENT READY AGE",
        "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE",
        "NAME CONTAINERS IMAGES POD LABELS",
        "podtemplate/base main busybox app=base",
    ] {
        assert!(squeezed.iter().any(|l| l == want), "{want:?} in {table}");
    }
    assert!(
        squeezed
            .iter()
            .any(|l| l.starts_with("replicationcontroller/web 3 0 0 ")),
        "{table}"
    );
    assert!(
        squeezed
            .iter()
            .any(|l| l.starts_with("persistentvolumeclaim/data Pending <unset> ")),
        "{table}"
    );
    let pv_table = ok(kube, v, &["get", "pv", "pv-batch-test"]);
    let row: Vec<String> = pv_table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        row[0],
        "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS \
         VOLUMEATTRIBUTESCLASS REASON AGE"
    );
    assert!(
        row[1].starts_with("pv-batch-test 1Gi RWO Retain Pending <unset> "),
        "{pv_table}"
    );

    let err = fails(
        kube,
        v,
        &[
            "patch",
            "pvc",
            "data",
            "-p",
            r#"{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}"#,
        ],
    );
    assert!(
        err.contains(
            "spec: Forbidden: spec is immutable after creation except resources.requests and \
             volumeAttributesClassName for bound claims"
        ),
        "{err}"
    );
    ok(kube, v, &["delete", "-f", &core]);
}

fn batch(kube: &Kube, v: Option<&str>) {
    jobs(kube, v);
    cronjobs(kube, v);
    batch_tables(kube, v);
    core_kinds(kube, v);
    ok(kube, v, &["delete", "job", "pi", "applied", "manual"]);
    ok(kube, v, &["delete", "cronjob", "tick", "daily"]);
    let left = get_json(kube, v, &["jobs,cronjobs"]);
    assert_eq!(left["items"], json!([]), "{left}");
}

#[test]
fn batch_on_keel_up() {
    let kube = Kube::start(Stack::Up);
    batch(&kube, None);
}

#[test]
fn batch_on_keel_apiserver_on_etcd_with_kubectl_1_27() {
    let kube = Kube::start(Stack::OnEtcd);
    batch(&kube, Some("1.27"));
}

#[test]
fn python_batch_on_keel_up() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/batch.py");
    Kube::start(Stack::Up).python_ok(script, &[]);
}

#[test]
fn python_batch_on_keel_apiserver_on_etcd() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/batch.py");
    Kube::start(Stack::OnEtcd).python_ok(script, &[]);
}
