//! openraft's state machine on the MVCC store.
//!
//! Each `apply` call takes every committed entry openraft hands over, applies them all in one
//! MVCC batch (one backend transaction, no fsync: the WAL is the truth), records the applied log
//! id in that same transaction, and only then answers the proposers, so a write is visible to
//! reads before it is acknowledged.
//!
//! The snapshot of a member is its backend made durable: building one fsyncs the backend at the
//! applied log id, after which openraft may purge the WAL behind it. A restart replays the WAL
//! from the backend's applied index.

use std::io;
use std::sync::Arc;

use futures::{Stream, TryStreamExt};
use keel_mvcc::{ApplyBatch, Mvcc};
use keel_proto::etcdserverpb::{
    AlarmMember, AlarmRequest, AlarmResponse, alarm_request::AlarmAction,
};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend};
use parking_lot::RwLock;
use prost::Message;

use super::codec::{self, LogId};
use super::{Applied, KeelRaft, Proposal, ProposalOp};
use crate::api::error::EtcdError;
use crate::auth::{AuthOp, AuthProposal, AuthStore};
use crate::metrics::Metrics;
use crate::watch::WatchHub;

type StoredMembership = openraft::alias::StoredMembershipOf<KeelRaft>;
type SnapshotMeta = openraft::alias::SnapshotMetaOf<KeelRaft>;
type Snapshot = openraft::alias::SnapshotOf<KeelRaft, DurableBackend>;

const META_APPLIED: &str = "raft_applied_log_id";
const META_MEMBERSHIP: &str = "raft_membership";
const META_ALARMS: &str = "alarms";
const META_AUTH: &str = "auth";

/// A snapshot's data: the member's own backend, durable up to the snapshot's log id.
#[derive(Debug, Clone, Copy)]
pub struct DurableBackend;

/// The applied state of this member, shared with the API layer.
pub struct Applier {
    /// The key-value store.
    pub mvcc: Arc<Mvcc>,
    alarms: RwLock<Vec<AlarmMember>>,
    auth: RwLock<AuthStore>,
    /// The watchers fed by every committed batch.
    pub watch: Arc<WatchHub>,
    applied: RwLock<(Option<LogId>, StoredMembership)>,
    metrics: Arc<Metrics>,
}

impl Applier {
    /// Loads the applied state recorded in the backend.
    pub fn open(mvcc: Arc<Mvcc>, metrics: Arc<Metrics>) -> io::Result<Applier> {
        let meta = |name| mvcc.meta(name).map_err(io::Error::other);
        let applied = codec::decode_log_id(&meta(META_APPLIED)?.unwrap_or_default())?;
        let membership = match meta(META_MEMBERSHIP)? {
            Some(bytes) if bytes.len() >= 16 => {
                let (log_id, membership) = bytes.split_at(16);
                let log_id = codec::decode_log_id(log_id)?;
                StoredMembership::new(
                    log_id,
                    codec::decode_membership(&mut codec::Reader(membership))?,
                )
            }
            Some(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "truncated membership record",
                ));
            }
            None => StoredMembership::default(),
        };
        let alarms = match meta(META_ALARMS)? {
            Some(bytes) => {
                AlarmResponse::decode(bytes.as_slice())
                    .map_err(io::Error::other)?
                    .alarms
            }
            None => Vec::new(),
        };
        let auth = match meta(META_AUTH)? {
            Some(bytes) => AuthStore::decode(bytes.as_slice()).map_err(io::Error::other)?,
            None => AuthStore::new(),
        };
        let watch = Arc::new(WatchHub::new(mvcc.clone(), metrics.clone()));
        Ok(Applier {
            watch,
            mvcc,
            alarms: RwLock::new(alarms),
            auth: RwLock::new(auth),
            applied: RwLock::new((applied, membership)),
            metrics,
        })
    }

    /// The alarms currently raised.
    pub fn alarms(&self) -> Vec<AlarmMember> {
        self.alarms.read().clone()
    }

    /// Reads the auth store.
    pub fn auth<T>(&self, read: impl FnOnce(&AuthStore) -> T) -> T {
        read(&self.auth.read())
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
            Some(ProposalOp::Auth(AuthProposal { op: Some(op) })) => {
                return self.apply_auth(batch, &op);
            }
            Some(ProposalOp::Auth(AuthProposal { op: None })) => {
                return Applied::Rejected(EtcdError::Internal("empty auth proposal".into()));
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

    fn snapshot(&self) -> io::Result<Snapshot> {
        let (last_log_id, last_membership) = self.applier.applied.read().clone();
        self.applier.mvcc.sync().map_err(io::Error::other)?;
        Ok(Snapshot {
            meta: SnapshotMeta {
                last_log_id,
                last_membership,
            },
            snapshot: DurableBackend,
        })
    }
}

impl RaftSnapshotBuilder<KeelRaft> for StateMachine {
    type SnapshotData = DurableBackend;

    async fn build_snapshot(&mut self) -> io::Result<Snapshot> {
        self.snapshot()
    }
}

impl RaftStateMachine<KeelRaft> for StateMachine {
    type SnapshotData = DurableBackend;
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
        let no_leases = |_id: i64| false;
        let mut batch = applier.mvcc.begin_apply(&no_leases);
        let mut replies = Vec::with_capacity(items.len());
        let mut membership = None;
        for (entry, responder) in items {
            let applied = match entry.payload {
                EntryPayload::Normal(proposal) => applier.apply_proposal(&mut batch, proposal),
                EntryPayload::Membership(m) => {
                    let mut bytes = codec::encode_log_id(Some(&entry.log_id));
                    codec::encode_membership(&m, &mut bytes);
                    batch.set_meta(META_MEMBERSHIP, &bytes);
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
        _meta: &SnapshotMeta,
        _snapshot: DurableBackend,
    ) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "installing a snapshot sent by a leader needs peer transport, which this member has not configured",
        ))
    }

    async fn get_current_snapshot(&mut self) -> io::Result<Option<Snapshot>> {
        if self.applier.applied().is_none() {
            return Ok(None);
        }
        self.snapshot().map(Some)
    }
}
