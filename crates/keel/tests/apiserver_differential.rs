//! The same API requests against `keel up` and against `keel apiserver` on a real etcd
//! 3.5.1 get the same answers (uids, timestamps and resourceVersions normalised), and the
//! same keys and values land in the store.

use std::fs;
use std::time::Duration;

use keel_testkit::CtlVersion;
use keel_testkit::kube::{Kube, Stack};
use regex::Regex;

/// One request: a kubectl command line, `{dir}` standing for the folder of the bodies.
const STEPS: &[&str] = &[
    "create --raw /api/v1/namespaces -f {dir}/ns.json",
    "create --raw /api/v1/namespaces/diff/configmaps -f {dir}/cm.json",
    "create --raw /api/v1/namespaces/diff/configmaps -f {dir}/cm.json",
    "get --raw /api/v1/namespaces/diff/configmaps/c1",
    "get --raw /api/v1/namespaces/diff/configmaps/missing",
    "replace --raw /api/v1/namespaces/diff/configmaps/c1 -f {dir}/cm-stale.json",
    "replace --raw /api/v1/namespaces/diff/configmaps/c1 -f {dir}/cm-changed.json",
    "get --raw /api/v1/namespaces/diff/configmaps?labelSelector=app%3Dweb",
    "get --raw /api/v1/namespaces/diff/configmaps?fieldSelector=spec.x%3D1",
    "get --raw /api/v1/namespaces/diff/configmaps?limit=1",
    "create --raw /api/v1/namespaces/diff/pods -f {dir}/pod.json",
    "create --raw /api/v1/namespaces/diff/pods -f {dir}/pod-invalid.json",
    "create --raw /api/v1/namespaces/diff/secrets -f {dir}/secret.json",
    "create --raw /api/v1/namespaces/diff/configmaps -f {dir}/bad.json",
    "get --raw /api/v1/namespaces/diff/pods/web",
    "delete --raw /api/v1/namespaces/diff/configmaps/c1",
    "delete --raw /api/v1/namespaces/diff/configmaps/c1",
    "get --raw /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
    "get --raw /api/v1",
];

const BODIES: &[(&str, &str)] = &[
    (
        "ns.json",
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"diff"}}"#,
    ),
    (
        "cm.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1","labels":{"app":"web"}},"data":{"a":"b"}}"#,
    ),
    (
        "cm-stale.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1","resourceVersion":"1"},"data":{"a":"x"}}"#,
    ),
    (
        "cm-changed.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c1","labels":{"app":"web"}},"data":{"a":"c"}}"#,
    ),
    (
        "pod.json",
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"a","image":"nginx:1.27","ports":[{"containerPort":80}]}]}}"#,
    ),
    (
        "pod-invalid.json",
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"a"}]}}"#,
    ),
    (
        "secret.json",
        r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"k":"v"}}"#,
    ),
    (
        "bad.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"#,
    ),
];

fn normalise(text: &str) -> String {
    let rules = [
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "UID",
        ),
        (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "TIME"),
        (r#""resourceVersion":"\d+""#, r#""resourceVersion":"RV""#),
        (r#""continue":"[^"]*""#, r#""continue":"TOKEN""#),
        (r"127\.0\.0\.1:\d+", "ADDR"),
    ];
    let mut out = text.to_string();
    for (pattern, with) in rules {
        out = Regex::new(pattern)
            .unwrap()
            .replace_all(&out, with)
            .into_owned();
    }
    out
}

/// The transcript of every step, and the store's keys and values after them.
fn transcript(stack: Stack) -> (Vec<String>, Vec<String>) {
    // The same controllers on both (keel up runs every one by default; the others publish
    // each server's own CA and watch nodes, which `--test controllers` proves).
    let kube = Kube::start_with(stack, &["--controllers=namespace"]);
    let dir = kube.scratch.join("bodies");
    fs::create_dir_all(&dir).unwrap();
    for (name, body) in BODIES {
        fs::write(dir.join(name), body).unwrap();
    }
    let mut lines = Vec::new();
    for step in STEPS {
        let command = step.replace("{dir}", &dir.display().to_string());
        let args: Vec<&str> = command.split(' ').collect();
        let out = kube.kubectl(&args);
        lines.push(normalise(&format!(
            "{step} => exit {:?}\n{}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr).replace(&dir.display().to_string(), "{dir}")
        )));
    }
    // kube-apiserver's own default/kubernetes Service and Endpoints are in the store too.
    keel_testkit::wait::until("the kubernetes endpoints", Duration::from_secs(60), || {
        let out = kube.kubectl(&["-n", "default", "get", "endpoints", "kubernetes"]);
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    });
    let store = keel_testkit::etcdctl(
        CtlVersion::V35,
        &kube.store_url,
        &["get".into(), "/registry".into(), "--prefix".into()],
        None,
    );
    assert_eq!(store.code, 0, "{}", store.stderr);
    // The default/kubernetes Service and its Endpoints name the apiserver's port.
    let server = kube.kubectl_ok(&[
        "config",
        "view",
        "-o",
        "jsonpath={.clusters[0].cluster.server}",
    ]);
    let port = server.rsplit(':').next().unwrap_or_default().to_string();
    let kvs = store
        .stdout
        .lines()
        .map(|kv| {
            normalise(
                &kv.replace(&format!(r#""port":{port},"#), r#""port":PORT,"#)
                    .replace(
                        &format!(r#""targetPort":{port}}}"#),
                        r#""targetPort":PORT}"#,
                    ),
            )
        })
        .collect();
    (lines, kvs)
}

#[test]
fn keel_up_answers_and_stores_as_keel_apiserver_on_etcd() {
    let (keel, keel_store) = transcript(Stack::Up);
    let (etcd, etcd_store) = transcript(Stack::OnEtcd);
    assert_eq!(
        keel.len(),
        etcd.len(),
        "the transcripts differ in length:\nkeel: {keel:#?}\netcd: {etcd:#?}"
    );
    for (k, e) in keel.iter().zip(&etcd) {
        assert_eq!(k, e, "the answers differ");
    }
    assert_eq!(keel_store, etcd_store, "the stored keys and values differ");
    // The requests did what they say (a transcript of errors would compare equal too).
    let created = &keel[1];
    assert!(created.contains(r#""name":"c1""#), "{created}");
    assert!(keel[2].contains("(AlreadyExists)"), "{}", keel[2]);
    assert!(keel[5].contains("(Conflict)"), "{}", keel[5]);
    assert!(
        keel[11].contains("The Pod \"Bad_Name\" is invalid"),
        "{}",
        keel[11]
    );
    assert!(keel[13].contains("(BadRequest)"), "{}", keel[13]);
    assert!(
        !keel_store
            .iter()
            .any(|l| l == "/registry/configmaps/diff/c1")
    );
    assert!(
        keel_store.iter().any(|l| l == "/registry/pods/diff/web"),
        "{keel_store:?}"
    );
    assert!(
        keel_store.iter().any(|l| l == "/registry/secrets/diff/s"),
        "{keel_store:?}"
    );
}
