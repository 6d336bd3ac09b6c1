//! openraft's peer messages to and from their `keelraftpb` form (see `peer.proto`); votes, log
//! ids, entries and memberships use [`codec`]'s encodings.

use std::io;

use keel_proto::raftpb::{self, propose_outcome::Applied as Wire};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, TransferLeaderError, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use tonic::Code;

use keel_proto::etcdserverpb::Member;
use keel_proto::raftpb::reconfigure_request::Change as WireChange;

use super::codec::{self, Entry};
use super::membership::Change;
use super::{Applied, KeelRaft};
use crate::error::EtcdError;

/// An AppendEntries request on the wire.
pub fn append_request(
    header: raftpb::Header,
    rpc: &AppendEntriesRequest<KeelRaft>,
) -> raftpb::AppendEntriesRequest {
    raftpb::AppendEntriesRequest {
        header: Some(header),
        vote: codec::encode_vote(&rpc.vote),
        prev_log_id: codec::encode_log_id(rpc.prev_log_id.as_ref()),
        entries: rpc
            .entries
            .iter()
            .map(|e: &Entry| raftpb::Entry {
                index: e.log_id.index,
                data: codec::encode_entry(e),
            })
            .collect(),
        leader_commit: codec::encode_log_id(rpc.leader_commit.as_ref()),
    }
}

/// An AppendEntries request from the wire.
pub fn append_request_from(
    req: &raftpb::AppendEntriesRequest,
) -> io::Result<AppendEntriesRequest<KeelRaft>> {
    Ok(AppendEntriesRequest {
        vote: codec::decode_vote(&req.vote)?,
        prev_log_id: codec::decode_log_id(&req.prev_log_id)?,
        entries: req
            .entries
            .iter()
            .map(|e| codec::decode_entry(e.index, &e.data))
            .collect::<io::Result<_>>()?,
        leader_commit: codec::decode_log_id(&req.leader_commit)?,
    })
}

/// An AppendEntries response on the wire.
pub fn append_response(resp: &AppendEntriesResponse<KeelRaft>) -> raftpb::AppendEntriesResponse {
    use raftpb::append_entries_response::Result as R;
    let result = match resp {
        AppendEntriesResponse::Success => R::Success(true),
        AppendEntriesResponse::PartialSuccess(id) => {
            R::PartialSuccess(codec::encode_log_id(id.as_ref()))
        }
        AppendEntriesResponse::Conflict => R::Conflict(true),
        AppendEntriesResponse::HigherVote(vote) => R::HigherVote(codec::encode_vote(vote)),
    };
    raftpb::AppendEntriesResponse {
        result: Some(result),
    }
}

/// An AppendEntries response from the wire.
pub fn append_response_from(
    resp: &raftpb::AppendEntriesResponse,
) -> io::Result<AppendEntriesResponse<KeelRaft>> {
    use raftpb::append_entries_response::Result as R;
    Ok(match &resp.result {
        Some(R::Success(_)) => AppendEntriesResponse::Success,
        Some(R::PartialSuccess(id)) => {
            AppendEntriesResponse::PartialSuccess(codec::decode_log_id(id)?)
        }
        Some(R::Conflict(_)) => AppendEntriesResponse::Conflict,
        Some(R::HigherVote(vote)) => AppendEntriesResponse::HigherVote(codec::decode_vote(vote)?),
        None => return Err(io::Error::other("AppendEntries response without a result")),
    })
}

/// A vote request on the wire.
pub fn vote_request(header: raftpb::Header, rpc: &VoteRequest<KeelRaft>) -> raftpb::VoteRequest {
    raftpb::VoteRequest {
        header: Some(header),
        vote: codec::encode_vote(&rpc.vote),
        last_log_id: codec::encode_log_id(rpc.last_log_id.as_ref()),
        leadership_transfer: rpc.leadership_transfer,
    }
}

/// A vote request from the wire.
pub fn vote_request_from(req: &raftpb::VoteRequest) -> io::Result<VoteRequest<KeelRaft>> {
    let mut rpc = VoteRequest::new(
        codec::decode_vote(&req.vote)?,
        codec::decode_log_id(&req.last_log_id)?,
    );
    rpc.leadership_transfer = req.leadership_transfer;
    Ok(rpc)
}

/// A vote response on the wire.
pub fn vote_response(resp: &VoteResponse<KeelRaft>) -> raftpb::VoteResponse {
    raftpb::VoteResponse {
        vote: codec::encode_vote(&resp.vote),
        vote_granted: resp.vote_granted,
        last_log_id: codec::encode_log_id(resp.last_log_id.as_ref()),
    }
}

/// A vote response from the wire.
pub fn vote_response_from(resp: &raftpb::VoteResponse) -> io::Result<VoteResponse<KeelRaft>> {
    Ok(VoteResponse::new(
        codec::decode_vote(&resp.vote)?,
        codec::decode_log_id(&resp.last_log_id)?,
        resp.vote_granted,
    ))
}

/// A leader-transfer request on the wire.
pub fn transfer_request(
    header: raftpb::Header,
    rpc: &TransferLeaderRequest<KeelRaft>,
) -> raftpb::TransferLeaderRequest {
    raftpb::TransferLeaderRequest {
        header: Some(header),
        from_leader: codec::encode_vote(rpc.from_leader()),
        to: *rpc.to_node_id(),
        last_log_id: codec::encode_log_id(rpc.last_log_id()),
    }
}

/// A leader-transfer request from the wire.
pub fn transfer_request_from(
    req: &raftpb::TransferLeaderRequest,
) -> io::Result<TransferLeaderRequest<KeelRaft>> {
    Ok(TransferLeaderRequest::new(
        codec::decode_vote(&req.from_leader)?,
        req.to,
        codec::decode_log_id(&req.last_log_id)?,
    ))
}

/// A leader-transfer answer on the wire.
pub fn transfer_response(
    resp: &TransferLeaderResponse<KeelRaft>,
) -> raftpb::TransferLeaderResponse {
    use raftpb::transfer_leader_response::Result as R;
    let result = match resp {
        Ok(()) => R::Accepted(true),
        Err(TransferLeaderError::VoteChanged { expected, actual }) => {
            R::VoteChanged(raftpb::Mismatch {
                expected: codec::encode_vote(expected),
                actual: codec::encode_vote(actual),
            })
        }
        Err(TransferLeaderError::LogNotFlushed { expected, actual }) => {
            R::LogNotFlushed(raftpb::Mismatch {
                expected: codec::encode_log_id(expected.as_ref()),
                actual: codec::encode_log_id(actual.as_ref()),
            })
        }
    };
    raftpb::TransferLeaderResponse {
        result: Some(result),
    }
}

/// A leader-transfer answer from the wire.
pub fn transfer_response_from(
    resp: &raftpb::TransferLeaderResponse,
) -> io::Result<TransferLeaderResponse<KeelRaft>> {
    use raftpb::transfer_leader_response::Result as R;
    Ok(match &resp.result {
        Some(R::Accepted(_)) => Ok(()),
        Some(R::VoteChanged(m)) => Err(TransferLeaderError::VoteChanged {
            expected: codec::decode_vote(&m.expected)?,
            actual: codec::decode_vote(&m.actual)?,
        }),
        Some(R::LogNotFlushed(m)) => Err(TransferLeaderError::LogNotFlushed {
            expected: codec::decode_log_id(&m.expected)?,
            actual: codec::decode_log_id(&m.actual)?,
        }),
        None => return Err(io::Error::other("TransferLeader response without a result")),
    })
}

/// The result of a forwarded proposal on the wire (a rejection as the status its client gets),
/// applied at log `index` (0: not applied).
pub fn outcome(applied: Applied, index: u64) -> raftpb::ProposeOutcome {
    let wire = match applied {
        Applied::Put(r) => Wire::Put(r),
        Applied::DeleteRange(r) => Wire::DeleteRange(r),
        Applied::Txn(r) => Wire::Txn(r),
        Applied::Compaction(r) => Wire::Compaction(r),
        Applied::Alarm(r) => Wire::Alarm(r),
        Applied::Auth => Wire::Auth(true),
        Applied::LeaseGrant(r) => Wire::LeaseGrant(r),
        Applied::LeaseRevoke(r) => Wire::LeaseRevoke(r),
        Applied::Lease => Wire::Lease(true),
        Applied::Published => Wire::Published(true),
        Applied::Rejected(e) => Wire::Rejected(rejection(&e)),
    };
    raftpb::ProposeOutcome {
        applied: Some(wire),
        index,
    }
}

/// A forwarded proposal the leader refused before appending it.
pub fn not_appended() -> raftpb::ProposeOutcome {
    raftpb::ProposeOutcome {
        applied: Some(Wire::NotAppended(true)),
        index: 0,
    }
}

/// The result of a forwarded proposal from the wire, with the log index the leader applied it
/// at: [`EtcdError::NoLeader`] only for one [`not_appended`].
pub fn applied_from(outcome: raftpb::ProposeOutcome) -> (Applied, u64) {
    let applied = match outcome.applied {
        Some(Wire::Put(r)) => Applied::Put(r),
        Some(Wire::DeleteRange(r)) => Applied::DeleteRange(r),
        Some(Wire::Txn(r)) => Applied::Txn(r),
        Some(Wire::Compaction(r)) => Applied::Compaction(r),
        Some(Wire::Alarm(r)) => Applied::Alarm(r),
        Some(Wire::Auth(_)) => Applied::Auth,
        Some(Wire::LeaseGrant(r)) => Applied::LeaseGrant(r),
        Some(Wire::LeaseRevoke(r)) => Applied::LeaseRevoke(r),
        Some(Wire::Lease(_)) => Applied::Lease,
        Some(Wire::Published(_)) => Applied::Published,
        Some(Wire::Rejected(r)) => Applied::Rejected(rejected_from(r)),
        Some(Wire::NotAppended(_)) => Applied::Rejected(EtcdError::NoLeader),
        None => Applied::Rejected(EtcdError::Internal(
            "the leader answered a forwarded write without a result".into(),
        )),
    };
    (applied, outcome.index)
}

/// An etcd error on the wire, as the status its client gets.
pub fn rejection(e: &EtcdError) -> raftpb::Rejection {
    raftpb::Rejection {
        code: e.code() as i32,
        message: e.to_string(),
    }
}

/// The leader's etcd error from the wire, passed on unchanged.
pub fn rejected_from(r: raftpb::Rejection) -> EtcdError {
    EtcdError::FromLeader {
        code: Code::from_i32(r.code),
        message: r.message,
    }
}

/// A backend row of a snapshot on the wire.
pub fn backend_row(row: keel_mvcc::SnapshotRow) -> raftpb::BackendRow {
    raftpb::BackendRow {
        table: u32::from(row.table),
        key: row.key,
        value: row.value,
    }
}

/// A backend row of a snapshot from the wire (an unknown table is refused when written).
pub fn backend_row_from(row: raftpb::BackendRow) -> keel_mvcc::SnapshotRow {
    keel_mvcc::SnapshotRow {
        table: u8::try_from(row.table).unwrap_or(0),
        key: row.key,
        value: row.value,
    }
}

/// A membership change on the wire.
pub fn reconfigure_request(header: raftpb::Header, change: &Change) -> raftpb::ReconfigureRequest {
    let member = |id: u64, peer_urls: &[String], is_learner: bool| Member {
        id,
        peer_ur_ls: peer_urls.to_vec(),
        is_learner,
        ..Default::default()
    };
    let change = match change {
        Change::Add {
            id,
            peer_urls,
            learner,
        } => WireChange::Add(member(*id, peer_urls, *learner)),
        Change::Remove(id) => WireChange::Remove(*id),
        Change::Update { id, peer_urls } => WireChange::Update(member(*id, peer_urls, false)),
        Change::Promote(id) => WireChange::Promote(*id),
    };
    raftpb::ReconfigureRequest {
        header: Some(header),
        change: Some(change),
    }
}

/// A membership change from the wire.
pub fn change_from(req: raftpb::ReconfigureRequest) -> io::Result<Change> {
    Ok(match req.change {
        Some(WireChange::Add(m)) => Change::Add {
            id: m.id,
            peer_urls: m.peer_ur_ls,
            learner: m.is_learner,
        },
        Some(WireChange::Remove(id)) => Change::Remove(id),
        Some(WireChange::Update(m)) => Change::Update {
            id: m.id,
            peer_urls: m.peer_ur_ls,
        },
        Some(WireChange::Promote(id)) => Change::Promote(id),
        None => return Err(io::Error::other("Reconfigure request without a change")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::codec::{Vote, log_id};
    use crate::raft::{Proposal, ProposalOp};
    use keel_proto::etcdserverpb::PutRequest;
    use openraft::entry::RaftEntry;

    #[test]
    fn only_a_write_refused_before_it_was_appended_comes_back_as_no_leader() {
        let (refused, _) = applied_from(not_appended());
        assert!(matches!(refused, Applied::Rejected(EtcdError::NoLeader)));
        // The same error as a write's result (which a follower must not try again) keeps
        // the leader's words but not the type.
        let (rejected, _) = applied_from(outcome(Applied::Rejected(EtcdError::NoLeader), 0));
        match rejected {
            Applied::Rejected(EtcdError::FromLeader { code, message }) => {
                assert_eq!(
                    (code, message.as_str()),
                    (Code::Unavailable, "etcdserver: no leader")
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn append_entries_round_trips() {
        let entry = Entry::new(
            log_id(3, 7),
            openraft::EntryPayload::Normal(Proposal {
                op: Some(ProposalOp::Put(PutRequest {
                    key: b"k".to_vec(),
                    ..Default::default()
                })),
            }),
        );
        let rpc = AppendEntriesRequest::<KeelRaft> {
            vote: Vote::new_committed(3, 1),
            prev_log_id: Some(log_id(3, 6)),
            entries: vec![entry],
            leader_commit: None,
        };
        let back = append_request_from(&append_request(raftpb::Header::default(), &rpc)).unwrap();
        assert_eq!(back.vote, rpc.vote);
        assert_eq!(back.prev_log_id, rpc.prev_log_id);
        assert_eq!(back.entries, rpc.entries);
        assert_eq!(back.leader_commit, None);
        for resp in [
            AppendEntriesResponse::Success,
            AppendEntriesResponse::PartialSuccess(Some(log_id(2, 9))),
            AppendEntriesResponse::PartialSuccess(None),
            AppendEntriesResponse::Conflict,
            AppendEntriesResponse::HigherVote(Vote::new(4, 2)),
        ] {
            assert_eq!(append_response_from(&append_response(&resp)).unwrap(), resp);
        }
    }

    #[test]
    fn applied_results_and_rejections_round_trip() {
        let put = keel_proto::etcdserverpb::PutResponse::default();
        assert!(matches!(
            applied_from(outcome(Applied::Put(put.clone()), 7)),
            (Applied::Put(p), 7) if p == put
        ));
        let (back, _) = applied_from(outcome(Applied::Rejected(EtcdError::LeaseNotFound), 0));
        let Applied::Rejected(e) = back else {
            panic!("rejection lost: {back:?}")
        };
        let status = tonic::Status::from(e);
        assert_eq!(status.code(), tonic::Code::NotFound);
        assert_eq!(status.message(), "etcdserver: requested lease not found");
    }

    #[test]
    fn membership_changes_round_trip() {
        let header = raftpb::Header::default();
        let urls = vec!["http://a:2380".to_string(), "http://b:2380".to_string()];
        for change in [
            Change::Add {
                id: 9,
                peer_urls: urls.clone(),
                learner: true,
            },
            Change::Remove(3),
            Change::Update {
                id: 4,
                peer_urls: urls.clone(),
            },
            Change::Promote(5),
        ] {
            let req = reconfigure_request(header, &change);
            assert_eq!(change_from(req).unwrap(), change);
        }
        assert!(change_from(raftpb::ReconfigureRequest::default()).is_err());
    }

    #[test]
    fn votes_round_trip() {
        let mut rpc = VoteRequest::<KeelRaft>::new(Vote::new(5, 2), Some(log_id(4, 10)));
        rpc.leadership_transfer = true;
        let back = vote_request_from(&vote_request(raftpb::Header::default(), &rpc)).unwrap();
        assert_eq!(back, rpc);
        let resp = VoteResponse::<KeelRaft>::new(Vote::new(5, 2), None, true);
        assert_eq!(vote_response_from(&vote_response(&resp)).unwrap(), resp);
    }
}
