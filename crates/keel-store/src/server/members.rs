//! This member's place in the cluster: the attributes it publishes, the member list, and
//! membership changes made through the leader (see [`crate::raft::membership`]).

use std::sync::atomic::Ordering;
use std::time::Duration;

use keel_proto::etcdserverpb::Member;

use super::Store;
use crate::error::EtcdError;
use crate::raft::ProposalOp;
use crate::raft::membership::Change;

impl Store {
    /// Publishes this member's attributes through the log (etcd's `publish`), retrying until
    /// they are applied; proposes nothing when they are already recorded.
    pub(super) async fn publish(&self) {
        let attributes = self.attributes();
        while self.applier.published(self.member_id).as_ref() != Some(&attributes) {
            match self.propose(ProposalOp::Member(attributes.clone())).await {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "publishing this member's attributes; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }

    /// This member's attributes, as it publishes them to the cluster.
    fn attributes(&self) -> Member {
        Member {
            id: self.member_id,
            name: self.config.name.clone(),
            peer_ur_ls: self.config.advertised_peer_urls(),
            client_ur_ls: self.config.advertised_client_urls(),
            is_learner: false,
        }
    }

    /// The cluster's members as etcd lists them (see
    /// [`crate::raft::membership::Roster::members`]).
    pub fn members(&self) -> Vec<Member> {
        self.roster.members()
    }

    /// Whether this member is a learner (which serves only Status, serializable reads and
    /// snapshots, as in etcd).
    pub fn is_learner(&self) -> bool {
        self.learner.load(Ordering::Relaxed)
    }

    /// Makes a membership change through the leader; returns once this member has applied it.
    pub async fn reconfigure(&self, change: &Change) -> Result<(), EtcdError> {
        let timeout = self.config.request_timeout();
        let index = match self.remote_leader() {
            None if self.leader() == 0 => return Err(EtcdError::NoLeader),
            None => self.roster.reconfigure(change, timeout).await?,
            Some((leader, addr)) => {
                self.link
                    .reconfigure(leader, &addr, change, timeout)
                    .await?
            }
        };
        // The leader stops replicating to a member as soon as it removes it: a member asked
        // to remove itself never applies its removal, so the leader's word is the answer.
        if *change == Change::Remove(self.member_id) {
            return Ok(());
        }
        self.wait_applied(index, timeout, "the membership change")
            .await
    }

    /// Resolves once this member has been removed from the cluster.
    pub async fn removed(&self) {
        self.removal.wait().await
    }
}
