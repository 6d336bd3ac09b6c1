//! The redb backend: table layout, opening, and rebuilding the key index from disk.
//!
//! Tables:
//! - `key`: etcd's `key` bucket. Backend key = encoded [`Rev`] (18 bytes with `'t'` for a
//!   tombstone), value = the protobuf-encoded `mvccpb.KeyValue` (just `{key}` for a tombstone).
//! - `meta`: the store's own bookkeeping, written in the same transaction as the batch it
//!   describes: `applied_index`, `current_rev`, `compact_rev` and `finished_compact_rev`
//!   (8 bytes big-endian each). `compact_rev` is the revision of the newest applied Compact
//!   (etcd's `scheduledCompactRev`), written with the batch that applied it;
//!   `finished_compact_rev` (etcd's `finishedCompactRev`) is written with the last removal of
//!   that compaction. When the first is larger, a compaction was cut short and is finished
//!   after opening (see `compaction`). The first batch that compacts a backend without
//!   `finished_compact_rev` writes it; until then the key is absent only from a backend
//!   whose compactions all removed everything in the Compact's own batch, so its
//!   `compact_rev` is finished.
//! - `app_meta`: values stored by the caller through `ApplyBatch::set_meta`.

use prost::Message;
use redb::{Database, ReadTransaction, ReadableTable, TableDefinition};

use crate::error::MvccError;
use crate::index::TreeIndex;
use crate::revision::{Rev, is_tombstone_key};
use keel_proto::mvccpb::KeyValue;

/// etcd's `key` bucket.
pub const KEY: TableDefinition<&[u8], &[u8]> = TableDefinition::new("key");
/// The store's bookkeeping.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// Caller-defined values (alarms, leases).
pub const APP_META: TableDefinition<&str, &[u8]> = TableDefinition::new("app_meta");

/// `meta` key of the Raft index of the last committed batch.
pub const META_APPLIED_INDEX: &str = "applied_index";
/// `meta` key of the store revision.
pub const META_CURRENT_REV: &str = "current_rev";
/// `meta` key of the compaction revision (the newest scheduled one).
pub const META_COMPACT_REV: &str = "compact_rev";
/// `meta` key of the revision of the last compaction whose removals are all committed.
pub const META_FINISHED_COMPACT_REV: &str = "finished_compact_rev";

/// Bytes of page cache redb may use by default: 32 MiB.
///
/// redb caches each 4 KiB page in an allocation of its own (4,112 bytes with its `Arc`
/// header), which mimalloc serves from its 5,120-byte size class, so the cache costs about
/// 1.25 times its size in resident memory. What it does not hold, the OS page cache does (redb
/// reads with `pread`, the file is not mapped), so a miss costs a system call and a copy, not
/// a disk read. Measured in-process with 1,000,000 keys of 256-byte values (a 544 MiB file):
/// random point reads run as fast with 32 MiB as with 64 MiB (within noise, ~130k/s) and
/// ~15% slower with 16 MiB; loading the keys, and puts that do not read the value they
/// replace, run alike from 8 MiB up. 64 MiB cost 41 MiB more resident memory than 32 MiB.
pub const DEFAULT_CACHE_BYTES: usize = 32 << 20;

/// Opens (creating if missing) the database and makes sure every table exists.
pub fn open_database(path: &std::path::Path, cache_bytes: usize) -> Result<Database, MvccError> {
    let db = Database::builder()
        .set_cache_size(cache_bytes)
        .create(path)?;
    let w = db.begin_write()?;
    {
        w.open_table(KEY)?;
        w.open_table(META)?;
        w.open_table(APP_META)?;
    }
    w.commit()?;
    Ok(db)
}

/// What `open` restores from the backend.
pub struct Restored {
    /// The rebuilt key index.
    pub index: TreeIndex,
    /// The store revision.
    pub current_rev: i64,
    /// The compaction revision (-1 when never compacted, like etcd).
    pub compact_rev: i64,
    /// The revision of the last compaction that finished (at most `compact_rev`).
    pub finished_compact_rev: i64,
    /// The Raft index of the last committed batch.
    pub applied_index: u64,
}

fn read_i64(
    t: &impl ReadableTable<&'static str, &'static [u8]>,
    name: &str,
) -> Result<Option<i64>, MvccError> {
    match t.get(name)? {
        None => Ok(None),
        Some(v) => {
            let b: [u8; 8] = v
                .value()
                .try_into()
                .map_err(|_| MvccError::Corrupt(format!("meta {name} is not 8 bytes")))?;
            Ok(Some(i64::from_be_bytes(b)))
        }
    }
}

/// The revisions a backend records in `meta` beside its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendRevisions {
    /// The store revision: of the last write, or the one a restore set (1 for a new store).
    pub current: i64,
    /// The newest compaction (etcd's `scheduledCompactRev`; -1 when never compacted).
    pub compact: i64,
    /// The newest compaction whose removals are all committed (etcd's
    /// `finishedCompactRev`; at most `compact`, -1 when none). A backend opened with it
    /// below `compact` finishes that compaction in the background.
    pub finished_compact: i64,
}

/// The revisions recorded in `meta`, without looking at the rows: the stored revision is
/// written by every batch that writes a row, so it is exact for any backend that holds one.
pub fn revisions(rtxn: &ReadTransaction) -> Result<BackendRevisions, MvccError> {
    let meta = rtxn.open_table(META)?;
    let compact = read_i64(&meta, META_COMPACT_REV)?.unwrap_or(-1);
    let finished_compact = read_i64(&meta, META_FINISHED_COMPACT_REV)?
        .unwrap_or(compact)
        .min(compact);
    let current = read_i64(&meta, META_CURRENT_REV)?
        .unwrap_or(1)
        .max(compact)
        .max(1);
    Ok(BackendRevisions {
        current,
        compact,
        finished_compact,
    })
}

/// The value stored under `name` in `app_meta`.
pub fn app_meta(rtxn: &ReadTransaction, name: &str) -> Result<Option<Vec<u8>>, MvccError> {
    let t = rtxn.open_table(APP_META)?;
    Ok(t.get(name)?.map(|v| v.value().to_vec()))
}

/// Every value in `app_meta` under a name starting with `prefix`, in name order.
pub fn app_meta_with_prefix(
    rtxn: &ReadTransaction,
    prefix: &str,
) -> Result<Vec<(String, Vec<u8>)>, MvccError> {
    let t = rtxn.open_table(APP_META)?;
    let mut out = Vec::new();
    for entry in t.range(prefix..)? {
        let (k, v) = entry?;
        let name = k.value();
        if !name.starts_with(prefix) {
            break;
        }
        out.push((name.to_owned(), v.value().to_vec()));
    }
    Ok(out)
}

/// The Raft index of the last committed batch (0 for a new store).
pub fn applied_index(rtxn: &ReadTransaction) -> Result<u64, MvccError> {
    Ok(read_i64(&rtxn.open_table(META)?, META_APPLIED_INDEX)?.unwrap_or(0) as u64)
}

/// Rebuilds the key index and the revisions from a read transaction (etcd's `restore`).
pub fn restore(rtxn: &ReadTransaction) -> Result<Restored, MvccError> {
    let stored = revisions(rtxn)?;
    let applied_index = applied_index(rtxn)?;

    let keys = rtxn.open_table(KEY)?;
    let mut index = TreeIndex::new();
    let mut last_rev = 1;
    for entry in keys.iter()? {
        let (k, v) = entry?;
        let k = k.value();
        let rev = Rev::from_key(k)
            .ok_or_else(|| MvccError::Corrupt(format!("bad revision key {k:?}")))?;
        let kv = KeyValue::decode(v.value())?;
        last_rev = rev.main;
        let tombstone = is_tombstone_key(k);
        if index.key_index(&kv.key).is_some() {
            if tombstone {
                index.tombstone(&kv.key, rev);
            } else {
                index.put(&kv.key, rev);
            }
        } else if tombstone {
            index.restore_tombstone(&kv.key, rev);
        } else {
            index.restore(&kv.key, kv.create_revision, rev, kv.version);
        }
    }
    // A compaction can remove the last rows: the stored revision stays.
    let current_rev = stored.current.max(last_rev);
    Ok(Restored {
        index,
        current_rev,
        compact_rev: stored.compact,
        finished_compact_rev: stored.finished_compact,
        applied_index,
    })
}
