//! A lean HTTPS client for `keel bench apiserver`: hyper's connection-level client over
//! rustls, HTTP/2 when the server offers it by ALPN (one connection carries many requests and
//! watches at once) and keep-alive HTTP/1.1 otherwise (one request at a time per connection),
//! with the kubeconfig's bearer token or client certificate. No pool of its own: each user of
//! a [`Conn`] forks it ([`Conn::fork`]: the same HTTP/2 connection, or a new HTTP/1.1 one), so
//! a group of clients shares one connection and keeps it on the thread that drives it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use keel_tls::AcceptAnyCertificate;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::kubeconfig::KubeTarget;

/// Where the system's CA bundle usually is, when the kubeconfig names no CA.
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The API server to connect to, and how.
pub struct Endpoint {
    target: KubeTarget,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    /// `host:port` for URIs and `Host` (IPv6 in brackets).
    authority: String,
    authorization: Option<HeaderValue>,
    dial_timeout: Duration,
}

impl Endpoint {
    /// Prepares connections to `target`: TLS with its CA (or the system's, or none with
    /// `insecure-skip-tls-verify`), offering HTTP/2 and HTTP/1.1 (only HTTP/1.1 with
    /// `http1_only`); each connection is established within `dial_timeout`.
    pub fn new(
        target: KubeTarget,
        http1_only: bool,
        dial_timeout: Duration,
    ) -> anyhow::Result<Arc<Self>> {
        let authority = if target.host.contains(':') {
            format!("[{}]:{}", target.host, target.port)
        } else {
            format!("{}:{}", target.host, target.port)
        };
        let tls = if target.https {
            let mut config = tls_config(&target)?;
            config.alpn_protocols = if http1_only {
                vec![b"http/1.1".to_vec()]
            } else {
                vec![b"h2".to_vec(), b"http/1.1".to_vec()]
            };
            let name = ServerName::try_from(target.server_name.clone())
                .with_context(|| format!("invalid TLS server name {:?}", target.server_name))?;
            Some((TlsConnector::from(Arc::new(config)), name))
        } else {
            None
        };
        let authorization = match &target.token {
            Some(token) => Some(
                HeaderValue::from_str(&format!("Bearer {token}"))
                    .context("the kubeconfig's token is not a valid header value")?,
            ),
            None => None,
        };
        Ok(Arc::new(Self {
            target,
            tls,
            authority,
            authorization,
            dial_timeout,
        }))
    }

    /// The server URL.
    pub fn server(&self) -> &str {
        &self.target.server
    }

    /// Opens one connection.
    pub async fn connect(self: &Arc<Self>) -> anyhow::Result<Conn> {
        let server = &self.target.server;
        match tokio::time::timeout(self.dial_timeout, self.dial()).await {
            Ok(Ok(sender)) => Ok(Conn {
                endpoint: self.clone(),
                sender,
            }),
            Ok(Err(err)) => bail!("cannot connect to {server}: {err:#}"),
            Err(_) => bail!(
                "cannot connect to {server}: timed out after {:?}",
                self.dial_timeout
            ),
        }
    }

    async fn dial(&self) -> anyhow::Result<Sender> {
        let tcp = TcpStream::connect((self.target.host.as_str(), self.target.port)).await?;
        tcp.set_nodelay(true)?;
        let Some((connector, name)) = &self.tls else {
            let (sender, conn) = http1::handshake(TokioIo::new(tcp)).await?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            return Ok(Sender::H1(sender));
        };
        let tls = connector.connect(name.clone(), tcp).await?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = TokioIo::new(tls);
        if h2 {
            let (sender, conn) = http2::Builder::new(TokioExecutor::new())
                .adaptive_window(true)
                .handshake(io)
                .await?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Sender::H2(sender))
        } else {
            let (sender, conn) = http1::handshake(io).await?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Sender::H1(sender))
        }
    }
}

/// rustls settings for `target`.
fn tls_config(target: &KubeTarget) -> anyhow::Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS setup")?;
    let builder = if target.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate::new(provider)))
    } else {
        let (pem, source) = if target.ca_pem.is_empty() {
            system_bundle()?
        } else {
            (
                target.ca_pem.clone(),
                "the kubeconfig's certificate authority".to_string(),
            )
        };
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.with_context(|| format!("{source}: invalid PEM"))?;
            roots
                .add(cert)
                .with_context(|| format!("{source}: invalid certificate"))?;
        }
        if roots.is_empty() {
            bail!("{source} holds no certificate");
        }
        builder.with_root_certificates(roots)
    };
    match &target.client_cert {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .context("client certificate: invalid PEM")?;
            let key = PrivateKeyDer::from_pem_slice(key).context("client key: invalid PEM")?;
            builder
                .with_client_auth_cert(chain, key)
                .context("client certificate")
        }
    }
}

/// The system's CA bundle (`$SSL_CERT_FILE` or the usual places) and where it came from.
fn system_bundle() -> anyhow::Result<(Vec<u8>, String)> {
    let from_env = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
    for path in from_env
        .into_iter()
        .chain(SYSTEM_BUNDLES.iter().map(Into::into))
    {
        if let Ok(pem) = std::fs::read(&path) {
            return Ok((pem, path.display().to_string()));
        }
    }
    bail!(
        "the kubeconfig names no certificate-authority and no system CA bundle was found \
         (set SSL_CERT_FILE, or insecure-skip-tls-verify in the kubeconfig)"
    )
}

enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

/// One user's handle on a connection to the API server.
pub struct Conn {
    endpoint: Arc<Endpoint>,
    sender: Sender,
}

/// A whole answer: status, body and the server's `Retry-After`.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body.
    pub body: Bytes,
    /// The `Retry-After` header in whole seconds (429s and 5xx of an overloaded server).
    pub retry_after: Option<Duration>,
}

impl Answer {
    /// The answer as an error message: the status code and the Status object's message (or
    /// the start of the body).
    pub fn error(&self) -> String {
        #[derive(serde::Deserialize)]
        struct Status {
            #[serde(default)]
            message: String,
        }
        let message = serde_json::from_slice::<Status>(&self.body)
            .map(|s| s.message)
            .unwrap_or_else(|_| {
                let text = String::from_utf8_lossy(&self.body);
                text.chars().take(200).collect()
            });
        format!("{}: {}", self.status.as_u16(), message.trim())
    }

    /// Reads the whole of `response`.
    pub async fn read(response: Response<Incoming>) -> Result<Answer, hyper::Error> {
        let status = response.status();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Answer {
            status,
            body,
            retry_after,
        })
    }
}

impl Conn {
    /// The protocol this connection speaks.
    pub fn protocol(&self) -> &'static str {
        match self.sender {
            Sender::H1(_) => "HTTP/1.1",
            Sender::H2(_) => "HTTP/2",
        }
    }

    /// Another handle for another user: on HTTP/2 the same connection, on HTTP/1.1 a new one
    /// (it carries one request at a time).
    pub async fn fork(&self) -> anyhow::Result<Conn> {
        match &self.sender {
            Sender::H2(sender) if !sender.is_closed() => Ok(Conn {
                endpoint: self.endpoint.clone(),
                sender: Sender::H2(sender.clone()),
            }),
            _ => self.endpoint.connect().await,
        }
    }

    /// `n` handles on this connection (see [`Conn::fork`]); this one is the last.
    pub async fn share(self, n: usize) -> anyhow::Result<Vec<Conn>> {
        let mut conns = Vec::with_capacity(n);
        for _ in 1..n {
            conns.push(self.fork().await?);
        }
        if n > 0 {
            conns.push(self);
        }
        Ok(conns)
    }

    /// Makes the connection usable again after a request on it was abandoned (timed out): an
    /// HTTP/1.1 connection may still deliver the old answer, so it is replaced; on HTTP/2 the
    /// abandoned stream was reset and the connection is kept.
    pub async fn recover(&mut self) {
        if matches!(self.sender, Sender::H1(_))
            && let Ok(conn) = self.endpoint.connect().await
        {
            *self = conn;
        }
    }

    /// Sends one request (`path` below the server URL's own path, with its query) and returns
    /// the response with its body still streaming. A connection the server has closed is
    /// reopened first.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<Response<Incoming>> {
        self.send_typed(method, path, body, "application/json")
            .await
    }

    /// [`Conn::send`] with a body of `content_type` (e.g. a patch's).
    pub async fn send_typed(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        content_type: &'static str,
    ) -> anyhow::Result<Response<Incoming>> {
        let closed = match &self.sender {
            Sender::H1(s) => s.is_closed(),
            Sender::H2(s) => s.is_closed(),
        };
        if closed {
            *self = self.endpoint.connect().await?;
        }
        let endpoint = &self.endpoint;
        let full_path = format!("{}{path}", endpoint.target.base_path);
        let uri = match self.sender {
            Sender::H1(_) => full_path,
            Sender::H2(_) => {
                let scheme = if endpoint.target.https {
                    "https"
                } else {
                    "http"
                };
                format!("{scheme}://{}{full_path}", endpoint.authority)
            }
        };
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::ACCEPT, "application/json")
            .header(header::USER_AGENT, "keel-bench");
        if matches!(self.sender, Sender::H1(_)) {
            request = request.header(header::HOST, &endpoint.authority);
        }
        if let Some(auth) = &endpoint.authorization {
            request = request.header(header::AUTHORIZATION, auth.clone());
        }
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        let request = request
            .body(Full::new(body.unwrap_or_default()))
            .context("invalid request")?;
        let response = match &mut self.sender {
            Sender::H1(sender) => {
                sender.ready().await?;
                sender.send_request(request).await?
            }
            Sender::H2(sender) => sender.send_request(request).await?,
        };
        Ok(response)
    }

    /// Sends one request and reads its whole answer.
    pub async fn call(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<Answer> {
        self.call_typed(method, path, body, "application/json")
            .await
    }

    /// [`Conn::call`] with a body of `content_type` (e.g. a patch's).
    pub async fn call_typed(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        content_type: &'static str,
    ) -> anyhow::Result<Answer> {
        let response = self.send_typed(method, path, body, content_type).await?;
        Ok(Answer::read(response).await?)
    }
}
