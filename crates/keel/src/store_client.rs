//! Reaching a store's members from the command line, as etcdctl's `--endpoints` does: their
//! gRPC service (`keel snapshot`, `keel doctor`) and their HTTP endpoints on the same client
//! URL (`/metrics`, keel's `/debug/faults`).

use std::time::Duration;

use anyhow::{Context, bail};
use keel_bench::kubeconfig::KubeTarget;
use tonic::transport::{Channel, Endpoint};

/// `url` with `http://` in front when it has no scheme (`host:port`, as etcdctl takes it).
pub fn with_scheme(url: &str) -> String {
    match url.contains("://") {
        true => url.to_string(),
        false => format!("http://{url}"),
    }
}

/// A gRPC channel to the first of `servers` that accepts a connection.
pub async fn connect(servers: &[String]) -> anyhow::Result<Channel> {
    let mut last = None;
    for url in servers {
        let url = with_scheme(url);
        let endpoint = Endpoint::from_shared(url.clone())
            .with_context(|| format!("{url:?} is not a URL"))?
            .connect_timeout(Duration::from_secs(5))
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(20));
        match endpoint.connect().await {
            Ok(channel) => return Ok(channel),
            Err(e) => last = Some(format!("{url}: {e}")),
        }
    }
    bail!(
        "cannot reach the store at {} ({}); is it running?",
        servers.join(","),
        last.unwrap_or_default()
    )
}

/// A member's client URL as an HTTP target (`flag` names it in errors): plain HTTP, as keel
/// store and a default etcd serve their clients.
pub fn http_target(url: &str, flag: &str) -> anyhow::Result<KubeTarget> {
    let url = with_scheme(url);
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("{flag}: {url:?} is not a URL"))?;
    if uri.scheme_str() != Some("http") {
        bail!("{flag}: {url}: only http:// client URLs are supported here");
    }
    let host = uri
        .host()
        .with_context(|| format!("{flag}: {url:?} has no host"))?
        .trim_matches(|c| c == '[' || c == ']')
        .to_string();
    Ok(KubeTarget {
        server: url.trim_end_matches('/').to_string(),
        https: false,
        port: uri.port_u16().unwrap_or(2379),
        base_path: String::new(),
        ca_pem: Vec::new(),
        insecure: false,
        server_name: host.clone(),
        host,
        token: None,
        client_cert: None,
    })
}
