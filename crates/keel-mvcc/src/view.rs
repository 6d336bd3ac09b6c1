//! A [`BackendView`] read by what it holds rather than in snapshot chunks, and a
//! [`SnapshotWriter`] given the revisions of a backend built from elsewhere: what converting
//! a backend to and from another format (etcd's snapshot file) needs.
//!
//! The `key` table is etcd's `key` bucket byte for byte (see `revision`), so a converter
//! copies rows; the revisions the `meta` table records are read and written as
//! [`BackendRevisions`], so their encoding stays in `backend`.

use redb::ReadableTable;

use crate::backend::META_FINISHED_COMPACT_REV;
use crate::backend::{self, BackendRevisions, KEY, META, META_COMPACT_REV, META_CURRENT_REV};
use crate::error::MvccError;
use crate::snapshot::{BackendView, SnapshotWriter};

impl BackendView {
    /// The revisions the view's backend records (see [`BackendRevisions`]).
    pub fn revisions(&self) -> Result<BackendRevisions, MvccError> {
        backend::revisions(&self.txn)
    }

    /// Every value stored by `ApplyBatch::set_meta` under a name starting with `prefix`, in
    /// name order, as of the view (like [`crate::Mvcc::meta_with_prefix`]).
    pub fn meta_with_prefix(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, MvccError> {
        backend::app_meta_with_prefix(&self.txn, prefix)
    }

    /// Calls `f` with every row of the `key` table in revision order: the encoded revision
    /// (with its tombstone mark) and the encoded `mvccpb.KeyValue`. Stops at the first error.
    pub fn for_each_key<E: From<MvccError>>(
        &self,
        mut f: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let table = self.txn.open_table(KEY).map_err(MvccError::from)?;
        for entry in table.iter().map_err(MvccError::from)? {
            let (k, v) = entry.map_err(MvccError::from)?;
            f(k.value(), v.value())?;
        }
        Ok(())
    }
}

impl SnapshotWriter {
    /// Records `revisions` as the backend's (overwriting any a `meta` row set), for a
    /// backend whose rows came from elsewhere. A `finished_compact` below `compact` makes
    /// the store finish that compaction after it opens the file.
    pub fn set_revisions(&mut self, revisions: BackendRevisions) -> Result<(), MvccError> {
        let mut meta = self.txn.open_table(META)?;
        let BackendRevisions {
            current,
            compact,
            finished_compact,
        } = revisions;
        meta.insert(META_CURRENT_REV, current.to_be_bytes().as_slice())?;
        meta.insert(META_COMPACT_REV, compact.to_be_bytes().as_slice())?;
        let finished = finished_compact.min(compact);
        meta.insert(META_FINISHED_COMPACT_REV, finished.to_be_bytes().as_slice())?;
        Ok(())
    }
}
