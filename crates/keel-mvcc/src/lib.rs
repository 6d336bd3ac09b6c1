//! keel's multi-version key-value store: etcd 3.5's revision semantics on a redb backend.
//!
//! A synchronous core; its only thread of its own is the compactor, which removes what a
//! Compact made unreadable in small steps (`compaction`). The Raft state machine opens one
//! [`ApplyBatch`] per batch of applied log entries, applies Put / DeleteRange / Txn / Compact
//! requests to it (the etcd protobuf types from `keel-proto`) and commits it together with the
//! Raft index of the batch; the gRPC layer calls [`Mvcc::range`] for reads.
//!
//! # Layout
//!
//! - `revision`: etcd's `(main, sub)` revisions and their backend key encoding.
//! - `index`: the in-memory key index (key -> generations of revisions), like etcd's `keyIndex`.
//! - `backend`: the redb tables (`key` in etcd's exact layout, `meta`, `app_meta`) and restore.
//! - `range`: range resolution and response shaping; `gosort`: Go's unstable sort, as etcd uses.
//! - `txn`: txn compares; `apply`: [`ApplyBatch`]; `store`: [`Mvcc`]; `hash`: HashKV / Hash.
//! - `compaction`: the incremental compaction (index walk and backend removals in batches).
//! - `snapshot`: streaming a [`BackendView`] to a [`SnapshotWriter`] and swapping the written
//!   file in with [`Mvcc::replace_with`] (Raft snapshots).
//! - `view`: a [`BackendView`] read row by row and a [`SnapshotWriter`] given its revisions,
//!   for converting a backend to and from another format.
//!
//! # Locking and ordering: why a reader never sees a revision it cannot read
//!
//! Shared state: `state` (an `RwLock` over the key index, the published current and compact
//! revisions, the compaction under way and `applied_index`), `db` (an `RwLock` over the redb
//! handle, taken for writing only by defragmentation and [`Mvcc::replace_with`]) and `writer`
//! (a mutex making batches exclusive). `replace_with` swaps the handle and the whole `state`
//! under all three; a read that keeps its redb snapshot after releasing `db` holds a clone of
//! the handle's `Arc`, since closing a redb handle ends its read transactions. Lock order:
//! `writer`, then `db`, then `state`; nobody waits for redb's write transaction while holding
//! `state`.
//!
//! 1. A batch adds its revisions to the key index as it goes, always above the published
//!    current revision. Index lookups take a read revision and never return anything newer,
//!    so readers (which read at or below the published revision) cannot observe them. Values
//!    of the batch are staged in memory, not in redb.
//! 2. `commit` writes the staged values, the compact revision and the metadata in one redb
//!    write transaction. If the batch compacts, the new compact revision is published *before*
//!    the redb commit, so from then on no reader resolves a revision that compaction removes.
//! 3. Only after the redb commit returns does `commit` take the index write lock to publish the
//!    new current revision and `applied_index`, and hand the compaction to the compactor.
//! 4. The compactor compacts the index a few keys per hold of the index write lock, then scans
//!    redb in revision order and removes the revisions the index dropped, in transactions of
//!    its own, only for compactions whose batch committed (3). It removes only revisions that no read at or above the compact
//!    revision resolves, so compacted and not yet compacted keys answer such reads alike
//!    (the argument is in `compaction`).
//! 5. A reader takes the index read lock, checks its revision against the published current and
//!    compact revisions, resolves the backend revisions it needs and opens a redb read snapshot
//!    *while still holding the lock*, then releases it and reads values from the snapshot.
//!    Every revision it resolved was published after its redb commit (3), so the snapshot holds
//!    it; any removal of it by compaction commits only after the compact revision moved past it
//!    (2, 4), i.e. after the snapshot was taken, and snapshots are immutable.
//!
//! Readers therefore hold the index lock only while walking the index; a batch holds the index
//! write lock only per changed key and for the O(1) publication, and the compactor per chunk
//! of keys (as etcd's `treeIndex.Compact` takes it per key).
//!
//! # Durability
//!
//! Batches commit with `Durability::None`; [`Mvcc::sync`] makes everything durable. After a
//! crash redb rolls back to the last durable commit, which holds the key table, the revisions
//! and `applied_index` of that same commit, so the caller replays its log from `applied_index`.
//! A compaction cut short by a crash is finished after the next open (`compaction`).

mod apply;
mod backend;
mod compaction;
mod error;
mod gosort;
mod hash;
mod history;
mod in_use;
mod index;
mod range;
mod revision;
mod snapshot;
mod store;
mod txn;
mod view;

pub use apply::ApplyBatch;
pub use backend::BackendRevisions;
pub use compaction::{CompactionStep, INDEX_CHUNK_KEYS};
pub use error::MvccError;
pub use hash::HashKv;
pub use history::{History, HistoryRequest};
pub use revision::{MARKED_REV_BYTES_LEN, REV_BYTES_LEN, Rev, RevKey, is_tombstone_key};
pub use snapshot::{
    BackendView, SNAPSHOT_ROW_OVERHEAD, SnapshotChunk, SnapshotCursor, SnapshotRow, SnapshotTable,
    SnapshotWriter,
};
pub use store::{Mvcc, MvccOptions};
pub use txn::{is_txn_readonly, is_txn_serializable};
