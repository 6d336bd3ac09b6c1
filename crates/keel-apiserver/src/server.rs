//! Starting an apiserver: the store connection, TLS (a generated CA and serving certificate,
//! or the operator's files), the admin token and kubeconfig, the listener, and the
//! controllers and compactor that run beside the request handlers.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto::Builder as ConnectionBuilder;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tonic::transport::{Channel, Endpoint};

use crate::config::{Config, ServersOverride};
use crate::controllers;
use crate::http::auth::{self, Tokens};
use crate::http::lane::{Connection, HomeExecutor, Lane};
use crate::http::{self, App, tls};
use crate::metrics::Metrics;
use crate::registry::{self, store::Registry};
use crate::storage::{Backend, Backends, Compactor, Etcd3, KeyLayout, StoreChannel, endpoints};

/// Why an apiserver could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A flag is wrong.
    #[error("{0}")]
    Config(String),
    /// The serving certificate.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The token file.
    #[error(transparent)]
    Auth(#[from] auth::AuthError),
    /// The port.
    #[error(
        "cannot listen on {addr}: {source}; is another apiserver running there? (choose another --secure-port)"
    )]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The kubeconfig.
    #[error("cannot write the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A running apiserver.
pub struct ApiServer {
    /// The address it serves on.
    pub addr: SocketAddr,
    /// `https://...` or `http://...`.
    pub url: String,
    /// The admin kubeconfig it wrote, if any.
    pub kubeconfig: Option<PathBuf>,
    serving: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// The apiserver's connections to its store: one for requests and one for watches, so that
/// no burst of requests, nor their cancellations, can end the watches the watch caches live
/// on. The same code for a remote store (two balanced channels) and an embedded one (its
/// service, called directly: see [`StoreChannel`]).
#[derive(Debug, Clone)]
pub struct StoreLink {
    /// Gets, lists, writes, leases and compactions.
    pub requests: StoreChannel,
    /// Watches.
    pub watches: StoreChannel,
}

/// Every store an apiserver uses: the main one and the overrides'.
#[derive(Debug, Clone)]
pub struct StoreLinks {
    /// The main store (`--etcd-servers`).
    pub main: StoreLink,
    /// The stores of `--etcd-servers-overrides`, one per distinct server list.
    pub overrides: Vec<OverrideLink>,
}

/// A store that keeps some resources (an `--etcd-servers-overrides` server list).
#[derive(Debug, Clone)]
pub struct OverrideLink {
    /// The resources it keeps, as (group, resource).
    pub resources: Vec<(String, String)>,
    /// Its servers, as given (for messages).
    pub servers: Vec<String>,
    /// The connections.
    pub link: StoreLink,
}

/// The connections to the main store (`--etcd-servers`) and the overrides' stores. Must be
/// called within a Tokio runtime.
pub fn connect(config: &Config) -> Result<StoreLinks, StartError> {
    Ok(StoreLinks {
        main: connect_servers(&config.etcd_servers, "--etcd-servers")?,
        overrides: connect_overrides(&config.etcd_servers_overrides)?,
    })
}

/// The stores of `--etcd-servers-overrides` (see [`crate::config::group_overrides`]).
pub fn connect_overrides(overrides: &[ServersOverride]) -> Result<Vec<OverrideLink>, StartError> {
    crate::config::group_overrides(overrides)
        .into_iter()
        .map(|store| {
            Ok(OverrideLink {
                link: connect_servers(&store.servers, "--etcd-servers-overrides")?,
                resources: store.resources,
                servers: store.servers,
            })
        })
        .collect()
}

/// The connections to one store's `servers` (connected lazily, balanced over the members
/// that can be reached: [`crate::storage::endpoints`]); `flag` names them in errors.
fn connect_servers(servers: &[String], flag: &str) -> Result<StoreLink, StartError> {
    let mut endpoints = Vec::new();
    for url in servers {
        let endpoint = Endpoint::from_shared(url.clone())
            .map_err(|e| StartError::Config(format!("{flag}: {url:?}: {e}")))?
            .tcp_nodelay(true)
            .http2_keep_alive_interval(std::time::Duration::from_secs(30));
        endpoints.push(endpoint);
    }
    let [requests, watches] =
        <[Channel; 2]>::try_from(endpoints::balanced(endpoints, 2)).expect("two channels");
    Ok(StoreLink {
        requests: StoreChannel::new(requests),
        watches: StoreChannel::new(watches),
    })
}

impl ApiServer {
    /// Starts serving `config` on the stores behind `stores`; the admin kubeconfig goes to
    /// `kubeconfig` (default: `--cert-dir`/kubeconfig).
    pub async fn start(
        config: Config,
        stores: StoreLinks,
        kubeconfig: Option<PathBuf>,
    ) -> Result<ApiServer, StartError> {
        config.validate().map_err(StartError::Config)?;
        keel_process::faults::process().serve(keel_process::faults::Component::Apiserver, None);
        let addr = SocketAddr::new(config.bind_address, config.secure_port);
        let (tls, ca_pem) = serving_tls(&config)?;
        let root_ca = root_ca(&config, &ca_pem)?;
        let (tokens, admin_token) = if config.plain_http {
            if let Some(file) = &config.token_auth_file {
                tracing::warn!(
                    file = %file.display(),
                    "--plain-http serves without authentication: --token-auth-file is not used"
                );
            }
            (None, String::new())
        } else {
            let (tokens, admin) = tokens(&config)?;
            (Some(tokens), admin)
        };
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Listen { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| StartError::Listen { addr, source })?;
        let client_host = match addr.ip() {
            ip if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            ip => ip,
        };
        let scheme = if config.plain_http { "http" } else { "https" };
        let url = format!("{scheme}://{}", SocketAddr::new(client_host, addr.port()));
        let kubeconfig = if admin_token.is_empty() && !config.plain_http {
            None
        } else {
            let path = kubeconfig.unwrap_or_else(|| config.cert_dir.join("kubeconfig"));
            crate::kubeconfig::write(&path, &url, &ca_pem, &admin_token, "keel").map_err(
                |source| StartError::Kubeconfig {
                    path: path.clone(),
                    source,
                },
            )?;
            Some(path)
        };
        let metrics = Arc::new(Metrics::new());
        let registry = Arc::new(Registry::new(
            backends(&config, stores, &metrics),
            KeyLayout::new(&config.etcd_prefix),
            registry::kinds(),
            config.event_ttl,
            config.watch_cache,
            metrics.clone(),
        ));
        registry.set_garbage_collection(config.enable_garbage_collector);
        registry.set_admission_plugins(config.admission_plugins().map_err(StartError::Config)?);
        for name in registry::admission::not_implemented(
            &config.enable_admission_plugins,
            &config.disable_admission_plugins,
        ) {
            tracing::warn!(
                plugin = name,
                "admission plugin {name} is one kube-apiserver registers but keel does not \
                 implement: enabling or disabling it has no effect"
            );
        }
        // The OpenAPI documents (also the schemas every write is pruned by) are made once,
        // before the first request, off the async workers.
        let kinds = registry.kinds().to_vec();
        tokio::task::spawn_blocking(move || {
            http::openapi::documents(&kinds);
        })
        .await
        .map_err(|e| StartError::Config(format!("building the OpenAPI documents: {e}")))?;
        let app = Arc::new(App {
            registry: registry.clone(),
            tokens: tokens.map(Arc::new),
            server_address: SocketAddr::new(client_host, addr.port()).to_string(),
            metrics,
            limits: crate::http::inflight::Limits::new(
                config.max_requests_inflight,
                config.max_mutating_requests_inflight,
            ),
            request_timeout: config.request_timeout,
            started: AtomicBool::new(false),
            rbac_bootstrapped: AtomicBool::new(false),
            events_apart: !std::ptr::eq(
                registry.backends().of("", "events"),
                registry.backends().main(),
            ),
            discovery: Default::default(),
        });
        // The CRDs stored are served from the first request, as kube-apiserver's readiness
        // waits for its CRD informer; a store that does not answer leaves it to the CRD
        // controller, which runs whatever `--controllers` says (it is the apiserver's own).
        let crds = controllers::crds::sync_all(&registry);
        if let Ok(Err(status)) = tokio::time::timeout(std::time::Duration::from_secs(5), crds).await
        {
            tracing::warn!(error = %status.message, "serving the stored CRDs: left to the CRD controller");
        }
        tokio::spawn(controllers::crds::run(registry.clone()));
        let ready = app.clone();
        let bootstrapping = registry.clone();
        // The `rbac/bootstrap-roles` post-start hook, then the system namespaces, then the
        // system priority classes: ready once all are done.
        let reconciled = app.clone();
        tokio::spawn(async move {
            registry::rbac::hook::run(&bootstrapping).await;
            reconciled.rbac_bootstrapped.store(true, Ordering::Release);
            let classes = bootstrapping.clone();
            controllers::system_namespaces::run(bootstrapping, move || {
                tokio::spawn(controllers::priority_classes::run(classes, move || {
                    ready.started.store(true, Ordering::Release);
                }));
            })
            .await;
        });
        let selection =
            controllers::Selection::new(config.controller_manager.controllers.as_deref())
                .map_err(StartError::Config)?;
        if selection.enabled("namespace") {
            tokio::spawn(controllers::namespaces::run(registry.clone()));
        }
        if selection.enabled("garbagecollector") {
            tokio::spawn(controllers::garbagecollector::run(registry.clone()));
        }
        if selection.enabled("clusterrole-aggregation") {
            tokio::spawn(controllers::clusterrole_aggregation::run(registry.clone()));
        }
        if registry
            .admission_plugins()
            .storage_object_in_use_protection
            && !(selection.enabled("pvc-protection") && selection.enabled("pv-protection"))
        {
            tracing::warn!(
                "StorageObjectInUseProtection puts kubernetes.io/pvc-protection and \
                 kubernetes.io/pv-protection on new claims and volumes, but --controllers does \
                 not run pvc-protection and pv-protection here: deleting them waits for a \
                 kube-controller-manager that does (or disable the plugin with \
                 --disable-admission-plugins=StorageObjectInUseProtection)"
            );
        }
        if selection.enabled("pvc-protection") {
            tokio::spawn(controllers::volume_protection::run_pvc(registry.clone()));
        }
        if selection.enabled("pv-protection") {
            tokio::spawn(controllers::volume_protection::run_pv(registry.clone()));
        }
        if selection.enabled("serviceaccount") {
            tokio::spawn(controllers::per_namespace::run(
                registry.clone(),
                controllers::serviceaccounts::ServiceAccounts,
            ));
        }
        if selection.enabled("root-ca-cert-publisher") {
            tokio::spawn(controllers::per_namespace::run(
                registry.clone(),
                controllers::root_ca::RootCaPublisher { ca: root_ca },
            ));
        }
        let kubernetes = controllers::kubernetes_service::KubernetesService {
            cluster_ip: config.service_cluster_ip_range,
            advertise: controllers::kubernetes_service::advertise_address(
                config.advertise_address,
                config.bind_address,
            ),
            port: addr.port(),
        };
        tokio::spawn(kubernetes.run(registry.clone()));
        if selection.enabled("nodelifecycle") {
            tokio::spawn(controllers::nodelifecycle::run(
                registry.clone(),
                controllers::nodelifecycle::Options::new(&config.controller_manager),
                app.metrics.node_lifecycle.clone(),
            ));
        }
        tokio::spawn(registry::object_count::observe(
            registry.clone(),
            app.metrics.clone(),
            config.etcd_count_metric_poll_period,
        ));
        if !config.etcd_compaction_interval.is_zero() {
            for backend in registry.backends().all() {
                let compactor = Compactor::new(&backend.storage);
                tokio::spawn(compactor.run(config.etcd_compaction_interval));
            }
        }
        let serving = tokio::spawn(serve(listener, tls, http::router(app)));
        tracing::info!(%url, "apiserver serving");
        Ok(ApiServer {
            addr,
            url,
            kubeconfig,
            serving,
        })
    }

    /// Serves until the listener fails.
    pub async fn wait(self) -> std::io::Result<()> {
        self.serving.await.map_err(std::io::Error::other)?
    }
}

/// The stores behind `stores`, each reusing TTL leases as `config` says (observed in
/// `metrics`); an override of a
/// resource this server does not serve is kept (kube-apiserver ignores it too) and logged.
fn backends(config: &Config, stores: StoreLinks, metrics: &Metrics) -> Backends {
    let etcd = |link: StoreLink| {
        Etcd3::new(link.requests)
            .with_watch_channel(link.watches)
            .with_lease_reuse(
                config.lease_reuse_duration_seconds,
                metrics.lease_object_counts.clone(),
            )
    };
    let mut backends = Backends::new(Backend {
        storage: etcd(stores.main),
        servers: config.etcd_servers.clone(),
        resources: Vec::new(),
    });
    let kinds = registry::kinds();
    for o in stores.overrides {
        for (group, resource) in &o.resources {
            let served = kinds.iter().any(|k| {
                let (g, r) = k.storage_resource();
                g == group && (r == resource || resource == "*")
            });
            if !served {
                tracing::warn!(
                    group = %group,
                    resource = %resource,
                    "--etcd-servers-overrides names a resource this server does not serve; its \
                     store is still connected, compacted and health-checked, as kube-apiserver does"
                );
            }
        }
        backends = backends.with(Backend {
            storage: etcd(o.link),
            servers: o.servers,
            resources: o.resources,
        });
    }
    backends
}

/// The TLS configuration and the CA clients should trust ("" when the operator brought the
/// certificate or TLS is off).
fn serving_tls(config: &Config) -> Result<(Option<Arc<rustls::ServerConfig>>, String), StartError> {
    if config.plain_http {
        return Ok((None, String::new()));
    }
    if let (Some(cert), Some(key)) = (&config.tls_cert_file, &config.tls_private_key_file) {
        return Ok((Some(tls::load_files(cert, key)?), String::new()));
    }
    let mut hosts = vec![config.bind_address.to_string()];
    if let Ok(name) = std::fs::read_to_string("/etc/hostname") {
        let name = name.trim();
        if !name.is_empty() {
            hosts.push(name.to_ascii_lowercase());
        }
    }
    let certs = tls::ServingCerts::load_or_create(&config.cert_dir, &hosts)?;
    Ok((Some(certs.server_config()?), certs.ca_pem().to_string()))
}

/// The CA bundle kube-controller-manager would publish as `kube-root-ca.crt`: its
/// `--root-ca-file`, else the CA clients verify this apiserver with (the generated CA, or
/// the last certificate of the operator's `--tls-cert-file` chain).
fn root_ca(config: &Config, generated: &str) -> Result<String, StartError> {
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .map_err(|e| StartError::Config(format!("cannot read {}: {e}", path.display())))
    };
    if let Some(file) = &config.controller_manager.root_ca_file {
        return read(file);
    }
    let Some(chain) = &config.tls_cert_file else {
        return Ok(generated.to_string());
    };
    let chain = read(chain)?;
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    Ok(match chain.rfind(BEGIN) {
        Some(last) => chain[last..].trim_end().to_string() + "\n",
        None => String::new(),
    })
}

/// The tokens, and the admin token for the kubeconfig ("" if the file has none).
fn tokens(config: &Config) -> Result<(Tokens, String), StartError> {
    let path: PathBuf = match &config.token_auth_file {
        Some(path) => path.clone(),
        None => config.cert_dir.join("tokens.csv"),
    };
    let admin = if config.token_auth_file.is_some() {
        if !Path::new(&path).exists() {
            return Err(StartError::Config(format!(
                "--token-auth-file {}: no such file",
                path.display()
            )));
        }
        auth::ensure_admin_token(&path).unwrap_or_default()
    } else {
        auth::ensure_admin_token(&path)?
    };
    Ok((Tokens::load(&path)?, admin))
}

/// How long a client may take to finish its TLS handshake (Go's `net/http` default TLS
/// handshake timeout), so connections that never speak cannot hold the connection budget.
const TLS_HANDSHAKE: std::time::Duration = std::time::Duration::from_secs(10);

/// Accepts connections (TLS first when configured) and serves HTTP/1.1 or HTTP/2 on each,
/// within the process's connection budget.
async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    router: axum::Router,
) -> std::io::Result<()> {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut backoff = std::time::Duration::from_millis(5);
    loop {
        // Room for the connection first: past the process's bound, clients wait in the
        // listen queue rather than take the descriptors the store's files need.
        let permit = keel_process::connections::budget().admit().await;
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => {
                backoff = std::time::Duration::from_millis(5);
                accepted
            }
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(std::time::Duration::from_secs(1));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // Each request carries its connection's lane, which moves a connection of Events
        // only to the low-priority runtime.
        let lane = Lane::new();
        let home = lane.home();
        let service = TowerToHyperService::new(tower::util::MapRequest::new(router.clone(), {
            let lane = lane.clone();
            move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(lane.clone());
                req
            }
        }));
        let acceptor = acceptor.clone();
        let connection: Connection = Box::pin(async move {
            let mut builder = ConnectionBuilder::new(HomeExecutor(home));
            builder.http2().max_pending_accept_reset_streams(
                keel_process::connections::MAX_PENDING_ACCEPT_RESETS,
            );
            let result = match acceptor {
                Some(acceptor) => {
                    match tokio::time::timeout(TLS_HANDSHAKE, acceptor.accept(stream))
                        .await
                        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
                    {
                        Ok(tls) => {
                            builder
                                .serve_connection_with_upgrades(TokioIo::new(tls), service)
                                .await
                        }
                        Err(e) => {
                            tracing::debug!(error = %e, "TLS handshake failed");
                            return;
                        }
                    }
                }
                None => {
                    builder
                        .serve_connection_with_upgrades(TokioIo::new(stream), service)
                        .await
                }
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, "connection ended");
            }
            drop(permit);
        });
        tokio::spawn(lane.drive(connection));
    }
}
