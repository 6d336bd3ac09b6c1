//! Server-side apply and `managedFields` with the real `kubectl` (the current one and 1.27)
//! against `keel up` and against `keel apiserver` on a real etcd 3.5.1: every write records
//! its manager (`kubectl-create`, `kubectl-patch`, `kubectl-label`, `kubectl-replace`, ...) as
//! kube-apiserver does; `apply --server-side` creates, applies, is a no-op the second time,
//! fails on a field another manager changed (exit code 1, upstream's message and kubectl's
//! hint) until `--force-conflicts`, removes what it stops applying, merges container lists
//! by name and service ports by port and protocol, and takes over what client-side `kubectl
//! apply` set; `get --show-managed-fields` shows it all.

use std::fs;
use std::process::Output;

use keel_testkit::kube::{Kube, Stack};
use serde_json::{Value, json};

/// Client-side validation needs `/openapi/v2`; the documents are not served yet.
/// kubectl's default, said aloud: the server validates fields (`fieldValidation=Strict`).
const VALIDATE: &str = "--validate=strict";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

struct Session<'a> {
    kube: &'a Kube,
    version: Option<&'a str>,
    ns: String,
}

impl Session<'_> {
    fn run(&self, args: &[&str]) -> Output {
        self.kube.kubectl_version(self.version, args)
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kubectl {:?} {args:?} failed: {}\n{}",
            self.version,
            text(&out.stderr),
            self.kube.log()
        );
        text(&out.stdout)
    }

    /// Fails with exit code 1; its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "kubectl {:?} {args:?} should fail but printed {}",
            self.version,
            text(&out.stdout)
        );
        text(&out.stderr)
    }

    fn write(&self, name: &str, body: &str) -> String {
        let path = self.kube.scratch.join(format!("{}-{name}", self.ns));
        fs::write(&path, body).expect("write a manifest");
        path.display().to_string()
    }

    fn apply(&self, file: &str, extra: &[&str]) -> String {
        let mut args = vec!["apply", "--server-side", VALIDATE, "-f", file];
        args.extend_from_slice(extra);
        self.ok(&args)
    }

    /// `apply --server-side` with kubectl's request log (`-v=6`) on stderr.
    fn apply_logged(&self, file: &str) -> Output {
        self.run(&["apply", "--server-side", VALIDATE, "-f", file, "-v=6"])
    }

    /// The object as JSON, managedFields shown.
    fn get(&self, what: &str) -> Value {
        let out = self.ok(&[
            "get",
            what,
            "-n",
            &self.ns,
            "-o",
            "json",
            "--show-managed-fields",
        ]);
        serde_json::from_str(&out).expect("kubectl prints JSON")
    }

    fn configmap(&self, name: &str, data: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {}\n  labels:\n    app: web\ndata:\n{data}",
            self.ns
        )
    }
}

/// Whether kubectl's request log shows a PATCH answered with `code` (`201 Created`).
fn patched(out: &Output, code: &str) -> bool {
    text(&out.stderr)
        .lines()
        .any(|l| l.contains("PATCH https://") && l.contains(&format!(" {code} in ")))
}

/// `(manager, operation, fieldsV1)` of every entry, in the order the server keeps them.
fn entries(obj: &Value) -> Vec<(String, String, Value)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or("").to_string(),
                e["operation"].as_str().unwrap_or("").to_string(),
                e["fieldsV1"].clone(),
            )
        })
        .collect()
}

fn entry(manager: &str, operation: &str, fields: Value) -> (String, String, Value) {
    (manager.to_string(), operation.to_string(), fields)
}

fn session(kube: &Kube, version: Option<&str>) {
    let ns = format!("ssa-{}", version.unwrap_or("current").replace('.', "-"));
    let s = Session { kube, version, ns };
    let ns = s.ns.as_str();
    let nsfile = s.write(
        "ns.yaml",
        &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"),
    );
    s.ok(&["create", "-f", &nsfile, VALIDATE]);
    let created = s.get(&format!("namespace/{ns}"));
    assert_eq!(
        entries(&created),
        [entry(
            "kubectl-create",
            "Update",
            json!({"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}})
        )]
    );

    // A create, a label, a replace: each its manager's Update entry.
    let c1 = s.write("c1.yaml", &s.configmap("c1", "  a: x\n"));
    s.ok(&["create", "-f", &c1, VALIDATE]);
    let obj = s.get("configmap/c1");
    let mf = &obj["metadata"]["managedFields"][0];
    assert_eq!(mf["apiVersion"], "v1");
    assert_eq!(mf["fieldsType"], "FieldsV1");
    let time = mf["time"].as_str().expect("a time");
    assert!(time.ends_with('Z') && time.len() == 20, "{time}");
    assert_eq!(
        entries(&obj),
        [entry(
            "kubectl-create",
            "Update",
            json!({"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
        )]
    );
    s.ok(&["label", "configmap/c1", "-n", ns, "tier=front"]);
    let replaced = s.write("c1b.yaml", &s.configmap("c1", "  a: w\n"));
    s.ok(&["replace", "-f", &replaced, VALIDATE]);
    assert_eq!(
        entries(&s.get("configmap/c1")),
        [
            entry(
                "kubectl-create",
                "Update",
                json!({"f:data": {}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
            ),
            entry("kubectl-replace", "Update", json!({"f:data": {"f:a": {}}})),
        ],
        "the replace took data.a and dropped the label kubectl-label had set"
    );
    let plain = s.ok(&["get", "configmap/c1", "-n", ns, "-o", "yaml"]);
    assert!(!plain.contains("managedFields"), "{plain}");

    // Server-side apply: create, then a second apply that writes nothing.
    let s1 = s.write("s1.yaml", &s.configmap("s1", "  a: x\n  b: two\n"));
    let first = s.apply_logged(&s1);
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert_eq!(text(&first.stdout), "configmap/s1 serverside-applied\n");
    assert!(patched(&first, "201 Created"), "{}", text(&first.stderr));
    let obj = s.get("configmap/s1");
    let applied = json!({
        "f:data": {"f:a": {}, "f:b": {}},
        "f:metadata": {"f:labels": {"f:app": {}}}
    });
    assert_eq!(entries(&obj), [entry("kubectl", "Apply", applied.clone())]);
    let rv = obj["metadata"]["resourceVersion"].clone();
    let second = s.apply_logged(&s1);
    assert!(patched(&second, "200 OK"), "{}", text(&second.stderr));
    assert_eq!(s.get("configmap/s1")["metadata"]["resourceVersion"], rv);
    let yaml = s.ok(&[
        "get",
        "configmap/s1",
        "-n",
        ns,
        "-o",
        "yaml",
        "--show-managed-fields",
    ]);
    assert!(
        yaml.contains("    manager: kubectl\n    operation: Apply\n"),
        "{yaml}"
    );

    // Another manager changes a.
    s.ok(&[
        "patch",
        "configmap/s1",
        "-n",
        ns,
        "-p",
        r#"{"data":{"a":"changed"}}"#,
    ]);
    let stderr = s.fails(&["apply", "--server-side", VALIDATE, "-f", &s1]);
    assert!(
        stderr.starts_with(
            "error: Apply failed with 1 conflict: conflict with \"kubectl-patch\" using v1: .data.a\n\
             Please review the fields above--they currently have other managers. Here\n\
             are the ways you can resolve this warning:\n"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("`--force-conflicts` flag"), "{stderr}");
    let refused = s.apply_logged(&s1);
    assert!(
        patched(&refused, "409 Conflict"),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(s.get("configmap/s1")["data"]["a"], "changed");
    assert_eq!(
        s.apply(&s1, &["--force-conflicts"]),
        "configmap/s1 serverside-applied\n"
    );
    let forced = s.get("configmap/s1");
    assert_eq!(forced["data"], json!({"a": "x", "b": "two"}));
    assert_eq!(entries(&forced), [entry("kubectl", "Apply", applied)]);

    // A second applier owns c; the first stops applying b (removed) and c (kept).
    let other = s.write(
        "other.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s1\n  namespace: {ns}\ndata:\n  c: three\n"
        ),
    );
    s.apply(&other, &["--field-manager=other"]);
    let fewer = s.write("s1b.yaml", &s.configmap("s1", "  a: x\n"));
    s.apply(&fewer, &[]);
    let obj = s.get("configmap/s1");
    assert_eq!(obj["data"], json!({"a": "x", "c": "three"}));
    // Both are Apply entries of the same second or not: compare them by manager.
    let mut both = entries(&obj);
    both.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        both,
        [
            entry(
                "kubectl",
                "Apply",
                json!({"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
            ),
            entry("other", "Apply", json!({"f:data": {"f:c": {}}})),
        ]
    );

    // A field manager name over 128 bytes is refused.
    let long = format!("--field-manager={}", "m".repeat(129));
    let stderr = s.fails(&["apply", "--server-side", VALIDATE, "-f", &s1, &long]);
    assert!(
        stderr.contains("fieldManager: Too long: may not be more than 128 bytes"),
        "{stderr}"
    );

    // Entries can be reset with [{}]; an object without entries starts none on update, and
    // an apply then finds its fields owned by before-first-apply.
    s.ok(&[
        "patch",
        "configmap/c1",
        "-n",
        ns,
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/metadata/managedFields","value":[{}]}]"#,
    ]);
    s.ok(&["annotate", "configmap/c1", "-n", ns, "note=1"]);
    assert!(
        s.get("configmap/c1")["metadata"]
            .get("managedFields")
            .is_none()
    );
    let c1_changed = s.write("c1c.yaml", &s.configmap("c1", "  a: z\n"));
    let stderr = s.fails(&["apply", "--server-side", VALIDATE, "-f", &c1_changed]);
    assert!(
        stderr.starts_with(
            "error: Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.a\n"
        ),
        "{stderr}"
    );

    // Client-side apply, then server-side apply of a changed value: kubectl migrates the
    // fields, with no conflict, and the annotation follows the applied configuration.
    let csa = s.write("csa.yaml", &s.configmap("m1", "  a: one\n  b: two\n"));
    s.ok(&["apply", VALIDATE, "-f", &csa]);
    let managers: Vec<String> = entries(&s.get("configmap/m1"))
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(managers, ["kubectl-client-side-apply"]);
    let ssa = s.write("ssa.yaml", &s.configmap("m1", "  a: uno\n  b: two\n"));
    assert_eq!(s.apply(&ssa, &[]), "configmap/m1 serverside-applied\n");
    let obj = s.get("configmap/m1");
    assert_eq!(obj["data"]["a"], "uno");
    let managers: Vec<(String, String)> = entries(&obj).into_iter().map(|e| (e.0, e.1)).collect();
    assert!(
        !managers
            .iter()
            .any(|(m, _)| m == "kubectl-client-side-apply"),
        "{managers:?}"
    );
    assert!(
        managers.contains(&("kubectl".into(), "Apply".into())),
        "{managers:?}"
    );
    let last = obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .expect("the annotation stays");
    let last: Value = serde_json::from_str(last).unwrap();
    assert_eq!(last["data"]["a"], "uno");
    // ...and client-side apply works on after it.
    let back = s.write("back.yaml", &s.configmap("m1", "  a: eins\n  b: two\n"));
    assert_eq!(
        s.ok(&["apply", VALIDATE, "-f", &back]),
        "configmap/m1 configured\n"
    );
    assert_eq!(s.get("configmap/m1")["data"]["a"], "eins");

    // Lists: containers by name, ports by port and protocol, env by name.
    let pod = s.write(
        "pod.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p1\n  namespace: {ns}\nspec:\n  containers:\n  - name: web\n    image: nginx:1.25\n    ports:\n    - containerPort: 80\n    env:\n    - name: A\n      value: \"1\"\n"
        ),
    );
    assert_eq!(s.apply(&pod, &[]), "pod/p1 serverside-applied\n");
    let obj = s.get("pod/p1");
    let (_, _, fields) = entries(&obj).into_iter().next().unwrap();
    let web = &fields["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"];
    assert_eq!(
        web,
        &json!({
            ".": {}, "f:image": {}, "f:name": {},
            "f:env": {"k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}}},
            "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
        })
    );
    s.ok(&["set", "image", "pod/p1", "-n", ns, "web=nginx:1.26"]);
    let stderr = s.fails(&["apply", "--server-side", VALIDATE, "-f", &pod]);
    assert!(
        stderr.starts_with(
            "error: Apply failed with 1 conflict: conflict with \"kubectl-set\" using v1: .spec.containers[name=\"web\"].image\n"
        ),
        "{stderr}"
    );

    // Service ports keyed by port and protocol: a second manager's port joins the first's.
    let svc = s.write(
        "svc.yaml",
        &format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  selector:\n    app: web\n  ports:\n  - name: http\n    port: 80\n"
        ),
    );
    assert_eq!(s.apply(&svc, &[]), "service/web serverside-applied\n");
    let dns = s.write(
        "dns.yaml",
        &format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  ports:\n  - name: dns\n    port: 53\n    protocol: UDP\n"
        ),
    );
    s.apply(&dns, &["--field-manager=dns"]);
    let obj = s.get("service/web");
    let ports: Vec<(Value, Value)> = obj["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["port"].clone(), p["protocol"].clone()))
        .collect();
    assert_eq!(
        ports,
        [(json!(80), json!("TCP")), (json!(53), json!("UDP"))],
        "{obj}"
    );
    let kubectl = entries(&obj)
        .into_iter()
        .find(|e| e.0 == "kubectl")
        .unwrap();
    assert_eq!(
        kubectl.2["f:spec"]["f:ports"],
        json!({"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}}})
    );
    // The first manager drops its port: only the second's stays.
    let no_port = s.write(
        "svc2.yaml",
        &format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  selector:\n    app: web\n"
        ),
    );
    s.apply(&no_port, &[]);
    let names: Vec<Value> = s.get("service/web")["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].clone())
        .collect();
    assert_eq!(names, [json!("dns")]);

    // A field the schema does not declare: refused (nothing stored, nothing owned), as the
    // field manager cannot make a typed patch object of it; the resource still reads.
    let unknown = s.write(
        "unknown.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: odd\n  namespace: {ns}\nbogus: 1\n"
        ),
    );
    let stderr = s.fails(&["apply", "--server-side", VALIDATE, "-f", &unknown]);
    assert!(
        stderr.contains(&format!(
            "failed to create typed patch object ({ns}/odd; /v1, Kind=ConfigMap): .bogus: field not declared in schema"
        )),
        "{stderr}"
    );
    let missing = s.run(&["get", "configmap", "odd", "-n", ns]);
    assert!(!missing.status.success(), "nothing was stored");
    s.ok(&["get", "configmaps", "-n", ns]);

    // A value of the wrong type: refused as structured-merge-diff's validation words it.
    let mistyped = s.write(
        "mistyped.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mistyped\n  namespace: {ns}\ndata:\n  count: 5\n"
        ),
    );
    let stderr = s.fails(&["apply", "--server-side", VALIDATE, "-f", &mistyped]);
    assert!(
        stderr.contains(&format!(
            "failed to create typed patch object ({ns}/mistyped; /v1, Kind=ConfigMap): .data.count: expected string, got &value.valueUnstructured{{Value:5}}"
        )),
        "{stderr}"
    );
    let missing = s.run(&["get", "configmap", "mistyped", "-n", ns]);
    assert!(!missing.status.success(), "nothing was stored");
}

#[test]
fn kubectl_server_side_apply_on_keel_up() {
    let kube = Kube::start(Stack::Up);
    session(&kube, None);
    session(&kube, Some("1.27"));
}

#[test]
fn kubectl_server_side_apply_on_keel_apiserver_on_etcd() {
    let kube = Kube::start(Stack::OnEtcd);
    session(&kube, None);
    session(&kube, Some("1.27"));
}

#[test]
fn two_managers_applying_a_new_object_at_once_both_succeed() {
    let kube = Kube::start(Stack::Up);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/apply_race.py");
    kube.python_ok(script, &[]);
}
