//! The kubeconfig keel writes on start so that `kubectl --kubeconfig <file>` reaches it as
//! the admin user: one cluster (the server and the CA to trust), one user (the admin bearer
//! token), one context joining them, made current.

use std::fs::DirBuilder;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::http::tls::write_atomic;

/// The user name the kubeconfig gives the admin token.
pub const ADMIN_USER: &str = "admin";

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Config {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    clusters: Vec<NamedCluster>,
    users: Vec<NamedUser>,
    contexts: Vec<NamedContext>,
    current_context: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct NamedCluster {
    name: String,
    cluster: Cluster,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    certificate_authority_data: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct NamedUser {
    name: String,
    user: UserEntry,
}

#[derive(Debug, Serialize, Deserialize)]
struct UserEntry {
    token: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct NamedContext {
    name: String,
    context: Context,
}

#[derive(Debug, Serialize, Deserialize)]
struct Context {
    cluster: String,
    user: String,
}

/// Writes a kubeconfig to `path` (mode 0600, atomically; a missing parent directory is made
/// with mode 0700) for `server` (`https://127.0.0.1:6443`), trusting the CA `ca_pem` (none
/// when empty, for a plain HTTP server), as user `admin` with bearer `token`, in a cluster and
/// a context both named `cluster_name`, which is made current.
pub fn write(
    path: &Path,
    server: &str,
    ca_pem: &str,
    token: &str,
    cluster_name: &str,
) -> Result<(), io::Error> {
    let config = Config {
        api_version: "v1".to_string(),
        kind: "Config".to_string(),
        clusters: vec![NamedCluster {
            name: cluster_name.to_string(),
            cluster: Cluster {
                server: server.to_string(),
                certificate_authority_data: (!ca_pem.is_empty())
                    .then(|| base64::engine::general_purpose::STANDARD.encode(ca_pem)),
            },
        }],
        users: vec![NamedUser {
            name: ADMIN_USER.to_string(),
            user: UserEntry {
                token: token.to_string(),
            },
        }],
        contexts: vec![NamedContext {
            name: cluster_name.to_string(),
            context: Context {
                cluster: cluster_name.to_string(),
                user: ADMIN_USER.to_string(),
            },
        }],
        current_context: cluster_name.to_string(),
    };
    let yaml = serde_yaml_ng::to_string(&config)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    write_atomic(path, yaml.as_bytes(), 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn read(path: &Path) -> Config {
        let text = std::fs::read_to_string(path).expect("read kubeconfig");
        serde_yaml_ng::from_str(&text).expect("parse kubeconfig")
    }

    #[test]
    fn write_round_trips_and_kubectl_reads_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kube").join("config");
        let ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        write(&path, "https://127.0.0.1:6443", ca, "s3cret", "keel").expect("write");
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        let config = read(&path);
        assert_eq!(config.api_version, "v1");
        assert_eq!(config.kind, "Config");
        assert_eq!(config.current_context, "keel");
        assert_eq!(config.clusters.len(), 1);
        assert_eq!(config.clusters[0].name, "keel");
        assert_eq!(config.clusters[0].cluster.server, "https://127.0.0.1:6443");
        let ca_data = config.clusters[0]
            .cluster
            .certificate_authority_data
            .as_deref()
            .expect("certificate-authority-data");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(ca_data)
            .expect("base64");
        assert_eq!(decoded, ca.as_bytes());
        assert_eq!(config.users[0].name, "admin");
        assert_eq!(config.users[0].user.token, "s3cret");
        assert_eq!(config.contexts[0].name, "keel");
        assert_eq!(config.contexts[0].context.cluster, "keel");
        assert_eq!(config.contexts[0].context.user, "admin");

        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains("certificate-authority-data:"), "{text}");
        assert!(text.contains("current-context: keel"), "{text}");

        let kubectl = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&path)
            .args([
                "config",
                "view",
                "--raw",
                "-o",
                "jsonpath={.users[0].user.token}",
            ])
            .output();
        if let Ok(output) = kubectl {
            assert!(output.status.success(), "{output:?}");
            assert_eq!(String::from_utf8_lossy(&output.stdout), "s3cret");
        }
    }

    #[test]
    fn write_without_ca_has_no_certificate_authority_data() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config");
        write(&path, "http://127.0.0.1:8080", "", "t", "dev").expect("write");
        let config = read(&path);
        assert_eq!(config.clusters[0].cluster.certificate_authority_data, None);
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(!text.contains("certificate-authority"), "{text}");
        // A second write replaces the first.
        write(&path, "http://127.0.0.1:9090", "", "u", "dev").expect("rewrite");
        assert_eq!(read(&path).users[0].user.token, "u");
    }
}
