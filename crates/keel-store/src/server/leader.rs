//! The leader from this member's side: its peer, to forward writes, read indexes,
//! membership changes and lease calls to, and handing leadership to another voter
//! ([`Store::move_leader`]).

use std::time::Duration;

use openraft::async_runtime::WatchReceiver;

use super::Store;
use crate::error::EtcdError;
use crate::raft::forward::LeaderClient;
use crate::raft::membership;

impl Store {
    /// The leader, with its peer URL, when it is another member.
    pub(super) fn remote_leader(&self) -> Option<(u64, String)> {
        let leader = Some(self.leader()).filter(|l| *l != 0 && *l != self.member_id)?;
        let metrics = self.raft.metrics();
        let m = metrics.borrow_watched();
        let node = m.membership_config.membership().get_node(&leader)?;
        Some((leader, membership::peer_url(node).to_string()))
    }

    /// The client of the leader's peer service and the header of messages to it, when
    /// another member leads.
    pub fn leader_peer(&self) -> Option<Result<LeaderClient, EtcdError>> {
        let (leader, addr) = self.remote_leader()?;
        Some(self.link.leader_client(leader, &addr))
    }

    /// Moves leadership to the voter `transferee` (etcd's MoveLeader, served by the leader):
    /// returns once it leads, or fails after etcd's request timeout.
    ///
    /// A transferee the leader has not heard from within an election timeout is refused at
    /// once with the error etcd gives after its timeout (etcd's Raft aborts such a transfer
    /// after an election timeout and keeps its leader); handing leadership to it would only
    /// cost an election.
    pub async fn move_leader(&self, transferee: u64) -> Result<(), EtcdError> {
        if self.leader() != self.member_id {
            return Err(EtcdError::NotLeader);
        }
        if transferee == self.member_id {
            return Ok(());
        }
        let (is_voter, reachable) = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow_watched();
            let election_timeout = Duration::from_millis(self.config.election_timeout);
            (
                m.membership_config
                    .membership()
                    .voter_ids()
                    .any(|id| id == transferee),
                membership::heard_within(&m, transferee, election_timeout),
            )
        };
        if !is_voter {
            return Err(EtcdError::BadLeaderTransferee);
        }
        if !reachable {
            return Err(EtcdError::LeaderTransferTimeout);
        }
        self.raft
            .trigger()
            .transfer_leader(transferee)
            .await
            .map_err(|e| EtcdError::Internal(e.to_string()))?;
        self.raft
            .wait(Some(self.config.request_timeout()))
            .metrics(
                |m| m.current_leader == Some(transferee),
                "the transferee to lead",
            )
            .await
            .map(drop)
            .map_err(|_| EtcdError::LeaderTransferTimeout)
    }
}
