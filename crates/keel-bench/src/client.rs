//! gRPC connections: one tonic `Channel` per `--conns`, clients assigned to them round-robin.

use std::time::Duration;

use anyhow::{Context, bail};
use keel_proto::etcdserverpb::kv_client::KvClient;
use tonic::transport::{Channel, Endpoint};

/// Turns a `--endpoints` entry into an `http://host:port` URI.
///
/// Accepts `host:port`, `http://host:port` and a trailing `/`; refuses `https://`, because
/// `keel bench` speaks plaintext gRPC only.
pub fn endpoint_uri(raw: &str) -> anyhow::Result<String> {
    let raw = raw.trim();
    if raw.is_empty() {
        bail!("empty endpoint in --endpoints");
    }
    let rest = if let Some(rest) = raw.strip_prefix("http://") {
        rest
    } else if raw.starts_with("https://") {
        bail!(
            "endpoint {raw:?}: TLS is not supported by keel bench; use a plaintext http endpoint"
        );
    } else if raw.contains("://") {
        bail!("endpoint {raw:?}: unsupported scheme (expected host:port or http://host:port)");
    } else {
        raw
    };
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() || rest.contains('/') {
        bail!("endpoint {raw:?}: expected host:port");
    }
    let (host, port) = rest
        .rsplit_once(':')
        .with_context(|| format!("endpoint {raw:?}: missing port (expected host:port)"))?;
    if host.is_empty() {
        bail!("endpoint {raw:?}: missing host (expected host:port)");
    }
    port.parse::<u16>()
        .map_err(|_| anyhow::anyhow!("endpoint {raw:?}: invalid port {port:?}"))?;
    Ok(format!("http://{rest}"))
}

/// Opens `conns` connections, spread round-robin over `endpoints`, and returns `clients` KV
/// clients spread round-robin over the connections (client `i` uses connection `i % conns`).
///
/// Every connection is established before returning, so an unreachable endpoint is reported
/// here rather than as a stream of failed requests.
pub async fn connect(
    endpoints: &[String],
    conns: usize,
    clients: usize,
    dial_timeout: Duration,
) -> anyhow::Result<Vec<KvClient<Channel>>> {
    if clients == 0 {
        bail!("--clients must be at least 1");
    }
    let channels = connect_channels(endpoints, conns, dial_timeout).await?;
    Ok((0..clients)
        .map(|i| KvClient::new(channels[i % channels.len()].clone()))
        .collect())
}

/// Opens `conns` connections, spread round-robin over `endpoints`, each established before
/// returning.
pub async fn connect_channels(
    endpoints: &[String],
    conns: usize,
    dial_timeout: Duration,
) -> anyhow::Result<Vec<Channel>> {
    if endpoints.is_empty() {
        bail!("--endpoints is empty");
    }
    if conns == 0 {
        bail!("--conns must be at least 1");
    }
    let uris = endpoints
        .iter()
        .map(|e| endpoint_uri(e))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let dials = (0..conns).map(|i| {
        let uri = uris[i % uris.len()].clone();
        async move {
            let endpoint = Endpoint::from_shared(uri.clone())
                .with_context(|| format!("invalid endpoint {uri}"))?
                .connect_timeout(dial_timeout)
                .tcp_nodelay(true);
            match tokio::time::timeout(dial_timeout, endpoint.connect()).await {
                Ok(Ok(channel)) => Ok(channel),
                Ok(Err(err)) => {
                    bail!(
                        "cannot connect to {uri}: {} (is the server running?)",
                        root_cause(&err)
                    )
                }
                Err(_) => bail!("cannot connect to {uri}: timed out after {dial_timeout:?}"),
            }
        }
    });
    futures::future::try_join_all(dials).await
}

/// A gRPC status as etcd's Go client prints it.
pub fn status_message(status: &tonic::Status) -> String {
    format!(
        "rpc error: code = {:?} desc = {}",
        status.code(),
        status.message()
    )
}

/// The innermost error of a chain (e.g. "Connection refused" under tonic's "transport error").
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_with_and_without_scheme() {
        assert_eq!(
            endpoint_uri("127.0.0.1:2379").unwrap(),
            "http://127.0.0.1:2379"
        );
        assert_eq!(
            endpoint_uri("http://localhost:2379/").unwrap(),
            "http://localhost:2379"
        );
        assert_eq!(endpoint_uri(" [::1]:2379 ").unwrap(), "http://[::1]:2379");
    }

    #[test]
    fn bad_endpoints() {
        for bad in [
            "",
            "localhost",
            "https://a:1",
            "unix://x",
            "a:notaport",
            ":2379",
            "a:1/x",
        ] {
            assert!(endpoint_uri(bad).is_err(), "{bad:?} accepted");
        }
    }
}
