//! openraft's state machine on the MVCC store.
//!
//! Each `apply` call takes every committed entry openraft hands over, applies them all in one
//! MVCC batch (one backend transaction, no fsync: the WAL is the truth), records the applied log
//! id in that same transaction, and only then answers the proposers, so a write is visible to
//! reads before it is acknowledged.
//!
//! Leases are replicated the same way as the auth store: grants, revokes, expiries and
//! checkpoints are log entries applied here to the [`Lessor`], which persists one record per
//! lease in the same backend transaction. Puts check their lease against the lessor (also inside
//! txns), and the events of every applied op attach keys to or detach them from leases; a
//! revoke deletes all of a lease's keys in one revision (one internal txn of deletes), so
//! watchers see DELETE events with `prev_kv`.
//!
//! The snapshot of a member is its backend made durable: building one fsyncs the backend at the
//! applied log id, after which openraft may purge the WAL behind it. A restart replays the WAL
//! from the backend's applied index.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures::{Stream, TryStreamExt};
use keel_mvcc::{ApplyBatch, BackendView, Mvcc, SnapshotRow, SnapshotTable, SnapshotWriter};
use keel_proto::etcdserverpb::{
    AlarmMember, AlarmRequest, AlarmResponse, DeleteRangeRequest, LeaseGrantResponse,
    LeaseRevokeResponse, Member, MemberListResponse, RequestOp, ResponseHeader, TxnRequest,
    alarm_request::AlarmAction, request_op,
};
use keel_proto::mvccpb::{Event, event::EventType};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend};
use parking_lot::{Mutex, RwLock};
use prost::Message;

use super::codec::{self, LogId};
use super::{Applied, KeelRaft, Proposal, ProposalOp};
use crate::api::error::EtcdError;
use crate::auth::{AuthOp, AuthProposal, AuthStore};
use crate::data_dir::DataDir;
use crate::lease::{self, LeaseOp, LeaseProposal, LeaseRecord, Lessor};
use crate::metrics::Metrics;
use crate::watch::WatchHub;

type StoredMembership = openraft::alias::StoredMembershipOf<KeelRaft>;
type SnapshotMeta = openraft::alias::SnapshotMetaOf<KeelRaft>;
type Snapshot = openraft::alias::SnapshotOf<KeelRaft, SnapshotData>;

const META_APPLIED: &str = "raft_applied_log_id";
const META_MEMBERSHIP: &str = "raft_membership";
const META_ALARMS: &str = "alarms";
const META_AUTH: &str = "auth";
const META_MEMBERS: &str = "members";
const META_REMOVED: &str = "members_removed";

/// A snapshot's data.
pub enum SnapshotData {
    /// A point-in-time view of this member's backend, whose records name the snapshot's log
    /// id and membership: what a leader streams to a member it has purged entries for.
    View(Arc<BackendView>),
    /// A backend file received from the leader, to be swapped in.
    Received(IncomingFile),
}

/// A snapshot file being received or waiting to be installed; removed if it never is (a
/// stream cut short, or a snapshot openraft declines as stale).
pub struct IncomingFile(PathBuf);

impl Drop for IncomingFile {
    fn drop(&mut self) {
        // After an install the file was renamed into place: nothing is left to remove.
        let _ = std::fs::remove_file(&self.0);
    }
}

impl std::fmt::Debug for SnapshotData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotData::View(_) => f.write_str("View"),
            SnapshotData::Received(file) => write!(f, "Received({})", file.0.display()),
        }
    }
}

/// A snapshot streamed by the leader, written to a new file in the member's `snap` directory
/// as it arrives; its log id and membership are read from the backend records it carries.
pub struct SnapshotReceiver {
    // Declared before the file, so it is closed before an unfinished file is removed.
    writer: Option<SnapshotWriter>,
    file: IncomingFile,
    rows: u64,
    applied: Option<Vec<u8>>,
    membership: Option<Vec<u8>>,
}

impl SnapshotReceiver {
    /// A receiver writing into a new scratch file of `data` ([`DataDir::incoming_snapshot`]).
    pub fn create(data: &DataDir) -> io::Result<SnapshotReceiver> {
        let path = data.incoming_snapshot();
        let writer = SnapshotWriter::create(&path).map_err(io::Error::other)?;
        Ok(SnapshotReceiver {
            writer: Some(writer),
            file: IncomingFile(path),
            rows: 0,
            applied: None,
            membership: None,
        })
    }

    /// Writes the rows of one chunk.
    pub fn write(&mut self, rows: &[SnapshotRow]) -> io::Result<()> {
        for row in rows
            .iter()
            .filter(|r| r.table == SnapshotTable::AppMeta.id())
        {
            match row.key.as_slice() {
                k if k == META_APPLIED.as_bytes() => self.applied = Some(row.value.clone()),
                k if k == META_MEMBERSHIP.as_bytes() => self.membership = Some(row.value.clone()),
                _ => {}
            }
        }
        self.rows += rows.len() as u64;
        match &mut self.writer {
            Some(writer) => writer.write(rows).map_err(io::Error::other),
            None => Err(io::Error::other("the snapshot was finished")),
        }
    }

    /// Makes the file durable once it holds the `sent` rows the leader says it sent; the
    /// snapshot to hand to openraft.
    pub fn finish(mut self, sent: u64) -> io::Result<Snapshot> {
        if self.rows != sent {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the snapshot stream carried {} rows, the leader sent {sent}",
                    self.rows
                ),
            ));
        }
        if let Some(writer) = self.writer.take() {
            writer.finish().map_err(io::Error::other)?;
        }
        let last_log_id = codec::decode_log_id(&self.applied.take().unwrap_or_default())?;
        if last_log_id.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a snapshot without an applied log id",
            ));
        }
        Ok(Snapshot {
            meta: SnapshotMeta {
                last_log_id,
                last_membership: decode_membership(self.membership.take())?,
            },
            snapshot: SnapshotData::Received(self.file),
        })
    }
}

/// The applied state of this member, shared with the API layer.
pub struct Applier {
    /// The key-value store.
    pub mvcc: Arc<Mvcc>,
    alarms: RwLock<Vec<AlarmMember>>,
    /// The attributes each member published, by id.
    members: RwLock<BTreeMap<u64, Member>>,
    /// Members removed from the cluster (etcd keeps them so it can refuse their messages).
    removed: RwLock<BTreeSet<u64>>,
    auth: RwLock<AuthStore>,
    lessor: Mutex<Lessor>,
    /// The watchers fed by every committed batch.
    pub watch: Arc<WatchHub>,
    applied: RwLock<(Option<LogId>, StoredMembership)>,
    min_lease_ttl: i64,
    metrics: Arc<Metrics>,
}

/// Everything the backend records besides keys: what [`Applier`] keeps in memory.
struct Recorded {
    applied: Option<LogId>,
    membership: StoredMembership,
    alarms: Vec<AlarmMember>,
    members: BTreeMap<u64, Member>,
    removed: BTreeSet<u64>,
    auth: AuthStore,
    lessor: Lessor,
}

impl Recorded {
    fn load(mvcc: &Mvcc, min_lease_ttl: i64) -> io::Result<Recorded> {
        let meta = |name| mvcc.meta(name).map_err(io::Error::other);
        let applied = codec::decode_log_id(&meta(META_APPLIED)?.unwrap_or_default())?;
        let membership = decode_membership(meta(META_MEMBERSHIP)?)?;
        let alarms = match meta(META_ALARMS)? {
            Some(bytes) => {
                AlarmResponse::decode(bytes.as_slice())
                    .map_err(io::Error::other)?
                    .alarms
            }
            None => Vec::new(),
        };
        let members = match meta(META_MEMBERS)? {
            Some(bytes) => MemberListResponse::decode(bytes.as_slice())
                .map_err(io::Error::other)?
                .members
                .into_iter()
                .map(|m| (m.id, m))
                .collect(),
            None => BTreeMap::new(),
        };
        let removed = meta(META_REMOVED)?.unwrap_or_default();
        if removed.len() % 8 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the removed-members record is not a list of 8-byte ids",
            ));
        }
        let removed = removed
            .chunks_exact(8)
            .map(|id| u64::from_be_bytes(id.try_into().expect("8 bytes")))
            .collect();
        let auth = match meta(META_AUTH)? {
            Some(bytes) => AuthStore::decode(bytes.as_slice()).map_err(io::Error::other)?,
            None => AuthStore::new(),
        };
        let mut records = Vec::new();
        for (_, bytes) in mvcc
            .meta_with_prefix(lease::META_PREFIX)
            .map_err(io::Error::other)?
        {
            records.push(LeaseRecord::decode(bytes.as_slice()).map_err(io::Error::other)?);
        }
        let leased_keys = mvcc.leased_keys().map_err(io::Error::other)?;
        let lessor = Lessor::restore(min_lease_ttl, records, leased_keys);
        Ok(Recorded {
            applied,
            membership,
            alarms,
            members,
            removed,
            auth,
            lessor,
        })
    }
}

/// The membership record (`raft_membership`): its log id, then the membership.
fn decode_membership(bytes: Option<Vec<u8>>) -> io::Result<StoredMembership> {
    match bytes {
        Some(bytes) if bytes.len() >= 16 => {
            let (log_id, membership) = bytes.split_at(16);
            let log_id = codec::decode_log_id(log_id)?;
            Ok(StoredMembership::new(
                log_id,
                codec::decode_membership(&mut codec::Reader(membership))?,
            ))
        }
        Some(_) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "truncated membership record",
        )),
        None => Ok(StoredMembership::default()),
    }
}

impl Applier {
    /// Loads the applied state recorded in the backend; leases get etcd's minimum TTL
    /// `min_lease_ttl` (seconds).
    pub fn open(mvcc: Arc<Mvcc>, metrics: Arc<Metrics>, min_lease_ttl: i64) -> io::Result<Applier> {
        let state = Recorded::load(&mvcc, min_lease_ttl)?;
        metrics.lease_count.set(state.lessor.len() as i64);
        let watch = Arc::new(WatchHub::new(mvcc.clone(), metrics.clone()));
        Ok(Applier {
            watch,
            mvcc,
            alarms: RwLock::new(state.alarms),
            members: RwLock::new(state.members),
            removed: RwLock::new(state.removed),
            auth: RwLock::new(state.auth),
            lessor: Mutex::new(state.lessor),
            applied: RwLock::new((state.applied, state.membership)),
            min_lease_ttl,
            metrics,
        })
    }

    /// Replaces the backend with the snapshot file at `path` and everything applied with what
    /// it records; watchers catch up from it. Reads are not stopped meanwhile: for a moment a
    /// read may see the new keys with the leases or auth store of before, as a follower far
    /// behind its leader serves old state anyway.
    fn install(&self, path: &Path) -> io::Result<()> {
        self.mvcc.replace_with(path).map_err(io::Error::other)?;
        let state = Recorded::load(&self.mvcc, self.min_lease_ttl)?;
        self.metrics.lease_count.set(state.lessor.len() as i64);
        *self.alarms.write() = state.alarms;
        *self.members.write() = state.members;
        *self.removed.write() = state.removed;
        *self.auth.write() = state.auth;
        *self.lessor.lock() = state.lessor;
        *self.applied.write() = (state.applied, state.membership);
        self.watch.restore(self.mvcc.current_revision());
        Ok(())
    }

    /// The alarms currently raised.
    pub fn alarms(&self) -> Vec<AlarmMember> {
        self.alarms.read().clone()
    }

    /// The attributes member `id` published, if it did.
    pub fn published(&self, id: u64) -> Option<Member> {
        self.members.read().get(&id).cloned()
    }

    /// Whether member `id` was removed from the cluster.
    pub fn is_removed(&self, id: u64) -> bool {
        self.removed.read().contains(&id)
    }

    /// Records the members a new membership no longer has as removed, and forgets their
    /// attributes.
    fn apply_membership(
        &self,
        batch: &mut ApplyBatch<'_>,
        before: &openraft::Membership<u64, openraft::impls::BasicNode>,
        after: &openraft::Membership<u64, openraft::impls::BasicNode>,
    ) {
        let gone: Vec<u64> = before
            .nodes()
            .map(|(id, _)| *id)
            .filter(|id| after.get_node(id).is_none())
            .collect();
        if gone.is_empty() {
            return;
        }
        let mut removed = self.removed.write();
        removed.extend(gone.iter().copied());
        let ids: Vec<u8> = removed.iter().flat_map(|id| id.to_be_bytes()).collect();
        batch.set_meta(META_REMOVED, &ids);
        let mut members = self.members.write();
        if gone.iter().any(|id| members.remove(id).is_some()) {
            persist_members(batch, &members);
        }
    }

    /// Reads the auth store.
    pub fn auth<T>(&self, read: impl FnOnce(&AuthStore) -> T) -> T {
        read(&self.auth.read())
    }

    /// Runs `f` on the lessor (keepalives, lookups and the leader's expiry loop).
    pub fn lessor<T>(&self, f: impl FnOnce(&mut Lessor) -> T) -> T {
        f(&mut self.lessor.lock())
    }

    /// The last applied log id.
    pub fn applied(&self) -> Option<LogId> {
        self.applied.read().0
    }

    fn apply_proposal(&self, batch: &mut ApplyBatch<'_>, proposal: Proposal) -> Applied {
        let result = match proposal.op {
            Some(ProposalOp::Put(req)) => batch.put(&req).map(Applied::Put),
            Some(ProposalOp::DeleteRange(req)) => {
                batch.delete_range(&req).map(Applied::DeleteRange)
            }
            Some(ProposalOp::Txn(req)) => batch.txn(&req).map(Applied::Txn),
            Some(ProposalOp::Compaction(req)) => batch.compact(&req).map(Applied::Compaction),
            Some(ProposalOp::Alarm(req)) => return Applied::Alarm(self.apply_alarm(batch, &req)),
            Some(ProposalOp::Member(member)) => return self.apply_member(batch, member),
            Some(ProposalOp::Auth(AuthProposal { op: Some(op) })) => {
                return self.apply_auth(batch, &op);
            }
            Some(ProposalOp::Auth(AuthProposal { op: None })) => {
                return Applied::Rejected(EtcdError::Internal("empty auth proposal".into()));
            }
            Some(ProposalOp::Lease(LeaseProposal { op: Some(op) })) => {
                return self.apply_lease(batch, op);
            }
            Some(ProposalOp::Lease(LeaseProposal { op: None })) => {
                return Applied::Rejected(EtcdError::Internal("empty lease proposal".into()));
            }
            None => return Applied::Rejected(EtcdError::Internal("empty proposal".into())),
        };
        result.unwrap_or_else(|e| Applied::Rejected(e.into()))
    }

    /// Applies an auth change and persists the auth store when it changed.
    fn apply_auth(&self, batch: &mut ApplyBatch<'_>, op: &AuthOp) -> Applied {
        let mut auth = self.auth.write();
        let revision = auth.revision;
        match auth.apply(op) {
            Ok(()) => {
                if auth.revision != revision {
                    batch.set_meta(META_AUTH, &auth.encode_to_vec());
                }
                Applied::Auth
            }
            Err(e) => Applied::Rejected(e),
        }
    }

    /// Applies a lease change; grants and checkpoints persist the lease's record, revokes
    /// and expiries delete it together with the lease's keys.
    fn apply_lease(&self, batch: &mut ApplyBatch<'_>, op: LeaseOp) -> Applied {
        let header = |revision| {
            Some(ResponseHeader {
                revision,
                ..Default::default()
            })
        };
        match op {
            LeaseOp::Grant(req) => {
                let granted = self.lessor.lock().grant(req.id, req.ttl, Instant::now());
                match granted {
                    Ok(record) => {
                        batch.set_meta(&lease::meta_name(req.id), &record.encode_to_vec());
                        self.metrics.lease_granted.inc();
                        self.metrics.lease_count.inc();
                        Applied::LeaseGrant(LeaseGrantResponse {
                            header: header(batch.revision()),
                            id: req.id,
                            ttl: record.ttl,
                            error: String::new(),
                        })
                    }
                    Err(e) => Applied::Rejected(e.into()),
                }
            }
            LeaseOp::Revoke(req) => match self.revoke_lease(batch, req.id) {
                Ok(()) => Applied::LeaseRevoke(LeaseRevokeResponse {
                    header: header(batch.revision()),
                }),
                Err(e) => Applied::Rejected(e),
            },
            LeaseOp::Expire(expire) => {
                for id in expire.ids {
                    match self.revoke_lease(batch, id) {
                        Ok(()) | Err(EtcdError::LeaseNotFound) => {}
                        Err(e) => return Applied::Rejected(e),
                    }
                }
                Applied::Lease
            }
            LeaseOp::Checkpoint(checkpoints) => {
                let mut lessor = self.lessor.lock();
                for c in checkpoints.checkpoints {
                    if let Some(record) = lessor.checkpoint(c.id, c.remaining_ms) {
                        batch.set_meta(&lease::meta_name(c.id), &record.encode_to_vec());
                    }
                }
                Applied::Lease
            }
        }
    }

    /// Revokes lease `id`: removes it and its record, and deletes its keys in one revision
    /// (sorted, as etcd does, so every member writes the same revision).
    fn revoke_lease(&self, batch: &mut ApplyBatch<'_>, id: i64) -> Result<(), EtcdError> {
        let keys = self.lessor.lock().revoke(id)?;
        batch.delete_meta(&lease::meta_name(id));
        self.metrics.lease_revoked.inc();
        self.metrics.lease_count.dec();
        if keys.is_empty() {
            return Ok(());
        }
        let deletes = TxnRequest {
            success: keys
                .into_iter()
                .map(|key| RequestOp {
                    request: Some(request_op::Request::RequestDeleteRange(
                        DeleteRangeRequest {
                            key,
                            ..Default::default()
                        },
                    )),
                })
                .collect(),
            ..Default::default()
        };
        batch.txn(&deletes)?;
        Ok(())
    }

    /// Attaches keys to and detaches them from leases after the events of one applied op (the
    /// lessor knows each key's lease, so events need not carry the values they replaced).
    fn track_leases(&self, events: &[Event]) {
        if events.is_empty() {
            return;
        }
        let mut lessor = self.lessor.lock();
        for event in events {
            let Some(kv) = &event.kv else { continue };
            let old = lessor.lease_of(&kv.key);
            let new = if event.r#type == EventType::Put as i32 {
                kv.lease
            } else {
                0
            };
            if old != 0 && old != new {
                lessor.detach(old, &kv.key);
            }
            if new != 0 && new != old {
                lessor.attach(new, kv.key.clone());
            }
        }
    }

    /// Records a member's published attributes and persists them all.
    fn apply_member(&self, batch: &mut ApplyBatch<'_>, member: Member) -> Applied {
        // As etcd, a removed member's attributes are not recorded again.
        if self.is_removed(member.id) {
            return Applied::Rejected(EtcdError::MemberNotFound);
        }
        let mut members = self.members.write();
        members.insert(member.id, member);
        persist_members(batch, &members);
        Applied::Published
    }

    /// Raises or clears an alarm, as etcd's applier does, and persists the alarm list.
    fn apply_alarm(&self, batch: &mut ApplyBatch<'_>, req: &AlarmRequest) -> AlarmResponse {
        let member = AlarmMember {
            member_id: req.member_id,
            alarm: req.alarm,
        };
        let mut alarms = self.alarms.write();
        let mut resp = AlarmResponse::default();
        match req.action() {
            AlarmAction::Activate => {
                if !alarms.contains(&member) {
                    alarms.push(member);
                }
                resp.alarms.push(member);
            }
            AlarmAction::Deactivate => {
                if let Some(pos) = alarms.iter().position(|a| *a == member) {
                    resp.alarms.push(alarms.remove(pos));
                }
            }
            AlarmAction::Get => resp.alarms = alarms.clone(),
        }
        let stored = AlarmResponse {
            alarms: alarms.clone(),
            ..Default::default()
        };
        batch.set_meta(META_ALARMS, &stored.encode_to_vec());
        resp
    }
}

/// Writes the published attributes of every member.
fn persist_members(batch: &mut ApplyBatch<'_>, members: &BTreeMap<u64, Member>) {
    let stored = MemberListResponse {
        members: members.values().cloned().collect(),
        ..Default::default()
    };
    batch.set_meta(META_MEMBERS, &stored.encode_to_vec());
}

/// openraft's handle on the applier.
#[derive(Clone)]
pub struct StateMachine {
    applier: Arc<Applier>,
}

impl StateMachine {
    /// Wraps the shared applier.
    pub fn new(applier: Arc<Applier>) -> Self {
        StateMachine { applier }
    }

    /// A snapshot of the backend as it is now: its meta read from the same view as its data.
    fn view(&self) -> io::Result<Option<Snapshot>> {
        let view = self.applier.mvcc.view().map_err(io::Error::other)?;
        let meta = |name| view.meta(name).map_err(io::Error::other);
        let last_log_id = codec::decode_log_id(&meta(META_APPLIED)?.unwrap_or_default())?;
        if last_log_id.is_none() {
            return Ok(None);
        }
        let last_membership = decode_membership(meta(META_MEMBERSHIP)?)?;
        Ok(Some(Snapshot {
            meta: SnapshotMeta {
                last_log_id,
                last_membership,
            },
            snapshot: SnapshotData::View(Arc::new(view)),
        }))
    }
}

impl RaftSnapshotBuilder<KeelRaft> for StateMachine {
    type SnapshotData = SnapshotData;

    /// The backend made durable: the view is taken first, so everything it holds is durable
    /// once the fsync returns, and openraft may purge the WAL up to it.
    async fn build_snapshot(&mut self) -> io::Result<Snapshot> {
        let snapshot = self
            .view()?
            .ok_or_else(|| io::Error::other("a snapshot of a member that applied nothing"))?;
        let mvcc = self.applier.mvcc.clone();
        tokio::task::spawn_blocking(move || mvcc.sync())
            .await
            .map_err(io::Error::other)?
            .map_err(io::Error::other)?;
        Ok(snapshot)
    }
}

impl RaftStateMachine<KeelRaft> for StateMachine {
    type SnapshotData = SnapshotData;
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> io::Result<(Option<LogId>, StoredMembership)> {
        Ok(self.applier.applied.read().clone())
    }

    async fn apply<S>(&mut self, entries: S) -> io::Result<()>
    where
        S: Stream<Item = io::Result<EntryResponder<KeelRaft>>> + Unpin + OptionalSend,
    {
        let items: Vec<EntryResponder<KeelRaft>> = entries.try_collect().await?;
        let Some(last) = items.last().map(|(entry, _)| entry.log_id) else {
            return Ok(());
        };
        let applier = &self.applier;
        let lease_exists = |id: i64| applier.lessor.lock().contains(id);
        let mut batch = applier.mvcc.begin_apply(&lease_exists);
        // Put events carry the value they replaced only for watchers that want it; one that
        // starts wanting it meanwhile catches up from the backend (see `watch::core`).
        batch.set_events_with_prev(applier.watch.wants_prev_kv());
        let mut replies = Vec::with_capacity(items.len());
        let mut membership: Option<StoredMembership> = None;
        let mut last_membership = applier.applied.read().1.membership().clone();
        for (entry, responder) in items {
            let applied = match entry.payload {
                EntryPayload::Normal(proposal) => {
                    let before = batch.events().len();
                    let applied = applier.apply_proposal(&mut batch, proposal);
                    applier.track_leases(&batch.events()[before..]);
                    applied
                }
                EntryPayload::Membership(m) => {
                    let mut bytes = codec::encode_log_id(Some(&entry.log_id));
                    codec::encode_membership(&m, &mut bytes);
                    batch.set_meta(META_MEMBERSHIP, &bytes);
                    applier.apply_membership(&mut batch, &last_membership, &m);
                    last_membership = m.clone();
                    membership = Some(StoredMembership::new(Some(entry.log_id), m));
                    Applied::default()
                }
                EntryPayload::Blank => Applied::default(),
            };
            if let Some(responder) = responder {
                replies.push((responder, applied));
            }
        }
        batch.set_meta(META_APPLIED, &codec::encode_log_id(Some(&last)));
        let started = std::time::Instant::now();
        let events = batch.commit(last.index).map_err(io::Error::other)?;
        applier
            .metrics
            .backend_commit
            .observe(started.elapsed().as_secs_f64());
        applier
            .watch
            .notify(events, applier.mvcc.current_revision());
        {
            let mut applied = applier.applied.write();
            applied.0 = Some(last);
            if let Some(m) = membership {
                applied.1 = m;
            }
        }
        applier.metrics.proposals_applied.set(last.index as i64);
        for (responder, applied) in replies {
            responder.send(applied);
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: SnapshotData,
    ) -> io::Result<()> {
        match snapshot {
            SnapshotData::Received(file) => {
                let applier = self.applier.clone();
                tokio::task::spawn_blocking(move || applier.install(&file.0))
                    .await
                    .map_err(io::Error::other)??;
                tracing::info!(
                    applied = %meta.last_log_id.map_or(0, |id| id.index),
                    revision = self.applier.mvcc.current_revision(),
                    "installed a snapshot from the leader"
                );
                Ok(())
            }
            // openraft re-installs the current snapshot at start only when it is ahead of the
            // applied state; a view of this backend never is.
            SnapshotData::View(_) if self.applier.applied() >= meta.last_log_id => Ok(()),
            SnapshotData::View(_) => Err(io::Error::other(
                "a view of this member's own backend is behind its snapshot",
            )),
        }
    }

    async fn get_current_snapshot(&mut self) -> io::Result<Option<Snapshot>> {
        self.view()
    }
}
