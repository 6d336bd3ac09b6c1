//! Reading a kubeconfig the way kubectl does, for `keel bench apiserver`: the chosen context
//! (`--context`, else `current-context`, else the only one) names a cluster and a user. From
//! the cluster come the server URL, the CA to trust (`certificate-authority-data`, or the
//! `certificate-authority` file, relative to the kubeconfig's folder), `insecure-skip-tls-verify`
//! and `tls-server-name`; from the user a bearer token (`token` or `tokenFile`) and/or a client
//! certificate (`client-certificate(-data)` and `client-key(-data)`). Exec and auth-provider
//! plugins and basic auth are refused with a clear message.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use base64::Engine as _;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Config {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    #[serde(default)]
    current_context: String,
}

#[derive(Debug, Deserialize)]
struct NamedCluster {
    name: String,
    cluster: Cluster,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: String,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: User,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct User {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    username: Option<String>,
    exec: Option<serde_yaml_ng::Value>,
    auth_provider: Option<serde_yaml_ng::Value>,
}

#[derive(Debug, Deserialize)]
struct NamedContext {
    name: String,
    context: ContextEntry,
}

#[derive(Debug, Deserialize)]
struct ContextEntry {
    cluster: String,
    #[serde(default)]
    user: String,
}

/// Where the API server is and how to authenticate to it.
#[derive(Debug, Clone)]
pub struct KubeTarget {
    /// The server URL as the kubeconfig gives it, without a trailing `/`.
    pub server: String,
    /// `https` (true) or `http`.
    pub https: bool,
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// A path the server URL carries (empty or starting with `/`, no trailing `/`), put in
    /// front of every request path.
    pub base_path: String,
    /// PEM of the CAs to trust (empty: the system's trust store).
    pub ca_pem: Vec<u8>,
    /// `insecure-skip-tls-verify`: any server certificate is accepted.
    pub insecure: bool,
    /// The name to verify the server certificate against (the URL's host unless
    /// `tls-server-name` says otherwise).
    pub server_name: String,
    /// Bearer token.
    pub token: Option<String>,
    /// Client certificate chain and key, both PEM.
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
}

/// The kubeconfig to use: `explicit`, else the first file of `$KUBECONFIG`, else
/// `~/.kube/config`.
pub fn default_path(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    if let Some(list) = std::env::var_os("KUBECONFIG")
        && let Some(first) = std::env::split_paths(&list).find(|p| !p.as_os_str().is_empty())
    {
        return Ok(first);
    }
    let home = std::env::var_os("HOME")
        .context("no --kubeconfig, no $KUBECONFIG and no $HOME to find ~/.kube/config")?;
    Ok(PathBuf::from(home).join(".kube").join("config"))
}

/// Reads the kubeconfig at `path` for `context` (None: its current context).
pub fn load(path: &Path, context: Option<&str>) -> anyhow::Result<KubeTarget> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    parse(&text, dir, context).with_context(|| format!("kubeconfig {}", path.display()))
}

/// Parses a kubeconfig's text; relative file names are taken from `dir`.
pub fn parse(text: &str, dir: &Path, context: Option<&str>) -> anyhow::Result<KubeTarget> {
    let config: Config = serde_yaml_ng::from_str(text).context("not a kubeconfig")?;
    let name = match context.filter(|c| !c.is_empty()) {
        Some(c) => c.to_string(),
        None if !config.current_context.is_empty() => config.current_context.clone(),
        None if config.contexts.len() == 1 => config.contexts[0].name.clone(),
        None => bail!("no current-context (and not exactly one context); pass --context"),
    };
    let ctx = config
        .contexts
        .iter()
        .find(|c| c.name == name)
        .with_context(|| format!("context {name:?} not found"))?;
    let cluster = &config
        .clusters
        .iter()
        .find(|c| c.name == ctx.context.cluster)
        .with_context(|| format!("cluster {:?} not found", ctx.context.cluster))?
        .cluster;
    let user = config
        .users
        .iter()
        .find(|u| u.name == ctx.context.user)
        .map(|u| &u.user);

    let (https, host, port, base_path) = split_url(&cluster.server)?;
    let read = |file: &str| -> anyhow::Result<Vec<u8>> {
        let path = dir.join(file);
        std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
    };
    let decode = |field: &str, data: &str| -> anyhow::Result<Vec<u8>> {
        base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .with_context(|| format!("{field} is not base64"))
    };
    let ca_pem = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) if !data.is_empty() => decode("certificate-authority-data", data)?,
        (_, Some(file)) if !file.is_empty() => read(file)?,
        _ => Vec::new(),
    };
    let mut target = KubeTarget {
        server: cluster.server.trim_end_matches('/').to_string(),
        https,
        server_name: cluster
            .tls_server_name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| host.clone()),
        host,
        port,
        base_path,
        ca_pem,
        insecure: cluster.insecure_skip_tls_verify,
        token: None,
        client_cert: None,
    };
    let Some(user) = user else {
        return Ok(target);
    };
    if user.exec.is_some() || user.auth_provider.is_some() {
        bail!(
            "user {:?} authenticates with an exec or auth-provider plugin, which keel bench does \
             not run; use a kubeconfig with a token or a client certificate",
            ctx.context.user
        );
    }
    target.token = match (&user.token, &user.token_file) {
        (Some(token), _) if !token.is_empty() => Some(token.clone()),
        (_, Some(file)) if !file.is_empty() => {
            Some(String::from_utf8_lossy(&read(file)?).trim().to_string())
        }
        _ => None,
    };
    let pem = |data: &Option<String>, file: &Option<String>, field: &str| match (data, file) {
        (Some(d), _) if !d.is_empty() => decode(field, d).map(Some),
        (_, Some(f)) if !f.is_empty() => read(f).map(Some),
        _ => Ok(None),
    };
    let cert = pem(
        &user.client_certificate_data,
        &user.client_certificate,
        "client-certificate-data",
    )?;
    let key = pem(&user.client_key_data, &user.client_key, "client-key-data")?;
    target.client_cert = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => bail!(
            "user {:?} has a client certificate or key without the other",
            ctx.context.user
        ),
    };
    if target.token.is_none() && target.client_cert.is_none() && user.username.is_some() {
        bail!(
            "user {:?} uses basic auth, which keel bench does not send; use a token or a client \
             certificate",
            ctx.context.user
        );
    }
    Ok(target)
}

/// Splits `scheme://host[:port][/path]` into (https, host, port, path).
fn split_url(url: &str) -> anyhow::Result<(bool, String, u16, String)> {
    let url = url.trim();
    let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        bail!("server {url:?}: expected an https:// or http:// URL");
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let default_port = if https { 443 } else { 80 };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .with_context(|| format!("server {url:?}: unclosed '[' in the host"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => bail!("server {url:?}: unexpected {after:?} after the host"),
        };
        (host.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host.to_string(), Some(port)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() {
        bail!("server {url:?}: no host");
    }
    let port = match port {
        Some(p) => p
            .parse()
            .map_err(|_| anyhow::anyhow!("server {url:?}: invalid port {p:?}"))?,
        None => default_port,
    };
    Ok((https, host, port, path.trim_end_matches('/').to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEL: &str = "apiVersion: v1
kind: Config
clusters:
- name: keel
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=
users:
- name: admin
  user:
    token: s3cret
contexts:
- name: keel
  context:
    cluster: keel
    user: admin
current-context: keel
";

    #[test]
    fn keel_kubeconfig() {
        let t = parse(KEEL, Path::new("/"), None).unwrap();
        assert!(t.https);
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 6443));
        assert_eq!(t.server_name, "127.0.0.1");
        assert_eq!(t.base_path, "");
        assert!(
            String::from_utf8(t.ca_pem)
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE")
        );
        assert_eq!(t.token.as_deref(), Some("s3cret"));
        assert!(!t.insecure && t.client_cert.is_none());
    }

    #[test]
    fn files_contexts_and_insecure() {
        let dir = tempfile_dir();
        std::fs::write(dir.join("token"), "tok\n").unwrap();
        std::fs::write(dir.join("ca.crt"), "CA").unwrap();
        let text = "clusters:
- name: a
  cluster: {server: 'https://[::1]/prefix/', certificate-authority: ca.crt}
- name: b
  cluster: {server: 'http://h', insecure-skip-tls-verify: true, tls-server-name: other}
users:
- name: u
  user: {tokenFile: token}
contexts:
- {name: one, context: {cluster: a, user: u}}
- {name: two, context: {cluster: b, user: nobody}}
";
        let a = parse(text, &dir, Some("one")).unwrap();
        assert_eq!((a.host.as_str(), a.port), ("::1", 443));
        assert_eq!(a.base_path, "/prefix");
        assert_eq!(a.ca_pem, b"CA");
        assert_eq!(a.token.as_deref(), Some("tok"));
        let b = parse(text, &dir, Some("two")).unwrap();
        assert!(!b.https && b.insecure);
        assert_eq!((b.port, b.server_name.as_str()), (80, "other"));
        assert!(b.token.is_none());
        let err = parse(text, &dir, None).unwrap_err().to_string();
        assert!(err.contains("--context"), "{err}");
        let err = parse(text, &dir, Some("three")).unwrap_err().to_string();
        assert!(err.contains("\"three\" not found"), "{err}");
    }

    #[test]
    fn plugins_and_bad_urls_are_refused() {
        let text = "clusters: [{name: c, cluster: {server: 'https://x:1'}}]
users: [{name: u, user: {exec: {command: aws}}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
";
        let err = parse(text, Path::new("/"), None).unwrap_err().to_string();
        assert!(err.contains("exec"), "{err}");
        for bad in ["ftp://x", "https://", "https://x:port", "https://[::1"] {
            assert!(split_url(bad).is_err(), "{bad:?} accepted");
        }
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("keel-bench-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
