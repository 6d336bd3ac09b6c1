//! The compactor: every `--etcd-compaction-interval` the store is compacted to the revision
//! seen one interval earlier, so about one to two intervals of history stay for watches and
//! exact lists, as kube-apiserver's `compact.go` does it.
//!
//! Several apiservers on one store compact once per interval between them: each round is
//! `Txn(if version(compact_rev_key) == <the version this apiserver last saw> then
//! Put(compact_rev_key, <revision>) else Range(compact_rev_key))`. The winner's Put bumps
//! the key's version, so the others' compares fail; they only learn the new version and the
//! store's revision, and try again next interval. The first round only records (nothing is
//! compacted at start-up). `compact_rev_key` lives outside `--etcd-prefix`, as upstream.

use super::StoreChannel;
use keel_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::response_op::Response;
use keel_proto::etcdserverpb::{
    CompactionRequest, Compare, PutRequest, RangeRequest, RequestOp, TxnRequest,
};

use super::StorageError;
use super::etcd3::Etcd3;

/// The key the apiservers of one store agree on compactions with.
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

/// One apiserver's compaction state.
#[derive(Debug, Clone)]
pub struct Compactor {
    kv: KvClient<StoreChannel>,
    /// The version of `compact_rev_key` this apiserver last saw (upstream's `compactTime`).
    seen_version: i64,
    /// The store's revision one round ago: what the next round compacts to.
    revision: i64,
}

impl Compactor {
    /// A compactor for `store` that has not run a round yet.
    pub fn new(store: &Etcd3) -> Compactor {
        Compactor {
            kv: KvClient::new(store.channel()),
            seen_version: 0,
            revision: 0,
        }
    }

    /// Runs one round; the revision it compacted to, if this apiserver compacted.
    pub async fn round(&mut self) -> Result<Option<i64>, StorageError> {
        let key = COMPACT_REV_KEY.as_bytes().to_vec();
        let txn = TxnRequest {
            compare: vec![Compare {
                result: CompareResult::Equal as i32,
                target: CompareTarget::Version as i32,
                key: key.clone(),
                range_end: Vec::new(),
                target_union: Some(TargetUnion::Version(self.seen_version)),
            }],
            success: vec![RequestOp {
                request: Some(Request::RequestPut(PutRequest {
                    key: key.clone(),
                    value: self.revision.to_string().into_bytes(),
                    ..Default::default()
                })),
            }],
            failure: vec![RequestOp {
                request: Some(Request::RequestRange(RangeRequest {
                    key,
                    ..Default::default()
                })),
            }],
        };
        let resp = self
            .kv
            .txn(txn)
            .await
            .map_err(|e| StorageError::Internal(format!("etcd compaction txn: {}", e.message())))?
            .into_inner();
        let current = resp.header.map_or(0, |h| h.revision);
        let compact_to = std::mem::replace(&mut self.revision, current);
        if !resp.succeeded {
            // Another apiserver compacted this round: learn its version.
            self.seen_version = resp
                .responses
                .into_iter()
                .find_map(|r| match r.response {
                    Some(Response::ResponseRange(range)) => range.kvs.into_iter().next(),
                    _ => None,
                })
                .map_or(0, |kv| kv.version);
            return Ok(None);
        }
        self.seen_version += 1;
        if compact_to == 0 {
            // No compaction on start-up.
            return Ok(None);
        }
        self.kv
            .compact(CompactionRequest {
                revision: compact_to,
                physical: false,
            })
            .await
            .map_err(|e| StorageError::Internal(format!("etcd compaction: {}", e.message())))?;
        Ok(Some(compact_to))
    }

    /// Runs a round every `interval`, for as long as the process runs (a zero interval
    /// disables compaction, as `--etcd-compaction-interval=0` does).
    pub async fn run(mut self, interval: std::time::Duration) {
        if interval.is_zero() {
            return;
        }
        loop {
            tokio::time::sleep(interval).await;
            match self.round().await {
                Ok(Some(revision)) => tracing::info!(revision, "etcd: compacted"),
                Ok(None) => {}
                Err(e) => tracing::error!(error = %e, "etcd: compaction failed"),
            }
        }
    }
}
