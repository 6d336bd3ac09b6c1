//! The Raft axis: keel's openraft glue.
//!
//! Every write is an entry in an openraft group of one or more members: the log lives in
//! keel's own WAL ([`log_store`]), committed entries are applied to the MVCC store
//! ([`state_machine`]), and entries are encoded by [`codec`]. Members talk over keel's peer
//! gRPC protocol ([`network`] sends, [`peer_service`] answers, [`wire`] converts); a follower
//! hands its clients' writes to the leader ([`forward`]); [`membership`] makes
//! membership changes with etcd's checks, and [`leadership`] applies etcd's check-quorum rule
//! to openraft's view of the leader. openraft types stay inside this module; the rest of the
//! store sees [`Proposal`], [`Applied`] and [`RaftNode`].

pub mod apply;
pub mod codec;
pub mod forward;
pub mod leadership;
pub mod log_store;
pub mod membership;
pub mod network;
pub mod peer_service;
pub(crate) mod records;
pub mod state_machine;
pub mod wire;

use std::fmt;

use keel_proto::etcdserverpb::{
    AlarmRequest, AlarmResponse, CompactionRequest, CompactionResponse, DeleteRangeRequest,
    DeleteRangeResponse, LeaseGrantResponse, LeaseRevokeResponse, Member, PutRequest, PutResponse,
    TxnRequest, TxnResponse,
};

use crate::error::EtcdError;

openraft::declare_raft_types!(
    /// openraft's type configuration for keel: standard Raft terms (one leader per term).
    pub KeelRaft:
        D = Proposal,
        R = Applied,
        LeaderId = openraft::impls::leader_id_std::LeaderId<u64, u64>,
);

/// The openraft handle type of a keel member.
pub type RaftNode = openraft::Raft<KeelRaft, state_machine::StateMachine>;

/// One replicated write: the payload of a normal log entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Proposal {
    /// The write itself.
    #[prost(oneof = "ProposalOp", tags = "1, 2, 3, 4, 5, 6, 7, 8")]
    pub op: Option<ProposalOp>,
}

/// The kinds of replicated writes.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum ProposalOp {
    /// A KV Put.
    #[prost(message, tag = "1")]
    Put(PutRequest),
    /// A KV DeleteRange.
    #[prost(message, tag = "2")]
    DeleteRange(DeleteRangeRequest),
    /// A KV Txn.
    #[prost(message, tag = "3")]
    Txn(TxnRequest),
    /// A KV Compact.
    #[prost(message, tag = "4")]
    Compaction(CompactionRequest),
    /// A Maintenance Alarm activation or deactivation.
    #[prost(message, tag = "5")]
    Alarm(AlarmRequest),
    /// A change to users, roles or permissions.
    #[prost(message, tag = "6")]
    Auth(crate::auth::AuthProposal),
    /// A lease grant, revoke, expiry or checkpoint.
    #[prost(message, tag = "7")]
    Lease(crate::lease::LeaseProposal),
    /// A member's attributes (name, URLs), published by the member when it starts (etcd's
    /// `publish`).
    #[prost(message, tag = "8")]
    Member(Member),
}

impl fmt::Display for Proposal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.op {
            Some(ProposalOp::Put(_)) => f.write_str("put"),
            Some(ProposalOp::DeleteRange(_)) => f.write_str("delete_range"),
            Some(ProposalOp::Txn(_)) => f.write_str("txn"),
            Some(ProposalOp::Compaction(_)) => f.write_str("compaction"),
            Some(ProposalOp::Alarm(_)) => f.write_str("alarm"),
            Some(ProposalOp::Auth(_)) => f.write_str("auth"),
            Some(ProposalOp::Lease(_)) => f.write_str("lease"),
            Some(ProposalOp::Member(_)) => f.write_str("member"),
            None => f.write_str("empty"),
        }
    }
}

/// The outcome of applying one [`Proposal`], handed back to the member that proposed it.
#[derive(Debug, Clone)]
pub enum Applied {
    /// Response to a Put.
    Put(PutResponse),
    /// Response to a DeleteRange.
    DeleteRange(DeleteRangeResponse),
    /// Response to a Txn.
    Txn(TxnResponse),
    /// Response to a Compact.
    Compaction(CompactionResponse),
    /// Response to an Alarm change.
    Alarm(AlarmResponse),
    /// An auth change was applied.
    Auth,
    /// Response to a LeaseGrant.
    LeaseGrant(LeaseGrantResponse),
    /// Response to a LeaseRevoke.
    LeaseRevoke(LeaseRevokeResponse),
    /// The leader's expiry or checkpoint was applied.
    Lease,
    /// A member's attributes were recorded.
    Published,
    /// The request was rejected by the state machine (etcd applies some checks at apply time).
    Rejected(EtcdError),
}

impl Default for Applied {
    fn default() -> Self {
        Applied::Rejected(EtcdError::Internal("empty proposal".into()))
    }
}
