//! Backend snapshots for Raft: streaming a consistent copy of the backend and swapping one in.
//!
//! The leader takes a [`BackendView`] ([`Mvcc::view`]), a point-in-time redb read snapshot,
//! and reads it in [`SnapshotChunk`]s with [`BackendView::next_chunk`]. A chunk is plain data:
//! rows of `(table id, key, value)` from the tables `key`, `meta` and `app_meta`, in that
//! order and in key order within a table. The follower writes the chunks into a fresh file
//! with a [`SnapshotWriter`] and swaps that file in with [`Mvcc::replace_with`].
//!
//! A view keeps its backend open (an `Arc` of the redb handle): it stays readable even after
//! [`Mvcc::replace_with`] replaced the backend, and [`Mvcc::defragment`] fails while one is
//! alive (as redb's compaction fails while a read transaction is live).

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use redb::{Database, Durability, ReadTransaction, ReadableDatabase, WriteTransaction};

use crate::backend::{self, APP_META, DEFAULT_CACHE_BYTES, KEY, META};
use crate::error::MvccError;
use crate::store::{Mvcc, State};

/// Bytes a row counts against `max_bytes` on top of its key and value: an upper bound of the
/// framing of a protobuf message carrying it.
pub const SNAPSHOT_ROW_OVERHEAD: usize = 24;

/// The backend tables a snapshot carries, with their wire ids (0 is no table, so a row whose
/// id field was left at its protobuf default is rejected).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum SnapshotTable {
    /// The `key` table (etcd's `key` bucket).
    Key = 1,
    /// The `meta` table (revisions and `applied_index`).
    Meta = 2,
    /// The `app_meta` table (values of `ApplyBatch::set_meta`).
    AppMeta = 3,
}

impl SnapshotTable {
    /// Every table, in the order a snapshot streams them.
    pub const ALL: [SnapshotTable; 3] = [
        SnapshotTable::Key,
        SnapshotTable::Meta,
        SnapshotTable::AppMeta,
    ];

    /// The wire id of the table.
    pub fn id(self) -> u8 {
        self as u8
    }
}

impl TryFrom<u8> for SnapshotTable {
    type Error = MvccError;

    /// The table with wire id `id`; [`MvccError::Corrupt`] for an unknown id.
    fn try_from(id: u8) -> Result<Self, MvccError> {
        SnapshotTable::ALL
            .into_iter()
            .find(|t| t.id() == id)
            .ok_or_else(|| MvccError::Corrupt(format!("snapshot row has unknown table id {id}")))
    }
}

/// One backend row of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRow {
    /// The table's wire id ([`SnapshotTable::id`]).
    pub table: u8,
    /// The backend key (UTF-8 for `meta` and `app_meta`).
    pub key: Vec<u8>,
    /// The backend value.
    pub value: Vec<u8>,
}

impl SnapshotRow {
    /// Bytes the row counts against a chunk's `max_bytes`.
    pub fn size(&self) -> usize {
        row_size(&self.key, &self.value)
    }
}

fn row_size(key: &[u8], value: &[u8]) -> usize {
    SNAPSHOT_ROW_OVERHEAD + key.len() + value.len()
}

/// A batch of consecutive snapshot rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotChunk {
    /// The rows, in stream order.
    pub rows: Vec<SnapshotRow>,
}

/// Where [`BackendView::next_chunk`] resumes: the last row it returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotCursor {
    table: SnapshotTable,
    key: Vec<u8>,
}

/// A consistent point-in-time view of the backend (a redb read transaction).
pub struct BackendView {
    // Declared first so it is dropped before the handle it reads.
    pub(crate) txn: ReadTransaction,
    // Keeps the backend open: closing a redb handle ends its read transactions.
    _db: Arc<Database>,
}

const _: () = {
    const fn shareable<T: Send + Sync + 'static>() {}
    shareable::<BackendView>();
    shareable::<SnapshotWriter>();
};

impl BackendView {
    /// The value stored under `name` by `ApplyBatch::set_meta`, as of the view (like [`Mvcc::meta`]).
    pub fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, MvccError> {
        backend::app_meta(&self.txn, name)
    }

    /// Raft log index of the last batch the view holds (0 for a new store).
    pub fn applied_index(&self) -> Result<u64, MvccError> {
        backend::applied_index(&self.txn)
    }

    /// The rows after `after` (from the start when `None`), as many as fit in `max_bytes`
    /// ([`SnapshotRow::size`]) but at least one, with the cursor to pass next; `None` when
    /// no rows are left.
    pub fn next_chunk(
        &self,
        after: Option<&SnapshotCursor>,
        max_bytes: usize,
    ) -> Result<Option<(SnapshotChunk, SnapshotCursor)>, MvccError> {
        let (first, mut after_key) = match after {
            Some(c) => (c.table, Some(c.key.as_slice())),
            None => (SnapshotTable::Key, None),
        };
        let mut fill = Fill {
            rows: Vec::new(),
            bytes: 0,
            max_bytes,
            last: first,
        };
        for table in SnapshotTable::ALL.into_iter().skip_while(|t| *t != first) {
            if !self.fill(table, after_key.take(), &mut fill)? {
                break;
            }
        }
        let Some(last) = fill.rows.last() else {
            return Ok(None);
        };
        let cursor = SnapshotCursor {
            table: fill.last,
            key: last.key.clone(),
        };
        Ok(Some((SnapshotChunk { rows: fill.rows }, cursor)))
    }

    /// Adds the rows of `table` after `after` to `fill`; false once the chunk is full.
    fn fill(
        &self,
        table: SnapshotTable,
        after: Option<&[u8]>,
        fill: &mut Fill,
    ) -> Result<bool, MvccError> {
        match table {
            SnapshotTable::Key => {
                let t = self.txn.open_table(KEY)?;
                let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
                for e in t.range::<&[u8]>((lower, Bound::Unbounded))? {
                    let (k, v) = e?;
                    if !fill.push(table, k.value(), v.value()) {
                        return Ok(false);
                    }
                }
            }
            SnapshotTable::Meta | SnapshotTable::AppMeta => {
                let def = if table == SnapshotTable::Meta {
                    META
                } else {
                    APP_META
                };
                let t = self.txn.open_table(def)?;
                let after = after.map(|k| utf8(table, k)).transpose()?;
                let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
                for e in t.range::<&str>((lower, Bound::Unbounded))? {
                    let (k, v) = e?;
                    if !fill.push(table, k.value().as_bytes(), v.value()) {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }
}

/// A chunk being filled.
struct Fill {
    rows: Vec<SnapshotRow>,
    bytes: usize,
    max_bytes: usize,
    /// The table of the last row.
    last: SnapshotTable,
}

impl Fill {
    /// Adds a row unless it would overflow a non-empty chunk; false when it did not fit.
    fn push(&mut self, table: SnapshotTable, key: &[u8], value: &[u8]) -> bool {
        let size = row_size(key, value);
        if !self.rows.is_empty() && self.bytes + size > self.max_bytes {
            return false;
        }
        self.bytes += size;
        self.last = table;
        self.rows.push(SnapshotRow {
            table: table.id(),
            key: key.to_vec(),
            value: value.to_vec(),
        });
        true
    }
}

fn utf8(table: SnapshotTable, key: &[u8]) -> Result<&str, MvccError> {
    std::str::from_utf8(key)
        .map_err(|_| MvccError::Corrupt(format!("snapshot key of table {table:?} is not UTF-8")))
}

/// Writes snapshot rows into a fresh backend file, for [`Mvcc::replace_with`].
///
/// Rows go into one redb write transaction, whose dirty pages redb spills to the file beyond
/// its cache, so memory stays bounded. Dropped without [`SnapshotWriter::finish`], it leaves a
/// file without any of the rows.
pub struct SnapshotWriter {
    // Declared first so it is dropped (aborted) before the handle.
    pub(crate) txn: WriteTransaction,
    db: Database,
}

impl SnapshotWriter {
    /// Creates an empty backend file at `path`, replacing any file there.
    pub fn create(path: &Path) -> Result<SnapshotWriter, MvccError> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        let db = backend::open_database(path, DEFAULT_CACHE_BYTES)?;
        let txn = db.begin_write()?;
        Ok(SnapshotWriter { txn, db })
    }

    /// Inserts `rows`; [`MvccError::Corrupt`] for an unknown table id or a non-UTF-8 key of
    /// `meta` / `app_meta`.
    pub fn write(&mut self, rows: &[SnapshotRow]) -> Result<(), MvccError> {
        let mut keys = self.txn.open_table(KEY)?;
        let mut meta = self.txn.open_table(META)?;
        let mut app = self.txn.open_table(APP_META)?;
        for row in rows {
            let table = SnapshotTable::try_from(row.table)?;
            let value = row.value.as_slice();
            match table {
                SnapshotTable::Key => keys.insert(row.key.as_slice(), value)?,
                SnapshotTable::Meta => meta.insert(utf8(table, &row.key)?, value)?,
                SnapshotTable::AppMeta => app.insert(utf8(table, &row.key)?, value)?,
            };
        }
        Ok(())
    }

    /// Commits the rows durably and closes the file.
    pub fn finish(self) -> Result<(), MvccError> {
        let SnapshotWriter { mut txn, db } = self;
        txn.set_durability(Durability::Immediate)?;
        txn.commit()?;
        db.close()?;
        Ok(())
    }
}

/// Bytes per chunk when [`Mvcc::write_snapshot`] copies a view into a file.
const COPY_CHUNK_BYTES: usize = 1 << 20;

impl Mvcc {
    /// A consistent point-in-time view of the backend. Cheap: a redb read snapshot.
    pub fn view(&self) -> Result<BackendView, MvccError> {
        let db = self.core.db.read();
        Ok(BackendView {
            txn: db.begin_read()?,
            _db: Arc::clone(&db),
        })
    }

    /// Writes a consistent copy of the backend (a redb database file) to `path`.
    pub fn write_snapshot(&self, path: &Path) -> Result<(), MvccError> {
        let view = self.view()?;
        let mut out = SnapshotWriter::create(path)?;
        let mut cursor = None;
        while let Some((chunk, next)) = view.next_chunk(cursor.as_ref(), COPY_CHUNK_BYTES)? {
            out.write(&chunk.rows)?;
            cursor = Some(next);
        }
        out.finish()
    }

    /// Replaces the backend with the database file at `path` (e.g. written by a
    /// [`SnapshotWriter`]; it must be on the backend's file system) while the store runs.
    ///
    /// The file is opened and its key index rebuilt first, without any lock: if that fails,
    /// the error is returned and the store is unchanged (the file stays at `path`). Then,
    /// holding the writer lock and the backend exclusively (no batch, read or view can start),
    /// the file is renamed over the backend file, the rename made durable (its directory
    /// fsynced), and only then the handle, key index, revisions and `applied_index` swapped
    /// in: no read sees a backend that a power cut could still take back, so a member never
    /// answers at a revision it would come back below after a restart. If the rename or the
    /// fsync fails the error is returned and the store still serves the old backend (after
    /// a failed fsync, its file may be gone from the path already). Views and reads begun
    /// before keep reading the old backend, whose handle closes when the last of them ends.
    /// A compaction under way on the old backend is abandoned; one cut short in the new
    /// backend is finished.
    pub fn replace_with(&self, path: &Path) -> Result<(), MvccError> {
        // open_database would create a missing file: an empty store is no snapshot.
        std::fs::metadata(path)?;
        let db = backend::open_database(path, self.cache_bytes)?;
        let restored = backend::restore(&db.begin_read()?)?;
        let old = {
            let _writer = self.writer.lock();
            let mut live = self.core.db.write();
            std::fs::rename(path, &self.core.path)?;
            sync_parent_dir(&self.core.path)?;
            let mut s = self.core.state.write();
            *s = State::restored(restored, s.backend_epoch.wrapping_add(1));
            std::mem::replace(&mut *live, Arc::new(db))
        };
        self.refresh_size();
        // A snapshot is written compact: all in use until the compactor counts it again.
        self.core.in_use.forget();
        // The new backend may hold a compaction that was cut short.
        self.core.compaction.wake();
        // Closing the old backend may write to its (now unlinked) file: outside the locks.
        drop(old);
        Ok(())
    }
}

/// Makes a rename in the directory of `path` durable.
fn sync_parent_dir(path: &Path) -> Result<(), MvccError> {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::File::open(dir)?.sync_all()?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_proto::etcdserverpb::{
        CompactionRequest, DeleteRangeRequest, PutRequest, RangeRequest, RangeResponse,
    };

    /// One batch: puts (`value` None deletes), meta values, an optional compaction.
    fn batch(m: &Mvcc, index: u64, ops: &[(&str, Option<&str>)], meta: &[(&str, &str)]) {
        let none = |_: i64| false;
        let mut b = m.begin_apply(&none);
        for (key, value) in ops {
            match value {
                Some(v) => {
                    b.put(&PutRequest {
                        key: key.as_bytes().to_vec(),
                        value: v.as_bytes().to_vec(),
                        ..Default::default()
                    })
                    .unwrap();
                }
                None => {
                    b.delete_range(&DeleteRangeRequest {
                        key: key.as_bytes().to_vec(),
                        ..Default::default()
                    })
                    .unwrap();
                }
            }
        }
        for (name, value) in meta {
            b.set_meta(name, value.as_bytes());
        }
        b.commit(index).unwrap();
    }

    fn compact(m: &Mvcc, index: u64, revision: i64) {
        let none = |_: i64| false;
        let mut b = m.begin_apply(&none);
        b.compact(&CompactionRequest {
            revision,
            physical: true,
        })
        .unwrap();
        b.commit(index).unwrap();
    }

    fn all(m: &Mvcc, revision: i64) -> Result<RangeResponse, MvccError> {
        m.range(&RangeRequest {
            key: vec![0],
            range_end: vec![0],
            revision,
            ..Default::default()
        })
    }

    fn stream(view: &BackendView, max_bytes: usize) -> Vec<SnapshotChunk> {
        let mut chunks = Vec::new();
        let mut cursor = None;
        while let Some((chunk, next)) = view.next_chunk(cursor.as_ref(), max_bytes).unwrap() {
            chunks.push(chunk);
            cursor = Some(next);
        }
        chunks
    }

    #[test]
    fn streamed_view_replaces_a_running_store() {
        let dir = tempfile::tempdir().unwrap();
        let src = Mvcc::open(&dir.path().join("src")).unwrap();
        batch(
            &src,
            1,
            &[("a", Some("1")), ("b", Some("1")), ("c", Some("1"))],
            &[("alarm", "x"), ("lease/1", "l1")],
        );
        batch(&src, 2, &[("a", Some("2")), ("b", None)], &[]);
        batch(&src, 3, &[("a", Some("3")), ("c", Some("2"))], &[]);
        let compact_rev = src.current_revision() - 1;
        compact(&src, 4, compact_rev);
        batch(&src, 5, &[("d", Some("1"))], &[("lease/2", "l2")]);

        let view = src.view().unwrap();
        let expect_all = all(&src, 0).unwrap();
        let expect_at_compact = all(&src, compact_rev).unwrap();
        let expect_hash = src.hash_kv(0).unwrap();
        let rev = src.current_revision();
        assert_eq!(src.compact_revision(), compact_rev);

        // Written after the view: none of it may reach the target.
        batch(
            &src,
            6,
            &[("a", Some("4")), ("e", Some("1")), ("c", None)],
            &[("alarm", "y"), ("lease/3", "l3")],
        );
        compact(&src, 7, rev + 1);
        assert_eq!(view.meta("alarm").unwrap().unwrap(), b"x");
        assert_eq!(view.applied_index().unwrap(), 5);

        let target_path = dir.path().join("target");
        let target = Mvcc::open(&target_path).unwrap();
        batch(
            &target,
            40,
            &[("z", Some("9")), ("a", Some("9"))],
            &[("alarm", "other")],
        );
        let old_view = target.view().unwrap();
        let old_rows: usize = stream(&old_view, usize::MAX)
            .iter()
            .map(|c| c.rows.len())
            .sum();

        let chunks = stream(&view, 100);
        assert!(chunks.len() > 3);
        for c in &chunks {
            let bytes: usize = c.rows.iter().map(SnapshotRow::size).sum();
            assert!(c.rows.len() == 1 || bytes <= 100);
        }
        let rows: Vec<&SnapshotRow> = chunks.iter().flat_map(|c| &c.rows).collect();
        let tables: Vec<u8> = rows.iter().map(|r| r.table).collect();
        assert!(tables.is_sorted());
        assert_eq!(stream(&view, usize::MAX)[0].rows.len(), rows.len());

        let incoming = dir.path().join("incoming");
        std::fs::write(&incoming, b"leftover").unwrap();
        let mut w = SnapshotWriter::create(&incoming).unwrap();
        for c in &chunks {
            w.write(&c.rows).unwrap();
        }
        w.finish().unwrap();
        target.replace_with(&incoming).unwrap();
        assert!(!incoming.exists());

        let check = |m: &Mvcc| {
            assert_eq!(all(m, 0).unwrap(), expect_all);
            assert_eq!(all(m, compact_rev).unwrap(), expect_at_compact);
            assert!(matches!(all(m, compact_rev - 1), Err(MvccError::Compacted)));
            assert!(matches!(all(m, rev + 1), Err(MvccError::FutureRevision)));
            assert_eq!(m.hash_kv(0).unwrap(), expect_hash);
            assert_eq!(m.current_revision(), rev);
            assert_eq!(m.compact_revision(), compact_rev);
            assert_eq!(m.applied_index(), 5);
            assert_eq!(m.meta("alarm").unwrap().unwrap(), b"x");
            let leases: Vec<String> = m
                .meta_with_prefix("lease/")
                .unwrap()
                .into_iter()
                .map(|(k, _)| k)
                .collect();
            assert_eq!(leases, ["lease/1", "lease/2"]);
        };
        check(&target);

        // The view taken before the replace still reads the old backend.
        assert_eq!(old_view.meta("alarm").unwrap().unwrap(), b"other");
        assert_eq!(old_view.applied_index().unwrap(), 40);
        let old_again: usize = stream(&old_view, 100).iter().map(|c| c.rows.len()).sum();
        assert_eq!(old_again, old_rows);
        drop(old_view);

        // The replaced store takes writes, and the file at its path is the new backend.
        batch(&target, 6, &[("f", Some("1"))], &[]);
        assert_eq!(target.current_revision(), rev + 1);
        drop(target);
        let reopened = Mvcc::open(&target_path).unwrap();
        assert_eq!(reopened.applied_index(), 6);
        assert_eq!(all(&reopened, rev).unwrap().kvs, expect_all.kvs);
    }

    #[test]
    fn a_file_that_does_not_open_leaves_the_store_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let m = Mvcc::open(&dir.path().join("db")).unwrap();
        batch(&m, 3, &[("a", Some("1"))], &[("alarm", "x")]);
        let before = all(&m, 0).unwrap();
        let bad = dir.path().join("bad");
        std::fs::write(&bad, vec![7u8; 8192]).unwrap();
        assert!(m.replace_with(&bad).is_err());
        assert!(m.replace_with(&dir.path().join("missing")).is_err());
        assert_eq!(all(&m, 0).unwrap(), before);
        assert_eq!(m.applied_index(), 3);
        batch(&m, 4, &[("b", Some("1"))], &[]);
        assert_eq!(m.current_revision(), 3);
    }

    #[test]
    fn unknown_table_ids_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SnapshotWriter::create(&dir.path().join("snap")).unwrap();
        for id in [0, 4, 255] {
            let row = SnapshotRow {
                table: id,
                key: b"k".to_vec(),
                value: b"v".to_vec(),
            };
            match w.write(&[row]) {
                Err(MvccError::Corrupt(msg)) => assert!(msg.contains("unknown table id")),
                other => panic!("table id {id}: {other:?}"),
            }
        }
        assert_eq!(SnapshotTable::try_from(2).unwrap(), SnapshotTable::Meta);
        assert!(SnapshotTable::try_from(0).is_err());
    }
}
