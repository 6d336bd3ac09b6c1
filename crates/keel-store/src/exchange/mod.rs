//! Snapshots in etcd's format: keel store's backend stays its own (redb, see `keel-mvcc`),
//! and the bbolt database etcd 3.5 keeps and snapshots is the exchange format.
//!
//! - [`export`]: the backend as of one [`keel_mvcc::BackendView`] as an etcd database, what
//!   the Maintenance Snapshot RPC streams (followed by its sha256, see `api::maintenance`),
//!   so `etcdctl snapshot save` gives a file that `etcdutl snapshot status` reads and
//!   `etcdutl snapshot restore` turns into a data directory a real etcd serves.
//!
//! `schema` holds etcd's bucket and key names and value encodings.

mod error;
mod export;
mod schema;

pub use error::ExportError;
pub use export::{Exported, export};
