//! Peer transport of the Raft axis.
//!
//! A member whose cluster has no other member never sends a Raft message; this transport
//! reports every peer as unreachable, so a misconfigured membership fails loudly instead of
//! silently. The start-up checks in `config` refuse multi-member clusters for this reason.

use std::future::Future;

use openraft::OptionalSend;
use openraft::errors::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::impls::BasicNode;
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};

use super::KeelRaft;
use super::codec::Vote;
use super::state_machine::DurableBackend;

type Snapshot = openraft::alias::SnapshotOf<KeelRaft, DurableBackend>;

/// Creates [`NoPeers`] clients.
pub struct NoPeersFactory;

/// A peer client that can reach no one.
pub struct NoPeers {
    target: u64,
}

impl NoPeers {
    fn unreachable(&self) -> Unreachable<KeelRaft> {
        Unreachable::from_string(format!(
            "member {:x} has no peer transport configured",
            self.target
        ))
    }
}

impl RaftNetworkFactory<KeelRaft> for NoPeersFactory {
    type Network = NoPeers;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> NoPeers {
        NoPeers { target }
    }
}

impl RaftNetworkV2<KeelRaft> for NoPeers {
    type SnapshotData = DurableBackend;

    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<KeelRaft>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<KeelRaft>, RPCError<KeelRaft>> {
        Err(RPCError::Unreachable(self.unreachable()))
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<KeelRaft>,
        _option: RPCOption,
    ) -> Result<VoteResponse<KeelRaft>, RPCError<KeelRaft>> {
        Err(RPCError::Unreachable(self.unreachable()))
    }

    async fn full_snapshot(
        &mut self,
        _vote: Vote,
        _snapshot: Snapshot,
        _cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<KeelRaft>, StreamingError<KeelRaft>> {
        Err(StreamingError::Unreachable(self.unreachable()))
    }
}
