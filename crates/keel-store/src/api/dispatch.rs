//! [`Dispatch`]: the one service behind a client port. A gRPC call goes straight to its
//! service by the first part of its path; anything else (`/health`, `/version`, `/metrics`,
//! HTTP/1.1 or not) goes to the HTTP router.
//!
//! A generic router (tonic's `Routes`, an axum `Router` with middleware) wraps every call's
//! body, response and future in several boxed layers; on the write path that costs more CPU
//! than the store's own work on a request. Here a call costs one match on its path and the
//! service's own boxed future.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Request, Response};
use hyper::body::Incoming;
use keel_proto::encoded::watch_server::WatchServer;
use keel_proto::etcdserverpb::{
    auth_server::AuthServer, cluster_server::ClusterServer, kv_server::KvServer,
    lease_server::LeaseServer, maintenance_server::MaintenanceServer,
};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::Service;

use super::{
    GRPC_OVERHEAD_BYTES, auth, cluster, http as http_routes, kv, lease, maintenance, watch,
};
use crate::error::EtcdError;
use crate::server::Store;

/// What a call answers: a response once the service has one.
pub type Answer = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

/// The gRPC methods a learner serves, as etcd's interceptors allow (a Range only when
/// serializable, which [`kv`] checks).
const LEARNER_METHODS: [&str; 3] = [
    "/etcdserverpb.Maintenance/Status",
    "/etcdserverpb.Maintenance/Snapshot",
    "/etcdserverpb.KV/Range",
];

/// Every etcd v3 gRPC service and the HTTP endpoints of one store, behind one service.
#[derive(Clone)]
pub struct Dispatch {
    store: Arc<Store>,
    kv: KvServer<kv::KvService>,
    watch: WatchServer<watch::WatchService>,
    lease: LeaseServer<lease::LeaseService>,
    cluster: ClusterServer<cluster::ClusterService>,
    maintenance: MaintenanceServer<maintenance::MaintenanceService>,
    auth: AuthServer<auth::AuthService>,
    http: axum::Router,
}

impl Dispatch {
    /// The services of `store`; requests larger than `--max-request-bytes` (plus gRPC's
    /// framing) are refused as etcd refuses them.
    pub fn new(store: Arc<Store>) -> Dispatch {
        let limit = store.config().max_request_bytes as usize + GRPC_OVERHEAD_BYTES;
        Dispatch {
            kv: KvServer::new(kv::KvService::new(store.clone()))
                .max_decoding_message_size(limit)
                .max_encoding_message_size(usize::MAX),
            watch: WatchServer::new(watch::WatchService::new(store.clone()))
                .max_decoding_message_size(limit)
                .max_encoding_message_size(usize::MAX),
            lease: LeaseServer::new(lease::LeaseService::new(store.clone()))
                .max_decoding_message_size(limit),
            cluster: ClusterServer::new(cluster::ClusterService::new(store.clone()))
                .max_decoding_message_size(limit),
            maintenance: MaintenanceServer::new(maintenance::MaintenanceService::new(
                store.clone(),
            ))
            .max_decoding_message_size(limit)
            .max_encoding_message_size(usize::MAX),
            auth: AuthServer::new(auth::AuthService::new(store.clone()))
                .max_decoding_message_size(limit),
            http: http_routes::router(store.clone()),
            store,
        }
    }

    /// Answers one gRPC call (`service` is the first part of its path).
    fn grpc<B>(&self, service: &str, req: Request<B>) -> Answer
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
    {
        const SERVICES: [&str; 6] = [
            "etcdserverpb.KV",
            "etcdserverpb.Watch",
            "etcdserverpb.Lease",
            "etcdserverpb.Cluster",
            "etcdserverpb.Maintenance",
            "etcdserverpb.Auth",
        ];
        if !SERVICES.contains(&service) {
            // grpc-go's answer for a service it does not know (before any interceptor).
            return refuse(Status::unimplemented(format!("unknown service {service}")));
        }
        if self.store.is_learner() && !LEARNER_METHODS.contains(&req.uri().path()) {
            return refuse(Status::from(EtcdError::NotSupportedForLearner));
        }
        let timeout = grpc_timeout(req.headers());
        let answer = match service {
            "etcdserverpb.KV" => self.kv.clone().call(req),
            "etcdserverpb.Watch" => self.watch.clone().call(req),
            "etcdserverpb.Lease" => self.lease.clone().call(req),
            "etcdserverpb.Cluster" => self.cluster.clone().call(req),
            "etcdserverpb.Maintenance" => self.maintenance.clone().call(req),
            _ => self.auth.clone().call(req),
        };
        match timeout {
            None => answer,
            // The client's deadline (`grpc-timeout`), as grpc-go's server enforces it.
            Some(within) => Box::pin(async move {
                match tokio::time::timeout(within, answer).await {
                    Ok(answered) => answered,
                    Err(_) => {
                        Ok(Status::deadline_exceeded("context deadline exceeded").into_http())
                    }
                }
            }),
        }
    }
}

impl Dispatch {
    /// Answers one request, whatever carried it (a client connection or the process
    /// itself, see [`crate::serve::InProcess`]).
    pub fn answer<B>(&self, req: Request<B>) -> Answer
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
    {
        if is_grpc(req.headers()) {
            let path = req.uri().path();
            let service = path
                .strip_prefix('/')
                .and_then(|p| p.split_once('/'))
                .map(|(service, _)| service.to_owned());
            if let Some(service) = service {
                return self.grpc(&service, req);
            }
        }
        let http = self.http.clone();
        Box::pin(async move {
            let response = route_http(http, req.map(axum::body::Body::new)).await;
            Ok(response.map(Body::new))
        })
    }
}

impl hyper::service::Service<Request<Incoming>> for Dispatch {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, req: Request<Incoming>) -> Answer {
        self.answer(req)
    }
}

/// Runs one HTTP request through the router (which is always ready).
async fn route_http(
    mut router: axum::Router,
    req: Request<axum::body::Body>,
) -> axum::response::Response {
    match router.call(req).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// Answers with `status` at once.
fn refuse(status: Status) -> Answer {
    Box::pin(std::future::ready(Ok(status.into_http())))
}

/// Whether the request is a gRPC call (`content-type: application/grpc[+proto|;...]`).
fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// The deadline a gRPC client sent (`grpc-timeout`: at most 8 digits and a unit, H, M, S,
/// m, u or n), if any and well formed.
fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at_checked(value.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout_of(value: &str) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-timeout", value.parse().unwrap());
        grpc_timeout(&headers)
    }

    #[test]
    fn grpc_timeouts_parse_as_grpc_defines_them() {
        assert_eq!(timeout_of("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(timeout_of("3M"), Some(Duration::from_secs(180)));
        assert_eq!(timeout_of("5S"), Some(Duration::from_secs(5)));
        assert_eq!(timeout_of("4999m"), Some(Duration::from_millis(4999)));
        assert_eq!(timeout_of("7u"), Some(Duration::from_micros(7)));
        assert_eq!(
            timeout_of("99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        for bad in ["", "S", "123456789S", "5s", "-5S", "5 S", "5"] {
            assert_eq!(timeout_of(bad), None, "{bad:?}");
        }
    }
}
