//! The real `kubectl` (the current one and 1.27) against `keel up` and against `keel
//! apiserver` on a real etcd 3.5.1: discovery, create/apply/replace/patch/label/annotate,
//! get in every output form with selectors and chunking, watch, dry run, diff, describe,
//! delete with wait and of a namespace with objects in it (and one held by a finalizer, its
//! deletion conditions in upstream's words), metrics and authentication,
//! values of the wrong type and ConfigMaps too large refused, and (with curl) bodies that
//! repeat a key under each field validation, answers in metadata and table forms and the
//! 405 of methods a subresource does not serve;
//! outputs, exit codes and error messages checked.

#[path = "kubectl/curl.rs"]
mod curl;
#[path = "kubectl/diff_describe.rs"]
mod diff_describe;
#[path = "kubectl/namespace_deletion.rs"]
mod namespace_deletion;
#[path = "kubectl/negotiation.rs"]
mod negotiation;
#[path = "kubectl/repeated_keys.rs"]
mod repeated_keys;
#[path = "kubectl/subresource_methods.rs"]
mod subresource_methods;

use std::fs;

use keel_testkit::kube::{Kube, Stack, fails, ok, text, write};

fn session(kube: &Kube, version: Option<&str>) {
    let ns = format!("t{}", version.unwrap_or("current").replace('.', "-"));
    let k = |args: &[&str]| ok(kube, version, args);
    let resources = k(&["api-resources"]);
    for row in ["configmaps", "namespaces", "pods", "leases", "events"] {
        assert!(
            resources.contains(row),
            "api-resources lacks {row}:\n{resources}"
        );
    }
    assert!(
        resources
            .lines()
            .any(|l| l.starts_with("configmaps") && l.contains(" cm ") && l.contains("ConfigMap"))
    );
    let versions = k(&["api-versions"]);
    for gv in ["v1", "coordination.k8s.io/v1", "events.k8s.io/v1"] {
        assert!(
            versions.lines().any(|l| l == gv),
            "api-versions lacks {gv}:\n{versions}"
        );
    }
    let namespaces = k(&["get", "namespaces", "-o", "name"]);
    for system in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(
            namespaces.contains(&format!("namespace/{system}\n")),
            "{namespaces}"
        );
    }

    let nsfile = write(
        kube,
        &format!("{ns}.yaml"),
        &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"),
    );
    assert_eq!(
        k(&["create", "-f", &nsfile]),
        format!("namespace/{ns} created\n")
    );
    let cm = write(
        kube,
        "cm.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\n  namespace: {ns}\n  labels: {{app: web}}\ndata:\n  a: b\n"
        ),
    );
    assert_eq!(k(&["create", "-f", &cm]), "configmap/c1 created\n");
    let again = fails(kube, version, &["create", "-f", &cm]);
    assert!(
        again.contains(&format!("Error from server (AlreadyExists): error when creating \"{cm}\": configmaps \"c1\" already exists")),
        "{again}"
    );
    // Client-side apply, twice, then a change.
    let applied = k(&["apply", "-f", &cm]);
    assert_eq!(applied, "configmap/c1 configured\n");
    assert_eq!(k(&["apply", "-f", &cm]), "configmap/c1 unchanged\n");
    let changed = write(
        kube,
        "cm2.yaml",
        &fs::read_to_string(&cm).unwrap().replace("a: b", "a: c"),
    );
    assert_eq!(k(&["apply", "-f", &changed]), "configmap/c1 configured\n");
    assert_eq!(
        k(&["get", "cm", "c1", "-n", &ns, "-o", "jsonpath={.data.a}"]),
        "c"
    );

    // Output forms.
    let table = k(&["get", "cm", "-n", &ns]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "DATA", "AGE"], "{table}");
    assert!(table.lines().nth(1).unwrap().starts_with("c1 "), "{table}");
    let wide = k(&["get", "ns", &ns, "-o", "wide"]);
    assert!(
        wide.starts_with("NAME") && wide.contains(&ns) && wide.contains("Active"),
        "{wide}"
    );
    assert_eq!(
        k(&["get", "cm", "c1", "-n", &ns, "-o", "name"]),
        "configmap/c1\n"
    );
    let json: serde_json::Value =
        serde_json::from_str(&k(&["get", "cm", "c1", "-n", &ns, "-o", "json"])).unwrap();
    assert_eq!(json["kind"], "ConfigMap");
    assert!(
        json["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<i64>()
            .unwrap()
            > 0
    );
    assert!(json["metadata"]["uid"].as_str().unwrap().len() == 36);
    let yaml = k(&["get", "cm", "c1", "-n", &ns, "-o", "yaml"]);
    assert!(
        yaml.contains("apiVersion: v1\n") && yaml.contains("kind: ConfigMap\n"),
        "{yaml}"
    );
    let custom = k(&[
        "get",
        "cm",
        "-n",
        &ns,
        "-o",
        "custom-columns=N:.metadata.name,A:.data.a",
    ]);
    assert_eq!(
        custom.split_whitespace().collect::<Vec<_>>(),
        ["N", "A", "c1", "c"]
    );

    // Labels, annotations, selectors, chunking.
    assert_eq!(
        k(&["label", "cm", "c1", "-n", &ns, "tier=db"]),
        "configmap/c1 labeled\n"
    );
    assert!(
        k(&["annotate", "cm", "c1", "-n", &ns, "note=hi"]).starts_with("configmap/c1 annotate")
    );
    for i in 2..=4 {
        k(&[
            "create",
            "-f",
            &write(
                kube,
                &format!("c{i}.yaml"),
                &format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}, namespace: {ns}}}\n"
                ),
            ),
        ]);
    }
    assert_eq!(
        k(&["get", "cm", "-n", &ns, "-l", "tier=db", "-o", "name"]),
        "configmap/c1\n"
    );
    assert_eq!(
        k(&["get", "cm", "-n", &ns, "-l", "tier!=db", "-o", "name"])
            .lines()
            .count(),
        3
    );
    assert_eq!(
        k(&[
            "get",
            "cm",
            "-n",
            &ns,
            "-l",
            "app in (web,api)",
            "-o",
            "name"
        ]),
        "configmap/c1\n"
    );
    assert_eq!(
        k(&[
            "get",
            "cm",
            "-n",
            &ns,
            "--field-selector",
            "metadata.name=c3",
            "-o",
            "name"
        ]),
        "configmap/c3\n"
    );
    let bad = fails(
        kube,
        version,
        &["get", "cm", "-n", &ns, "--field-selector", "spec.x=1"],
    );
    assert!(bad.contains("\"spec.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""), "{bad}");
    let chunked = k(&["get", "cm", "-n", &ns, "--chunk-size", "1", "-o", "name"]);
    assert_eq!(
        chunked,
        "configmap/c1\nconfigmap/c2\nconfigmap/c3\nconfigmap/c4\n"
    );

    // Patches of each type.
    k(&[
        "patch",
        "cm",
        "c2",
        "-n",
        &ns,
        "--type",
        "merge",
        "-p",
        r#"{"data":{"m":"1"}}"#,
    ]);
    k(&[
        "patch",
        "cm",
        "c2",
        "-n",
        &ns,
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/data/j","value":"2"}]"#,
    ]);
    k(&[
        "patch",
        "cm",
        "c2",
        "-n",
        &ns,
        "-p",
        r#"{"data":{"s":"3","m":null}}"#,
    ]);
    let data: serde_json::Value = serde_json::from_str(&k(&[
        "get",
        "cm",
        "c2",
        "-n",
        &ns,
        "-o",
        "jsonpath={.data}",
    ]))
    .unwrap();
    assert_eq!(data, serde_json::json!({"j": "2", "s": "3"}));

    // Replace with a stale object: 409.
    let stale = k(&["get", "cm", "c3", "-n", &ns, "-o", "yaml"]);
    k(&["label", "cm", "c3", "-n", &ns, "x=y"]);
    let stale = write(kube, "stale.yaml", &stale);
    let conflict = fails(kube, version, &["replace", "-f", &stale]);
    assert!(
        conflict.contains("Operation cannot be fulfilled on configmaps \"c3\": the object has been modified; please apply your changes to the latest version and try again"),
        "{conflict}"
    );

    // Server-side dry run writes nothing.
    let dry = write(
        kube,
        "dry.yaml",
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: dry, namespace: {ns}}}\n"),
    );
    assert_eq!(
        k(&["create", "-f", &dry, "--dry-run=server"]),
        "configmap/dry created (server dry run)\n"
    );
    let missing = fails(kube, version, &["get", "cm", "dry", "-n", &ns]);
    assert!(
        missing.contains("Error from server (NotFound): configmaps \"dry\" not found"),
        "{missing}"
    );

    explain_and_field_validation(kube, version, &ns);
    value_types_and_sizes(kube, version, &ns);
    diff_describe::diff(kube, version, &ns);
    diff_describe::describe(kube, version, &ns);
    if version.is_none() {
        repeated_keys::check(kube, &ns);
        negotiation::check(kube, &ns);
        negotiation::aggregated_discovery(kube);
        negotiation::protobuf_answers(kube, &ns);
        subresource_methods::check(kube, &ns);
    }
    namespace_deletion::check(kube, version, &ns);

    // A watch lists what is there as ADDED events.
    let watched = kube.kubectl_version(
        version,
        &[
            "get",
            "cm",
            "-n",
            &ns,
            "-w",
            "--output-watch-events",
            "--request-timeout=2s",
        ],
    );
    let watched = text(&watched.stdout);
    assert!(
        watched
            .lines()
            .any(|l| l.starts_with("ADDED") && l.contains("c4")),
        "{watched}"
    );

    // Delete and wait, then the namespace with what is left in it.
    assert_eq!(
        k(&["delete", "cm", "c4", "-n", &ns, "--wait"]),
        "configmap \"c4\" deleted\n"
    );
    assert_eq!(
        k(&["delete", "namespace", &ns, "--wait", "--timeout=60s"]),
        format!("namespace \"{ns}\" deleted\n")
    );
    let gone = fails(kube, version, &["get", "namespace", &ns]);
    assert!(
        gone.contains(&format!("namespaces \"{ns}\" not found")),
        "{gone}"
    );

    let metrics = k(&["get", "--raw", "/metrics"]);
    assert!(
        metrics.contains("apiserver_request_total{"),
        "no request counter"
    );
    assert!(
        metrics.contains("etcd_request_duration_seconds_bucket{"),
        "no store latency"
    );
    let denied = fails(
        kube,
        version,
        &["--token", "not-a-token", "get", "namespaces"],
    );
    assert!(denied.contains("Unauthorized"), "{denied}");
}

/// `kubectl explain` from the OpenAPI documents, `kubectl edit`, and server-side field
/// validation: unknown fields refused (the default, `--validate=strict`), warned about
/// (`--validate=warn`) or ignored (`--validate=false`), and never stored.
fn explain_and_field_validation(kube: &Kube, version: Option<&str>, ns: &str) {
    let k = |args: &[&str]| ok(kube, version, args);
    let pods = k(&["explain", "pods"]);
    assert!(
        pods.lines()
            .any(|l| l.starts_with("KIND:") && l.ends_with("Pod"))
            && pods
                .lines()
                .any(|l| l.trim_start().starts_with("spec") && l.ends_with("<PodSpec>")),
        "{pods}"
    );
    let containers = k(&["explain", "pods.spec.containers"]);
    assert!(
        containers.contains("FIELD: containers <[]Container>")
            && containers.contains("imagePullPolicy"),
        "{containers}"
    );
    let leases = k(&["explain", "leases", "--api-version=coordination.k8s.io/v1"]);
    assert!(
        leases
            .lines()
            .any(|l| l.starts_with("GROUP:") && l.ends_with("coordination.k8s.io"))
            && leases.contains("<LeaseSpec>"),
        "{leases}"
    );

    let unknown = write(
        kube,
        "unknown.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: u1\n  namespace: {ns}\n  foo: x\ndata:\n  a: b\nbar: 1\n"
        ),
    );
    let refused = fails(kube, version, &["create", "-f", &unknown]);
    assert!(
        refused.contains(&format!(
            "Error from server (BadRequest): error when creating \"{unknown}\": ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bar\", unknown field \"metadata.foo\""
        )),
        "{refused}"
    );
    let pod = write(
        kube,
        "pod.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p1, namespace: {ns}}}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    bogus: 1\n"
        ),
    );
    let refused = fails(kube, version, &["apply", "-f", &pod]);
    assert!(
        refused.contains("Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.containers[0].bogus\""),
        "{refused}"
    );
    let warned = kube.kubectl_version(version, &["create", "-f", &unknown, "--validate=warn"]);
    assert!(warned.status.success(), "{}", text(&warned.stderr));
    let stderr = text(&warned.stderr);
    assert!(
        stderr.contains("Warning: unknown field \"bar\"")
            && stderr.contains("Warning: unknown field \"metadata.foo\""),
        "{stderr}"
    );
    let stored: serde_json::Value =
        serde_json::from_str(&k(&["get", "cm", "u1", "-n", ns, "-o", "json"])).unwrap();
    assert!(
        stored.get("bar").is_none() && stored["metadata"].get("foo").is_none(),
        "{stored}"
    );
    let quiet = write(
        kube,
        "quiet.yaml",
        &fs::read_to_string(&unknown)
            .unwrap()
            .replace("name: u1", "name: u2"),
    );
    let ignored = kube.kubectl_version(version, &["create", "-f", &quiet, "--validate=false"]);
    assert!(ignored.status.success(), "{}", text(&ignored.stderr));
    assert_eq!(text(&ignored.stderr), "");
    let stored = k(&["get", "cm", "u2", "-n", ns, "-o", "json"]);
    assert!(!stored.contains("\"bar\""), "{stored}");
    // kubectl patch leaves fieldValidation unset: the server's default warns, and stores
    // nothing of the unknown field.
    let patched = kube.kubectl_version(
        version,
        &[
            "patch",
            "cm",
            "u1",
            "-n",
            ns,
            "--type",
            "merge",
            "-p",
            r#"{"zed":1}"#,
        ],
    );
    assert!(patched.status.success(), "{}", text(&patched.stderr));
    assert_eq!(text(&patched.stderr), "Warning: unknown field \"zed\"\n");
    assert_eq!(text(&patched.stdout), "configmap/u1 patched (no change)\n");

    // kubectl edit: the object in an editor, the change sent as a patch.
    let editor = "sed -i s/a:\\ b/a:\\ edited/";
    let edited = std::process::Command::new(keel_testkit::kube::kubectl_bin(version))
        .arg("--kubeconfig")
        .arg(&kube.kubeconfig)
        .args(["edit", "cm", "u1", "-n", ns])
        .env("EDITOR", editor)
        .output()
        .expect("run kubectl edit");
    assert!(edited.status.success(), "{}", text(&edited.stderr));
    assert_eq!(text(&edited.stdout), "configmap/u1 edited\n");
    assert_eq!(
        k(&["get", "cm", "u1", "-n", ns, "-o", "jsonpath={.data.a}"]),
        "edited"
    );
}

/// Values of the wrong type for their fields, refused as kube-apiserver's decoders refuse
/// them (a create 400, a patch 422, whatever `--validate` says), a ConfigMap above 1 MiB
/// refused as Invalid; nothing of it stored. And `eventTime` required in events.k8s.io/v1.
fn value_types_and_sizes(kube: &Kube, version: Option<&str>, ns: &str) {
    let k = |args: &[&str]| ok(kube, version, args);
    let typed = write(
        kube,
        "typed.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typed\n  namespace: {ns}\ndata:\n  count: 5\n"
        ),
    );
    for validate in ["--validate=strict", "--validate=false"] {
        let refused = fails(kube, version, &["create", "-f", &typed, validate]);
        assert!(
            refused.contains(&format!(
                "Error from server (BadRequest): error when creating \"{typed}\": ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
            )),
            "{refused}"
        );
    }
    let missing = fails(kube, version, &["get", "cm", "typed", "-n", ns]);
    assert!(missing.contains("NotFound"), "{missing}");
    let service = write(
        kube,
        "typed-svc.yaml",
        &format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: typed\n  namespace: {ns}\nspec:\n  ports:\n  - port: \"80\"\n"
        ),
    );
    let refused = fails(kube, version, &["apply", "-f", &service]);
    assert!(
        refused.contains("Service in version \"v1\" cannot be handled as a Service: json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32"),
        "{refused}"
    );

    // Patches: the result of a merge patch is decoded as a body, of a strategic merge patch
    // by the unstructured converter; u1 keeps what it had.
    let merge = fails(
        kube,
        version,
        &[
            "patch",
            "cm",
            "u1",
            "-n",
            ns,
            "--type",
            "merge",
            "-p",
            r#"{"data":{"a":5}}"#,
        ],
    );
    assert!(
        merge.contains("The request is invalid: patch: Invalid value: ")
            && merge.contains(
                "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
            ),
        "{merge}"
    );
    let strategic = fails(
        kube,
        version,
        &[
            "patch",
            "cm",
            "u1",
            "-n",
            ns,
            "-p",
            r#"{"data":{"a":true}}"#,
        ],
    );
    assert!(
        strategic.contains(
            "The request is invalid: patch: Invalid value: \"map[data:map[a:true]]\": unrecognized type: string"
        ),
        "{strategic}"
    );
    assert_eq!(
        k(&["get", "cm", "u1", "-n", ns, "-o", "jsonpath={.data.a}"]),
        "edited"
    );

    // Data above 1 MiB is Invalid, not a storage failure.
    let big = kube.scratch.join("big.txt");
    fs::write(&big, "x".repeat(1024 * 1024 + 1)).expect("write a big file");
    let from_file = format!("--from-file={}", big.display());
    let refused = fails(
        kube,
        version,
        &["create", "configmap", "big", "-n", ns, &from_file],
    );
    assert!(
        refused.contains(
            "ConfigMap \"big\" is invalid: []: Too long: may not be more than 1048576 bytes"
        ),
        "{refused}"
    );
    let missing = fails(kube, version, &["get", "cm", "big", "-n", ns]);
    assert!(missing.contains("NotFound"), "{missing}");

    let events = k(&["explain", "events", "--api-version=events.k8s.io/v1"]);
    assert!(
        events
            .lines()
            .any(|l| l.trim_start().starts_with("eventTime") && l.contains("-required-")),
        "{events}"
    );
}

#[test]
fn kubectl_drives_keel_up() {
    // The session counts and describes what it made: with the controllers keel apiserver runs
    // by default, as on etcd below (`--test controllers` and `--test node_lifecycle` prove
    // the others).
    let kube = Kube::start_with(Stack::Up, &["--controllers=namespace"]);
    session(&kube, None);
    session(&kube, Some("1.27"));
    // A second keel up on the same folder (other ports) is refused, and the first serves on.
    let dir = kube.scratch.join("keel.data");
    let port = |p: u16| format!("http://127.0.0.1:{p}");
    let second = std::process::Command::new(keel_testkit::keel_bin())
        .args(["up", "--data-dir", &dir.display().to_string()])
        .args(["--secure-port", &keel_testkit::free_port().to_string()])
        .args(["--listen-client-urls", &port(keel_testkit::free_port())])
        .args(["--listen-peer-urls", &port(keel_testkit::free_port())])
        .output()
        .expect("run a second keel up");
    assert!(!second.status.success());
    let stderr = text(&second.stderr);
    assert!(stderr.contains("is in use by another keel up"), "{stderr}");
    assert_eq!(ok(&kube, None, &["get", "--raw", "/readyz"]), "ok");
}

#[test]
fn kubectl_drives_keel_apiserver_on_etcd() {
    let kube = Kube::start(Stack::OnEtcd);
    session(&kube, None);
    session(&kube, Some("1.27"));
}
