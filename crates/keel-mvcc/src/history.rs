//! [`Mvcc::history`]: the events of a span of revisions, read back from the backend.
//!
//! The `key` table is ordered by revision (etcd's 17-byte revision key, plus `'t'` for a
//! tombstone), so the events of revisions `from..=to` are one range scan. Like etcd's
//! `kvsToEvents`, a tombstone becomes a DELETE event whose `kv` is `{key, mod_revision}`.
//!
//! Previous values are resolved with the key index: the value a key had at `main - 1`. The
//! scan reads a redb snapshot opened under the index lock (see the crate docs), and the index is
//! consulted afterwards under a short read lock; if a compaction was published in between (or
//! the backend was replaced), the read is retried, so every previous value found is one the
//! snapshot still holds.

use std::ops::Bound;
use std::sync::Arc;

use keel_proto::mvccpb::event::EventType;
use keel_proto::mvccpb::{Event, KeyValue};
use prost::Message;
use redb::ReadableDatabase;

use crate::apply::table_value;
use crate::backend::KEY;
use crate::error::MvccError;
use crate::revision::{Rev, is_tombstone_key};
use crate::store::Mvcc;

/// How many times a read is retried when compactions keep racing it.
const COMPACTION_RETRIES: usize = 8;

/// The outcome of [`Mvcc::history`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// The events, in revision order (and change order inside a revision).
    pub events: Vec<Event>,
    /// The first revision not covered: `to + 1` when the whole span was read, less when the
    /// read stopped early at a revision boundary because of `max_entries`.
    pub next: i64,
}

/// What [`Mvcc::history`] reads.
pub struct HistoryRequest<'a> {
    /// The first revision to read.
    pub from: i64,
    /// The last revision to read (inclusive); at most the store revision.
    pub to: i64,
    /// Backend entries after which the read stops at the next revision boundary (all changes of
    /// one revision are always read together).
    pub max_entries: usize,
    /// Resolve `prev_kv` of updates and deletes.
    pub prev_kv: bool,
    /// Which keys are wanted.
    pub wanted: &'a dyn Fn(&[u8]) -> bool,
}

impl Mvcc {
    /// The events of revisions `req.from..=req.to` on the wanted keys (etcd's unsynced-watcher
    /// read). Returns [`MvccError::Compacted`] when `from` is below the compaction revision and
    /// [`MvccError::FutureRevision`] when `to` is above the store revision.
    pub fn history(&self, req: &HistoryRequest<'_>) -> Result<History, MvccError> {
        for _ in 0..COMPACTION_RETRIES {
            if let Some(history) = self.try_history(req)? {
                return Ok(history);
            }
        }
        Err(MvccError::Corrupt(
            "history read kept racing compactions".into(),
        ))
    }

    /// One attempt; `None` when a compaction was published during the read.
    fn try_history(&self, req: &HistoryRequest<'_>) -> Result<Option<History>, MvccError> {
        let db = self.core.db.read();
        // Keeps the backend open should `replace_with` swap it while this reads (declared
        // before the table, so dropped after it).
        let _backend = Arc::clone(&db);
        let (table, compact_rev, epoch) = {
            let s = self.core.state.read();
            if req.from < s.compact_rev {
                return Err(MvccError::Compacted);
            }
            if req.to > s.current_rev {
                return Err(MvccError::FutureRevision);
            }
            let table = db.begin_read()?.open_table(KEY)?;
            (table, s.compact_rev, s.backend_epoch)
        };
        drop(db);
        let mut history = History {
            events: Vec::new(),
            next: req.to + 1,
        };
        if req.from > req.to {
            history.next = req.from;
            return Ok(Some(history));
        }
        let start = Rev::new(req.from, 0).to_key(false);
        let end = Rev::new(req.to + 1, 0).to_key(false);
        let range = (
            Bound::Included(start.as_bytes()),
            Bound::Excluded(end.as_bytes()),
        );
        let mut last_main = i64::MIN;
        for (entries, entry) in table.range::<&[u8]>(range)?.enumerate() {
            let (k, v) = entry?;
            let k = k.value();
            let rev = Rev::from_key(k)
                .ok_or_else(|| MvccError::Corrupt(format!("bad revision key {k:?}")))?;
            if rev.main != last_main {
                if entries >= req.max_entries {
                    history.next = rev.main;
                    break;
                }
                last_main = rev.main;
            }
            let mut kv = KeyValue::decode(v.value())?;
            if !(req.wanted)(&kv.key) {
                continue;
            }
            let r#type = if is_tombstone_key(k) {
                kv.mod_revision = rev.main;
                EventType::Delete
            } else {
                EventType::Put
            };
            history.events.push(Event {
                r#type: r#type as i32,
                kv: Some(kv),
                prev_kv: None,
            });
        }
        if !req.prev_kv {
            return Ok(Some(history));
        }
        // Resolve the previous revisions under one short index lock, then read them.
        let prev_revs: Vec<Option<Rev>> = {
            let s = self.core.state.read();
            if s.compact_rev != compact_rev || s.backend_epoch != epoch {
                return Ok(None);
            }
            history
                .events
                .iter()
                .map(|e| {
                    let kv = e.kv.as_ref()?;
                    let is_create =
                        e.r#type == EventType::Put as i32 && kv.create_revision == kv.mod_revision;
                    if is_create || kv.mod_revision - 1 < compact_rev {
                        return None;
                    }
                    s.index
                        .get(&kv.key, kv.mod_revision - 1)
                        .map(|found| found.modified)
                })
                .collect()
        };
        for (event, prev) in history.events.iter_mut().zip(prev_revs) {
            if let Some(rev) = prev {
                event.prev_kv = Some(table_value(&table, rev)?);
            }
        }
        Ok(Some(history))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_proto::etcdserverpb::{CompactionRequest, DeleteRangeRequest, PutRequest};

    fn put(m: &Mvcc, key: &str, value: &str) {
        let no_leases = |_: i64| false;
        let mut b = m.begin_apply(&no_leases);
        b.put(&PutRequest {
            key: key.into(),
            value: value.into(),
            ..Default::default()
        })
        .unwrap();
        b.commit(0).unwrap();
    }

    fn delete(m: &Mvcc, key: &str) {
        let no_leases = |_: i64| false;
        let mut b = m.begin_apply(&no_leases);
        b.delete_range(&DeleteRangeRequest {
            key: key.into(),
            ..Default::default()
        })
        .unwrap();
        b.commit(0).unwrap();
    }

    fn compact(m: &Mvcc, rev: i64) {
        let no_leases = |_: i64| false;
        let mut b = m.begin_apply(&no_leases);
        b.compact(&CompactionRequest {
            revision: rev,
            ..Default::default()
        })
        .unwrap();
        b.commit(0).unwrap();
    }

    fn read(m: &Mvcc, from: i64, max_entries: usize, prefix: &'static str) -> History {
        let wanted = move |k: &[u8]| k.starts_with(prefix.as_bytes());
        m.history(&HistoryRequest {
            from,
            to: m.current_revision(),
            max_entries,
            prev_kv: true,
            wanted: &wanted,
        })
        .unwrap()
    }

    #[test]
    fn replays_puts_and_deletes_with_prev_kv() {
        let dir = tempfile::tempdir().unwrap();
        let m = Mvcc::open(&dir.path().join("db")).unwrap();
        put(&m, "a", "1"); // 2
        put(&m, "b", "1"); // 3
        put(&m, "a", "2"); // 4
        delete(&m, "a"); // 5
        let h = read(&m, 2, usize::MAX, "a");
        assert_eq!(h.next, 6);
        let summary: Vec<_> = h
            .events
            .iter()
            .map(|e| {
                let kv = e.kv.as_ref().unwrap();
                (
                    e.r#type,
                    kv.mod_revision,
                    e.prev_kv.as_ref().map(|p| p.value.clone()),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (EventType::Put as i32, 2, None),
                (EventType::Put as i32, 4, Some(b"1".to_vec())),
                (EventType::Delete as i32, 5, Some(b"2".to_vec())),
            ]
        );
        let delete = h.events[2].kv.as_ref().unwrap();
        assert_eq!(delete.key, b"a");
        assert_eq!(delete.create_revision, 0);
    }

    #[test]
    fn stops_at_a_revision_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let m = Mvcc::open(&dir.path().join("db")).unwrap();
        for i in 0..5 {
            put(&m, &format!("k{i}"), "v"); // 2..=6
        }
        let h = read(&m, 2, 2, "k");
        assert_eq!(h.events.len(), 2);
        assert_eq!(h.next, 4);
        let h = read(&m, h.next, 10, "k");
        assert_eq!(h.events.len(), 3);
        assert_eq!(h.next, 7);
    }

    #[test]
    fn compacted_start_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let m = Mvcc::open(&dir.path().join("db")).unwrap();
        put(&m, "a", "1"); // 2
        put(&m, "a", "2"); // 3
        put(&m, "a", "3"); // 4
        compact(&m, 3);
        let wanted = |_: &[u8]| true;
        let req = |from| HistoryRequest {
            from,
            to: 4,
            max_entries: usize::MAX,
            prev_kv: true,
            wanted: &wanted,
        };
        assert!(matches!(m.history(&req(2)), Err(MvccError::Compacted)));
        let h = m.history(&req(3)).unwrap();
        assert_eq!(h.events.len(), 2);
        // The update at 4 still finds its previous value (kept by the compaction at 3).
        assert_eq!(h.events[1].prev_kv.as_ref().unwrap().value, b"2");
        assert!(matches!(
            m.history(&HistoryRequest { to: 9, ..req(3) }),
            Err(MvccError::FutureRevision)
        ));
    }
}
