//! ConfigMaps written and read back through the real kubectl on one API server: the tests
//! that check every acknowledged write survives a fault (a killed leader, a power cut) record
//! each write's value and resourceVersion with [`Api::write`] and read the store with
//! [`Api::read`] and [`Api::list`].

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::kube::{Kube, kubectl_bin};

/// Where the ConfigMaps live.
pub const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// ConfigMaps as name -> (`data.v`, resourceVersion).
pub type Stored = BTreeMap<String, (String, i64)>;

/// kubectl on one API server, each request limited to a timeout.
#[derive(Clone, Debug)]
pub struct Api {
    kubeconfig: PathBuf,
    /// kubectl's `--request-timeout` flag.
    request_timeout: String,
}

impl Api {
    /// kubectl on `kube` through its admin kubeconfig, each request given up after
    /// `request_timeout` (kubectl's `--request-timeout`).
    pub fn of(kube: &Kube, request_timeout: Duration) -> Api {
        Api {
            kubeconfig: kube.kubeconfig.clone(),
            request_timeout: format!("--request-timeout={}s", request_timeout.as_secs_f64()),
        }
    }

    /// kubectl with the kubeconfig and `args` but no request timeout (for a watch, which
    /// must not end on one); stdio is left to the caller.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(kubectl_bin(None));
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        cmd
    }

    /// kubectl with the request timeout and `args`.
    fn timed(&self, args: &[&str]) -> Command {
        let mut cmd = self.command(&[self.request_timeout.as_str()]);
        cmd.args(args);
        cmd
    }

    /// Runs kubectl with `body` on its standard input: the JSON it printed, or why it failed.
    /// A kubectl that gave up before reading its input (no kubeconfig after a power cut)
    /// fails with its own message, not on the closed pipe.
    pub fn run(&self, args: &[&str], body: Option<&Value>) -> Result<Value, String> {
        let mut child = self
            .timed(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        let mut stdin = child.stdin.take().expect("kubectl's stdin");
        if let Some(body) = body {
            // A kubectl that already gave up closed its stdin.
            let _ = stdin.write_all(body.to_string().as_bytes());
        }
        drop(stdin);
        let out = child.wait_with_output().expect("wait for kubectl");
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("kubectl printed no JSON ({e}): {:?}", out.stdout))
    }

    /// Runs kubectl without input: what it printed, trimmed, or why it failed.
    pub fn run_text(&self, args: &[&str]) -> Result<String, String> {
        let out = self
            .timed(args)
            .stdin(Stdio::null())
            .output()
            .expect("run kubectl");
        let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
        if out.status.success() {
            Ok(text(&out.stdout))
        } else {
            Err(text(&out.stderr))
        }
    }

    /// Creates ConfigMap `name` (update: None) or replaces it on the resourceVersion it was
    /// created with, with `data.v = value`: the resourceVersion answered. An answer that is
    /// not the object written fails the test.
    pub fn write(&self, name: &str, value: &str, update: Option<i64>) -> Result<i64, String> {
        let mut body = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name}, "data": {"v": value},
        });
        let answer = match update {
            None => self.run(&["create", "--raw", CONFIGMAPS, "-f", "-"], Some(&body))?,
            Some(rv) => {
                body["metadata"]["resourceVersion"] = json!(rv.to_string());
                let path = format!("{CONFIGMAPS}/{name}");
                self.run(&["replace", "--raw", &path, "-f", "-"], Some(&body))?
            }
        };
        assert_eq!(
            (answer["metadata"]["name"].as_str(), value_of(&answer)),
            (Some(name), Some(value)),
            "the answer to a write: {answer}"
        );
        Ok(rv_of(&answer))
    }

    /// Lists ConfigMap `name` alone (a field selector): the list's resourceVersion and the
    /// object's value and resourceVersion, if it exists.
    pub fn read(&self, name: &str) -> Result<(i64, Option<(String, i64)>), String> {
        let (list_rv, mut items) = self.list_at(&format!(
            "{CONFIGMAPS}?fieldSelector=metadata.name%3D{name}"
        ))?;
        Ok((list_rv, items.remove(name)))
    }

    /// Every ConfigMap as name -> (value, resourceVersion), and the list's resourceVersion.
    pub fn list(&self) -> Result<(i64, Stored), String> {
        self.list_at(CONFIGMAPS)
    }

    /// The ConfigMaps a GET of `path` lists, and the list's resourceVersion.
    fn list_at(&self, path: &str) -> Result<(i64, Stored), String> {
        let list = self.run(&["get", "--raw", path], None)?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let items = items.iter().map(|o| {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            let value = value_of(o).unwrap_or_default();
            (name.to_string(), (value.to_string(), rv_of(o)))
        });
        Ok((rv_of(&list), items.collect()))
    }

    /// Whether `/readyz` answers `ok`.
    pub fn ready(&self) -> bool {
        self.run_text(&["get", "--raw", "/readyz"])
            .is_ok_and(|s| s == "ok")
    }

    /// Whether the server answers at all (`/livez/ping`, which needs no store).
    pub fn alive(&self) -> bool {
        self.run_text(&["get", "--raw", "/livez/ping"])
            .is_ok_and(|s| s == "ok")
    }
}

/// An object's `metadata.resourceVersion` (or a list's) as a number; fails the test if it
/// has none.
pub fn rv_of(object: &Value) -> i64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no numeric resourceVersion in {object}"))
}

/// A ConfigMap's `data.v`.
pub fn value_of(object: &Value) -> Option<&str> {
    object["data"]["v"].as_str()
}
