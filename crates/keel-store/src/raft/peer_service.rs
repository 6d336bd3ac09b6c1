//! Peer transport of the Raft axis: the server side, `keelraftpb.Peer` on `--listen-peer-urls`.
//!
//! Besides Raft's own messages, a follower sends the leader the writes its clients make
//! (`Propose`), asks it for a read index before a linearizable read (`ReadIndex`), and has
//! its lessor answer keepalives and TimeToLive (`LeaseRenew`, `LeaseTimeToLive`, see
//! [`crate::lease::forward`]).
//! Messages addressed to another cluster or another member are refused with
//! FailedPrecondition, as etcd refuses a peer whose cluster id does not match.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use keel_proto::raftpb::{self, peer_server::Peer};
use openraft::ReadPolicy;
use openraft::async_runtime::WatchReceiver;
use openraft::errors::ClientWriteError;
use openraft::raft::AppendEntriesResponse;
use prost::Message;
use tonic::{Request, Response, Status};

use super::apply::Applier;
use super::leadership::Leadership;
use super::membership::{REMOVED, Roster};
use super::state_machine::SnapshotReceiver;
use super::{Applied, Proposal, RaftNode, codec, wire};
use crate::data_dir::DataDir;
use crate::error::EtcdError;
use crate::lease::forward;
use crate::metrics::Metrics;

/// What one entry, forwarded write or backend row may carry beyond its request's bytes.
const ITEM_OVERHEAD_BYTES: usize = 1024;

/// The largest peer message a member accepts (etcd bounds its peer messages too, at 512 MB a
/// stream message): the largest each call carries when every request is as large as
/// `--max-request-bytes` allows. An `AppendEntries` of `max_payload_entries` entries, a
/// `Propose` batch (4 MiB, or one larger write) and a snapshot chunk (1 MiB of rows and the
/// row that passes it). With etcd's default 1.5 MiB that is about 450 MiB, in the order of
/// etcd's own bound.
pub fn max_message_bytes(max_request_bytes: u32, max_payload_entries: u64) -> usize {
    let request = max_request_bytes as usize + ITEM_OVERHEAD_BYTES;
    let append = (max_payload_entries as usize).saturating_mul(request);
    let propose = super::forward::MAX_BATCH * ITEM_OVERHEAD_BYTES
        + super::forward::MAX_BATCH_BYTES.max(request);
    let chunk = super::network::SNAPSHOT_CHUNK_BYTES + request;
    append.max(propose).max(chunk) + crate::api::GRPC_OVERHEAD_BYTES
}

/// Serves Raft messages to this member's Raft node.
pub struct PeerService {
    /// The Raft node.
    pub raft: RaftNode,
    /// The cluster whose messages are accepted.
    pub cluster_id: u64,
    /// This member.
    pub member_id: u64,
    /// Told of every accepted `AppendEntries` and snapshot.
    pub leadership: Arc<Leadership>,
    /// Where peer traffic is counted.
    pub metrics: Arc<Metrics>,
    /// Lists the members and makes membership changes.
    pub roster: Arc<Roster>,
    /// The applied state, whose lessor answers keepalives and TimeToLive forwarded by
    /// followers.
    pub applier: Arc<Applier>,
    /// How long a membership change may take (etcd's request timeout).
    pub request_timeout: Duration,
    /// The data folder, where snapshots from the leader are received.
    pub data: DataDir,
}

impl PeerService {
    /// Counts a request of `received` bytes and its `answer`.
    fn counted<T: Message>(
        &self,
        header: Option<&raftpb::Header>,
        received: usize,
        answer: T,
    ) -> Result<Response<T>, Status> {
        if let Some(h) = header {
            self.metrics.received_from(h.from, received);
            self.metrics.sent_to(h.from, answer.encoded_len());
        }
        Ok(Response::new(answer))
    }

    /// Whether this member leads, as openraft sees it.
    fn leads(&self) -> bool {
        self.raft.metrics().borrow_watched().current_leader == Some(self.member_id)
    }

    fn check(&self, header: Option<&raftpb::Header>) -> Result<(), Status> {
        let h = header.ok_or_else(|| Status::invalid_argument("peer message without header"))?;
        if h.cluster_id != self.cluster_id {
            return Err(Status::failed_precondition(format!(
                "request cluster ID mismatch (got {:x} want {:x})",
                h.cluster_id, self.cluster_id
            )));
        }
        // As etcd, a removed member is told so, and stops.
        if self.roster.is_removed(h.from) {
            return Err(Status::permission_denied(REMOVED));
        }
        if h.to != self.member_id {
            return Err(Status::failed_precondition(format!(
                "message for member {:x} sent to member {:x}",
                h.to, self.member_id
            )));
        }
        Ok(())
    }
}

/// Runs blocking backend I/O off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(std::io::Error::other)?
}

fn invalid(e: std::io::Error) -> Status {
    Status::invalid_argument(format!("malformed peer message: {e}"))
}

#[tonic::async_trait]
impl Peer for PeerService {
    async fn append_entries(
        &self,
        request: Request<raftpb::AppendEntriesRequest>,
    ) -> Result<Response<raftpb::AppendEntriesResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let rpc = wire::append_request_from(&req).map_err(invalid)?;
        let resp = self
            .raft
            .append_entries(rpc)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        if !matches!(resp, AppendEntriesResponse::HigherVote(_))
            && let Some(h) = &req.header
        {
            self.leadership.heard_from(h.from, Instant::now());
        }
        let received = req.encoded_len();
        self.counted(req.header.as_ref(), received, wire::append_response(&resp))
    }

    async fn transfer_leader(
        &self,
        request: Request<raftpb::TransferLeaderRequest>,
    ) -> Result<Response<raftpb::TransferLeaderResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let rpc = wire::transfer_request_from(&req).map_err(invalid)?;
        let resp = self
            .raft
            .handle_transfer_leader(rpc)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let received = req.encoded_len();
        self.counted(
            req.header.as_ref(),
            received,
            wire::transfer_response(&resp),
        )
    }

    async fn vote(
        &self,
        request: Request<raftpb::VoteRequest>,
    ) -> Result<Response<raftpb::VoteResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let rpc = wire::vote_request_from(&req).map_err(invalid)?;
        let resp = self
            .raft
            .vote(rpc)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let received = req.encoded_len();
        self.counted(req.header.as_ref(), received, wire::vote_response(&resp))
    }

    async fn propose(
        &self,
        request: Request<raftpb::ProposeRequest>,
    ) -> Result<Response<raftpb::ProposeResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let proposals = req
            .proposals
            .iter()
            .map(|p| Proposal::decode(p.as_slice()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Status::invalid_argument(format!("malformed proposal: {e}")))?;
        // Handed to openraft in one message, appended as one batch.
        let n = proposals.len();
        let written = self
            .raft
            .client_write_many(proposals)
            .await
            .map_err(|e| Status::from(EtcdError::Internal(e.to_string())))?;
        let mut outcomes: Vec<_> = written
            .map(|written| match written {
                Ok(Ok(resp)) => wire::outcome(resp.response, resp.log_id.index),
                Ok(Err(ClientWriteError::ForwardToLeader(_))) => wire::not_appended(),
                Ok(Err(e)) => {
                    wire::outcome(Applied::Rejected(EtcdError::Internal(e.to_string())), 0)
                }
                Err(fatal) => {
                    wire::outcome(Applied::Rejected(EtcdError::Internal(fatal.to_string())), 0)
                }
            })
            .collect()
            .await;
        // A stream cut short (openraft stopping) leaves the rest unknown, not failed silently.
        outcomes.resize_with(n, || {
            wire::outcome(Applied::Rejected(EtcdError::Timeout), 0)
        });
        let answer = raftpb::ProposeResponse { outcomes };
        self.counted(req.header.as_ref(), req.encoded_len(), answer)
    }

    async fn install_snapshot(
        &self,
        request: Request<tonic::Streaming<raftpb::SnapshotChunk>>,
    ) -> Result<Response<raftpb::SnapshotResponse>, Status> {
        let mut chunks = request.into_inner();
        let first = chunks
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("an empty snapshot stream"))?;
        self.check(first.header.as_ref())?;
        let header = first.header;
        let vote = codec::decode_vote(&first.vote).map_err(invalid)?;
        let storage = |e: std::io::Error| Status::internal(format!("receiving a snapshot: {e}"));
        let data = self.data.clone();
        let mut receiver = blocking(move || SnapshotReceiver::create(&data))
            .await
            .map_err(storage)?;
        let mut received = 0;
        let mut chunk = Some(first);
        let mut total_rows = None;
        while let Some(c) = chunk {
            received += c.encoded_len();
            total_rows = c.total_rows;
            let rows: Vec<_> = c.rows.into_iter().map(wire::backend_row_from).collect();
            receiver = blocking(move || receiver.write(&rows).map(|()| receiver))
                .await
                .map_err(storage)?;
            chunk = chunks.message().await?;
        }
        let Some(total_rows) = total_rows else {
            return Err(Status::aborted(
                "the snapshot stream ended before its last chunk",
            ));
        };
        let snapshot = blocking(move || receiver.finish(total_rows))
            .await
            .map_err(storage)?;
        let resp = self
            .raft
            .install_full_snapshot(vote, snapshot)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        if let Some(h) = &header {
            self.leadership.heard_from(h.from, Instant::now());
        }
        let answer = raftpb::SnapshotResponse {
            vote: codec::encode_vote(&resp.vote),
        };
        self.counted(header.as_ref(), received, answer)
    }

    async fn reconfigure(
        &self,
        request: Request<raftpb::ReconfigureRequest>,
    ) -> Result<Response<raftpb::ReconfigureResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let header = req.header;
        let received = req.encoded_len();
        let change = wire::change_from(req).map_err(invalid)?;
        let result = match self.roster.reconfigure(&change, self.request_timeout).await {
            Ok(index) => raftpb::reconfigure_response::Result::Index(index),
            Err(e) => raftpb::reconfigure_response::Result::Rejected(wire::rejection(&e)),
        };
        let answer = raftpb::ReconfigureResponse {
            result: Some(result),
        };
        self.counted(header.as_ref(), received, answer)
    }

    async fn members(
        &self,
        _request: Request<raftpb::MembersRequest>,
    ) -> Result<Response<raftpb::MembersResponse>, Status> {
        Ok(Response::new(raftpb::MembersResponse {
            cluster_id: self.cluster_id,
            members: self.roster.members(),
        }))
    }

    async fn read_index(
        &self,
        request: Request<raftpb::ReadIndexRequest>,
    ) -> Result<Response<raftpb::ReadIndexResponse>, Status> {
        self.check(request.get_ref().header.as_ref())?;
        let (read, _) = self
            .raft
            .get_read_log_id(ReadPolicy::ReadIndex)
            .await
            .map_err(|_| Status::from(EtcdError::NoLeader))?;
        Ok(Response::new(raftpb::ReadIndexResponse {
            index: read.index(),
        }))
    }

    async fn lease_renew(
        &self,
        request: Request<raftpb::LeaseRenewRequest>,
    ) -> Result<Response<raftpb::LeaseRenewResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let leads = self.leads();
        let answer = self
            .applier
            .lessor_at(|l, now| forward::answer_renew(l, &self.metrics, leads, &req, now));
        self.counted(req.header.as_ref(), req.encoded_len(), answer)
    }

    async fn lease_time_to_live(
        &self,
        request: Request<raftpb::LeaseTimeToLiveRequest>,
    ) -> Result<Response<raftpb::LeaseTimeToLiveResponse>, Status> {
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let leads = self.leads();
        let answer = self
            .applier
            .lessor_at(|l, now| forward::answer_time_to_live(l, leads, &req, now));
        self.counted(req.header.as_ref(), req.encoded_len(), answer)
    }
}

#[cfg(test)]
mod tests {
    use keel_proto::raftpb::peer_client::PeerClient;
    use keel_proto::raftpb::{AppendEntriesRequest, Entry};

    /// A peer message larger than the bound is refused before it is decoded; below the bound
    /// it reaches the service (which refuses it for carrying no header).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn peer_messages_are_bounded_by_the_request_size() {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let peer = format!("http://127.0.0.1:{port}");
        let cluster = format!("default={peer}");
        let config = crate::config::parse_for_test(&[
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--listen-client-urls",
            "http://127.0.0.1:0",
            "--advertise-client-urls",
            "http://127.0.0.1:0",
            "--listen-peer-urls",
            &peer,
            "--initial-advertise-peer-urls",
            &peer,
            "--initial-cluster",
            &cluster,
            "--max-request-bytes",
            "4096",
        ]);
        let limit = super::max_message_bytes(4096, 300);
        assert!(limit < 8 << 20, "{limit}");
        let _handle = crate::StoreHandle::start(config).await.unwrap();
        let mut client = PeerClient::connect(peer)
            .await
            .unwrap()
            .max_encoding_message_size(usize::MAX);
        let message = |bytes: usize| AppendEntriesRequest {
            entries: vec![Entry {
                index: 1,
                data: vec![7; bytes],
            }],
            ..Default::default()
        };
        let small = client.append_entries(message(1 << 20)).await.unwrap_err();
        assert_eq!(small.code(), tonic::Code::InvalidArgument, "{small:?}");
        let large = client.append_entries(message(8 << 20)).await.unwrap_err();
        assert_eq!(large.code(), tonic::Code::OutOfRange, "{large:?}");
        assert!(
            large.message().contains("message length too large"),
            "{large:?}"
        );
    }
}
