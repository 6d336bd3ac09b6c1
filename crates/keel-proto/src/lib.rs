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

/// The range end that selects every key starting with `prefix` (etcd's
/// `clientv3.GetPrefixRangeEnd`): the prefix with its last byte below 0xff incremented and
/// what follows dropped; `[0]` (to the end of the key space) when there is none.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    #[test]
    fn prefix_end_is_the_first_key_after_the_prefix() {
        assert_eq!(super::prefix_end(b"foo"), b"fop");
        assert_eq!(super::prefix_end(b"a\xff"), b"b");
        assert_eq!(super::prefix_end(b"\xff\xff"), vec![0]);
        assert_eq!(super::prefix_end(b""), vec![0]);
    }
}
