//! `HashKV` and `Hash`.
//!
//! [`Mvcc::hash_kv`] is etcd 3.5's `HashByRev`: a CRC-32C (Castagnoli) over the bucket name `key`
//! and then, in revision order, every backend key and value with revision `<= rev`, where entries
//! at or below the compact revision count only if they are in the compaction keep set at `rev`
//! (when that set is non-empty). Because the backend uses etcd's key layout and the values are
//! the same protobuf bytes, the same history hashes to the same value as on etcd. Revisions a
//! running compaction has yet to remove lie below the compact revision and outside the keep
//! set, so HashKV is the same before, during and after the removals (when anything is kept).
//! A tombstone at exactly the compact revision is left out, as etcd's hasher leaves it out:
//! keel's compaction keeps it (as etcd > 3.5.15 does) where etcd 3.5.1 deleted it, and
//! skipping it gives every version the same hash, even when the compaction keeps nothing.

use std::collections::HashSet;

use redb::{ReadableDatabase, ReadableTable};

use crate::backend::{APP_META, KEY};
use crate::error::MvccError;
use crate::revision::{Rev, is_tombstone_key};
use crate::store::Mvcc;

/// The answer of [`Mvcc::hash_kv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashKv {
    /// CRC-32C over the revisions up to `hash_revision`.
    pub hash: u32,
    /// The store's compact revision (-1 if never compacted).
    pub compact_revision: i64,
    /// The revision the hash covers.
    pub hash_revision: i64,
}

impl Mvcc {
    /// etcd's `HashByRev(revision)`; 0 hashes at the current revision.
    pub fn hash_kv(&self, revision: i64) -> Result<HashKv, MvccError> {
        let db = self.core.db.read();
        let (rev, compact, keep, table) = {
            let s = self.core.state.read();
            let (cur, compact) = (s.current_rev, s.compact_rev);
            if revision > 0 && revision <= compact {
                return Err(MvccError::Compacted);
            }
            if revision > 0 && revision > cur {
                return Err(MvccError::FutureRevision);
            }
            let rev = if revision == 0 { cur } else { revision };
            let keep: HashSet<Rev> = s.index.keep(rev);
            (rev, compact, keep, db.begin_read()?.open_table(KEY)?)
        };
        let mut h = crc32c::crc32c(b"key");
        let upper = Rev::new(rev.saturating_add(1), 0);
        let lower = Rev::new(compact.saturating_add(1), 0);
        let end = upper.to_key(false);
        for e in table.range::<&[u8]>(..end.as_bytes())? {
            let (k, v) = e?;
            let k = k.value();
            let Some(kr) = Rev::from_key(k) else {
                continue;
            };
            if kr >= upper {
                continue;
            }
            if kr < lower && !keep.is_empty() && !keep.contains(&kr) {
                continue;
            }
            if kr.main == compact && is_tombstone_key(k) {
                continue;
            }
            h = crc32c::crc32c_append(h, k);
            h = crc32c::crc32c_append(h, v.value());
        }
        Ok(HashKv {
            hash: h,
            compact_revision: compact,
            hash_revision: rev,
        })
    }

    /// A CRC-32C over the whole backend contents that replicas must agree on: the `key` table
    /// and the caller's metadata (not the per-member `applied_index`). Like etcd's `Hash`, it
    /// covers revisions a running compaction has not removed yet, so replicas agree on it once
    /// their compactions finished ([`Mvcc::finish_compaction`]).
    pub fn hash(&self) -> Result<u32, MvccError> {
        let db = self.core.db.read();
        let r = db.begin_read()?;
        let mut h = crc32c::crc32c(b"key");
        for e in r.open_table(KEY)?.iter()? {
            let (k, v) = e?;
            h = crc32c::crc32c_append(h, k.value());
            h = crc32c::crc32c_append(h, v.value());
        }
        h = crc32c::crc32c_append(h, b"app_meta");
        for e in r.open_table(APP_META)?.iter()? {
            let (k, v) = e?;
            h = crc32c::crc32c_append(h, k.value().as_bytes());
            h = crc32c::crc32c_append(h, v.value());
        }
        Ok(h)
    }
}
