//! The etcd v3 API: messages and gRPC stubs generated from `proto/etcd/api`.
//!
//! The `.proto` files carry etcd's exact package, service, message and field names and numbers,
//! so any etcd v3 client can talk to a server built on these stubs, and our own clients can talk
//! to any etcd. Beside them, [`encoded`]: the Watch server stub whose responses are sent
//! pre-encoded.

/// The `mvccpb` package: `KeyValue` and `Event`.
#[allow(missing_docs, clippy::all)]
pub mod mvccpb {
    tonic::include_proto!("mvccpb");
}

/// The `authpb` package: users, roles and permissions.
#[allow(missing_docs, clippy::all)]
pub mod authpb {
    tonic::include_proto!("authpb");
}

/// The `keelraftpb` package: Raft messages between the members of a keel store cluster.
#[allow(missing_docs, clippy::all)]
pub mod raftpb {
    tonic::include_proto!("keelraftpb");
}

/// The `etcdserverpb` package: the KV, Watch, Lease, Cluster, Maintenance and Auth services.
#[allow(missing_docs, clippy::all)]
pub mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
}

pub mod encoded;
