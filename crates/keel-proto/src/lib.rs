//! The etcd v3 API: messages and gRPC stubs generated from `proto/etcd/api`.
//!
//! The `.proto` files carry etcd's exact package, service, message and field names and numbers,
//! so any etcd v3 client can talk to a server built on these stubs, and our own clients can talk
//! to any etcd.

#![allow(missing_docs, clippy::all)]

/// The `mvccpb` package: `KeyValue` and `Event`.
pub mod mvccpb {
    tonic::include_proto!("mvccpb");
}

/// The `authpb` package: users, roles and permissions.
pub mod authpb {
    tonic::include_proto!("authpb");
}

/// The `etcdserverpb` package: the KV, Watch, Lease, Cluster, Maintenance and Auth services.
pub mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
}

pub mod encoded;
