//! `keel bench txn-put`: one `KV.Txn` per request holding `--txn-ops` puts and no compares.

use std::sync::Arc;

use anyhow::bail;
use keel_proto::etcdserverpb::{PutRequest, RequestOp, TxnRequest, request_op};

use crate::args::{BenchArgs, TxnPutArgs};
use crate::keys::{KeyMaker, Rng};
use crate::runner::{MakeRequest, Request};

/// Builds the requests of a txn-put benchmark.
///
/// As in etcd, keys are always sequential: transaction `n` writes keys
/// `n * txn-ops + j` (mod key-space-size) for `j` in `0..txn-ops`.
pub fn requests(args: &BenchArgs, txn: &TxnPutArgs) -> anyhow::Result<MakeRequest> {
    if txn.txn_ops == 0 {
        bail!("expected positive --txn-ops, got 0");
    }
    if txn.txn_ops > args.key_space_size {
        bail!(
            "expected --txn-ops no larger than --key-space-size, got txn-ops({}) key-space-size({})",
            txn.txn_ops,
            args.key_space_size
        );
    }
    let keys = KeyMaker::new(b"", args.key_size, args.key_space_size)?;
    let value = Rng::seeded(u64::MAX).bytes(args.val_size);
    let ops = txn.txn_ops;
    Ok(Arc::new(move |n, _rng| {
        let success = (0..ops)
            .map(|j| RequestOp {
                request: Some(request_op::Request::RequestPut(PutRequest {
                    key: keys.key(n.wrapping_mul(ops).wrapping_add(j)),
                    value: value.clone(),
                    ..Default::default()
                })),
            })
            .collect();
        Request::Txn(TxnRequest {
            success,
            ..Default::default()
        })
    }))
}
