//! Serving a store: its clients on `--listen-client-urls` ([`StoreHandle`]: gRPC and, on the
//! same ports, HTTP/1.1 for `/health`, `/version` and `/metrics`), its peers on
//! `--listen-peer-urls`, and the process's life until a signal or the member's removal.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder as ConnectionBuilder;
use keel_process::faults::Outcome;
use keel_proto::raftpb::peer_server::PeerServer;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tonic::transport::server::TcpIncoming;

use crate::api::Dispatch;
use crate::coalesce::Coalesced;
use crate::config::Config;
use crate::raft::membership;
use crate::raft::peer_service::PeerService;
use crate::server::{FAILURE_GRACE, StartError, Store};

/// A running store serving clients.
pub struct StoreHandle {
    store: Arc<Store>,
    addrs: Vec<SocketAddr>,
    tasks: JoinSet<std::io::Result<()>>,
    in_process: InProcess,
}

impl StoreHandle {
    /// Opens the store and serves gRPC and HTTP on every `--listen-client-urls` address.
    ///
    /// The flags are checked before the client ports are bound (and again by
    /// [`Store::open`], which embedders call directly), so a bad flag is reported as such
    /// even when a port is taken.
    pub async fn start(config: Config) -> Result<StoreHandle, StartError> {
        config.validate()?;
        keel_process::faults::process()
            .serve(keel_process::faults::Component::Store, Some(&config.name));
        let listeners = bind(config.client_listen_addrs()?).await?;
        let store = Store::open(config).await?;
        // A lease storm: on the leader, that many leases expire now; a follower says where.
        let storming = Arc::downgrade(&store);
        keel_process::faults::process().on_set(
            keel_process::faults::Fault::LeaseExpireStorm,
            Box::new(move |count| {
                let store = storming.upgrade()?;
                let name = &store.config().name;
                let expired = store
                    .lessor_at(|l, now| l.is_primary().then(|| l.expire_now(count as usize, now)));
                Some(match expired {
                    Some(expired) => {
                        tracing::warn!(expired, "lease expiry storm: leases expire now");
                        Outcome::Acted(format!("{expired} leases expired on {name}"))
                    }
                    None => Outcome::NotHere(format!(
                        "{name} is not the leader; the leader expires leases: \
                         set it on the leader, or on every member"
                    )),
                })
            }),
        );
        let dispatch = Dispatch::new(store.clone());
        let mut tasks = JoinSet::new();
        let mut addrs = Vec::new();
        let connections = connection_builder(store.config().max_concurrent_streams);
        for listener in listeners {
            let addr = listener.local_addr().map_err(|source| StartError::Listen {
                addr: SocketAddr::from(([0, 0, 0, 0], 0)),
                source,
            })?;
            addrs.push(addr);
            tasks.spawn(serve_clients(
                listener,
                dispatch.clone(),
                connections.clone(),
            ));
        }
        tokio::spawn(crate::compactor::run(store.clone()));
        tracing::info!(
            name = %store.config().name,
            member_id = %format!("{:x}", store.member_id()),
            addresses = ?addrs,
            "ready to serve client requests"
        );
        Ok(StoreHandle {
            store,
            addrs,
            tasks,
            in_process: InProcess { dispatch },
        })
    }

    /// This store as a gRPC service that never leaves the process, for an embedder (`keel
    /// up`'s apiserver) to put its gRPC clients on: the same service as a client port
    /// answers, called directly (see [`InProcess`]), so the embedder's clients talk to it
    /// exactly as to a remote etcd, without HTTP/2 or a connection in between.
    pub fn in_process(&self) -> InProcess {
        self.in_process.clone()
    }

    /// The store behind this handle.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The addresses clients can reach.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Serves until the process receives Ctrl-C / SIGTERM, the member is
    /// removed from the cluster (then, as etcd, it serves one more second, so the answer to
    /// its own removal goes out, and stops without error), or its storage fails (then it
    /// stops with an error after a second (`FAILURE_GRACE`), so the process exits non-zero and a
    /// supervisor can restart it, as etcd exits on a failed WAL write).
    pub async fn wait(mut self) -> std::io::Result<()> {
        let result = tokio::select! {
            Some(done) = self.tasks.join_next() => done.map_err(std::io::Error::other).and_then(|r| r),
            _ = shutdown_signal() => Ok(()),
            reason = self.store.failed() => {
                tokio::time::sleep(FAILURE_GRACE).await;
                Err(std::io::Error::other(format!("stopped after a storage failure: {reason}")))
            }
            _ = self.store.removed() => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                tracing::warn!(
                    data_dir = %self.store.config().data_dir().display(),
                    "{}; the data directory used by this member must be removed",
                    membership::REMOVED
                );
                Ok(())
            }
        };
        self.store.shutdown().await;
        result
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// The HTTP/2 flow-control window of every client connection and stream.
const CONNECTION_WINDOW: u32 = 1 << 20;

/// How client connections are served: HTTP/1.1 (for `/health`, `/version` and `/metrics`)
/// and HTTP/2 (gRPC) on the same port, with at most `max_streams` concurrent streams per
/// connection (`--max-concurrent-streams`; 0 or 2^32-1 set no limit).
fn connection_builder(max_streams: u32) -> ConnectionBuilder<TokioExecutor> {
    let mut builder = ConnectionBuilder::new(TokioExecutor::new());
    builder
        .http2()
        .timer(TokioTimer::new())
        // Fixed 1 MiB windows (hyper's defaults), not the adaptive ones that start at 64 KiB:
        // h2 ends a connection (GOAWAY ENHANCE_YOUR_CALM "too_many_data_frames") once the
        // small DATA frames it holds for the service weigh more than half the connection
        // window, and a burst of small requests on an apiserver's one connection (1,000
        // watches opened at once, or a Range for each) is past 32 KiB but well within 512 KiB.
        .initial_connection_window_size(CONNECTION_WINDOW)
        .initial_stream_window_size(CONNECTION_WINDOW)
        // As etcd's gRPC server: streams an apiserver cancels before they are taken up never
        // end the connection (see `keel_process::connections::MAX_PENDING_ACCEPT_RESETS`).
        .max_pending_accept_reset_streams(usize::MAX)
        .max_concurrent_streams(Some(max_streams).filter(|&n| n != 0 && n != u32::MAX));
    // hyper enforces its HTTP/1.1 header read timeout only with a timer.
    builder.http1().timer(TokioTimer::new());
    builder
}

/// Accepts client connections on `listener` and serves each in its own task with
/// `dispatch`, for as long as the process runs, within the process's connection budget.
async fn serve_clients(
    listener: TcpListener,
    dispatch: Dispatch,
    connections: ConnectionBuilder<TokioExecutor>,
) -> std::io::Result<()> {
    let mut backoff = Duration::ZERO;
    loop {
        // Room for the connection first: past the process's bound, clients wait in the
        // listen queue rather than take the descriptors the WAL and backend need.
        let permit = keel_process::connections::budget().admit().await;
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            // The peer went away before it was accepted: nothing to serve.
            Err(e) if is_connection_error(&e) => continue,
            // Out of file descriptors or memory: wait for some to be freed, longer each time
            // (5 ms to 1 s, as Go's server waits), saying so once per failing stretch.
            Err(e) => {
                if backoff.is_zero() {
                    tracing::warn!(error = %e, "accepting a client connection failed; retrying");
                }
                backoff = (backoff * 2).clamp(Duration::from_millis(5), Duration::from_secs(1));
                tokio::time::sleep(backoff).await;
                continue;
            }
        };
        backoff = Duration::ZERO;
        let _ = tcp.set_nodelay(true);
        let io = TokioIo::new(Coalesced::new(tcp));
        let connections = connections.clone();
        // The client's address goes with each request (`/debug/faults` serves loopback only).
        let dispatch = dispatch.clone();
        let service = hyper::service::service_fn(move |mut req: http::Request<Incoming>| {
            req.extensions_mut()
                .insert(axum::extract::connect_info::ConnectInfo(peer));
            dispatch.answer(req)
        });
        tokio::spawn(async move {
            if let Err(e) = connections.serve_connection(io, service).await {
                tracing::debug!(error = %e, "client connection ended with an error");
            }
            drop(permit);
        });
    }
}

/// The store served in memory (see [`StoreHandle::in_process`]): each request is handed
/// to the client port's own [`Dispatch`] as it is, with no connection, framing or task
/// between the caller and the service; bodies, streams and trailers pass as they are.
#[derive(Clone)]
pub struct InProcess {
    dispatch: Dispatch,
}

impl tower::Service<http::Request<tonic::body::Body>> for InProcess {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = crate::api::Answer;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        self.dispatch.answer(req)
    }
}

/// Errors of one connection being accepted, not of the listener.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// Binds a listener on each of `addrs`, in order; fails on the first that cannot be bound.
pub(crate) async fn bind(addrs: Vec<SocketAddr>) -> Result<Vec<TcpListener>, StartError> {
    let mut listeners = Vec::with_capacity(addrs.len());
    for addr in addrs {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Listen { addr, source })?;
        listeners.push(listener);
    }
    Ok(listeners)
}

/// Serves the Raft peer service on every `--listen-peer-urls` listener, refusing messages
/// larger than `max_message_bytes`.
pub(crate) async fn serve_peers(
    listeners: Vec<TcpListener>,
    max_message_bytes: usize,
    service: PeerService,
) {
    let service = PeerServer::new(service)
        .max_decoding_message_size(max_message_bytes)
        .max_encoding_message_size(usize::MAX);
    let mut servers = JoinSet::new();
    for listener in listeners {
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        let server = tonic::transport::Server::builder().add_service(service.clone());
        servers.spawn(async move {
            if let Err(e) = server.serve_with_incoming(incoming).await {
                tracing::error!(error = %e, "serving peers failed");
            }
        });
    }
    while servers.join_next().await.is_some() {}
}
