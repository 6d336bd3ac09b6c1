//! The etcd v3 gRPC services (one file each) and the HTTP endpoints; every etcd error string
//! they answer with comes from [`crate::error`].

pub mod auth;
pub mod cluster;
pub mod dispatch;
pub mod http;
pub mod kv;
pub mod lease;
pub mod maintenance;
pub mod require_leader;
pub mod watch;

use std::future::Future;

use tonic::{Response, Status};

use crate::error::{self, EtcdError};
use crate::metrics::GrpcLabels;
use crate::server::Store;

pub use dispatch::{Answer, Dispatch};

/// gRPC's own framing overhead allowed on top of `--max-request-bytes`, as etcd allows.
pub(crate) const GRPC_OVERHEAD_BYTES: usize = 512 * 1024;

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
