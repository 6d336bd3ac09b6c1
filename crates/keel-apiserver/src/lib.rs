//! keel apiserver: a Kubernetes API server that keeps its objects in an etcd v3 store (keel
//! store or any real etcd cluster) exactly as kube-apiserver lays them out.
//!
//! It depends on the etcd v3 client stubs of `keel-proto` only, never on the store's own
//! crates: an embedded keel store is reached through the same client code as a remote etcd.
//!
//! - [`apimachinery`]: Go's and apimachinery's wording (quoting, value and float printing,
//!   times, name and label validation), used by every layer below.
//! - [`storage`]: the etcd3 layer (key layout, create/update/delete by Txn on mod_revision,
//!   paginated lists with continue tokens, resourceVersion rules, watches, and the one table of
//!   Kubernetes `Status` errors).
//! - [`registry`]: what each resource kind is (one file per kind behind one trait), and the
//!   generic store that runs every verb through it.
//! - [`fieldmanager`]: who set which field: `metadata.managedFields`, the typed walks and
//!   field sets they are made of, and server-side apply.
//! - [`http`]: routes, content negotiation, Tables, watch streaming, patches, TLS and tokens.
//! - [`controllers`]: the system namespaces and namespace deletion, through the registry.
//! - [`nesting`]: how deep a body or a stored value nests, checked before it is parsed.
//! - [`server`]: start-up ([`ApiServer`]), with [`config`] (kube-apiserver's flags) and
//!   [`metrics`] (kube-apiserver's metric names).

pub mod apiextensions;
pub mod apimachinery;
pub mod config;
pub mod controllers;
pub mod fieldmanager;
pub mod http;
pub mod json_pointer;
pub mod kubeconfig;
pub mod metrics;
pub mod nesting;
pub mod registry;
pub mod schema;
pub mod server;
pub mod storage;

pub use config::Config;
pub use server::{ApiServer, StartError};
