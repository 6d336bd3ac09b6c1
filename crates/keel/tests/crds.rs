//! CustomResourceDefinitions with the real `kubectl` (the current one and 1.27) against
//! `keel up` and against `keel apiserver` on a real etcd 3.5.1: a CRD applied is
//! established and served at once (discovery, `api-resources`, `explain`); its custom
//! resources are defaulted, pruned (with kubectl's warning), validated by the schema and by
//! CEL rules with upstream's words, printed with their printer columns, and updated through
//! the status subresource; a second CRD whose short name is taken is not established;
//! deleting the CRD deletes its objects, then the CRD; the CRDs are served again after a
//! restart, from the first request. A CRD of two versions (v1beta1 served, v1 served and
//! stored, no conversion) serves each object through both with that version's apiVersion
//! (get, list, watch) and stores it in the storage version, as etcdctl reads it. A
//! server-side apply of a custom resource with a field its schema does not declare is
//! refused whatever `--validate` says (a field under `x-kubernetes-preserve-unknown-fields`
//! is kept), and rules using the regex, IP, CIDR and semver libraries judge custom resources
//! with upstream's words.

use std::time::Duration;

use keel_testkit::kube::{Kube, Stack, fails, get_json, ok, text, write};
use keel_testkit::{CtlVersion, etcdctl};
use serde_json::Value;

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    kind: Widget
    shortNames: [wd]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Color
      type: string
      jsonPath: .spec.color
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            x-kubernetes-validations:
            - rule: "self.replicas <= self.maxReplicas"
              message: "replicas must not exceed maxReplicas"
            properties:
              color:
                type: string
                enum: [red, green, blue]
              replicas:
                type: integer
                minimum: 0
                default: 1
              maxReplicas:
                type: integer
                default: 10
          status:
            type: object
            properties:
              ready:
                type: boolean
              replicas:
                type: integer
"#;

fn widget(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n{spec}"
    )
}

/// Waits until the CRD is established, as `kubectl wait` does.
fn wait_established(kube: &Kube, version: Option<&str>, crd: &str) {
    let out = kube.kubectl_version(
        version,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=20s",
            &format!("crd/{crd}"),
        ],
    );
    assert!(out.status.success(), "{} {}", text(&out.stderr), kube.log());
}

fn crds(kube: &mut Kube, version: Option<&str>) {
    let run = |args: &[&str]| kube.kubectl_version(version, args);
    let crd = write(kube, "crd.yaml", CRD);
    let out = run(&["apply", "-f", &crd]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    wait_established(kube, version, "widgets.example.com");
    let crd_json = get_json(kube, version, &["crd", "widgets.example.com"]);
    assert_eq!(
        crd_json["metadata"]["finalizers"],
        serde_json::json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    assert_eq!(crd_json["spec"]["names"]["listKind"], "WidgetList");
    assert_eq!(crd_json["status"]["acceptedNames"]["kind"], "Widget");
    assert_eq!(
        crd_json["status"]["storedVersions"],
        serde_json::json!(["v1"])
    );

    // Discovery and explain see the new resource.
    let resources = text(&run(&["api-resources", "--api-group=example.com"]).stdout);
    assert!(
        resources.contains("widgets") && resources.contains("wd"),
        "{resources}"
    );
    let explain = run(&["explain", "widgets.spec.color"]);
    assert!(
        explain.status.success() && text(&explain.stdout).contains("color"),
        "explain: {}{}",
        text(&explain.stdout),
        text(&explain.stderr)
    );

    // An unknown field fails kubectl's default strict validation, as upstream words it; with
    // `--validate=warn` the object is pruned, defaulted and stored, with the warning.
    let good = write(
        kube,
        "good.yaml",
        &widget("w1", "  color: red\n  extra: 1\n"),
    );
    let err = text(&run(&["apply", "-f", &good]).stderr);
    assert!(
        err.contains(
            r#"Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.extra""#
        ),
        "{err}"
    );
    let out = run(&["apply", "--validate=warn", "-f", &good]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("unknown field \"spec.extra\""),
        "warning: {}",
        text(&out.stderr)
    );
    let w1 = get_json(kube, version, &["widget", "w1"]);
    assert_eq!(w1["spec"]["replicas"], 1);
    assert_eq!(w1["spec"]["maxReplicas"], 10);
    assert!(w1["spec"].get("extra").is_none(), "{w1}");
    assert_eq!(w1["metadata"]["generation"], 1);

    // Invalid by schema: the enum, and a missing required field.
    let bad = write(kube, "bad.yaml", &widget("w2", "  color: pink\n"));
    let err = text(&run(&["apply", "-f", &bad]).stderr);
    assert!(
        err.contains(
            r#"spec.color: Unsupported value: "pink": supported values: "red", "green", "blue""#
        ),
        "{err}"
    );
    let missing = write(kube, "missing.yaml", &widget("w3", "  replicas: 2\n"));
    let err = text(&run(&["apply", "-f", &missing]).stderr);
    assert!(err.contains("spec.color: Required value"), "{err}");
    // Invalid by the CEL rule.
    let cel = write(
        kube,
        "cel.yaml",
        &widget("w4", "  color: blue\n  replicas: 20\n"),
    );
    let err = text(&run(&["apply", "-f", &cel]).stderr);
    assert!(
        err.contains("replicas must not exceed maxReplicas"),
        "{err}"
    );
    assert!(!run(&["get", "widget", "w2"]).status.success());

    // Printer columns, and the short name.
    let table = text(&run(&["get", "wd"]).stdout);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "REPLICAS", "COLOR"], "{table}");
    assert!(table.contains("w1") && table.contains("red"), "{table}");

    // The status subresource: an update of the object keeps the status, and the other way.
    let status = r#"{"status":{"ready":true}}"#;
    let out = run(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        status,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"color":"green"},"status":{"ready":false}}"#,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let w1 = get_json(kube, version, &["widget", "w1"]);
    assert_eq!(w1["status"]["ready"], true, "{w1}");
    assert_eq!(w1["spec"]["color"], "green");
    assert_eq!(w1["metadata"]["generation"], 2);
    // kubectl scale, through the scale subresource; past maxReplicas the CEL rule refuses it.
    let out = run(&["scale", "widget", "w1", "--replicas=3"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        get_json(kube, version, &["widget", "w1"])["spec"]["replicas"],
        3
    );
    let raw = run(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets/w1/scale",
    ]);
    let scale: Value = serde_json::from_slice(&raw.stdout).expect("a Scale");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 3);
    let err = text(&run(&["scale", "widget", "w1", "--replicas=11"]).stderr);
    assert!(
        err.contains("replicas must not exceed maxReplicas"),
        "{err}"
    );
    // Strategic merge patches are not for custom resources.
    let out = run(&["patch", "widget", "w1", "--type=strategic", "-p", "{}"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("application/merge-patch+json"),
        "{}",
        text(&out.stderr)
    );

    // A second CRD of the group whose short name is taken is not established.
    let gadgets = CRD
        .replace("widgets", "gadgets")
        .replace("Widget", "Gadget");
    let gadgets = write(kube, "gadgets.yaml", &gadgets);
    assert!(run(&["apply", "-f", &gadgets]).status.success());
    let mut reason = String::new();
    for _ in 0..50 {
        let g = get_json(kube, version, &["crd", "gadgets.example.com"]);
        reason = g["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "NamesAccepted")
            .map(|c| format!("{} {}", c["status"], c["reason"]))
            .unwrap_or_default();
        if !reason.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(reason, r#""False" "ShortNamesConflict""#);
    assert!(run(&["delete", "-f", &gadgets]).status.success());

    // Served again after a restart, from the first request.
    if kube.stack == Stack::Up {
        kube.kill_and_restart();
        let w1 = get_json(kube, version, &["widget", "w1"]);
        assert_eq!(w1["spec"]["color"], "green");
    }

    // Deleting the CRD deletes its objects, then the CRD.
    let out = kube.kubectl_version(
        version,
        &["delete", "crd", "widgets.example.com", "--timeout=30s"],
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stderr),
        kube.log()
    );
    let out = kube.kubectl_version(version, &["get", "crd", "widgets.example.com"]);
    assert!(!out.status.success());
    let raw = kube.kubectl_version(version, &["get", "--raw", "/apis/example.com/v1/widgets"]);
    assert!(!raw.status.success(), "still served: {}", text(&raw.stdout));
    // Created again, it has no objects left over.
    assert!(
        kube.kubectl_version(version, &["apply", "-f", &crd])
            .status
            .success()
    );
    wait_established(kube, version, "widgets.example.com");
    let list = get_json(kube, version, &["widgets", "-A"]);
    assert_eq!(list["items"], serde_json::json!([]), "{list}");
}

#[test]
fn crds_on_keel_up() {
    let mut kube = Kube::start(Stack::Up);
    crds(&mut kube, None);
}

#[test]
fn crds_on_keel_apiserver_on_etcd_with_kubectl_1_27() {
    let mut kube = Kube::start(Stack::OnEtcd);
    crds(&mut kube, Some("1.27"));
}

/// A CRD of two versions, v1beta1 served and v1 served and stored, with no conversion.
fn gears() -> String {
    let version = |name: &str, storage: bool| {
        format!(
            "  - name: {name}\n    served: true\n    storage: {storage}\n    schema:\n      \
             openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            \
             type: object\n            properties: {{teeth: {{type: integer}}}}\n"
        )
    };
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  \
         name: gears.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  \
         names: {{plural: gears, kind: Gear}}\n  conversion: {{strategy: None}}\n  versions:\n{}{}",
        version("v1beta1", false),
        version("v1", true)
    )
}

/// A Gear of `version` as JSON.
fn gear(version: &str, name: &str, teeth: i64) -> String {
    serde_json::json!({
        "apiVersion": format!("example.com/{version}"), "kind": "Gear",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"teeth": teeth},
    })
    .to_string()
}

fn raw_get(kube: &Kube, path: &str) -> Value {
    serde_json::from_str(&kube.kubectl_ok(&["get", "--raw", path])).expect("JSON")
}

fn versions(stack: Stack) {
    let kube = Kube::start(stack);
    kube.kubectl_ok(&["apply", "-f", &write(&kube, "gears.yaml", &gears())]);
    wait_established(&kube, None, "gears.example.com");
    let path = |version: &str, name: &str| {
        format!("/apis/example.com/{version}/namespaces/default/gears{name}")
    };
    let watch = kube.watch(&format!("{}?watch=1", path("v1beta1", "")));
    // One object created through each version.
    kube.kubectl_ok(&[
        "create",
        "-f",
        &write(&kube, "g1.json", &gear("v1beta1", "g1", 12)),
    ]);
    kube.kubectl_ok(&[
        "create",
        "-f",
        &write(&kube, "g2.json", &gear("v1", "g2", 20)),
    ]);
    for version in ["v1beta1", "v1"] {
        for name in ["g1", "g2"] {
            let got = raw_get(&kube, &path(version, &format!("/{name}")));
            assert_eq!(got["apiVersion"], format!("example.com/{version}"), "{got}");
            assert_eq!(got["kind"], "Gear");
        }
        let list = raw_get(&kube, &path(version, ""));
        assert_eq!(
            list["apiVersion"],
            format!("example.com/{version}"),
            "{list}"
        );
        let items: Vec<(&Value, &Value)> = list["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| (&i["apiVersion"], &i["spec"]["teeth"]))
            .collect();
        let want = Value::from(format!("example.com/{version}"));
        assert_eq!(
            items,
            [(&want, &Value::from(12)), (&want, &Value::from(20))]
        );
    }
    // kubectl's fully qualified resource picks the version.
    let g2 = get_json(&kube, None, &["gears.v1beta1.example.com", "g2"]);
    assert_eq!(g2["apiVersion"], "example.com/v1beta1");
    // A watch through v1beta1 sees the object created through v1 in v1beta1.
    let mut added = Vec::new();
    while added.len() < 2 {
        let event = watch.next(Duration::from_secs(10)).expect("a watch event");
        assert_eq!(event["type"], "ADDED", "{event}");
        added.push(event["object"]["apiVersion"].clone());
    }
    assert_eq!(added, ["example.com/v1beta1", "example.com/v1beta1"]);
    // A patch through v1beta1 of the object written through v1.
    kube.kubectl_ok(&[
        "patch",
        "gears.v1beta1.example.com",
        "g2",
        "--type=merge",
        "-p",
        r#"{"spec":{"teeth":21}}"#,
    ]);
    // Both are stored in the storage version, v1.
    for (name, teeth) in [("g1", 12), ("g2", 21)] {
        let key = format!("/registry/example.com/gears/default/{name}");
        let args = ["get", key.as_str(), "--print-value-only"].map(String::from);
        let got = etcdctl(CtlVersion::V35, &kube.store_url, &args, None);
        assert_eq!(got.code, 0, "etcdctl get {key}: {}", got.stderr);
        let stored: Value = serde_json::from_str(got.stdout.trim()).expect("stored as JSON");
        assert_eq!(stored["apiVersion"], "example.com/v1", "{stored}");
        assert_eq!(stored["spec"]["teeth"], teeth, "{stored}");
    }
    let crd = get_json(&kube, None, &["crd", "gears.example.com"]);
    assert_eq!(crd["status"]["storedVersions"], serde_json::json!(["v1"]));
}

#[test]
fn a_crd_of_two_versions_serves_both_and_stores_one_on_keel_up() {
    versions(Stack::Up);
}

#[test]
fn a_crd_of_two_versions_serves_both_and_stores_one_on_etcd() {
    versions(Stack::OnEtcd);
}

const HOSTS: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: hosts.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: hosts, kind: Host}
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
            x-kubernetes-validations:
            - rule: "isIP(self.address)"
            - rule: "cidr(self.network).containsIP(self.address)"
              message: "address must be in network"
            - rule: "semver(self.version).isGreaterThan(semver('1.0.0'))"
            - rule: "self.image.find('^[a-z]+') != ''"
              messageExpression: "'image ' + self.image + ' must start with a letter'"
            properties:
              address: {type: string, maxLength: 64}
              network: {type: string, maxLength: 64}
              version: {type: string, maxLength: 64}
              image: {type: string, maxLength: 64}
              extra:
                type: object
                x-kubernetes-preserve-unknown-fields: true
"#;

fn host(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Host\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n{spec}"
    )
}

const GOOD: &str = "  address: 10.0.0.7\n  network: 10.0.0.0/8\n  version: 1.2.3\n  image: nginx\n";

#[test]
fn server_side_apply_of_undeclared_fields_and_cel_libraries_on_keel_up() {
    let kube = Kube::start(Stack::Up);
    let crd = write(&kube, "hosts.yaml", HOSTS);
    ok(&kube, None, &["apply", "-f", &crd]);
    wait_established(&kube, None, "hosts.example.com");

    // An undeclared field: refused whatever --validate says, before anything is stored; a
    // field under x-kubernetes-preserve-unknown-fields is kept.
    let undeclared = write(
        &kube,
        "undeclared.yaml",
        &host("h1", &format!("{GOOD}  foo: 1\n")),
    );
    for validate in ["strict", "warn", "ignore"] {
        let flag = format!("--validate={validate}");
        let err = fails(
            &kube,
            None,
            &["apply", "--server-side", &flag, "-f", &undeclared],
        );
        assert!(
            err.contains(
                "failed to create typed patch object (default/h1; example.com/v1, Kind=Host): .spec.foo: field not declared in schema"
            ),
            "{validate}: {err}"
        );
    }
    assert!(!kube.kubectl(&["get", "host", "h1"]).status.success());
    let preserved = write(
        &kube,
        "preserved.yaml",
        &host("h1", &format!("{GOOD}  extra: {{anything: [1, 2]}}\n")),
    );
    ok(&kube, None, &["apply", "--server-side", "-f", &preserved]);
    let h1 = get_json(&kube, None, &["host", "h1"]);
    assert_eq!(h1["spec"]["extra"]["anything"], serde_json::json!([1, 2]));
    // Client-side apply prunes the undeclared field instead, with the warning.
    let out = kube.kubectl(&["apply", "--validate=warn", "-f", &undeclared]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(r#"unknown field "spec.foo""#));

    // The CEL libraries: a good host passes, each bad one fails its rule in upstream's words.
    let bad = [
        (
            "  address: 10.0.0.300\n  network: 10.0.0.0/8\n  version: 1.2.3\n  image: nginx\n",
            // A string that is not an IP matches no overload of containsIP, upstream; the
            // error names the rule by its message.
            vec![
                r#"spec: Invalid value: "object": failed rule: isIP(self.address)"#,
                r#"spec: Invalid value: "object": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: address must be in network"#,
            ],
        ),
        (
            "  address: 192.168.0.1\n  network: 10.0.0.0/8\n  version: 1.2.3\n  image: nginx\n",
            vec![r#"spec: Invalid value: "object": address must be in network"#],
        ),
        (
            "  address: 10.0.0.7\n  network: 10.0.0.0/8\n  version: v1.2\n  image: nginx\n",
            vec![
                r#"spec: Invalid value: "object": No Major.Minor.Patch elements found evaluating rule: semver(self.version).isGreaterThan(semver('1.0.0'))"#,
            ],
        ),
        (
            "  address: 10.0.0.7\n  network: 10.0.0.0/8\n  version: 0.9.0\n  image: nginx\n",
            vec![
                r#"spec: Invalid value: "object": failed rule: semver(self.version).isGreaterThan(semver('1.0.0'))"#,
            ],
        ),
        (
            "  address: 10.0.0.7\n  network: 10.0.0.0/8\n  version: 1.2.3\n  image: 9nginx\n",
            vec![r#"spec: Invalid value: "object": image 9nginx must start with a letter"#],
        ),
    ];
    for (i, (spec, errors)) in bad.iter().enumerate() {
        let file = write(&kube, &format!("bad{i}.yaml"), &host("h2", spec));
        let err = fails(&kube, None, &["apply", "-f", &file]);
        for e in errors {
            assert!(err.contains(e), "{spec}: {err}");
        }
    }
    let good = write(&kube, "good.yaml", &host("h2", GOOD));
    ok(&kube, None, &["apply", "-f", &good]);
}
