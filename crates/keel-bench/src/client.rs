//! gRPC connections: `--conns` lean [`GrpcConn`]s, clients assigned to them round-robin.

use std::time::Duration;

use anyhow::{Context, bail};

use crate::grpc::GrpcConn;

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

/// Opens `conns` connections, spread round-robin over `endpoints`, and returns `clients`
/// handles for unary calls spread round-robin over them (client `i` uses connection
/// `i % conns`).
///
/// Every connection is established before returning, so an unreachable endpoint is reported
/// here rather than as a stream of failed requests.
pub async fn connect(
    endpoints: &[String],
    conns: usize,
    clients: usize,
    dial_timeout: Duration,
) -> anyhow::Result<Vec<GrpcConn>> {
    if clients == 0 {
        bail!("--clients must be at least 1");
    }
    let conns = dial_all(endpoints, conns, dial_timeout, |uri| async move {
        GrpcConn::connect(&uri).await
    })
    .await?;
    Ok((0..clients)
        .map(|i| conns[i % conns.len()].clone())
        .collect())
}

/// Dials `conns` connections with `dial`, spread round-robin over `endpoints`, each within
/// `dial_timeout`.
async fn dial_all<T, F, Fut>(
    endpoints: &[String],
    conns: usize,
    dial_timeout: Duration,
    dial: F,
) -> anyhow::Result<Vec<T>>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
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
        let dialing = dial(uri.clone());
        async move {
            match tokio::time::timeout(dial_timeout, dialing).await {
                Ok(Ok(conn)) => Ok(conn),
                Ok(Err(err)) => bail!(
                    "cannot connect to {uri}: {} (is the server running?)",
                    err.root_cause()
                ),
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
