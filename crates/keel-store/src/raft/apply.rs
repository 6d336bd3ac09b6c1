//! The applied state of a member and how each committed entry changes it.
//!
//! The [`Applier`] holds what the log has made of this member: the MVCC store, alarms, the
//! members' published attributes, removed members, the auth store and the lessor; every
//! record besides keys lives in the backend's meta bucket, written in the same transaction as
//! the entries that changed it, so the backend is always at one applied log id.
//!
//! Leases are replicated the same way as the auth store: grants, revokes, expiries and
//! checkpoints are log entries applied here to the [`Lessor`], which persists one record per
//! lease in the same backend transaction. Puts check their lease against the lessor (also inside
//! txns), and the events of every applied op attach keys to or detach them from leases; a
//! revoke deletes all of a lease's keys in one revision (one internal txn of deletes), so
//! watchers see DELETE events with `prev_kv`.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use keel_mvcc::{ApplyBatch, Mvcc};
use keel_proto::etcdserverpb::{
    AlarmMember, AlarmRequest, AlarmResponse, DeleteRangeRequest, LeaseGrantResponse,
    LeaseRevokeResponse, Member, MemberListResponse, RequestOp, ResponseHeader, TxnRequest,
    alarm_request::AlarmAction, request_op,
};
use keel_proto::mvccpb::{Event, event::EventType};
use parking_lot::{Mutex, RwLock};
use prost::Message;

use super::codec::LogId;
use super::records::{
    META_ALARMS, META_AUTH, META_MEMBERS, META_REMOVED, Records, StoredMembership,
};
use super::{Applied, Proposal, ProposalOp};
use crate::auth::{AuthOp, AuthProposal, AuthStore};
use crate::error::EtcdError;
use crate::lease::{self, LeaseClock, LeaseOp, LeaseProposal, Lessor};
use crate::metrics::Metrics;
use crate::watch::WatchHub;

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
    pub(super) lessor: Mutex<Lessor>,
    /// The time every lessor call is made at.
    lease_clock: LeaseClock,
    /// The watchers fed by every committed batch. Declared after `mvcc`, so the hub (which
    /// holds the backend too) outlives this handle on it: see `Store::backend_released`.
    pub watch: Arc<WatchHub>,
    /// The last applied log id and the membership applied with it; written through
    /// [`Applier::set_applied`].
    pub(super) applied: RwLock<(Option<LogId>, StoredMembership)>,
    /// The index of `applied`'s log id (0: none), read on every write without the lock.
    applied_index: AtomicU64,
    min_lease_ttl: i64,
    pub(super) metrics: Arc<Metrics>,
}

/// The records of the backend with the lessor they describe: what [`Applier`] keeps in
/// memory.
struct Recorded {
    records: Records,
    lessor: Lessor,
}

impl Recorded {
    fn load(mvcc: &Mvcc, min_lease_ttl: i64) -> io::Result<Recorded> {
        let mut records = Records::of_mvcc(mvcc)?;
        let leased_keys = mvcc.leased_keys().map_err(io::Error::other)?;
        let leases = std::mem::take(&mut records.leases);
        let lessor = Lessor::restore(min_lease_ttl, leases, leased_keys);
        Ok(Recorded { records, lessor })
    }
}

impl Applier {
    /// Loads the applied state recorded in the backend; leases get etcd's minimum TTL
    /// `min_lease_ttl` (seconds) and are timed by `lease_clock`.
    pub fn open(
        mvcc: Arc<Mvcc>,
        metrics: Arc<Metrics>,
        min_lease_ttl: i64,
        lease_clock: LeaseClock,
    ) -> io::Result<Applier> {
        let Recorded { records, lessor } = Recorded::load(&mvcc, min_lease_ttl)?;
        metrics.lease_count.set(lessor.len() as i64);
        let watch = Arc::new(WatchHub::new(mvcc.clone(), metrics.clone()));
        Ok(Applier {
            watch,
            mvcc,
            alarms: RwLock::new(records.alarms),
            members: RwLock::new(records.members),
            removed: RwLock::new(records.removed),
            auth: RwLock::new(records.auth),
            lessor: Mutex::new(lessor),
            lease_clock,
            applied_index: AtomicU64::new(index(records.applied)),
            applied: RwLock::new((records.applied, records.membership)),
            min_lease_ttl,
            metrics,
        })
    }

    /// Replaces the backend with the snapshot file at `path` and everything applied with what
    /// it records; watchers catch up from it. Reads are not stopped meanwhile: for a moment a
    /// read may see the new keys with the leases or auth store of before, as a follower far
    /// behind its leader serves old state anyway.
    pub(super) fn install(&self, path: &Path) -> io::Result<()> {
        self.mvcc.replace_with(path).map_err(io::Error::other)?;
        let Recorded { records, lessor } = Recorded::load(&self.mvcc, self.min_lease_ttl)?;
        self.metrics.lease_count.set(lessor.len() as i64);
        *self.alarms.write() = records.alarms;
        *self.members.write() = records.members;
        *self.removed.write() = records.removed;
        *self.auth.write() = records.auth;
        *self.lessor.lock() = lessor;
        self.set_applied(records.applied, Some(records.membership));
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
    pub(super) fn apply_membership(
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

    /// Runs `f` on the lessor with the lease clock's current time, read under the lessor's
    /// lock so calls see the lessor's times in order.
    pub fn lessor_at<T>(&self, f: impl FnOnce(&mut Lessor, std::time::Instant) -> T) -> T {
        let mut lessor = self.lessor.lock();
        f(&mut lessor, self.lease_clock.now())
    }

    /// The clock leases are timed by.
    pub fn lease_clock(&self) -> &LeaseClock {
        &self.lease_clock
    }

    /// The last applied log id.
    pub fn applied(&self) -> Option<LogId> {
        self.applied.read().0
    }

    /// The index of the last applied entry (0: none), without taking a lock.
    pub fn applied_index(&self) -> u64 {
        self.applied_index.load(Ordering::Acquire)
    }

    /// Records `last` as applied, with the membership applied along with it if it changed.
    pub(super) fn set_applied(&self, last: Option<LogId>, membership: Option<StoredMembership>) {
        let mut applied = self.applied.write();
        applied.0 = last;
        if let Some(m) = membership {
            applied.1 = m;
        }
        // Released after what was applied, so a reader that sees the index sees its effects.
        self.applied_index.store(index(last), Ordering::Release);
    }

    pub(super) fn apply_proposal(&self, batch: &mut ApplyBatch<'_>, proposal: Proposal) -> Applied {
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
                let granted = self.lessor_at(|l, now| l.grant(req.id, req.ttl, now));
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
    pub(super) fn track_leases(&self, events: &[Event]) {
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

/// The index of an applied log id, 0 for none.
fn index(id: Option<LogId>) -> u64 {
    id.map_or(0, |id| id.index)
}
