//! keel store: an etcd-compatible, Raft-replicated MVCC key-value store.
//!
//! Layout by axis: [`raft`] (consensus and its log on `keel-wal`), the MVCC axis in the
//! `keel-mvcc` crate, [`api`] (one module per etcd gRPC service, plus HTTP and the error
//! table), [`server`] (request -> proposal -> apply -> response), [`config`] (etcd's flags),
//! [`metrics`] (etcd's metric names), [`lease`] (the lessor: grants, keepalives, expiry and
//! remaining TTLs that survive restarts), [`auth`] (users and roles), [`compactor`] (auto
//! compaction) and [`exchange`] (snapshots in etcd's format: export, restore, rewrite).
//!
//! Embed a store with [`StoreHandle::start`].

pub mod api;
pub mod auth;
pub mod coalesce;
pub mod compactor;
pub mod config;
pub mod data_dir;
pub mod error;
pub mod exchange;
pub mod identity;
pub mod lease;
pub mod metrics;
pub mod raft;
pub mod serve;
pub mod server;
pub mod slow_log;
pub mod watch;

pub use config::Config;
pub use serve::{InProcess, StoreHandle};
pub use server::{StartError, Store};
