//! Bodies that repeat a key, sent as they are with `curl` and the kubeconfig's credentials
//! (kubectl reads YAML itself and keeps the last of each key, so it never sends a repeat): a
//! server-side apply and a YAML create under `fieldValidation` `Strict` (refused, nothing
//! stored), `Warn` (a `Warning` header per repeated key) and `Ignore`, each answered in
//! kube-apiserver's words; and YAML bodies whose plain scalars are YAML 1.1's (`stdin: yes`,
//! `defaultMode: 0644`), created and applied as yaml.v2 types them.

use keel_testkit::kube::Kube;

use super::curl::Curl;

/// A server-side apply and a YAML create repeating keys, under each directive.
pub fn check(kube: &Kube, ns: &str) {
    let curl = Curl::new(kube);
    yaml11(kube, &curl, ns);
    let applied = format!(
        "{{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"ConfigMap\",\n  \"metadata\": {{\"name\": \"r1\", \"namespace\": \"{ns}\"}},\n  \"data\": {{\n    \"a\": \"1\",\n    \"a\": \"2\"\n  }}\n}}\n"
    );
    let path = format!("/api/v1/namespaces/{ns}/configmaps/r1?fieldManager=m&fieldValidation=");
    let apply = |directive: &str| {
        curl.send(
            "PATCH",
            &format!("{path}{directive}"),
            "application/apply-patch+yaml",
            &applied,
        )
    };
    let refused = apply("Strict");
    assert_eq!(refused.code, 400, "{}", refused.text);
    assert_eq!(refused.json()["reason"], "BadRequest");
    assert_eq!(
        refused.json()["message"],
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 7: key \"a\" already set in map"
    );
    let gone = kube.kubectl(&["get", "cm", "r1", "-n", ns]);
    assert!(!gone.status.success());
    let warned = apply("Warn");
    assert_eq!(warned.code, 201, "{}", warned.text);
    assert_eq!(
        warned.warnings,
        ["299 - \"line 7: key \\\"a\\\" already set in map\""]
    );
    assert_eq!(warned.json()["data"]["a"], "2");
    let quiet = apply("Ignore");
    assert_eq!(
        (quiet.code, quiet.warnings.len()),
        (200, 0),
        "{}",
        quiet.text
    );
    // An apply's conflict comes before its repeated keys, as upstream checks them last.
    let conflicting = applied.replace("\"a\": \"2\"", "\"a\": \"3\"");
    let conflict = curl.send(
        "PATCH",
        &format!("/api/v1/namespaces/{ns}/configmaps/r1?fieldManager=other&fieldValidation=Strict"),
        "application/apply-patch+yaml",
        &conflicting,
    );
    assert_eq!(conflict.code, 409, "{}", conflict.text);

    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r2\n  namespace: {ns}\ndata:\n  a: \"1\"\n  a: \"2\"\nbogus: 1\n"
    );
    let create = |directive: &str| {
        curl.send(
            "POST",
            &format!("/api/v1/namespaces/{ns}/configmaps?fieldValidation={directive}"),
            "application/yaml",
            &yaml,
        )
    };
    let refused = create("Strict");
    assert_eq!(refused.code, 400, "{}", refused.text);
    assert_eq!(
        refused.json()["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: yaml: unmarshal errors:\n  line 8: key \"a\" already set in map, unknown field \"bogus\""
    );
    let warned = create("Warn");
    assert_eq!(warned.code, 201, "{}", warned.text);
    assert_eq!(
        warned.warnings,
        [
            "299 - \"line 8: key \\\"a\\\" already set in map\"",
            "299 - \"unknown field \\\"bogus\\\"\""
        ]
    );
    assert_eq!(warned.json()["data"]["a"], "2");
}

/// A pod in YAML with YAML 1.1 plain scalars, created and applied: `yes` and `on` are
/// booleans, `0644` is octal, `1_000` is a thousand.
fn yaml11(kube: &Kube, curl: &Curl, ns: &str) {
    let pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  activeDeadlineSeconds: 1_000\n  containers:\n  - name: c\n    image: busybox\n    stdin: yes\n    tty: on\n  volumes:\n  - name: s\n    secret:\n      secretName: s\n      defaultMode: 0644\n"
        )
    };
    let pods = format!("/api/v1/namespaces/{ns}/pods");
    let created = curl.send("POST", &pods, "application/yaml", &pod("y1"));
    let applied = curl.send(
        "PATCH",
        &format!("{pods}/y2?fieldManager=m"),
        "application/apply-patch+yaml",
        &pod("y2"),
    );
    for (answer, name) in [(created, "y1"), (applied, "y2")] {
        assert_eq!(answer.code, 201, "{name}: {}", answer.text);
        let stored = kube.kubectl(&["get", "pod", name, "-n", ns, "-o", "json"]);
        let stored: serde_json::Value = serde_json::from_slice(&stored.stdout).unwrap();
        let spec = &stored["spec"];
        assert_eq!(
            (
                &spec["activeDeadlineSeconds"],
                &spec["containers"][0]["stdin"],
                &spec["containers"][0]["tty"],
                &spec["volumes"][0]["secret"]["defaultMode"],
            ),
            (
                &serde_json::json!(1000),
                &serde_json::json!(true),
                &serde_json::json!(true),
                &serde_json::json!(420)
            ),
            "{name}"
        );
    }
}
