//! kubectl's typed commands against `keel up`: the current kubectl sends their bodies as
//! Kubernetes protobuf (`kubectl create namespace|configmap|secret|serviceaccount|service`,
//! and `kubectl drain`'s DeleteOptions), kubectl 1.27 as JSON; both must leave the objects
//! that `kubectl create --dry-run=client -o json` prints, the same either way. And the
//! protobuf answers of CustomResourceDefinitions, APIServices and aggregated discovery
//! ([`extensions`]), and error Statuses in the negotiated form ([`errors`]), on `keel up`
//! and on etcd 3.5.1.

#[allow(dead_code)]
#[path = "kubectl/curl.rs"]
mod curl;
#[path = "kubectl_protobuf/errors.rs"]
mod errors;
#[path = "kubectl_protobuf/extensions.rs"]
mod extensions;

use serde_json::Value;

use keel_testkit::kube::{Kube, Stack, write};

const PROTOBUF: &str = "Content-Type: application/vnd.kubernetes.protobuf";

fn run(kube: &Kube, version: Option<&str>, args: &[&str]) -> (bool, String, String) {
    let out = kube.kubectl_version(version, args);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

fn ok(kube: &Kube, version: Option<&str>, args: &[&str]) -> String {
    let (success, stdout, stderr) = run(kube, version, args);
    assert!(
        success,
        "kubectl {args:?} ({version:?}) failed: {stderr}\n{}",
        kube.log()
    );
    stdout
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// An object without what the server gives every object (and the namespace it is in).
fn portable(mut obj: Value) -> Value {
    let meta = obj["metadata"].as_object_mut().expect("metadata");
    for field in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
        "namespace",
    ] {
        meta.remove(field);
    }
    obj
}

/// Every field of `expected` is in `actual` with the same value (the server adds defaults).
fn assert_within(expected: &Value, actual: &Value, path: &str) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, v) in e {
                let actual = a.get(k).unwrap_or(&Value::Null);
                assert_within(v, actual, &format!("{path}.{k}"));
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (i, (e, a)) in e.iter().zip(a).enumerate() {
                assert_within(e, a, &format!("{path}[{i}]"));
            }
        }
        _ => assert_eq!(expected, actual, "at {path}"),
    }
}

/// The typed create commands, each with the resource and name to read back.
fn commands(suffix: &str, node_port: u16) -> Vec<(Vec<String>, &'static str, String)> {
    let name = |base: &str| format!("{base}-{suffix}");
    let create = |args: &[&str]| {
        let mut all = vec!["create".to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        all
    };
    vec![
        (create(&["namespace", &name("ns")]), "namespace", name("ns")),
        (
            create(&[
                "configmap",
                &name("cm"),
                "--from-literal=a=b",
                "--from-literal=empty=",
            ]),
            "configmap",
            name("cm"),
        ),
        (
            create(&[
                "secret",
                "generic",
                &name("secret"),
                "--from-literal=user=admin",
                "--from-literal=pass=s3cr€t",
            ]),
            "secret",
            name("secret"),
        ),
        (
            create(&["serviceaccount", &name("sa")]),
            "serviceaccount",
            name("sa"),
        ),
        (
            create(&["service", "clusterip", &name("svc"), "--tcp=80:8080"]),
            "service",
            name("svc"),
        ),
        (
            create(&[
                "service",
                "nodeport",
                &name("np"),
                "--tcp=8443:443",
                &format!("--node-port={node_port}"),
            ]),
            "service",
            name("np"),
        ),
    ]
}

/// Runs the typed creates with `version` and returns the objects read back, portable.
fn creates(kube: &Kube, version: Option<&str>, suffix: &str, node_port: u16) -> Vec<Value> {
    let mut objects = Vec::new();
    for (args, resource, name) in commands(suffix, node_port) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut dry = args.clone();
        dry.extend(["--dry-run=client", "-o", "json"]);
        let expected = json(&ok(kube, version, &dry));
        let mut verbose = args.clone();
        verbose.push("-v=7");
        let (success, _, log) = run(kube, version, &verbose);
        assert!(success, "kubectl {args:?} ({version:?}) failed: {log}");
        assert_eq!(
            log.contains(PROTOBUF),
            version.is_none(),
            "which body kubectl {args:?} ({version:?}) sent: {log}"
        );
        let got = json(&ok(kube, version, &["get", resource, &name, "-o", "json"]));
        assert_within(&portable(expected), &got, resource);
        objects.push(portable(got));
    }
    objects
}

/// Strips the name suffix and what the server assigns per object, to compare two runs.
fn anonymous(obj: &Value, suffix: &str) -> String {
    let mut obj = obj.clone();
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
        for port in spec
            .get_mut("ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            port.as_object_mut().map(|p| p.remove("nodePort"));
        }
    }
    obj.to_string().replace(&format!("-{suffix}"), "")
}

#[test]
fn typed_kubectl_commands_send_protobuf_and_json_alike() {
    let kube = Kube::start(Stack::Up);
    let protobuf = creates(&kube, None, "current", 30080);
    let json_bodies = creates(&kube, Some("1.27"), "old", 30081);
    assert!(
        !protobuf.is_empty() && protobuf.len() == json_bodies.len(),
        "{} objects created with protobuf bodies, {} with JSON ones",
        protobuf.len(),
        json_bodies.len()
    );
    for (p, j) in protobuf.iter().zip(&json_bodies) {
        assert_eq!(anonymous(p, "current"), anonymous(j, "old"));
    }

    // kubectl drain deletes pods with its DeleteOptions (grace period) in the body.
    for (version, node) in [(None, "node-current"), (Some("1.27"), "node-old")] {
        let manifest = serde_json::json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}},
                {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": format!("on-{node}"), "namespace": "default"},
                 "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}},
            ],
        });
        let path = kube.scratch.join(format!("{node}.json"));
        std::fs::write(&path, manifest.to_string()).expect("write a manifest");
        let path = path.display().to_string();
        ok(&kube, version, &["create", "--validate=false", "-f", &path]);
        // No kubelet finishes the deletion, so drain gives up waiting: the pod is left
        // terminating with the grace period drain asked for.
        let (_, _, log) = run(
            &kube,
            version,
            &[
                "drain",
                node,
                "--disable-eviction",
                "--force",
                "--grace-period=7",
                "--timeout=1s",
                "-v=7",
            ],
        );
        assert!(!log.contains("BadRequest"), "{log}");
        assert_eq!(log.contains(PROTOBUF), version.is_none(), "{log}");
        let pod = json(&ok(
            &kube,
            version,
            &["get", "pod", &format!("on-{node}"), "-o", "json"],
        ));
        assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 7, "{pod}");
        assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");
    }
}

#[test]
fn crds_apiservices_and_discovery_answer_protobuf_on_keel_up() {
    let kube = Kube::start(Stack::Up);
    extensions::crds_and_apiservices(&kube, "up");
    errors::negotiated_errors(&kube, "up");
    extensions::aggregated_discovery(&kube);
}

#[test]
fn crds_apiservices_and_discovery_answer_protobuf_on_etcd() {
    let kube = Kube::start(Stack::OnEtcd);
    extensions::crds_and_apiservices(&kube, "etcd");
    errors::negotiated_errors(&kube, "etcd");
    extensions::aggregated_discovery(&kube);
}
