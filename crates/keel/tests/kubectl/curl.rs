//! `curl` with the kubeconfig's server, token and CA, for requests kubectl cannot make as
//! they are (bodies it would re-encode, Accept headers it would not send).

use std::process::Command;

use base64::Engine;
use keel_testkit::kube::Kube;

use super::{ok, write};

/// A response.
pub struct Answer {
    /// The status code.
    pub code: u16,
    /// The `Warning` header values.
    pub warnings: Vec<String>,
    /// The `Content-Type`.
    pub content_type: String,
    /// The `ETag`, if any.
    pub etag: String,
    /// The `Allow` header values.
    pub allow: Vec<String>,
    /// The body.
    pub text: String,
    /// The body's bytes.
    pub bytes: Vec<u8>,
}

impl Answer {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("{e}: {}", self.text))
    }
}

/// `curl` with the kubeconfig's server, token and CA.
pub struct Curl<'a> {
    kube: &'a Kube,
    server: String,
    token: String,
    ca_file: String,
}

impl<'a> Curl<'a> {
    /// The kubeconfig's credentials, read once.
    pub fn new(kube: &'a Kube) -> Self {
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
    pub fn send(&self, method: &str, path: &str, content_type: &str, body: &str) -> Answer {
        self.send_bytes(method, path, content_type, body.as_bytes())
    }

    /// `curl -X <method>` of `path` with the bytes `body` as `content_type`.
    pub fn send_bytes(&self, method: &str, path: &str, content_type: &str, body: &[u8]) -> Answer {
        let body_file = write(self.kube, "curl-body", "");
        std::fs::write(&body_file, body).expect("write the body");
        self.run(&[
            "-X",
            method,
            "-H",
            &format!("Content-Type: {content_type}"),
            "--data-binary",
            &format!("@{body_file}"),
            &format!("{}{path}", self.server),
        ])
    }

    /// `curl` of `path` with `Accept: <accept>`.
    pub fn get(&self, path: &str, accept: &str) -> Answer {
        self.get_with(path, &[&format!("Accept: {accept}")])
    }

    /// `curl` of `path` with these request headers (`Name: value`).
    pub fn get_with(&self, path: &str, headers: &[&str]) -> Answer {
        let mut args = Vec::new();
        for h in headers {
            args.extend(["-H", h]);
        }
        let url = format!("{}{path}", self.server);
        args.push(&url);
        self.run(&args)
    }

    fn run(&self, args: &[&str]) -> Answer {
        let headers = self.kube.scratch.join("curl-headers");
        let out = Command::new("curl")
            .args(["-sS", "--cacert", &self.ca_file, "-D"])
            .arg(&headers)
            .args(["-H", &format!("Authorization: Bearer {}", self.token)])
            .args(args)
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
        let header = |name: &str| -> Vec<String> {
            headers
                .lines()
                .filter_map(|l| l.split_once(':'))
                .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim().to_string())
                .collect()
        };
        Answer {
            code,
            warnings: header("warning"),
            content_type: header("content-type").join(", "),
            etag: header("etag").join(", "),
            allow: header("allow"),
            text: String::from_utf8_lossy(&out.stdout).into_owned(),
            bytes: out.stdout,
        }
    }
}
