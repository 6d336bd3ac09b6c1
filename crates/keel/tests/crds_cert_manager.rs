//! A well-known project's CRD, unchanged: cert-manager's `Certificate` (cert-manager.io/v1,
//! `tests/fixtures/cert-manager.io_certificates.yaml`), applied with the real `kubectl` to
//! `keel up`, and Certificates good and bad answered as kube-apiserver answers them: the CRD
//! is kept as written (its schema, its selectable fields) and established; a good Certificate
//! is stored unchanged (the CRD declares no defaults and no CEL rules, which the test checks
//! of the fixture); a missing `spec.secretName`, a bad `spec.privateKey.algorithm`, a wrong
//! type, an unknown field under `--validate=strict`, a bad enum or date-time in the status
//! and a repeated `status.conditions` type (`x-kubernetes-list-type: map`) are refused with
//! upstream's words; `kubectl get certificates` prints the CRD's printer columns (the
//! `priority: 1` ones with `-o wide`), the short names and category find them, and field
//! selectors work on the `selectableFields` (`spec.issuerRef.*`) and only on them.

use std::fs;
use std::path::PathBuf;

use keel_testkit::kube::{Kube, Stack};
use serde_json::{Value, json};

const CRD_NAME: &str = "certificates.cert-manager.io";

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cert-manager.io_certificates.yaml")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write(kube: &Kube, name: &str, body: &Value) -> String {
    let path = kube.scratch.join(name);
    fs::write(&path, serde_json::to_vec_pretty(body).expect("JSON")).expect("write a manifest");
    path.display().to_string()
}

fn get_json(kube: &Kube, args: &[&str]) -> Value {
    let mut all = vec!["get", "-o", "json"];
    all.extend_from_slice(args);
    let out = kube.kubectl(&all);
    assert!(
        out.status.success(),
        "kubectl {all:?}: {}\n{}",
        text(&out.stderr),
        kube.log()
    );
    serde_json::from_slice(&out.stdout).expect("kubectl prints JSON")
}

fn certificate(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}

/// A Certificate that uses much of the schema, as a user of cert-manager writes one.
fn good_spec(issuer: &str) -> Value {
    json!({
        "secretName": "web-tls",
        "commonName": "web.example.com",
        "dnsNames": ["web.example.com", "www.example.com"],
        "ipAddresses": ["10.0.0.1"],
        "uris": ["spiffe://cluster.local/ns/default/sa/web"],
        "emailAddresses": ["ops@example.com"],
        "duration": "2160h0m0s",
        "renewBefore": "360h0m0s",
        "isCA": false,
        "usages": ["server auth", "client auth", "digital signature", "key encipherment"],
        "privateKey": {"algorithm": "ECDSA", "size": 256, "encoding": "PKCS8", "rotationPolicy": "Always"},
        "subject": {"organizations": ["Example"], "countries": ["NL"]},
        "secretTemplate": {"labels": {"team": "web"}, "annotations": {"a": "b"}},
        "additionalOutputFormats": [{"type": "CombinedPEM"}, {"type": "DER"}],
        "keystores": {"pkcs12": {"create": true, "profile": "Modern2023",
            "passwordSecretRef": {"name": "p12-pass", "key": "password"}}},
        "otherNames": [{"oid": "1.3.6.1.4.1.311.20.2.3", "utf8Value": "upn@example.com"}],
        "revisionHistoryLimit": 3,
        "issuerRef": {"name": issuer, "kind": "ClusterIssuer", "group": "cert-manager.io"},
    })
}

/// Applies `body`, which must be refused; kubectl's stderr.
fn refused(kube: &Kube, file: &str, body: &Value, extra: &[&str]) -> String {
    let path = write(kube, file, body);
    let mut args = vec!["apply", "-f", &path];
    args.extend_from_slice(extra);
    let out = kube.kubectl(&args);
    assert!(
        !out.status.success(),
        "{file} was accepted: {}",
        text(&out.stdout)
    );
    text(&out.stderr)
}

fn header(table: &str) -> Vec<String> {
    table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn cert_managers_certificate_crd_on_keel_up() {
    let mut kube = Kube::start(Stack::Up);
    let crd_file = fixture().display().to_string();
    let source = fs::read_to_string(fixture()).expect("the fixture");
    // What the test can check of the CRD: it declares no CEL rules and no defaults (if a newer
    // fixture brings some, this test must learn to check them).
    assert!(!source.contains("x-kubernetes-validations") && !source.contains("default:"));

    // The CRD as kubectl reads it, to compare with what keel keeps.
    let local = kube.kubectl(&["create", "--dry-run=client", "-o", "json", "-f", &crd_file]);
    assert!(local.status.success(), "{}", text(&local.stderr));
    let local: Value = serde_json::from_slice(&local.stdout).expect("JSON");

    let out = kube.kubectl(&["apply", "-f", &crd_file]);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stderr),
        kube.log()
    );
    let out = kube.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=20s",
        &format!("crd/{CRD_NAME}"),
    ]);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stderr),
        kube.log()
    );
    let crd = get_json(&kube, &["crd", CRD_NAME]);
    assert_eq!(
        crd["spec"]["versions"][0]["schema"], local["spec"]["versions"][0]["schema"],
        "the schema is kept as written"
    );
    assert_eq!(
        crd["spec"]["versions"][0]["selectableFields"],
        json!([
            {"jsonPath": ".spec.issuerRef.group"},
            {"jsonPath": ".spec.issuerRef.kind"},
            {"jsonPath": ".spec.issuerRef.name"}
        ])
    );
    assert_eq!(crd["spec"]["names"], local["spec"]["names"]);
    assert_eq!(
        crd["status"]["acceptedNames"]["shortNames"],
        json!(["cert", "certs"])
    );
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    let explain = kube.kubectl(&["explain", "certificate.spec.privateKey.algorithm"]);
    assert!(
        explain.status.success() && text(&explain.stdout).contains("Ed25519"),
        "explain: {}{}",
        text(&explain.stdout),
        text(&explain.stderr)
    );

    // Good Certificates are stored as sent: nothing added, nothing pruned.
    let spec = good_spec("letsencrypt");
    let web = write(&kube, "web.yaml", &certificate("web", spec.clone()));
    let out = kube.kubectl(&["apply", "--validate=strict", "-f", &web]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).is_empty(),
        "warnings: {}",
        text(&out.stderr)
    );
    let stored = get_json(&kube, &["certificate", "web"]);
    assert_eq!(stored["spec"], spec);
    assert!(stored.get("status").is_none(), "{stored}");
    let minimal = json!({"secretName": "api-tls", "issuerRef": {"name": "internal-ca"}});
    let api = write(&kube, "api.yaml", &certificate("api", minimal.clone()));
    let out = kube.kubectl(&["apply", "-f", &api]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(get_json(&kube, &["cert", "api"])["spec"], minimal);

    // Bad ones, in upstream's words.
    let mut no_secret = good_spec("x");
    no_secret.as_object_mut().unwrap().remove("secretName");
    let err = refused(
        &kube,
        "no-secret.yaml",
        &certificate("no-secret", no_secret),
        &[],
    );
    assert!(
        err.contains(r#"The Certificate "no-secret" is invalid: spec.secretName: Required value"#),
        "{err}"
    );
    let err = refused(
        &kube,
        "no-issuer-name.yaml",
        &certificate(
            "no-issuer-name",
            json!({"secretName": "s", "issuerRef": {"kind": "Issuer"}}),
        ),
        &[],
    );
    assert!(err.contains("spec.issuerRef.name: Required value"), "{err}");
    let mut algorithm = good_spec("x");
    algorithm["privateKey"]["algorithm"] = json!("DSA");
    let err = refused(
        &kube,
        "algorithm.yaml",
        &certificate("algorithm", algorithm),
        &[],
    );
    assert!(
        err.contains(
            r#"spec.privateKey.algorithm: Unsupported value: "DSA": supported values: "RSA", "ECDSA", "Ed25519""#
        ),
        "{err}"
    );
    let mut usage = good_spec("x");
    usage["usages"] = json!(["server auth", "teleport"]);
    let err = refused(&kube, "usage.yaml", &certificate("usage", usage), &[]);
    assert!(
        err.contains(r#"spec.usages[1]: Unsupported value: "teleport": supported values: "signing", "digital signature""#),
        "{err}"
    );
    let mut wrong_type = good_spec("x");
    wrong_type["dnsNames"] = json!("web.example.com");
    wrong_type["isCA"] = json!("yes");
    let err = refused(&kube, "types.yaml", &certificate("types", wrong_type), &[]);
    // kubectl lists the causes, one a line.
    assert!(
        err.contains(
            "The Certificate \"types\" is invalid: \n\
             * spec.dnsNames: Invalid value: \"string\": spec.dnsNames in body must be of type array: \"string\"\n\
             * spec.isCA: Invalid value: \"string\": spec.isCA in body must be of type boolean: \"string\""
        ),
        "{err}"
    );
    let mut size = good_spec("x");
    size["privateKey"]["size"] = json!("256");
    let err = refused(&kube, "size.yaml", &certificate("size", size), &[]);
    assert!(
        err.contains(
            r#"spec.privateKey.size: Invalid value: "string": spec.privateKey.size in body must be of type integer: "string""#
        ),
        "{err}"
    );
    let mut unknown = good_spec("x");
    unknown["foo"] = json!("bar");
    let err = refused(
        &kube,
        "unknown.yaml",
        &certificate("unknown", unknown.clone()),
        &["--validate=strict"],
    );
    assert!(
        err.contains(
            r#"Certificate in version "v1" cannot be handled as a Certificate: strict decoding error: unknown field "spec.foo""#
        ),
        "{err}"
    );
    for name in [
        "no-secret",
        "no-issuer-name",
        "algorithm",
        "usage",
        "types",
        "size",
        "unknown",
    ] {
        assert!(
            !kube.kubectl(&["get", "certificate", name]).status.success(),
            "{name} stored"
        );
    }
    // Warned and pruned otherwise.
    let path = write(&kube, "unknown.yaml", &certificate("unknown", unknown));
    let out = kube.kubectl(&["apply", "--validate=warn", "-f", &path]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(r#"unknown field "spec.foo""#),
        "{}",
        text(&out.stderr)
    );
    assert!(
        get_json(&kube, &["certificate", "unknown"])["spec"]
            .get("foo")
            .is_none()
    );

    // The status, through its subresource, as cert-manager's controller writes it.
    let ready = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
            "message": "Certificate is up to date and has not expired",
            "lastTransitionTime": "2026-01-02T03:04:05Z", "observedGeneration": 1}],
        "notAfter": "2026-04-02T03:04:05Z", "notBefore": "2026-01-02T03:04:05Z",
        "renewalTime": "2026-03-03T03:04:05Z", "revision": 1,
    }});
    let patch = |body: &Value| {
        kube.kubectl(&[
            "patch",
            "certificate",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            &body.to_string(),
        ])
    };
    let out = patch(&ready);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        get_json(&kube, &["certificate", "web"])["status"],
        ready["status"]
    );
    let bad_status = |body: Value| {
        let out = patch(&body);
        assert!(!out.status.success(), "accepted: {body}");
        text(&out.stderr)
    };
    let err = bad_status(json!({"status": {"notAfter": "soon"}}));
    assert!(
        err.contains(
            r#"status.notAfter: Invalid value: "soon": status.notAfter in body must be of type date-time: "soon""#
        ),
        "{err}"
    );
    let err = bad_status(json!({"status": {"conditions": [{"type": "Ready", "status": "Maybe"}]}}));
    assert!(
        err.contains(
            r#"status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown""#
        ),
        "{err}"
    );
    let err = bad_status(json!({"status": {"conditions": [
        {"type": "Ready", "status": "True"}, {"type": "Ready", "status": "False"}
    ]}}));
    assert!(
        err.contains(
            r#"status.conditions[1]: Duplicate value: map[string]interface {}{"type":"Ready"}"#
        ),
        "{err}"
    );

    // The printer columns: the priority 0 ones, and all of them with -o wide.
    let out = kube.kubectl(&["get", "certificates"]);
    let table = text(&out.stdout);
    assert_eq!(
        header(&table),
        ["NAME", "READY", "SECRET", "AGE"],
        "{table}"
    );
    let web_row = table.lines().find(|l| l.starts_with("web ")).unwrap_or("");
    assert_eq!(
        web_row.split_whitespace().take(3).collect::<Vec<_>>(),
        ["web", "True", "web-tls"]
    );
    let api_row = table.lines().find(|l| l.starts_with("api ")).unwrap_or("");
    assert_eq!(
        api_row.split_whitespace().take(2).collect::<Vec<_>>(),
        ["api", "api-tls"],
        "{table}"
    );
    let wide = text(&kube.kubectl(&["get", "certs", "-o", "wide"]).stdout);
    assert_eq!(
        header(&wide),
        ["NAME", "READY", "SECRET", "ISSUER", "STATUS", "AGE"],
        "{wide}"
    );
    assert!(
        wide.contains("letsencrypt   Certificate is up to date and has not expired"),
        "{wide}"
    );
    // The category (one kind in it: kubectl prints the plain table).
    let all = text(&kube.kubectl(&["get", "cert-manager"]).stdout);
    assert_eq!(header(&all), ["NAME", "READY", "SECRET", "AGE"], "{all}");
    assert!(all.lines().any(|l| l.starts_with("web ")), "{all}");

    // Field selectors on the selectable fields, and on nothing else.
    let by_issuer = get_json(
        &kube,
        &[
            "certificates",
            "--field-selector",
            "spec.issuerRef.name=internal-ca",
        ],
    );
    assert_eq!(names(&by_issuer), ["api"]);
    let by_kind = get_json(
        &kube,
        &[
            "certificates",
            "--field-selector",
            "spec.issuerRef.kind=ClusterIssuer",
        ],
    );
    let mut kinds = names(&by_kind);
    kinds.sort();
    assert_eq!(kinds, ["unknown", "web"]);
    let out = kube.kubectl(&[
        "get",
        "certificates",
        "--field-selector",
        "spec.secretName=web-tls",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("field label not supported: spec.secretName"),
        "{}",
        text(&out.stderr)
    );

    // Deleting the CRD while a Certificate holds a finalizer: the CRD is terminating, creates
    // are refused as upstream refuses them, and it stays so across a restart (its objects
    // still served and still to be deleted) until the finalizer goes.
    let out = kube.kubectl(&[
        "patch",
        "certificate",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = kube.kubectl(&["delete", "crd", CRD_NAME, "--wait=false"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut terminating = false;
    for _ in 0..100 {
        let crd = get_json(&kube, &["crd", CRD_NAME]);
        terminating = crd["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Terminating" && c["status"] == "True");
        if terminating
            && !kube
                .kubectl(&["get", "certificate", "api"])
                .status
                .success()
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(terminating, "{}", kube.log());
    let late = write(
        &kube,
        "late.yaml",
        &certificate(
            "late",
            json!({"secretName": "late", "issuerRef": {"name": "x"}}),
        ),
    );
    let out = kube.kubectl(&["create", "-f", &late]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr)
            .contains("create not allowed while custom resource definition is terminating"),
        "{}",
        text(&out.stderr)
    );
    kube.kill_and_restart();
    let web = get_json(&kube, &["certificate", "web"]);
    assert!(web["metadata"]["deletionTimestamp"].is_string(), "{web}");
    let out = kube.kubectl(&[
        "patch",
        "certificate",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = kube.kubectl(&[
        "wait",
        "--for=delete",
        &format!("crd/{CRD_NAME}"),
        "--timeout=30s",
    ]);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stderr),
        kube.log()
    );
    // Created again, it has no objects left over.
    let out = kube.kubectl(&["apply", "-f", &crd_file]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = kube.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=20s",
        &format!("crd/{CRD_NAME}"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list = get_json(&kube, &["certificates", "-A"]);
    assert_eq!(list["items"], json!([]), "{list}");

    // A field added to the schema: served at once, by the OpenAPI documents too.
    let out = kube.kubectl(&[
        "patch",
        "crd",
        CRD_NAME,
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/team","value":{"type":"string","description":"The team that owns the Certificate."}}]"#,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut spec = good_spec("x");
    spec["team"] = json!("web");
    let path = write(&kube, "team.yaml", &certificate("team", spec.clone()));
    let mut accepted = false;
    for _ in 0..50 {
        if kube
            .kubectl(&["apply", "--validate=strict", "-f", &path])
            .status
            .success()
        {
            accepted = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(accepted, "{}", kube.log());
    assert_eq!(get_json(&kube, &["certificate", "team"])["spec"], spec);
    let doc = kube.kubectl(&["get", "--raw", "/openapi/v3/apis/cert-manager.io/v1"]);
    assert!(
        text(&doc.stdout).contains("The team that owns the Certificate."),
        "the OpenAPI document is the old one"
    );
}
