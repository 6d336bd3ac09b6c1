//! The etcd v3 gRPC services (one file each) and the HTTP endpoints; every etcd error string
//! they answer with comes from [`crate::error`].

pub mod auth;
pub mod cluster;
pub mod http;
pub mod kv;
pub mod lease;
pub mod maintenance;
pub mod require_leader;
pub mod watch;

use std::future::Future;
use std::sync::Arc;

use keel_proto::etcdserverpb::{
    auth_server::AuthServer, cluster_server::ClusterServer, kv_server::KvServer,
    maintenance_server::MaintenanceServer,
};
use tonic::{Response, Status};

use crate::error::{self, EtcdError};
use crate::metrics::GrpcLabels;
use crate::server::Store;

/// gRPC's own framing overhead allowed on top of `--max-request-bytes`, as etcd allows.
pub(crate) const GRPC_OVERHEAD_BYTES: usize = 512 * 1024;

/// One router serving every gRPC service and the HTTP endpoints on the same port.
pub fn router(store: Arc<Store>) -> axum::Router {
    let limit = store.config().max_request_bytes as usize + GRPC_OVERHEAD_BYTES;
    let grpc = tonic::service::Routes::new(
        KvServer::new(kv::KvService::new(store.clone()))
            .max_decoding_message_size(limit)
            .max_encoding_message_size(usize::MAX),
    )
    .add_service(
        MaintenanceServer::new(maintenance::MaintenanceService::new(store.clone()))
            .max_decoding_message_size(limit)
            .max_encoding_message_size(usize::MAX),
    )
    .add_service(
        ClusterServer::new(cluster::ClusterService::new(store.clone()))
            .max_decoding_message_size(limit),
    )
    .add_service(
        keel_proto::encoded::watch_server::WatchServer::new(watch::WatchService::new(
            store.clone(),
        ))
        .max_decoding_message_size(limit)
        .max_encoding_message_size(usize::MAX),
    )
    .add_service(
        AuthServer::new(auth::AuthService::new(store.clone())).max_decoding_message_size(limit),
    )
    .add_service(
        keel_proto::etcdserverpb::lease_server::LeaseServer::new(lease::LeaseService::new(
            store.clone(),
        ))
        .max_decoding_message_size(limit),
    );
    let gate = store.clone();
    grpc.into_axum_router()
        .layer(axum::middleware::from_fn(move |req, next| {
            learner_gate(gate.clone(), req, next)
        }))
        .merge(http::router(store))
}

/// The gRPC methods a learner serves, as etcd's interceptors allow (a Range only when
/// serializable, which [`kv`] checks).
const LEARNER_METHODS: [&str; 3] = [
    "/etcdserverpb.Maintenance/Status",
    "/etcdserverpb.Maintenance/Snapshot",
    "/etcdserverpb.KV/Range",
];

/// Refuses, on a learner, every gRPC method etcd's learners refuse.
async fn learner_gate(
    store: Arc<Store>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if store.is_learner() && !LEARNER_METHODS.contains(&req.uri().path()) {
        let (parts, body) = Status::from(EtcdError::NotSupportedForLearner)
            .into_http::<tonic::body::Body>()
            .into_parts();
        return axum::response::Response::from_parts(parts, axum::body::Body::new(body));
    }
    next.run(req).await
}

/// Runs one unary call: counts it in `grpc_server_handled_total` and turns its error into
/// etcd's status.
pub async fn unary<T>(
    store: &Store,
    service: &'static str,
    method: &'static str,
    call: impl Future<Output = Result<T, EtcdError>>,
) -> Result<Response<T>, Status> {
    let result = call.await.map_err(Status::from);
    let code = result
        .as_ref()
        .map_or_else(|s| s.code(), |_| tonic::Code::Ok);
    let labels = GrpcLabels {
        grpc_type: "unary",
        grpc_service: service,
        grpc_method: method,
        grpc_code: error::code_name(code),
    };
    store.metrics().grpc_handled.get_or_create(&labels).inc();
    result.map(Response::new)
}
