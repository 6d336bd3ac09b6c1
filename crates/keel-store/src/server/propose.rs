//! The write path: [`Store::propose`] and the checks before it.
//!
//! A write is refused before it is proposed when the member stopped, the request is too
//! large, no leader is known or apply trails commit too far; [`Store::check_quota`] is etcd's
//! backend quota check. The leader proposes it to its Raft node; a follower hands it to the
//! leader (see [`crate::raft::forward`]) and answers once it has applied it too, so its
//! client reads it here next.

use std::time::Duration;

use keel_proto::etcdserverpb::{AlarmRequest, AlarmType, alarm_request::AlarmAction};
use openraft::errors::{ClientWriteError, RaftError};
use prometheus_client::metrics::gauge::Gauge;
use prost::Message;

use super::Store;
use crate::error::EtcdError;
use crate::raft::forward::Unsent;
use crate::raft::{Applied, Proposal, ProposalOp};

/// How far the applied index may trail the commit index before writes are refused with
/// `etcdserver: too many requests` (etcd's `maxGapBetweenApplyAndCommitIndex`), so a member
/// whose apply falls behind does not queue proposals without bound.
pub const MAX_APPLY_GAP: u64 = 5000;

impl Store {
    /// Replicates and applies one write, returning the applied result; a follower has the
    /// leader propose it.
    pub async fn propose(&self, op: ProposalOp) -> Result<Applied, EtcdError> {
        self.check_writable()?;
        let proposal = Proposal { op: Some(op) };
        if proposal.encoded_len() > self.config.max_request_bytes as usize {
            return Err(EtcdError::RequestTooLarge);
        }
        if self.leader() == 0 {
            self.metrics.proposals_failed.inc();
            return Err(EtcdError::NoLeader);
        }
        if self.committed_index() > self.applied_index() + MAX_APPLY_GAP {
            return Err(EtcdError::TooManyRequests);
        }
        let _pending = Pending::new(&self.metrics.proposals_pending);
        let deadline = tokio::time::Instant::now() + self.config.request_timeout();
        let pause = Duration::from_millis(self.config.heartbeat_interval);
        // While some member leads, a write that was certainly not applied is tried again: one
        // handed back unsent because another member took over while it was queued goes to the
        // new leader (or is proposed here, if this member took over), and one a leader refused
        // (just elected, its quorum not heard yet; or not reached at all) after a pause.
        while let Some((leader, addr)) = self.remote_leader() {
            let wait = match self.link.propose(leader, &addr, &proposal, deadline).await {
                // etcd's answer when a new leader was elected while the write waited.
                Ok((Applied::Rejected(EtcdError::Timeout), _))
                    if ![0, leader].contains(&self.leader()) =>
                {
                    self.metrics.proposals_failed.inc();
                    return Err(EtcdError::TimeoutDueToLeaderFail);
                }
                Ok((Applied::Rejected(EtcdError::NoLeader), _)) if self.leader() != 0 => pause,
                // Not carried out (rather than applied and refused, e.g. for a compacted revision).
                Ok((Applied::Rejected(e @ (EtcdError::NoLeader | EtcdError::Timeout)), _)) => {
                    self.metrics.proposals_failed.inc();
                    return Err(e);
                }
                Ok((applied, index)) => {
                    // As etcd, a write is answered once this member has applied it too, so its
                    // client reads it here next (a refusal at apply time is applied as well).
                    self.applied_by(index, deadline).await?;
                    return match applied {
                        Applied::Rejected(e) => Err(e),
                        applied => Ok(applied),
                    };
                }
                Err(Unsent) => Duration::ZERO,
            };
            if tokio::time::Instant::now() + wait >= deadline {
                self.metrics.proposals_failed.inc();
                return Err(EtcdError::Timeout);
            }
            tokio::time::sleep(wait).await;
        }
        let written = loop {
            let written = self.raft.client_write(proposal.clone());
            let Ok(written) = tokio::time::timeout_at(deadline, written).await else {
                // etcd's ErrTimeout: the entry may still commit once a quorum answers.
                self.metrics.proposals_failed.inc();
                return Err(EtcdError::Timeout);
            };
            // A leader whose quorum has not acknowledged it yet (just elected, or a late
            // heartbeat) refuses writes without naming another leader: retry while it leads.
            if let Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) = &written
                && f.leader_id.is_none()
                && self.leader() == self.member_id
            {
                tokio::time::sleep(pause.min(deadline - tokio::time::Instant::now())).await;
                continue;
            }
            break written;
        };
        match written {
            Ok(resp) => match resp.data {
                Applied::Rejected(e) => Err(e),
                applied => Ok(applied),
            },
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                self.metrics.proposals_failed.inc();
                Err(EtcdError::NoLeader)
            }
            // The Raft core stopped (a storage failure, see `failure`): etcd's answer while
            // it stops, never openraft's own description.
            Err(RaftError::Fatal(_)) => {
                self.metrics.proposals_failed.inc();
                Err(EtcdError::Stopped)
            }
            Err(e) => {
                self.metrics.proposals_failed.inc();
                Err(EtcdError::Internal(e.to_string()))
            }
        }
    }

    /// Waits until this member has applied log `index`, or fails with etcd's timeout at
    /// `deadline`.
    async fn applied_by(
        &self,
        index: u64,
        deadline: tokio::time::Instant,
    ) -> Result<(), EtcdError> {
        if self.applied_index() >= index {
            return Ok(());
        }
        let within = deadline.saturating_duration_since(tokio::time::Instant::now());
        self.wait_applied(index, within, "a forwarded write").await
    }

    /// Refuses a write that adds data when the NOSPACE alarm is raised, and raises it when the
    /// backend has grown past the quota (etcd's quota check before proposing).
    pub async fn check_quota(&self, cost: usize) -> Result<(), EtcdError> {
        let nospace = AlarmType::Nospace as i32;
        if self.alarms().iter().any(|a| a.alarm == nospace) {
            return Err(EtcdError::NoSpace);
        }
        if self.mvcc().db_size() + cost as u64 <= self.config.quota_bytes() {
            return Ok(());
        }
        let raise = AlarmRequest {
            action: AlarmAction::Activate as i32,
            member_id: self.member_id,
            alarm: nospace,
        };
        tracing::warn!(
            quota = self.config.quota_bytes(),
            "backend quota exceeded: raising the NOSPACE alarm"
        );
        self.propose(ProposalOp::Alarm(raise)).await?;
        Err(EtcdError::NoSpace)
    }
}

/// Counts one proposal in `etcd_server_proposals_pending` while it lives.
struct Pending<'a>(&'a Gauge<i64>);

impl<'a> Pending<'a> {
    fn new(gauge: &'a Gauge<i64>) -> Self {
        gauge.inc();
        Pending(gauge)
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}
