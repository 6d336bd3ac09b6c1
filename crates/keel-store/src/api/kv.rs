//! The etcd `KV` service: request validation exactly as etcd's gRPC layer does it, then reads
//! from the MVCC store and writes through Raft.

use std::collections::HashSet;
use std::sync::Arc;

use keel_proto::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, RangeStreamResponse, RequestOp, TxnRequest,
    TxnResponse, kv_server::Kv, range_request, request_op,
};
use tonic::{Request, Response, Status};

use keel_mvcc::{is_txn_readonly, is_txn_serializable};

use super::unary;
use crate::error::EtcdError;
use crate::raft::{Applied, ProposalOp};
use crate::server::Store;

const SERVICE: &str = "etcdserverpb.KV";

/// The KV service of one member.
pub struct KvService {
    store: Arc<Store>,
}

impl KvService {
    /// Serves KV requests on `store`.
    pub fn new(store: Arc<Store>) -> Self {
        KvService { store }
    }

    /// etcd's read path: a linearizable read waits for the read barrier (a learner serves
    /// only serializable reads); a serializable one is served from local state at once, with
    /// or without a leader.
    async fn ready_to_read(&self, serializable: bool) -> Result<(), EtcdError> {
        if !serializable {
            if self.store.is_learner() {
                return Err(EtcdError::NotSupportedForLearner);
            }
            self.store.read_barrier().await?;
        }
        Ok(())
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse, EtcdError> {
        check_range(&req)?;
        self.ready_to_read(req.serializable).await?;
        self.store.metrics().mvcc_range.inc();
        let mut resp = self.store.mvcc().range(&req)?;
        self.store.fill(&mut resp.header);
        Ok(resp)
    }

    async fn put(&self, req: PutRequest) -> Result<PutResponse, EtcdError> {
        check_put(&req)?;
        self.store
            .check_quota(req.key.len() + req.value.len())
            .await?;
        self.store.metrics().mvcc_put.inc();
        match self.store.propose(ProposalOp::Put(req)).await? {
            Applied::Put(mut resp) => {
                self.store.fill(&mut resp.header);
                Ok(resp)
            }
            other => Err(unexpected(other)),
        }
    }

    async fn delete_range(
        &self,
        req: DeleteRangeRequest,
    ) -> Result<DeleteRangeResponse, EtcdError> {
        if req.key.is_empty() {
            return Err(EtcdError::EmptyKey);
        }
        self.store.metrics().mvcc_delete.inc();
        match self.store.propose(ProposalOp::DeleteRange(req)).await? {
            Applied::DeleteRange(mut resp) => {
                self.store.fill(&mut resp.header);
                Ok(resp)
            }
            other => Err(unexpected(other)),
        }
    }

    async fn txn(&self, req: TxnRequest) -> Result<TxnResponse, EtcdError> {
        check_txn(&req, self.store.config().max_txn_ops as usize)?;
        check_intervals(&req.success)?;
        check_intervals(&req.failure)?;
        self.store.metrics().mvcc_txn.inc();
        // etcd serves a txn without writes like a range: no log entry, no fsync.
        if is_txn_readonly(&req) {
            self.ready_to_read(is_txn_serializable(&req)).await?;
            let mut resp = self.store.mvcc().read_txn(&req)?;
            self.store.fill(&mut resp.header);
            return Ok(resp);
        }
        if has_put(&req) {
            self.store
                .check_quota(prost::Message::encoded_len(&req))
                .await?;
        }
        match self.store.propose(ProposalOp::Txn(req)).await? {
            Applied::Txn(mut resp) => {
                self.store.fill(&mut resp.header);
                Ok(resp)
            }
            other => Err(unexpected(other)),
        }
    }

    /// A physical compaction is answered once this member removed what it compacted, as in
    /// etcd; otherwise once it is applied (the removal runs in the background).
    async fn compact(&self, req: CompactionRequest) -> Result<CompactionResponse, EtcdError> {
        let (revision, physical) = (req.revision, req.physical);
        match self.store.propose(ProposalOp::Compaction(req)).await? {
            Applied::Compaction(mut resp) => {
                while physical && self.store.mvcc().finished_compact_revision() < revision {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                self.store.fill(&mut resp.header);
                Ok(resp)
            }
            other => Err(unexpected(other)),
        }
    }
}

fn unexpected(applied: Applied) -> EtcdError {
    EtcdError::Internal(format!("unexpected apply result {applied:?}"))
}

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(
        &self,
        request: Request<RangeRequest>,
    ) -> Result<Response<RangeResponse>, Status> {
        unary(
            &self.store,
            SERVICE,
            "Range",
            self.range(request.into_inner()),
        )
        .await
    }

    type RangeStreamStream = futures::stream::Empty<Result<RangeStreamResponse, Status>>;

    async fn range_stream(
        &self,
        _request: Request<RangeRequest>,
    ) -> Result<Response<Self::RangeStreamStream>, Status> {
        // etcd 3.5 has no RangeStream; clients fall back to paginated Range on Unimplemented.
        Err(Status::unimplemented(
            "unknown method RangeStream for service etcdserverpb.KV",
        ))
    }

    async fn put(&self, request: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        unary(&self.store, SERVICE, "Put", self.put(request.into_inner())).await
    }

    async fn delete_range(
        &self,
        request: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        unary(
            &self.store,
            SERVICE,
            "DeleteRange",
            self.delete_range(request.into_inner()),
        )
        .await
    }

    async fn txn(&self, request: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        unary(&self.store, SERVICE, "Txn", self.txn(request.into_inner())).await
    }

    async fn compact(
        &self,
        request: Request<CompactionRequest>,
    ) -> Result<Response<CompactionResponse>, Status> {
        unary(
            &self.store,
            SERVICE,
            "Compact",
            self.compact(request.into_inner()),
        )
        .await
    }
}

fn check_range(req: &RangeRequest) -> Result<(), EtcdError> {
    if req.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    if range_request::SortOrder::try_from(req.sort_order).is_err()
        || range_request::SortTarget::try_from(req.sort_target).is_err()
    {
        return Err(EtcdError::InvalidSortOption);
    }
    Ok(())
}

fn check_put(req: &PutRequest) -> Result<(), EtcdError> {
    if req.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    if req.ignore_value && !req.value.is_empty() {
        return Err(EtcdError::ValueProvided);
    }
    if req.ignore_lease && req.lease != 0 {
        return Err(EtcdError::LeaseProvided);
    }
    Ok(())
}

/// etcd's `checkTxnRequest`: op counts against `--max-txn-ops`, then every op.
fn check_txn(req: &TxnRequest, max_ops: usize) -> Result<(), EtcdError> {
    let ops = req
        .compare
        .len()
        .max(req.success.len())
        .max(req.failure.len());
    if ops > max_ops {
        return Err(EtcdError::TooManyOps);
    }
    if req.compare.iter().any(|c| c.key.is_empty()) {
        return Err(EtcdError::EmptyKey);
    }
    for op in req.success.iter().chain(&req.failure) {
        check_op(op, max_ops - ops)?;
    }
    Ok(())
}

fn check_op(op: &RequestOp, max_ops: usize) -> Result<(), EtcdError> {
    match &op.request {
        Some(request_op::Request::RequestRange(r)) => check_range(r),
        Some(request_op::Request::RequestPut(r)) => check_put(r),
        Some(request_op::Request::RequestDeleteRange(r)) if r.key.is_empty() => {
            Err(EtcdError::EmptyKey)
        }
        Some(request_op::Request::RequestDeleteRange(_)) => Ok(()),
        Some(request_op::Request::RequestTxn(t)) => check_txn(t, max_ops),
        None => Err(EtcdError::KeyNotFound),
    }
}

/// A half-open key interval as etcd's `StringAffineInterval`: an empty end is +infinity.
#[derive(Clone)]
struct Interval {
    begin: Vec<u8>,
    end: Vec<u8>,
}

impl Interval {
    fn point(key: &[u8]) -> Interval {
        let mut end = key.to_vec();
        end.push(0);
        Interval {
            begin: key.to_vec(),
            end,
        }
    }

    fn contains_point(&self, key: &[u8]) -> bool {
        self.begin.as_slice() <= key && (self.end.is_empty() || key < self.end.as_slice())
    }
}

/// etcd's `checkIntervals`: no put may overlap a delete or another put of the same branch
/// path (puts in the then and else branches of one nested txn may share keys).
fn check_intervals(ops: &[RequestOp]) -> Result<(HashSet<Vec<u8>>, Vec<Interval>), EtcdError> {
    let mut dels: Vec<Interval> = ops
        .iter()
        .filter_map(|op| match &op.request {
            Some(request_op::Request::RequestDeleteRange(d)) => Some(if d.range_end.is_empty() {
                Interval::point(&d.key)
            } else {
                Interval {
                    begin: d.key.clone(),
                    end: d.range_end.clone(),
                }
            }),
            _ => None,
        })
        .collect();
    let hits = |dels: &[Interval], key: &[u8]| dels.iter().any(|d| d.contains_point(key));
    let mut puts = HashSet::new();
    for op in ops {
        let Some(request_op::Request::RequestTxn(txn)) = &op.request else {
            continue;
        };
        let (puts_then, dels_then) = check_intervals(&txn.success)?;
        let (puts_else, dels_else) = check_intervals(&txn.failure)?;
        for key in &puts_then {
            if puts.contains(key) || hits(&dels, key) {
                return Err(EtcdError::DuplicateKey);
            }
            puts.insert(key.clone());
        }
        for key in puts_else {
            if (puts.contains(&key) && !puts_then.contains(&key)) || hits(&dels, &key) {
                return Err(EtcdError::DuplicateKey);
            }
            puts.insert(key);
        }
        dels.extend(dels_then);
        dels.extend(dels_else);
    }
    for op in ops {
        let Some(request_op::Request::RequestPut(put)) = &op.request else {
            continue;
        };
        if puts.contains(&put.key) || hits(&dels, &put.key) {
            return Err(EtcdError::DuplicateKey);
        }
        puts.insert(put.key.clone());
    }
    Ok((puts, dels))
}

fn ops_of(req: &TxnRequest) -> impl Iterator<Item = &RequestOp> {
    req.success.iter().chain(&req.failure)
}

fn has_put(req: &TxnRequest) -> bool {
    ops_of(req).any(|op| match &op.request {
        Some(request_op::Request::RequestPut(_)) => true,
        Some(request_op::Request::RequestTxn(t)) => has_put(t),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_proto::etcdserverpb::{Compare, DeleteRangeRequest};

    fn put(key: &str) -> RequestOp {
        RequestOp {
            request: Some(request_op::Request::RequestPut(PutRequest {
                key: key.into(),
                ..Default::default()
            })),
        }
    }

    fn del(key: &str, end: &str) -> RequestOp {
        RequestOp {
            request: Some(request_op::Request::RequestDeleteRange(
                DeleteRangeRequest {
                    key: key.into(),
                    range_end: end.into(),
                    ..Default::default()
                },
            )),
        }
    }

    fn txn(success: Vec<RequestOp>, failure: Vec<RequestOp>) -> RequestOp {
        RequestOp {
            request: Some(request_op::Request::RequestTxn(TxnRequest {
                success,
                failure,
                ..Default::default()
            })),
        }
    }

    #[test]
    fn duplicate_keys_as_etcd() {
        assert_eq!(
            check_intervals(&[put("a"), put("a")]).err(),
            Some(EtcdError::DuplicateKey)
        );
        assert_eq!(
            check_intervals(&[put("b"), del("a", "c")]).err(),
            Some(EtcdError::DuplicateKey)
        );
        assert!(check_intervals(&[put("c"), del("a", "c")]).is_ok());
        // then/else branches of one nested txn may write the same key
        assert!(check_intervals(&[txn(vec![put("a")], vec![put("a")])]).is_ok());
        assert_eq!(
            check_intervals(&[txn(vec![put("a")], vec![]), put("a")]).err(),
            Some(EtcdError::DuplicateKey)
        );
    }

    #[test]
    fn op_limits_as_etcd() {
        let req = TxnRequest {
            success: vec![put("a"), put("b")],
            ..Default::default()
        };
        assert_eq!(check_txn(&req, 1).err(), Some(EtcdError::TooManyOps));
        assert!(check_txn(&req, 2).is_ok());
        let req = TxnRequest {
            compare: vec![Compare::default()],
            ..Default::default()
        };
        assert_eq!(check_txn(&req, 8).err(), Some(EtcdError::EmptyKey));
        let req = TxnRequest {
            success: vec![RequestOp { request: None }],
            ..Default::default()
        };
        assert_eq!(check_txn(&req, 8).err(), Some(EtcdError::KeyNotFound));
    }
}
