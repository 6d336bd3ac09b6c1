//! [`Mvcc`]: the store handle — opening, reads, batches, maintenance.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use keel_proto::etcdserverpb::{RangeRequest, RangeResponse, TxnRequest, TxnResponse};
use keel_proto::mvccpb::KeyValue;
use parking_lot::{Mutex, RwLock};
use redb::{CompactionError, Database, Durability, ReadOnlyTable, ReadableDatabase};

use crate::apply::{ApplyBatch, table_value};
use crate::backend::{self, DEFAULT_CACHE_BYTES, KEY, Restored};
use crate::compaction::{self, CompactionControl, CompactionPass};
use crate::error::MvccError;
use crate::in_use::InUse;
use crate::index::{KeyRange, TreeIndex};
use crate::range::{self, ValueSource};
use crate::revision::Rev;

/// Published state: what readers may see. Guarded by one `RwLock`.
pub(crate) struct State {
    pub(crate) index: TreeIndex,
    pub(crate) current_rev: i64,
    /// Reads below this revision fail with [`MvccError::Compacted`]; it moves when a batch
    /// that compacts commits (just before its redb commit).
    pub(crate) compact_rev: i64,
    /// The newest compaction committed to the backend: the one the compactor works towards.
    pub(crate) scheduled_compact_rev: i64,
    /// The newest compaction whose removals are all committed.
    pub(crate) finished_compact_rev: i64,
    /// The compaction the compactor is carrying out, if any.
    pub(crate) pass: Option<CompactionPass>,
    pub(crate) applied_index: u64,
    /// Bumped when [`Mvcc::replace_with`] swaps the backend, so a read that resolves
    /// revisions in two steps can tell it still reads the backend the index describes.
    pub(crate) backend_epoch: u64,
}

impl State {
    /// The state of a freshly opened backend.
    pub(crate) fn restored(restored: Restored, backend_epoch: u64) -> State {
        State {
            index: restored.index,
            current_rev: restored.current_rev,
            compact_rev: restored.compact_rev,
            scheduled_compact_rev: restored.compact_rev,
            finished_compact_rev: restored.finished_compact_rev,
            pass: None,
            applied_index: restored.applied_index,
            backend_epoch,
        }
    }
}

/// Options for [`Mvcc::open_with`].
#[derive(Debug, Clone)]
pub struct MvccOptions {
    /// Bytes of page cache the redb backend may use (default 32 MiB, see
    /// `backend::DEFAULT_CACHE_BYTES`; the OS page cache serves the rest without counting
    /// against the process).
    pub cache_bytes: usize,
    /// Backend revisions a compaction removes per redb transaction (etcd's
    /// `compactionBatchLimit`, default 1000).
    pub compaction_batch_limit: usize,
    /// Pause between two such transactions (etcd's `compactionSleepInterval`, default 10 ms).
    pub compaction_sleep_interval: Duration,
    /// Run compactions on a background thread of the store (the default). Without it nothing
    /// is removed until the caller drives [`Mvcc::compaction_step`].
    pub background_compaction: bool,
}

impl Default for MvccOptions {
    fn default() -> Self {
        MvccOptions {
            cache_bytes: DEFAULT_CACHE_BYTES,
            compaction_batch_limit: 1000,
            compaction_sleep_interval: Duration::from_millis(10),
            background_compaction: true,
        }
    }
}

/// What the store shares with its compactor thread.
pub(crate) struct Core {
    pub(crate) path: PathBuf,
    /// Size of the backend file, refreshed after every commit (read on every write request).
    size: AtomicU64,
    /// The redb handle; reads that outlive the lock (views) hold a clone, which keeps the
    /// handle open after [`Mvcc::replace_with`] swapped in another one.
    pub(crate) db: RwLock<Arc<Database>>,
    pub(crate) state: RwLock<State>,
    pub(crate) compaction: CompactionControl,
    /// The bytes in use, as last counted.
    pub(crate) in_use: InUse,
}

impl Core {
    /// Re-reads the size of the backend file.
    pub(crate) fn refresh_size(&self) {
        let len = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        self.size.store(len, Ordering::Relaxed);
    }

    /// Counts the bytes in use of `db`, the live backend, which the caller holds under the
    /// handle's read lock (so that no defragmentation or snapshot install swaps it meanwhile);
    /// returns how long it took. See [`crate::in_use`].
    pub(crate) fn count_in_use(&self, db: &Database) -> Duration {
        self.refresh_size();
        self.in_use.count(db, self.size.load(Ordering::Relaxed))
    }
}

/// The multi-version key-value store (see the crate docs).
pub struct Mvcc {
    pub(crate) core: Arc<Core>,
    /// The redb page cache size the backend was opened with.
    pub(crate) cache_bytes: usize,
    pub(crate) writer: Mutex<()>,
    /// The background compactor, stopped and joined on drop.
    compactor: Option<JoinHandle<()>>,
}

impl Drop for Mvcc {
    fn drop(&mut self) {
        self.core.compaction.stop();
        if let Some(thread) = self.compactor.take() {
            let _ = thread.join();
        }
    }
}

struct TableValues(ReadOnlyTable<&'static [u8], &'static [u8]>);

impl ValueSource for TableValues {
    fn value(&self, rev: Rev) -> Result<KeyValue, MvccError> {
        table_value(&self.0, rev)
    }
}

impl Mvcc {
    /// Opens (creating if missing) the redb file at `path` and rebuilds the in-memory key index from it.
    pub fn open(path: &Path) -> Result<Mvcc, MvccError> {
        Mvcc::open_with(path, &MvccOptions::default())
    }

    /// [`Mvcc::open`] with explicit options. A compaction that was cut short (by a crash or
    /// a close) is finished in the background, or by [`Mvcc::compaction_step`].
    pub fn open_with(path: &Path, options: &MvccOptions) -> Result<Mvcc, MvccError> {
        let db = backend::open_database(path, options.cache_bytes)?;
        let restored = backend::restore(&db.begin_read()?)?;
        let core = Arc::new(Core {
            path: path.to_path_buf(),
            size: AtomicU64::new(0),
            db: RwLock::new(Arc::new(db)),
            state: RwLock::new(State::restored(restored, 0)),
            compaction: CompactionControl::new(options),
            in_use: InUse::new(),
        });
        core.refresh_size();
        // The compactor thread counts the bytes in use first thing; without it, they are
        // counted here.
        let compactor = if options.background_compaction {
            Some(compaction::spawn(core.clone())?)
        } else {
            core.count_in_use(&core.db.read());
            None
        };
        Ok(Mvcc {
            core,
            cache_bytes: options.cache_bytes,
            writer: Mutex::new(()),
            compactor,
        })
    }

    /// Re-reads the size of the backend file.
    pub(crate) fn refresh_size(&self) {
        self.core.refresh_size();
    }

    /// Whether a background thread carries out compactions.
    pub(crate) fn background_compaction(&self) -> bool {
        self.compactor.is_some()
    }

    /// The store revision (1 for a new store; etcd's first write gets revision 2).
    pub fn current_revision(&self) -> i64 {
        self.core.state.read().current_rev
    }

    /// The compaction revision; -1 when the store was never compacted (what etcd's HashKV reports).
    pub fn compact_revision(&self) -> i64 {
        self.core.state.read().compact_rev
    }

    /// Raft log index of the last batch committed to the backend (0 for a new store).
    pub fn applied_index(&self) -> u64 {
        self.core.state.read().applied_index
    }

    /// Number of keys the in-memory index tracks (live keys plus deleted ones not yet compacted).
    pub fn indexed_keys(&self) -> usize {
        self.core.state.read().index.len()
    }

    /// A read of committed state. Never blocked by a running ApplyBatch except for an O(1) moment.
    pub fn range(&self, req: &RangeRequest) -> Result<RangeResponse, MvccError> {
        let db = self.core.db.read();
        let (resolved, cur, table) = {
            let s = self.core.state.read();
            let resolved = range::resolve(&s.index, req, s.current_rev, s.compact_rev)?;
            // The snapshot is taken under the index lock: it holds every revision the index
            // resolved (published only after their commit) and none that compaction removed
            // (compact revision published before the removals commit).
            let table = if resolved.revs.is_empty() {
                None
            } else {
                Some(db.begin_read()?.open_table(KEY)?)
            };
            (resolved, s.current_rev, table)
        };
        match table {
            Some(t) => range::materialize(&TableValues(t), resolved, req, cur),
            None => range::materialize(&NoValues, resolved, req, cur),
        }
    }

    /// Serves a txn without writes ([`is_txn_readonly`](crate::is_txn_readonly)) from
    /// committed state at the current revision, as a range is served: beside the writer, with
    /// the same answer the txn would get through a batch. A txn with writes is refused.
    pub fn read_txn(&self, req: &TxnRequest) -> Result<TxnResponse, MvccError> {
        if !crate::is_txn_readonly(req) {
            return Err(MvccError::TxnWrites);
        }
        let db = self.core.db.read();
        let (table, rev, compact) = {
            let s = self.core.state.read();
            // Under the index lock, as in `range`: the snapshot holds every published revision.
            (
                db.begin_read()?.open_table(KEY)?,
                s.current_rev,
                s.compact_rev,
            )
        };
        ApplyBatch::read_only(self, table, rev, compact).txn(req)
    }

    /// Starts the one batch of writes (waits if another batch is open).
    pub fn begin_apply<'a>(&'a self, lease_exists: &'a dyn Fn(i64) -> bool) -> ApplyBatch<'a> {
        let writer = self.writer.lock();
        let (rev, compact) = {
            let s = self.core.state.read();
            (s.current_rev, s.compact_rev)
        };
        ApplyBatch::new(self, Some(writer), lease_exists, rev, compact)
    }

    /// Bytes of the backend file.
    pub fn db_size(&self) -> u64 {
        self.core.size.load(Ordering::Relaxed)
    }

    /// Bytes of the backend file in use, as last counted (see [`crate::in_use`]): never waits
    /// for a writer, never walks more than a millisecond's worth of backend.
    pub fn db_size_in_use(&self) -> u64 {
        if self.core.in_use.cheap() {
            self.core.count_in_use(&self.core.db.read());
        }
        self.core.in_use.bytes(self.db_size())
    }

    /// Compacts the backend file (redb `compact`); stops reads and writes while it runs, like
    /// etcd's defragmentation. Fails while a [`BackendView`](crate::BackendView) or another
    /// read is alive, as redb's compaction does.
    pub fn defragment(&self) -> Result<(), MvccError> {
        let _writer = self.writer.lock();
        let mut guard = self.core.db.write();
        let db = Arc::get_mut(&mut guard).ok_or(CompactionError::TransactionInProgress)?;
        // A non-durable tail must be made durable before redb compacts.
        let mut w = db.begin_write()?;
        w.set_durability(Durability::Immediate)?;
        w.commit()?;
        for _ in 0..16 {
            if !db.compact()? {
                break;
            }
        }
        drop(guard);
        self.refresh_size();
        // A defragmented file is all in use; the compactor counts it again when idle.
        self.core.in_use.forget();
        Ok(())
    }

    /// Makes every committed batch durable (fsync); batches themselves commit without fsync because the WAL is the truth.
    pub fn sync(&self) -> Result<(), MvccError> {
        let db = self.core.db.read();
        let mut w = db.begin_write()?;
        w.set_durability(Durability::Immediate)?;
        w.commit()?;
        Ok(())
    }

    /// Reads a value stored by ApplyBatch::set_meta (used for alarms, auth, leases).
    pub fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, MvccError> {
        let db = self.core.db.read();
        backend::app_meta(&db.begin_read()?, name)
    }

    /// Every value stored by ApplyBatch::set_meta under a name starting with `prefix`, in
    /// name order (e.g. one record per lease).
    pub fn meta_with_prefix(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, MvccError> {
        let db = self.core.db.read();
        backend::app_meta_with_prefix(&db.begin_read()?, prefix)
    }

    /// Every live key attached to a lease, with its lease, in key order (how a lessor
    /// rebuilds its key sets at start, as etcd's does from the key space).
    pub fn leased_keys(&self) -> Result<Vec<(i64, Vec<u8>)>, MvccError> {
        let db = self.core.db.read();
        let (revs, table) = {
            let s = self.core.state.read();
            let mut revs = Vec::new();
            s.index
                .visit(KeyRange::new(&[0], &[0]), s.current_rev, |_, f| {
                    revs.push(f.modified);
                    true
                });
            // Snapshot taken under the index lock, as in `range`.
            (revs, db.begin_read()?.open_table(KEY)?)
        };
        let mut out = Vec::new();
        for rev in revs {
            let kv = table_value(&table, rev)?;
            if kv.lease != 0 {
                out.push((kv.lease, kv.key));
            }
        }
        Ok(out)
    }
}

struct NoValues;

impl ValueSource for NoValues {
    fn value(&self, rev: Rev) -> Result<KeyValue, MvccError> {
        Err(MvccError::Corrupt(format!(
            "no snapshot to read revision {}",
            rev.main
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_proto::etcdserverpb::{DeleteRangeRequest, PutRequest};

    fn put(key: &str, lease: i64) -> PutRequest {
        PutRequest {
            key: key.into(),
            value: b"v".to_vec(),
            lease,
            ..Default::default()
        }
    }

    #[test]
    fn meta_records_by_prefix_and_removal() {
        let dir = tempfile::tempdir().unwrap();
        let m = Mvcc::open(&dir.path().join("db")).unwrap();
        let none = |_: i64| false;
        let mut b = m.begin_apply(&none);
        b.set_meta("lease/01", b"a");
        b.set_meta("lease/02", b"b");
        b.set_meta("leasf", b"c");
        b.set_meta("lease/03", b"x");
        b.delete_meta("lease/03");
        b.commit(1).unwrap();
        let names = |m: &Mvcc| -> Vec<String> {
            m.meta_with_prefix("lease/")
                .unwrap()
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        };
        assert_eq!(names(&m), ["lease/01", "lease/02"]);
        let mut b = m.begin_apply(&none);
        b.delete_meta("lease/01");
        b.set_meta("lease/03", b"y");
        b.commit(2).unwrap();
        drop(m);
        let m = Mvcc::open(&dir.path().join("db")).unwrap();
        assert_eq!(names(&m), ["lease/02", "lease/03"]);
        assert_eq!(m.meta("lease/03").unwrap().unwrap(), b"y");
    }

    #[test]
    fn leased_keys_are_the_live_keys_with_a_lease() {
        let dir = tempfile::tempdir().unwrap();
        let m = Mvcc::open(&dir.path().join("db")).unwrap();
        let all = |_: i64| true;
        let mut b = m.begin_apply(&all);
        b.put(&put("a", 7)).unwrap();
        b.put(&put("b", 0)).unwrap();
        b.put(&put("c", 7)).unwrap();
        b.put(&put("d", 9)).unwrap();
        let before = b.events().len();
        b.put(&put("c", 0)).unwrap();
        assert_eq!(b.events().len(), before + 1);
        assert_eq!(b.events()[before].prev_kv.as_ref().unwrap().lease, 7);
        b.delete_range(&DeleteRangeRequest {
            key: b"d".to_vec(),
            ..Default::default()
        })
        .unwrap();
        b.commit(1).unwrap();
        assert_eq!(m.leased_keys().unwrap(), vec![(7, b"a".to_vec())]);
    }

    #[test]
    fn put_events_may_leave_out_the_replaced_value() {
        let dir = tempfile::tempdir().unwrap();
        let m = Mvcc::open(&dir.path().join("db")).unwrap();
        let all = |_: i64| true;
        let mut b = m.begin_apply(&all);
        b.put(&put("a", 0)).unwrap();
        b.commit(1).unwrap();
        let mut b = m.begin_apply(&all);
        b.set_events_with_prev(false);
        b.put(&put("a", 0)).unwrap();
        let asked = b
            .put(&PutRequest {
                prev_kv: true,
                ..put("a", 0)
            })
            .unwrap();
        let events = b.events().to_vec();
        b.commit(2).unwrap();
        assert!(events[0].prev_kv.is_none(), "not read for the event");
        assert_eq!(events[0].kv.as_ref().unwrap().version, 2);
        assert_eq!(
            asked.prev_kv.unwrap().version,
            2,
            "read when the request asks"
        );
        assert_eq!(events[1].prev_kv.as_ref().unwrap().version, 2);
    }
}
