//! Snapshots in etcd's format, both ways: keel store's backend stays its own (redb, see
//! `keel-mvcc`), and the bbolt database etcd 3.5 keeps and snapshots is the exchange format.
//!
//! - [`export`]: the backend as of one [`keel_mvcc::BackendView`] as an etcd database, what
//!   the Maintenance Snapshot RPC streams (followed by its sha256, see `api::maintenance`),
//!   so `etcdctl snapshot save` gives a file that `etcdutl snapshot status` reads and
//!   `etcdutl snapshot restore` turns into a data directory a real etcd serves.
//! - [`restore`]: a new keel store data directory from an etcd snapshot file (saved from a
//!   real etcd or from keel), with etcdutl's options and etcd 3.6's revision bump.
//! - [`rewrite`]: an etcd snapshot to an etcd snapshot with its revisions bumped and
//!   compaction marked, in a form etcd 3.5.1's restore serves right.
//!
//! `schema` holds etcd's bucket and key names and value encodings; `sealed` the trailing
//! sha256; `source` opens and reads an etcd database, `import` writes it as a keel backend
//! file.
//!
//! # Bumped revisions
//!
//! A restore from a backup goes back in time: clients that watched or cached at revisions
//! newer than the backup must not be served those revisions again with other contents.
//! etcd 3.6 restores with `--bump-revision N --mark-compacted`: the store's revision jumps
//! `N` past the snapshot's latest and every revision up to the new one counts as compacted,
//! so a read or watch at an older revision answers `mvcc: required revision has been
//! compacted` and clients relist. The snapshot's latest revision is the one etcd serves it
//! at: its last `key` row's, or a newer compaction's.
//!
//! etcd 3.6 records the bump as an empty-value `key` row at the new revision plus a
//! `scheduledCompactRev`. etcd 3.5.1 reads that row as a key with an empty name (its index
//! keeps it for good) and takes its revision only from the last row and
//! `finishedCompactRev`, so [`rewrite`] writes the bump as the compaction alone:
//! `scheduledCompactRev` and `finishedCompactRev` both at the new revision, which both
//! etcd 3.5.1 and 3.6 take as their revision and compaction point, with no row added. The
//! superseded rows stay in the file until the next compaction removes them, and
//! `etcdutl snapshot status`, which reports the last row's revision, shows the revision
//! from before the bump. A restore into
//! keel writes the same revisions into its backend and leaves the compaction for the store
//! to finish after it opens; rows of an empty key (etcd 3.6's mark) are not keys and are
//! left out.

mod error;
mod export;
mod import;
mod restore;
mod rewrite;
mod schema;
mod sealed;
mod source;

pub use error::{ExportError, RestoreError};
pub use export::{Exported, export};
pub use restore::{RestoreOptions, Restored, restore};
pub use rewrite::{Rewritten, rewrite};
pub use sealed::sealed_hash;
pub use source::revision;

#[cfg(test)]
mod tests;
