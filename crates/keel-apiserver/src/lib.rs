//! keel apiserver: a Kubernetes API server that keeps its objects in an etcd v3 store (keel
//! store or any real etcd cluster) exactly as kube-apiserver lays them out.
//!
//! It depends on the etcd v3 client stubs of `keel-proto` only, never on the store's own
//! crates: an embedded keel store is reached through the same client code as a remote etcd.
//!
//! - [`storage`]: the etcd3 layer (key layout, create/update/delete by Txn on mod_revision,
//!   paginated lists with continue tokens, resourceVersion rules, watches, and the one table of
//!   Kubernetes `Status` errors).
//! - [`registry`]: what each resource kind is; so far the name rules every kind shares.

pub mod registry;
pub mod storage;
