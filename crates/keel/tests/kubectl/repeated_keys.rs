//! Bodies that repeat a key, sent as they are with `curl` and the kubeconfig's credentials
//! (kubectl reads YAML itself and keeps the last of each key, so it never sends a repeat): a
//! server-side apply and a YAML create under `fieldValidation` `Strict` (refused, nothing
//! stored), `Warn` (a `Warning` header per repeated key) and `Ignore`, each answered in
//! kube-apiserver's words.

use std::process::Command;

use base64::Engine;
use keel_testkit::kube::Kube;

use super::{ok, write};

/// A response: its status code, its `Warning` header values and its body.
struct Answer {
    code: u16,
    warnings: Vec<String>,
    body: serde_json::Value,
}

/// `curl` with the kubeconfig's server, token and CA.
struct Curl<'a> {
    kube: &'a Kube,
    server: String,
    token: String,
    ca_file: String,
}

impl<'a> Curl<'a> {
    fn new(kube: &'a Kube) -> Self {
        let view = |field: &str| {
            let jsonpath = format!("jsonpath={{{field}}}");
            ok(kube, None, &["config", "view", "--raw", "-o", &jsonpath])
        };
        let ca = base64::engine::general_purpose::STANDARD
            .decode(view(".clusters[0].cluster.certificate-authority-data"))
            .expect("the kubeconfig's CA");
        Curl {
            kube,
            server: view(".clusters[0].cluster.server"),
            token: view(".users[0].user.token"),
            ca_file: write(kube, "curl-ca.crt", &String::from_utf8_lossy(&ca)),
        }
    }

    /// `curl -X <method>` of `path` with `body` as `content_type`.
    fn send(&self, method: &str, path: &str, content_type: &str, body: &str) -> Answer {
        let body_file = write(self.kube, "curl-body", body);
        let headers = self.kube.scratch.join("curl-headers");
        let out = Command::new("curl")
            .args(["-sS", "-X", method, "--cacert", &self.ca_file, "-D"])
            .arg(&headers)
            .args(["-H", &format!("Authorization: Bearer {}", self.token)])
            .args(["-H", &format!("Content-Type: {content_type}")])
            .args(["--data-binary", &format!("@{body_file}")])
            .arg(format!("{}{path}", self.server))
            .output()
            .expect("run curl (apt-get install -y curl)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let headers = std::fs::read_to_string(&headers).expect("read the headers");
        let code = headers
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("a status line");
        let warnings = headers
            .lines()
            .filter_map(|l| l.strip_prefix("warning: ").or(l.strip_prefix("Warning: ")))
            .map(|w| w.trim_end().to_string())
            .collect();
        let body = serde_json::from_slice(&out.stdout).expect("a JSON answer");
        Answer {
            code,
            warnings,
            body,
        }
    }
}

/// A server-side apply and a YAML create repeating keys, under each directive.
pub fn check(kube: &Kube, ns: &str) {
    let curl = Curl::new(kube);
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
    assert_eq!(refused.code, 400, "{}", refused.body);
    assert_eq!(refused.body["reason"], "BadRequest");
    assert_eq!(
        refused.body["message"],
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 7: key \"a\" already set in map"
    );
    let gone = kube.kubectl(&["get", "cm", "r1", "-n", ns]);
    assert!(!gone.status.success());
    let warned = apply("Warn");
    assert_eq!(warned.code, 201, "{}", warned.body);
    assert_eq!(
        warned.warnings,
        ["299 - \"line 7: key \\\"a\\\" already set in map\""]
    );
    assert_eq!(warned.body["data"]["a"], "2");
    let quiet = apply("Ignore");
    assert_eq!(
        (quiet.code, quiet.warnings.len()),
        (200, 0),
        "{}",
        quiet.body
    );
    // An apply's conflict comes before its repeated keys, as upstream checks them last.
    let conflicting = applied.replace("\"a\": \"2\"", "\"a\": \"3\"");
    let conflict = curl.send(
        "PATCH",
        &format!("/api/v1/namespaces/{ns}/configmaps/r1?fieldManager=other&fieldValidation=Strict"),
        "application/apply-patch+yaml",
        &conflicting,
    );
    assert_eq!(conflict.code, 409, "{}", conflict.body);

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
    assert_eq!(refused.code, 400, "{}", refused.body);
    assert_eq!(
        refused.body["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: yaml: unmarshal errors:\n  line 8: key \"a\" already set in map, unknown field \"bogus\""
    );
    let warned = create("Warn");
    assert_eq!(warned.code, 201, "{}", warned.body);
    assert_eq!(
        warned.warnings,
        [
            "299 - \"line 8: key \\\"a\\\" already set in map\"",
            "299 - \"unknown field \\\"bogus\\\"\""
        ]
    );
    assert_eq!(warned.body["data"]["a"], "2");
}
