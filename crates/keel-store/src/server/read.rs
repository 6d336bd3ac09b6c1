//! The linearizable read barrier: [`Store::read_barrier`], Raft's ReadIndex.

use std::sync::atomic::Ordering;

use openraft::ReadPolicy;

use super::Store;
use crate::error::EtcdError;
use crate::raft::forward::FORWARD_TIMEOUT;

impl Store {
    /// Waits until a linearizable read may be served locally (Raft's ReadIndex).
    ///
    /// With this member as the only voter, every acknowledged write was applied before it was
    /// acknowledged, so the applied state already reflects every write that completed before
    /// the read began: the leader check is the whole barrier. Otherwise the leader confirms
    /// its leadership with a quorum and names a read index, and the read waits until this
    /// member has applied it.
    pub async fn read_barrier(&self) -> Result<(), EtcdError> {
        self.check_writable()?;
        let leader = self.leader();
        if leader == self.member_id && self.voters.load(Ordering::Relaxed) <= 1 {
            return Ok(());
        }
        if leader == self.member_id {
            let confirmed = self.raft.ensure_linearizable(ReadPolicy::ReadIndex);
            return match tokio::time::timeout(self.config.request_timeout(), confirmed).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(_)) => Err(EtcdError::NoLeader),
                Err(_) => Err(EtcdError::Timeout),
            };
        }
        let Some((leader, addr)) = self.remote_leader() else {
            return Err(EtcdError::NoLeader);
        };
        let index = self.link.read_index(leader, &addr).await?;
        self.wait_applied(index, FORWARD_TIMEOUT, "the read index")
            .await
    }
}
