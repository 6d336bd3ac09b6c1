//! [`StoreChannel`]: what the apiserver's gRPC clients (KV, Watch, Lease, Maintenance,
//! Cluster) are put on. Every store is reached through one, so the storage code is the same
//! for every store: a connection to remote etcd members ([`StoreChannel::new`] over a tonic
//! `Channel`), or a store embedded in the process (`keel up`), called directly.

use std::task::{Context, Poll};

use tonic::body::Body;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Service, ServiceExt};

/// A gRPC transport to a store; cheap to clone.
#[derive(Clone)]
pub struct StoreChannel(BoxCloneSyncService<http::Request<Body>, http::Response<Body>, BoxError>);

impl StoreChannel {
    /// A channel over `service`: a tonic `Channel`, or a store's own service.
    pub fn new<S>(service: S) -> StoreChannel
    where
        S: Service<http::Request<Body>, Response = http::Response<Body>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
    {
        StoreChannel(BoxCloneSyncService::new(service.map_err(Into::into)))
    }
}

impl From<tonic::transport::Channel> for StoreChannel {
    fn from(channel: tonic::transport::Channel) -> StoreChannel {
        StoreChannel::new(channel)
    }
}

impl std::fmt::Debug for StoreChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreChannel")
    }
}

impl Service<http::Request<Body>> for StoreChannel {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future =
        <BoxCloneSyncService<http::Request<Body>, http::Response<Body>, BoxError> as Service<
            http::Request<Body>,
        >>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        self.0.call(req)
    }
}
