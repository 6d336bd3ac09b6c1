//! [`ApplyBatch`]: one batch of writes, applied with etcd's revision rules and committed in one
//! redb write transaction.
//!
//! During the batch:
//! - new revisions go straight into the shared key index (under its write lock, briefly), above
//!   the published store revision, where readers do not look; an undo log takes them back if an
//!   op fails or the batch is dropped without commit;
//! - new backend values are staged in memory (`writes`) and read from there by later ops of the
//!   batch; older values come from a redb read snapshot taken at the start of the batch;
//! - a Compact only moves the batch's compact revision (O(1)): the commit records it and the
//!   store's compactor removes what it makes unreadable afterwards, in small steps (see
//!   `compaction`).
//!
//! [`ApplyBatch::commit`] writes everything plus `applied_index` and the revisions in one redb
//! transaction and then publishes (see the crate docs for the ordering argument).

use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::response_op::Response;
use keel_proto::etcdserverpb::{
    CompactionRequest, CompactionResponse, Compare, DeleteRangeRequest, DeleteRangeResponse,
    PutRequest, PutResponse, RangeRequest, RangeResponse, RequestOp, ResponseHeader, ResponseOp,
    TxnRequest, TxnResponse,
};
use keel_proto::mvccpb::event::EventType;
use keel_proto::mvccpb::{Event, KeyValue};
use parking_lot::MutexGuard;
use prost::Message;
use redb::{Durability, ReadOnlyTable, ReadableDatabase, ReadableTable, WriteTransaction};

use crate::backend::{
    APP_META, KEY, META, META_APPLIED_INDEX, META_COMPACT_REV, META_CURRENT_REV,
    META_FINISHED_COMPACT_REV,
};
use crate::error::MvccError;
use crate::index::{Found, KeyRange};
use crate::range::{self, ValueSource};
use crate::revision::Rev;
use crate::store::Mvcc;
use crate::txn;

type KeyTable = ReadOnlyTable<&'static [u8], &'static [u8]>;

fn header(revision: i64) -> Option<ResponseHeader> {
    Some(ResponseHeader {
        revision,
        ..Default::default()
    })
}

/// A staged backend write.
struct PendingWrite {
    rev: Rev,
    tombstone: bool,
    kv: KeyValue,
}

/// Positions in the batch's logs, to take back one failed op.
#[derive(Clone, Copy)]
struct Mark {
    writes: usize,
    undo: usize,
    events: usize,
}

/// One write op (Put, DeleteRange or Txn): etcd's `storeTxnWrite`.
struct Op {
    begin: i64,
    changes: i64,
}

impl Op {
    /// The revision reads inside the op see (the op's own changes included).
    fn read_rev(&self) -> i64 {
        self.begin + i64::from(self.changes > 0)
    }
}

/// The batch's view of values: its own staged writes, then the committed snapshot.
struct BatchValues<'b> {
    writes: &'b [PendingWrite],
    committed: Option<&'b KeyTable>,
}

impl ValueSource for BatchValues<'_> {
    fn value(&self, rev: Rev) -> Result<KeyValue, MvccError> {
        if let Ok(i) = self.writes.binary_search_by_key(&rev, |w| w.rev) {
            return Ok(self.writes[i].kv.clone());
        }
        let table = self
            .committed
            .ok_or_else(|| MvccError::Corrupt("no backend snapshot in batch".into()))?;
        table_value(table, rev)
    }
}

/// Reads the value at `rev` from a `key` table.
pub(crate) fn table_value(table: &KeyTable, rev: Rev) -> Result<KeyValue, MvccError> {
    match table.get(rev.to_key(false).as_bytes())? {
        Some(v) => Ok(KeyValue::decode(v.value())?),
        None => Err(MvccError::Corrupt(format!(
            "revision {}_{} missing from backend",
            rev.main, rev.sub
        ))),
    }
}

/// The one open batch of writes of a [`Mvcc`]; see the module docs.
///
/// Dropping a batch without [`commit`](ApplyBatch::commit) abandons all of it.
pub struct ApplyBatch<'a> {
    mvcc: &'a Mvcc,
    /// The store's one writer slot; `None` for a [`read_only`](ApplyBatch::read_only) batch.
    _writer: Option<MutexGuard<'a, ()>>,
    lease_exists: &'a dyn Fn(i64) -> bool,
    committed: Option<KeyTable>,
    rev: i64,
    compact_rev: i64,
    writes: Vec<PendingWrite>,
    undo: Vec<(Box<[u8]>, bool)>,
    compactions: Vec<i64>,
    /// Metadata changes in call order: a value to store, or `None` to remove the name.
    meta: Vec<(String, Option<Vec<u8>>)>,
    events: Vec<Event>,
    /// Whether put events carry the value they replaced (a backend read per put).
    events_with_prev: bool,
}

impl<'a> ApplyBatch<'a> {
    /// A batch that only reads committed state at `rev` from `committed` (taken with `rev`
    /// and `compact_rev` under the state lock): it takes no writer slot, so it must run no
    /// write op (see [`Mvcc::read_txn`]).
    pub(crate) fn read_only(
        mvcc: &'a Mvcc,
        committed: KeyTable,
        rev: i64,
        compact_rev: i64,
    ) -> ApplyBatch<'a> {
        let mut batch = ApplyBatch::new(mvcc, None, &|_| false, rev, compact_rev);
        batch.committed = Some(committed);
        batch
    }

    pub(crate) fn new(
        mvcc: &'a Mvcc,
        writer: Option<MutexGuard<'a, ()>>,
        lease_exists: &'a dyn Fn(i64) -> bool,
        rev: i64,
        compact_rev: i64,
    ) -> ApplyBatch<'a> {
        ApplyBatch {
            mvcc,
            _writer: writer,
            lease_exists,
            committed: None,
            rev,
            compact_rev,
            writes: Vec::new(),
            undo: Vec::new(),
            compactions: Vec::new(),
            meta: Vec::new(),
            events: Vec::new(),
            events_with_prev: true,
        }
    }

    /// Whether the events of later puts carry `prev_kv` (the default). Without it a put reads
    /// nothing from the backend unless its request needs the old value (`prev_kv`,
    /// `ignore_value`, `ignore_lease`), and its event has no `prev_kv` even when it replaced
    /// a value (`kv.version > 1`); deletes always carry it.
    pub fn set_events_with_prev(&mut self, with_prev: bool) {
        self.events_with_prev = with_prev;
    }

    /// The store revision as this batch has advanced it so far.
    pub fn revision(&self) -> i64 {
        self.rev
    }

    /// Applies a Put (etcd's `applierV3backend.Put`): lease check first, then the write.
    pub fn put(&mut self, req: &PutRequest) -> Result<PutResponse, MvccError> {
        if req.lease != 0 && !(self.lease_exists)(req.lease) {
            return Err(MvccError::LeaseNotFound(req.lease));
        }
        self.run_op(|b, op| b.put_op(req, op))
    }

    /// Applies a DeleteRange.
    pub fn delete_range(
        &mut self,
        req: &DeleteRangeRequest,
    ) -> Result<DeleteRangeResponse, MvccError> {
        self.run_op(|b, op| b.delete_op(req, op))
    }

    /// Applies a Txn: compares against the state before the txn, etcd's pre-execution checks
    /// (ignore_value/ignore_lease on missing keys, unknown leases, range revisions), then the
    /// ops of the chosen branches under one revision. A failing txn changes nothing.
    pub fn txn(&mut self, req: &TxnRequest) -> Result<TxnResponse, MvccError> {
        self.ensure_snapshot()?;
        let mut path = Vec::new();
        self.compare_to_path(req, self.rev, &mut path)?;
        self.check_requests(req, &path, &mut 0, true)?;
        self.check_requests(req, &path, &mut 0, false)?;
        self.run_op(|b, op| {
            let mut resp = b.apply_txn(req, &path, &mut 0, op)?;
            resp.header = header(op.read_rev());
            Ok(resp)
        })
    }

    /// Compacts the store at `req.revision`: once the batch commits, reads below it fail and
    /// the store's compactor removes the revisions it makes unreadable (etcd's
    /// `scheduleCompaction`), in the background.
    pub fn compact(&mut self, req: &CompactionRequest) -> Result<CompactionResponse, MvccError> {
        let rev = req.revision;
        if rev <= self.compact_rev {
            return Err(MvccError::Compacted);
        }
        if rev > self.rev {
            return Err(MvccError::FutureRevision);
        }
        self.compact_rev = rev;
        self.compactions.push(rev);
        Ok(CompactionResponse {
            header: header(self.rev),
        })
    }

    /// Stores `value` under `name`, committed with the batch; read back with [`Mvcc::meta`].
    pub fn set_meta(&mut self, name: &str, value: &[u8]) {
        self.meta.push((name.to_owned(), Some(value.to_vec())));
    }

    /// Removes the value stored under `name` (if any), committed with the batch.
    pub fn delete_meta(&mut self, name: &str) {
        self.meta.push((name.to_owned(), None));
    }

    /// The events of the ops applied so far in this batch, in revision order (a failed op
    /// leaves none). Callers that track keys, such as a lessor attaching leased keys, read
    /// the events an op added right after applying it.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Commits the batch: one redb write transaction (without fsync) holding the new revisions,
    /// the compaction revision, the metadata and `applied_index`; then publishes the new
    /// revision to readers (and a compaction to the compactor). Returns the batch's events in
    /// revision order.
    pub fn commit(mut self, applied_index: u64) -> Result<Vec<Event>, MvccError> {
        let mvcc = self.mvcc;
        let db = mvcc.core.db.read();
        let mut w = db.begin_write()?;
        w.set_durability(Durability::None)?;
        self.write_tables(&w, applied_index)?;
        // Readers stop resolving revisions below the new compact revision before the
        // compactor may remove any (it starts only once `scheduled_compact_rev` moved, below).
        let old_compact = if self.compactions.is_empty() {
            None
        } else {
            let mut s = mvcc.core.state.write();
            let old = s.compact_rev;
            s.compact_rev = self.compact_rev;
            Some(old)
        };
        if let Err(e) = w.commit() {
            if let Some(old) = old_compact {
                mvcc.core.state.write().compact_rev = old;
            }
            return Err(e.into());
        }
        {
            let mut s = mvcc.core.state.write();
            s.current_rev = self.rev;
            s.applied_index = applied_index;
            if !self.compactions.is_empty() {
                s.scheduled_compact_rev = self.compact_rev;
            }
        }
        drop(db);
        mvcc.refresh_size();
        if !self.compactions.is_empty() {
            mvcc.core.compaction.wake();
        }
        self.undo.clear();
        Ok(std::mem::take(&mut self.events))
    }

    // ---- internals ----

    /// Writes the batch's rows and metadata into the write transaction `w`.
    fn write_tables(&self, w: &WriteTransaction, applied_index: u64) -> Result<(), MvccError> {
        let mut keys = w.open_table(KEY)?;
        let mut value = Vec::new();
        for pw in &self.writes {
            value.clear();
            pw.kv.encode_raw(&mut value);
            keys.insert(pw.rev.to_key(pw.tombstone).as_bytes(), value.as_slice())?;
        }
        // Only what changed: the revision moves only with writes, the compact revision
        // only with a compaction.
        let mut meta = w.open_table(META)?;
        meta.insert(META_APPLIED_INDEX, applied_index.to_be_bytes().as_slice())?;
        if !self.writes.is_empty() {
            meta.insert(META_CURRENT_REV, self.rev.to_be_bytes().as_slice())?;
        }
        if !self.compactions.is_empty() {
            meta.insert(META_COMPACT_REV, self.compact_rev.to_be_bytes().as_slice())?;
            if meta.get(META_FINISHED_COMPACT_REV)?.is_none() {
                // Until now every compaction of this backend finished in its own batch.
                let finished = self.mvcc.core.state.read().finished_compact_rev;
                meta.insert(META_FINISHED_COMPACT_REV, finished.to_be_bytes().as_slice())?;
            }
        }
        if self.meta.is_empty() {
            return Ok(());
        }
        let mut app = w.open_table(APP_META)?;
        for (k, v) in &self.meta {
            match v {
                Some(v) => {
                    app.insert(k.as_str(), v.as_slice())?;
                }
                None => {
                    app.remove(k.as_str())?;
                }
            }
        }

        Ok(())
    }

    fn ensure_snapshot(&mut self) -> Result<(), MvccError> {
        if self.committed.is_none() {
            let db = self.mvcc.core.db.read();
            self.committed = Some(db.begin_read()?.open_table(KEY)?);
        }
        Ok(())
    }

    fn values(&self) -> BatchValues<'_> {
        BatchValues {
            writes: &self.writes,
            committed: self.committed.as_ref(),
        }
    }

    fn mark(&self) -> Mark {
        Mark {
            writes: self.writes.len(),
            undo: self.undo.len(),
            events: self.events.len(),
        }
    }

    fn rollback(&mut self, mark: Mark) {
        if self.undo.len() > mark.undo {
            let mut s = self.mvcc.core.state.write();
            for (key, tomb) in self.undo.drain(mark.undo..).rev() {
                s.index.undo(&key, tomb);
            }
        }
        self.writes.truncate(mark.writes);
        self.events.truncate(mark.events);
    }

    fn run_op<T>(
        &mut self,
        f: impl FnOnce(&mut Self, &mut Op) -> Result<T, MvccError>,
    ) -> Result<T, MvccError> {
        self.ensure_snapshot()?;
        let mark = self.mark();
        let mut op = Op {
            begin: self.rev,
            changes: 0,
        };
        match f(self, &mut op) {
            Ok(v) => {
                if op.changes > 0 {
                    self.rev += 1;
                }
                Ok(v)
            }
            Err(e) => {
                self.rollback(mark);
                Err(e)
            }
        }
    }

    fn stage(&mut self, rev: Rev, tombstone: bool, kv: KeyValue) {
        // Revisions only grow within a batch, so `writes` stays sorted for lookups.
        debug_assert!(self.writes.last().is_none_or(|w| w.rev < rev));
        self.writes.push(PendingWrite { rev, tombstone, kv });
    }

    fn found_kv(&self, found: Option<Found>) -> Result<Option<KeyValue>, MvccError> {
        found.map(|f| self.values().value(f.modified)).transpose()
    }

    fn range_op(&self, req: &RangeRequest, op: &Op) -> Result<RangeResponse, MvccError> {
        let cur = op.read_rev();
        let resolved = {
            let s = self.mvcc.core.state.read();
            // A read-only batch runs beside the writer: a compaction published since it began
            // counts (a write batch's own compaction is never behind the published one).
            range::resolve(&s.index, req, cur, self.compact_rev.max(s.compact_rev))?
        };
        range::materialize(&self.values(), resolved, req, cur)
    }

    fn put_op(&mut self, req: &PutRequest, op: &mut Op) -> Result<PutResponse, MvccError> {
        let rev = op.begin + 1;
        let idx_rev = Rev::new(rev, op.changes);
        // The index entry goes in first (one lookup); an error below takes it back with the op.
        let found = self.mvcc.core.state.write().index.put(&req.key, idx_rev);
        self.undo.push((req.key.as_slice().into(), false));
        let needs_prev =
            self.events_with_prev || req.prev_kv || req.ignore_value || req.ignore_lease;
        let prev = if needs_prev {
            self.found_kv(found)?
        } else {
            None
        };
        let (value, lease) = match (&prev, req.ignore_value || req.ignore_lease) {
            (None, true) => return Err(MvccError::KeyNotFound),
            (Some(p), _) => (
                if req.ignore_value {
                    p.value.clone()
                } else {
                    req.value.clone()
                },
                if req.ignore_lease { p.lease } else { req.lease },
            ),
            (None, false) => (req.value.clone(), req.lease),
        };
        let kv = KeyValue {
            key: req.key.clone(),
            create_revision: found.map_or(rev, |f| f.created),
            mod_revision: rev,
            version: found.map_or(0, |f| f.ver) + 1,
            value,
            lease,
        };
        self.stage(idx_rev, false, kv.clone());
        op.changes += 1;
        let prev_kv = if req.prev_kv { prev.clone() } else { None };
        self.events.push(Event {
            r#type: EventType::Put as i32,
            kv: Some(kv),
            prev_kv: prev,
        });
        Ok(PutResponse {
            header: header(rev),
            prev_kv,
        })
    }

    fn delete_op(
        &mut self,
        req: &DeleteRangeRequest,
        op: &mut Op,
    ) -> Result<DeleteRangeResponse, MvccError> {
        let at = op.read_rev();
        let mut targets: Vec<(Vec<u8>, Rev)> = Vec::new();
        self.mvcc.core.state.read().index.visit(
            KeyRange::new(&req.key, &req.range_end),
            at,
            |k, f| {
                targets.push((k.to_vec(), f.modified));
                true
            },
        );
        let rev = op.begin + 1;
        let mut prevs = Vec::with_capacity(targets.len());
        for (_, modified) in &targets {
            prevs.push(self.values().value(*modified)?);
        }
        let deleted = targets.len() as i64;
        let mut prev_kvs = Vec::new();
        for ((key, _), prev) in targets.into_iter().zip(prevs) {
            let idx_rev = Rev::new(rev, op.changes);
            self.stage(
                idx_rev,
                true,
                KeyValue {
                    key: key.clone(),
                    ..Default::default()
                },
            );
            if !self.mvcc.core.state.write().index.tombstone(&key, idx_rev) {
                return Err(MvccError::Corrupt(
                    "tombstone of a key that is not live".into(),
                ));
            }
            self.undo.push((key.as_slice().into(), true));
            op.changes += 1;
            if req.prev_kv {
                prev_kvs.push(prev.clone());
            }
            self.events.push(Event {
                r#type: EventType::Delete as i32,
                kv: Some(KeyValue {
                    key,
                    mod_revision: rev,
                    ..Default::default()
                }),
                prev_kv: Some(prev),
            });
        }
        let hdr_rev = if deleted != 0 || op.changes > 0 {
            rev
        } else {
            op.begin
        };
        Ok(DeleteRangeResponse {
            header: header(hdr_rev),
            deleted,
            prev_kvs,
        })
    }

    fn apply_compare(&self, c: &Compare, at: i64) -> Result<bool, MvccError> {
        let mut hits: Vec<(Vec<u8>, Found)> = Vec::new();
        self.mvcc
            .core
            .state
            .read()
            .index
            .visit(KeyRange::new(&c.key, &c.range_end), at, |k, f| {
                hits.push((k.to_vec(), f));
                true
            });
        if hits.is_empty() {
            return Ok(txn::compare_missing(c));
        }
        let with_value = txn::needs_value(c);
        for (key, f) in hits {
            let kv = if with_value {
                self.values().value(f.modified)?
            } else {
                KeyValue {
                    key,
                    create_revision: f.created,
                    mod_revision: f.modified.main,
                    version: f.ver,
                    ..Default::default()
                }
            };
            if !txn::compare_kv(c, &kv) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// etcd's `compareToPath`: the outcome of every txn that runs, in pre-order.
    fn compare_to_path(
        &self,
        req: &TxnRequest,
        at: i64,
        path: &mut Vec<bool>,
    ) -> Result<(), MvccError> {
        let mut ok = true;
        for c in &req.compare {
            if !self.apply_compare(c, at)? {
                ok = false;
                break;
            }
        }
        path.push(ok);
        for nested in txn::nested(txn::branch(req, ok)) {
            self.compare_to_path(nested, at, path)?;
        }
        Ok(())
    }

    /// etcd's `checkRequests` with `checkRequestPut` (`puts`) or `checkRequestRange`.
    fn check_requests(
        &self,
        req: &TxnRequest,
        path: &[bool],
        pos: &mut usize,
        puts: bool,
    ) -> Result<(), MvccError> {
        let ok = path.get(*pos).copied().unwrap_or(false);
        *pos += 1;
        for op in txn::branch(req, ok) {
            match &op.request {
                Some(Request::RequestTxn(t)) => self.check_requests(t, path, pos, puts)?,
                Some(Request::RequestPut(p)) if puts => {
                    if (p.ignore_value || p.ignore_lease)
                        && self
                            .mvcc
                            .core
                            .state
                            .read()
                            .index
                            .get(&p.key, self.rev)
                            .is_none()
                    {
                        return Err(MvccError::KeyNotFound);
                    }
                    if p.lease != 0 && !(self.lease_exists)(p.lease) {
                        return Err(MvccError::LeaseNotFound(p.lease));
                    }
                }
                Some(Request::RequestRange(r)) if !puts && r.revision != 0 => {
                    if r.revision > self.rev {
                        return Err(MvccError::FutureRevision);
                    }
                    if r.revision < self.compact_rev {
                        return Err(MvccError::Compacted);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// etcd's `applyTxn`.
    fn apply_txn(
        &mut self,
        req: &TxnRequest,
        path: &[bool],
        pos: &mut usize,
        op: &mut Op,
    ) -> Result<TxnResponse, MvccError> {
        let ok = path.get(*pos).copied().unwrap_or(false);
        *pos += 1;
        let ops: &[RequestOp] = txn::branch(req, ok);
        let mut responses = Vec::with_capacity(ops.len());
        for o in ops {
            let response = match &o.request {
                Some(Request::RequestRange(r)) => {
                    Some(Response::ResponseRange(self.range_op(r, op)?))
                }
                Some(Request::RequestPut(p)) => Some(Response::ResponsePut(self.put_op(p, op)?)),
                Some(Request::RequestDeleteRange(d)) => {
                    Some(Response::ResponseDeleteRange(self.delete_op(d, op)?))
                }
                Some(Request::RequestTxn(t)) => {
                    Some(Response::ResponseTxn(self.apply_txn(t, path, pos, op)?))
                }
                None => None,
            };
            responses.push(ResponseOp { response });
        }
        Ok(TxnResponse {
            header: Some(ResponseHeader::default()),
            succeeded: ok,
            responses,
        })
    }
}

impl Drop for ApplyBatch<'_> {
    fn drop(&mut self) {
        if !self.undo.is_empty() {
            let mut s = self.mvcc.core.state.write();
            for (key, tomb) in self.undo.drain(..).rev() {
                s.index.undo(&key, tomb);
            }
        }
    }
}
