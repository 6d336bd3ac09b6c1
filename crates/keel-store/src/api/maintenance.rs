//! The etcd `Maintenance` service: status, alarms, defragmentation, hashes, snapshots and
//! leadership moves.

use std::io::Read;
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use keel_proto::etcdserverpb::{
    AlarmRequest, AlarmResponse, AlarmType, DefragmentRequest, DefragmentResponse,
    DowngradeRequest, DowngradeResponse, HashKvRequest, HashKvResponse, HashRequest, HashResponse,
    MoveLeaderRequest, MoveLeaderResponse, SnapshotRequest, SnapshotResponse, StatusRequest,
    StatusResponse, alarm_request::AlarmAction, maintenance_server::Maintenance,
};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::unary;
use crate::error::EtcdError;
use crate::exchange;
use crate::raft::{Applied, ProposalOp};
use crate::server::Store;

const SERVICE: &str = "etcdserverpb.Maintenance";
/// Snapshot chunk size, as etcd sends it.
const SNAPSHOT_CHUNK: usize = 32 * 1024;

/// The Maintenance service of one member.
pub struct MaintenanceService {
    store: Arc<Store>,
}

impl MaintenanceService {
    /// Serves Maintenance requests on `store`.
    pub fn new(store: Arc<Store>) -> Self {
        MaintenanceService { store }
    }

    async fn alarm(&self, req: AlarmRequest) -> Result<AlarmResponse, EtcdError> {
        let mut resp = match req.action() {
            AlarmAction::Get => {
                let alarms = self.store.alarms();
                let wanted = |a: &&keel_proto::etcdserverpb::AlarmMember| {
                    (req.member_id == 0 || a.member_id == req.member_id)
                        && (req.alarm == AlarmType::None as i32 || a.alarm == req.alarm)
                };
                AlarmResponse {
                    alarms: alarms.iter().filter(wanted).copied().collect(),
                    ..Default::default()
                }
            }
            AlarmAction::Activate | AlarmAction::Deactivate => {
                match self.store.propose(ProposalOp::Alarm(req)).await? {
                    Applied::Alarm(resp) => resp,
                    other => {
                        return Err(EtcdError::Internal(format!(
                            "unexpected apply result {other:?}"
                        )));
                    }
                }
            }
        };
        resp.header = Some(self.store.header(self.store.mvcc().current_revision()));
        Ok(resp)
    }

    async fn status(&self) -> Result<StatusResponse, EtcdError> {
        let store = &self.store;
        let mvcc = store.mvcc();
        let errors = store
            .alarms()
            .iter()
            .map(|a| {
                let name = AlarmType::try_from(a.alarm).map_or("UNKNOWN", |t| t.as_str_name());
                format!("memberID:{} alarm:{} ", a.member_id, name)
            })
            .collect();
        Ok(StatusResponse {
            header: Some(store.header(mvcc.current_revision())),
            version: store.config().emulated_etcd_version.clone(),
            db_size: mvcc.db_size() as i64,
            leader: store.leader(),
            raft_index: store.last_log_index(),
            raft_term: store.term(),
            raft_applied_index: store.applied_index(),
            errors,
            db_size_in_use: mvcc.db_size_in_use() as i64,
            is_learner: self.store.is_learner(),
            ..Default::default()
        })
    }

    async fn defragment(&self) -> Result<DefragmentResponse, EtcdError> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.mvcc().defragment())
            .await
            .map_err(|e| EtcdError::Internal(e.to_string()))??;
        Ok(DefragmentResponse {
            header: Some(self.store.header(self.store.mvcc().current_revision())),
        })
    }

    async fn hash(&self) -> Result<HashResponse, EtcdError> {
        let hash = self.store.mvcc().hash()?;
        Ok(HashResponse {
            header: Some(self.store.header(self.store.mvcc().current_revision())),
            hash,
        })
    }

    async fn hash_kv(&self, req: HashKvRequest) -> Result<HashKvResponse, EtcdError> {
        let h = self.store.mvcc().hash_kv(req.revision)?;
        Ok(HashKvResponse {
            header: Some(self.store.header(self.store.mvcc().current_revision())),
            hash: h.hash,
            compact_revision: h.compact_revision,
            hash_revision: h.hash_revision,
        })
    }

    async fn move_leader(&self, req: MoveLeaderRequest) -> Result<MoveLeaderResponse, EtcdError> {
        self.store.move_leader(req.target_id).await?;
        Ok(MoveLeaderResponse {
            header: Some(self.store.header(self.store.mvcc().current_revision())),
        })
    }
}

/// Writes the backend as of now in etcd's snapshot format (see [`crate::exchange`]) to a
/// scratch file of the data directory and opens it for streaming; the name is removed at
/// once, so nothing is left behind however the stream ends.
fn snapshot_file(store: &Store) -> Result<std::fs::File, EtcdError> {
    let tmp = store.data_dir().snapshot_tmp();
    let view = store.mvcc().view()?;
    let exported = exchange::export(&view, &tmp, &store.config().emulated_etcd_version);
    drop(view);
    let file = exported
        .map_err(|e| EtcdError::Internal(e.to_string()))
        .and_then(|_| std::fs::File::open(&tmp).map_err(|e| EtcdError::Internal(e.to_string())));
    // The open handle keeps the data readable; the name can go now.
    let _ = std::fs::remove_file(&tmp);
    file
}

/// Streams the snapshot as etcd's Snapshot RPC does: chunks of 32 KiB, each with the bytes
/// still to come after it (`remaining_bytes`, which `etcdctl snapshot save` shows as
/// progress), then one last message whose blob is the sha256 of everything sent.
fn stream_snapshot(mut file: std::fs::File, tx: mpsc::Sender<Result<SnapshotResponse, Status>>) {
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut sent = 0u64;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; SNAPSHOT_CHUNK];
    while sent < total {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                let _ = tx.blocking_send(Err(Status::from(EtcdError::Internal(e.to_string()))));
                return;
            }
        };
        sent += n as u64;
        hasher.update(&buf[..n]);
        let chunk = SnapshotResponse {
            remaining_bytes: total - sent,
            blob: buf[..n].to_vec(),
            ..Default::default()
        };
        if tx.blocking_send(Ok(chunk)).is_err() {
            return;
        }
    }
    let digest = SnapshotResponse {
        remaining_bytes: 0,
        blob: hasher.finalize().to_vec(),
        ..Default::default()
    };
    let _ = tx.blocking_send(Ok(digest));
}

#[tonic::async_trait]
impl Maintenance for MaintenanceService {
    async fn alarm(
        &self,
        request: Request<AlarmRequest>,
    ) -> Result<Response<AlarmResponse>, Status> {
        unary(
            &self.store,
            SERVICE,
            "Alarm",
            self.alarm(request.into_inner()),
        )
        .await
    }

    async fn status(
        &self,
        _request: Request<StatusRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        unary(&self.store, SERVICE, "Status", self.status()).await
    }

    async fn defragment(
        &self,
        _request: Request<DefragmentRequest>,
    ) -> Result<Response<DefragmentResponse>, Status> {
        unary(&self.store, SERVICE, "Defragment", self.defragment()).await
    }

    async fn hash(&self, _request: Request<HashRequest>) -> Result<Response<HashResponse>, Status> {
        unary(&self.store, SERVICE, "Hash", self.hash()).await
    }

    async fn hash_kv(
        &self,
        request: Request<HashKvRequest>,
    ) -> Result<Response<HashKvResponse>, Status> {
        unary(
            &self.store,
            SERVICE,
            "HashKV",
            self.hash_kv(request.into_inner()),
        )
        .await
    }

    type SnapshotStream = Pin<Box<dyn Stream<Item = Result<SnapshotResponse, Status>> + Send>>;

    async fn snapshot(
        &self,
        _request: Request<SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        let store = self.store.clone();
        let file = tokio::task::spawn_blocking(move || snapshot_file(&store))
            .await
            .map_err(|e| Status::unknown(e.to_string()))?
            .map_err(Status::from)?;
        let (tx, rx) = mpsc::channel(4);
        tokio::task::spawn_blocking(move || stream_snapshot(file, tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn move_leader(
        &self,
        request: Request<MoveLeaderRequest>,
    ) -> Result<Response<MoveLeaderResponse>, Status> {
        unary(
            &self.store,
            SERVICE,
            "MoveLeader",
            self.move_leader(request.into_inner()),
        )
        .await
    }

    async fn downgrade(
        &self,
        _request: Request<DowngradeRequest>,
    ) -> Result<Response<DowngradeResponse>, Status> {
        let call = async {
            Err(EtcdError::Unimplemented(
                "keel store does not support cluster downgrades".into(),
            ))
        };
        unary(&self.store, SERVICE, "Downgrade", call).await
    }
}
