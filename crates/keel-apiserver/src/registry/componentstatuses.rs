//! core/v1 ComponentStatuses (deprecated, still read by clients): not stored, but computed
//! on each get or list, as kube-apiserver's `componentstatus` REST does, and served for get
//! and list only. One per component kube-apiserver checks:
//!
//! - `etcd-0`, `etcd-1`, ...: each member of each store (the main store's first, then each
//!   `--etcd-servers-overrides` store's), healthy (`ok`) when it answers a linearizable read
//!   on its own client URL within two seconds;
//! - `scheduler` and `controller-manager`: an HTTPS `GET /healthz` on their secure ports
//!   (10259, 10257) on the loopback address, answered as kube-apiserver answers it: a
//!   connection refused is Unhealthy with Go's error text as the message.
//!
//! Table: NAME, STATUS (Healthy, Unhealthy, Unknown), MESSAGE, ERROR. Every answer carries
//! kube-apiserver's deprecation warning.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Column, NAME_COLUMN, ResourceInfo, Strategy, meta_str};
use crate::apimachinery::time::Time;
use crate::storage::{Backends, Status};

/// The ComponentStatus strategy.
pub struct ComponentStatuses;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["cs"],
    namespaced: false,
    ..ResourceInfo::new(
        "",
        "v1",
        "ComponentStatus",
        "componentstatuses",
        "componentstatus",
    )
};

static COLUMNS: [Column; 4] = [
    NAME_COLUMN,
    Column::string("Status", 0, "Status of the component conditions"),
    Column::string("Message", 0, "Message of the component conditions"),
    Column::string("Error", 0, "Error of the component conditions"),
];

/// How long a component's health check may take (kube-apiserver's `probeTimeOut`).
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// The components checked over HTTPS: name and port on the loopback address.
const HTTP_COMPONENTS: [(&str, u16); 2] = [("controller-manager", 10257), ("scheduler", 10259)];

impl Strategy for ComponentStatuses {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn read_only(&self) -> bool {
        true
    }

    fn deprecation(&self) -> Option<&'static str> {
        Some("v1 ComponentStatus is deprecated in v1.19+")
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, _now: Time) -> Vec<Value> {
        let healthy = obj["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Healthy"));
        let (status, message, error) = match healthy {
            Some(c) => (
                if c["status"] == "True" {
                    "Healthy"
                } else {
                    "Unhealthy"
                },
                c["message"].as_str().unwrap_or(""),
                c["error"].as_str().unwrap_or(""),
            ),
            None => ("Unknown", "", ""),
        };
        vec![
            meta_str(obj, "name").into(),
            status.into(),
            message.into(),
            error.into(),
        ]
    }
}

/// A ComponentStatus with one `Healthy` condition.
fn component(name: &str, status: &str, message: &str, error: &str) -> Value {
    let mut condition = json!({"type": "Healthy", "status": status});
    if !message.is_empty() {
        condition["message"] = message.into();
    }
    if !error.is_empty() {
        condition["error"] = error.into();
    }
    json!({
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name, "creationTimestamp": null},
        "conditions": [condition],
    })
}

/// Every component's status, checked now (in name order).
pub async fn all(backends: &Backends) -> Vec<Value> {
    let mut out = Vec::new();
    for (name, port) in HTTP_COMPONENTS {
        out.push(check_http(name, port).await);
    }
    let mut next = 0..;
    for backend in backends.all() {
        match backend.storage.member_health().await {
            Ok(members) => {
                for (member, i) in members.iter().zip(next.by_ref()) {
                    let name = format!("etcd-{i}");
                    out.push(match &member.error {
                        None => component(&name, "True", "ok", ""),
                        Some(error) => component(&name, "False", "", error),
                    });
                }
            }
            Err(error) => {
                let i = next.next().unwrap_or_default();
                out.push(component(&format!("etcd-{i}"), "False", "", &error));
            }
        }
    }
    out.sort_by(|a, b| meta_str(a, "name").cmp(meta_str(b, "name")));
    out
}

/// The status of component `name`: 500 `Component not found: <name>` for any other name,
/// as kube-apiserver answers it.
pub async fn get(backends: &Backends, name: &str) -> Result<Value, Status> {
    all(backends)
        .await
        .into_iter()
        .find(|c| meta_str(c, "name") == name)
        .ok_or_else(|| Status::failure(500, "", format!("Component not found: {name}")))
}

/// An HTTPS `GET /healthz` on `port` (the certificate is not verified, as kube-apiserver's
/// prober does not): 2xx and 3xx are healthy with the body as the message; any other code
/// or a failed connection unhealthy, with the body or Go's error text as the message.
async fn check_http(name: &str, port: u16) -> Value {
    let url = format!("https://127.0.0.1:{port}/healthz");
    let probe = async {
        let stream = TcpStream::connect(("127.0.0.1", port)).await.map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
                _ => e.to_string(),
            };
            format!("dial tcp 127.0.0.1:{port}: {why}")
        })?;
        get_healthz(stream, port).await
    };
    let answer = match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(answer) => answer,
        Err(_) => Err(
            "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                .to_string(),
        ),
    };
    match answer {
        Ok((code, body)) if (200..400).contains(&code) => component(name, "True", &body, ""),
        Ok((_, body)) => component(name, "False", &body, ""),
        Err(why) => component(name, "False", &format!("Get \"{url}\": {why}"), ""),
    }
}

/// `GET /healthz` over TLS on `stream`: the status code and body.
async fn get_healthz(stream: TcpStream, port: u16) -> Result<(u16, String), String> {
    let config = crate::http::tls::insecure_client_config();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let server = rustls::pki_types::ServerName::try_from("127.0.0.1")
        .map_err(|e| e.to_string())?
        .to_owned();
    let mut tls = connector
        .connect(server, stream)
        .await
        .map_err(|e| e.to_string())?;
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: kube-probe\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| "malformed HTTP response".to_string())?;
    Ok((code, body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_show_health_as_kubectl_does() {
        let now = Time(0);
        let refused = component(
            "scheduler",
            "False",
            "Get \"https://127.0.0.1:10259/healthz\": x",
            "",
        );
        assert_eq!(
            ComponentStatuses.cells(&refused, now),
            [
                "scheduler",
                "Unhealthy",
                "Get \"https://127.0.0.1:10259/healthz\": x",
                ""
            ]
        );
        let ok = component("etcd-0", "True", "ok", "");
        assert_eq!(
            ComponentStatuses.cells(&ok, now),
            ["etcd-0", "Healthy", "ok", ""]
        );
        let none = json!({"metadata": {"name": "x"}});
        assert_eq!(
            ComponentStatuses.cells(&none, now),
            ["x", "Unknown", "", ""]
        );
    }

    #[tokio::test]
    async fn a_component_not_listening_is_unhealthy_with_gos_error_text() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let status = check_http("scheduler", port).await;
        assert_eq!(
            status["conditions"][0],
            json!({"type": "Healthy", "status": "False", "message": format!(
                "Get \"https://127.0.0.1:{port}/healthz\": dial tcp 127.0.0.1:{port}: connect: connection refused"
            )})
        );
    }
}
