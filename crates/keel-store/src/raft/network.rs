//! Peer transport of the Raft axis: the client side.
//!
//! Each member talks to each other member over gRPC (`keelraftpb.Peer`, served on
//! `--listen-peer-urls` by [`super::peer_service`]), on one lazily connected channel per peer
//! that reconnects on its own. Every message carries the cluster id, so a member of another
//! cluster (another `--initial-cluster-token`) is refused. A peer that cannot be reached is
//! reported as such and openraft retries it; openraft's time-to-live bounds every call.

use keel_process::faults;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keel_proto::raftpb::{self, peer_client::PeerClient};
use openraft::OptionalSend;
use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::impls::BasicNode;
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint};

use prost::Message;

use super::KeelRaft;
use super::codec::{self, Vote};
use super::membership::{PeerUrls, REMOVED, Removal, peer_url};
use super::state_machine::SnapshotData;
use super::wire;
use crate::metrics::Metrics;

type Snapshot = openraft::alias::SnapshotOf<KeelRaft, SnapshotData>;

/// How long a peer connection may take to establish.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Creates a [`Peer`] client per target member.
#[derive(Clone)]
pub struct PeerNetwork {
    /// The cluster every message belongs to.
    pub cluster_id: u64,
    /// This member.
    pub member_id: u64,
    /// Where peer traffic and round trips are counted.
    pub metrics: Arc<Metrics>,
    /// Signalled when a peer answers that this member was removed from the cluster.
    pub removal: Arc<Removal>,
    /// Every member's peer URL, as the membership has it now.
    pub urls: Arc<PeerUrls>,
}

/// The client of one peer.
pub struct Peer {
    header: raftpb::Header,
    addr: String,
    client: Option<PeerClient<Channel>>,
    metrics: Arc<Metrics>,
    removal: Arc<Removal>,
    urls: Arc<PeerUrls>,
}

impl RaftNetworkFactory<KeelRaft> for PeerNetwork {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Peer {
        Peer {
            header: raftpb::Header {
                cluster_id: self.cluster_id,
                from: self.member_id,
                to: target,
            },
            addr: peer_url(node).to_string(),
            client: peer_client(peer_url(node)),
            metrics: self.metrics.clone(),
            removal: self.removal.clone(),
            urls: self.urls.clone(),
        }
    }
}

/// A lazily connected client of the peer at `addr`; `None` if `addr` is not a URL.
pub(super) fn peer_client(addr: &str) -> Option<PeerClient<Channel>> {
    let endpoint = Endpoint::from_shared(addr.to_string()).ok()?;
    Some(
        PeerClient::new(
            endpoint
                .connect_timeout(CONNECT_TIMEOUT)
                .tcp_nodelay(true)
                .connect_lazy(),
        )
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX),
    )
}

impl Peer {
    /// The client of the peer, redialled at its new URL once the membership moved it
    /// (MemberUpdate).
    fn client(&mut self) -> Result<PeerClient<Channel>, Unreachable<KeelRaft>> {
        if let Some(url) = self.urls.get(self.header.to)
            && url != self.addr
        {
            self.client = peer_client(&url);
            self.addr = url;
        }
        self.client.clone().ok_or_else(|| {
            Unreachable::from_string(format!(
                "member {:x}: invalid peer URL {:?}",
                self.header.to, self.addr
            ))
        })
    }

    /// Runs one call (whose request is `sent` bytes) within `ttl`, mapping failures to
    /// openraft's kinds; counts its bytes and round trip.
    async fn call<T: Message>(
        &self,
        ttl: Duration,
        sent: usize,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, RPCError<KeelRaft>> {
        let to = self.header.to;
        let faults = faults::process();
        if faults.drops(to) {
            self.metrics.send_failed(to);
            return Err(RPCError::Unreachable(Unreachable::from_string(format!(
                "member {to:x}: message dropped by the peer.drop fault"
            ))));
        }
        self.metrics.sent_to(to, sent);
        let started = Instant::now();
        let call = async move {
            faults.pause_for_peer(to).await;
            call.await
        };
        let answer = tokio::time::timeout(ttl, call).await;
        if !matches!(answer, Ok(Ok(_))) {
            self.metrics.send_failed(to);
        }
        match answer {
            Err(_) => Err(RPCError::Unreachable(Unreachable::from_string(format!(
                "member {:x} ({}) did not answer within {ttl:?}",
                self.header.to, self.addr
            )))),
            Ok(Ok(resp)) => {
                let resp = resp.into_inner();
                self.metrics.round_trip(to, started.elapsed());
                self.metrics.received_from(to, resp.encoded_len());
                Ok(resp)
            }
            Ok(Err(status)) if status.message() == REMOVED => {
                self.removal.signal();
                Err(RPCError::Network(NetworkError::from_string(REMOVED)))
            }
            Ok(Err(status)) if status.code() == tonic::Code::Unavailable => {
                Err(RPCError::Unreachable(Unreachable::from_string(format!(
                    "member {:x} ({}): {}",
                    self.header.to,
                    self.addr,
                    status.message()
                ))))
            }
            Ok(Err(status)) => Err(RPCError::Network(NetworkError::from_string(format!(
                "member {:x} ({}): {}",
                self.header.to,
                self.addr,
                status.message()
            )))),
        }
    }
}

fn bad_answer(e: std::io::Error) -> RPCError<KeelRaft> {
    RPCError::Network(NetworkError::from_string(format!("bad answer: {e}")))
}

impl RaftNetworkV2<KeelRaft> for Peer {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<KeelRaft>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<KeelRaft>, RPCError<KeelRaft>> {
        let mut client = self.client()?;
        let req = wire::append_request(self.header, &rpc);
        let sent = req.encoded_len();
        let resp = self
            .call(option.hard_ttl(), sent, client.append_entries(req))
            .await?;
        wire::append_response_from(&resp).map_err(bad_answer)
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<KeelRaft>,
        option: RPCOption,
    ) -> Result<VoteResponse<KeelRaft>, RPCError<KeelRaft>> {
        let mut client = self.client()?;
        let req = wire::vote_request(self.header, &rpc);
        let sent = req.encoded_len();
        let resp = self.call(option.hard_ttl(), sent, client.vote(req)).await?;
        wire::vote_response_from(&resp).map_err(bad_answer)
    }

    async fn transfer_leader(
        &mut self,
        rpc: TransferLeaderRequest<KeelRaft>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<KeelRaft>, RPCError<KeelRaft>> {
        let mut client = self.client()?;
        let req = wire::transfer_request(self.header, &rpc);
        let sent = req.encoded_len();
        let resp = self
            .call(option.hard_ttl(), sent, client.transfer_leader(req))
            .await?;
        wire::transfer_response_from(&resp).map_err(bad_answer)
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<KeelRaft>, StreamingError<KeelRaft>> {
        let mut client = self.client()?;
        let SnapshotData::View(view) = snapshot.snapshot else {
            return Err(StreamingError::Unreachable(Unreachable::from_string(
                "only a view of this member's backend can be sent",
            )));
        };
        let (tx, rx) = mpsc::channel(2);
        let (header, vote_bytes) = (self.header, codec::encode_vote(&vote));
        let metrics = self.metrics.clone();
        let to = self.header.to;
        let started = Instant::now();
        let progress = Arc::new(AtomicU64::new(0));
        let sent = progress.clone();
        // redb reads block: the chunks are read on a blocking thread, two at most ahead. The
        // last chunk says how many rows were sent, and is sent only if every read succeeded.
        let reader = tokio::task::spawn_blocking(move || {
            let mut cursor = None;
            let mut first = Some((header, vote_bytes));
            let mut rows_sent = 0u64;
            loop {
                let next = view.next_chunk(cursor.as_ref(), SNAPSHOT_CHUNK_BYTES)?;
                let (rows, after) = next.map_or((Vec::new(), None), |(chunk, after)| {
                    (chunk.rows, Some(after))
                });
                rows_sent += rows.len() as u64;
                let (header, vote) = first.take().unzip();
                let chunk = raftpb::SnapshotChunk {
                    header,
                    vote: vote.unwrap_or_default(),
                    rows: rows.into_iter().map(wire::backend_row).collect(),
                    total_rows: after.is_none().then_some(rows_sent),
                };
                let bytes = chunk.encoded_len();
                if tx.blocking_send(chunk).is_err() {
                    return Ok::<_, keel_mvcc::MvccError>(());
                }
                metrics.sent_to(to, bytes);
                sent.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
                match after {
                    None => return Ok(()),
                    Some(after) => cursor = Some(after),
                }
            }
        });
        let failed = |e: String| {
            StreamingError::Unreachable(Unreachable::from_string(format!(
                "sending a snapshot to member {to:x} ({}): {e}",
                self.addr
            )))
        };
        let call = client.install_snapshot(tokio_stream::wrappers::ReceiverStream::new(rx));
        tokio::pin!(call, cancel);
        // Given up when no chunk moves for a while (a large backend may take long in all),
        // or when the follower does not answer in time once it has every chunk.
        let answered = loop {
            tokio::select! {
                answered = &mut call => break answered,
                closed = &mut cancel => return Err(StreamingError::Closed(closed)),
                _ = tokio::time::sleep(Duration::from_secs(1)) => {
                    let last = Duration::from_millis(progress.load(Ordering::Relaxed));
                    let limit = if reader.is_finished() { SNAPSHOT_INSTALL } else { SNAPSHOT_STALL };
                    if started.elapsed().saturating_sub(last) > limit {
                        return Err(failed(format!("no progress for {limit:?}")));
                    }
                }
            }
        };
        let read = reader.await.map_err(|e| failed(e.to_string()))?;
        read.map_err(|e| failed(e.to_string()))?;
        let resp = match answered {
            Err(status) if status.message() == REMOVED => {
                self.removal.signal();
                return Err(failed(REMOVED.to_string()));
            }
            Err(status) => return Err(failed(status.message().to_string())),
            Ok(resp) => resp.into_inner(),
        };
        self.metrics.received_from(to, resp.encoded_len());
        let vote = codec::decode_vote(&resp.vote).map_err(|e| failed(e.to_string()))?;
        Ok(SnapshotResponse::new(vote))
    }
}

/// The most row bytes one snapshot chunk carries.
pub(crate) const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;
/// How long a snapshot stream may make no progress before the leader gives up and starts
/// over.
const SNAPSHOT_STALL: Duration = Duration::from_secs(30);
/// How long the follower may take to install a snapshot it has received in full.
const SNAPSHOT_INSTALL: Duration = Duration::from_secs(300);
