//! How deep a request's object may nest, against `keel up` with the real `kubectl` (see
//! `keel_apiserver::nesting` for the limit and why it is lower than kube-apiserver's 10,000
//! levels): a ConfigMap-like body and a custom resource with `x-kubernetes-preserve-unknown-
//! fields` nested 100 levels are created, read, patched and read again (the custom resource
//! keeping its whole depth); the same nested 10,000 levels (what kube-apiserver takes) are
//! refused with the documented words, and the server goes on serving them.

use keel_testkit::kube::{Kube, Stack, fails, ok, text, write};
use serde_json::{Value, json};

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: deeps.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: deeps
    kind: Deep
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
            x-kubernetes-preserve-unknown-fields: true
"#;

/// `{"a":{"a":...1...}}`, `levels` objects deep.
fn nested(levels: usize) -> String {
    format!("{}1{}", r#"{"a":"#.repeat(levels), "}".repeat(levels))
}

/// The depth of `v` along its `a` keys.
fn depth(mut v: &Value) -> usize {
    let mut levels = 0;
    while let Some(inner) = v.get("a") {
        levels += 1;
        v = inner;
    }
    levels
}

/// A ConfigMap whose unknown field `x` makes the body `levels` deep, and a Deep whose spec
/// does.
fn bodies(name: &str, levels: usize) -> (String, String) {
    let config_map = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"k":"v"}},"x":{}}}"#,
        nested(levels - 1)
    );
    let deep = format!(
        r#"{{"apiVersion":"example.com/v1","kind":"Deep","metadata":{{"name":"{name}"}},"spec":{}}}"#,
        nested(levels - 1)
    );
    (config_map, deep)
}

const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";
const DEEPS: &str = "/apis/example.com/v1/namespaces/default/deeps";

#[test]
fn deep_objects_are_taken_to_the_documented_limit_and_refused_past_it() {
    let kube = Kube::start(Stack::Up);
    let k = |args: &[&str]| ok(&kube, None, args);
    let crd = write(&kube, "crd.yaml", CRD);
    k(&["apply", "-f", &crd]);
    let out = kube.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=20s",
        "crd/deeps.example.com",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Within the limit: created, read, patched, read again.
    let (config_map, deep) = bodies("within", 100);
    let cm = write(&kube, "cm.json", &config_map);
    let dp = write(&kube, "deep.json", &deep);
    k(&["create", "--raw", CONFIG_MAPS, "-f", &cm]);
    k(&["create", "--raw", DEEPS, "-f", &dp]);
    let got: Value =
        serde_json::from_str(&k(&["get", "--raw", &format!("{DEEPS}/within")])).unwrap();
    assert_eq!(depth(&got["spec"]), 99);
    k(&[
        "patch",
        "deep",
        "within",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"b":1}}"#,
    ]);
    k(&[
        "patch",
        "configmap",
        "within",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"k":"w"}}"#,
    ]);
    let got: Value =
        serde_json::from_str(&k(&["get", "--raw", &format!("{DEEPS}/within")])).unwrap();
    assert_eq!((depth(&got["spec"]), &got["spec"]["b"]), (99, &json!(1)));
    let cm: Value =
        serde_json::from_str(&k(&["get", "--raw", &format!("{CONFIG_MAPS}/within")])).unwrap();
    assert_eq!(cm["data"], json!({"k": "w"}));
    assert!(cm.get("x").is_none(), "{cm}");

    // What kube-apiserver takes, 10,000 levels: refused with the documented words.
    let (config_map, deep) = bodies("past", 10_000);
    let words = "Error from server (BadRequest): couldn't get version/kind; json parse error: \
                 recursion limit exceeded at line 1 column ";
    for (path, body) in [(CONFIG_MAPS, config_map), (DEEPS, deep)] {
        let file = write(&kube, "past.json", &body);
        let err = fails(&kube, None, &["create", "--raw", path, "-f", &file]);
        assert!(err.contains(words), "{err}");
    }
    // The server is still up and serving.
    assert_eq!(k(&["get", "--raw", "/readyz"]).trim(), "ok");
    let got: Value =
        serde_json::from_str(&k(&["get", "--raw", &format!("{DEEPS}/within")])).unwrap();
    assert_eq!(depth(&got["spec"]), 99);
}
