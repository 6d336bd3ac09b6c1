//! Txn compares (etcd's `applyCompare` / `compareKV`) and the request checks etcd runs before a
//! txn executes (`checkRequests`).

use keel_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::{Compare, TxnRequest};
use keel_proto::mvccpb::KeyValue;

/// Compares one key-value (a zero `KeyValue` for a missing key) with a compare's target.
pub fn compare_kv(c: &Compare, kv: &KeyValue) -> bool {
    use std::cmp::Ordering;
    let int = |want: Option<i64>, have: i64| have.cmp(&want.unwrap_or(0));
    let result: Ordering = match CompareTarget::try_from(c.target) {
        Ok(CompareTarget::Value) => {
            let want: &[u8] = match &c.target_union {
                Some(TargetUnion::Value(v)) => v,
                _ => &[],
            };
            kv.value.as_slice().cmp(want)
        }
        Ok(CompareTarget::Create) => int(
            match c.target_union {
                Some(TargetUnion::CreateRevision(r)) => Some(r),
                _ => None,
            },
            kv.create_revision,
        ),
        Ok(CompareTarget::Mod) => int(
            match c.target_union {
                Some(TargetUnion::ModRevision(r)) => Some(r),
                _ => None,
            },
            kv.mod_revision,
        ),
        Ok(CompareTarget::Version) => int(
            match c.target_union {
                Some(TargetUnion::Version(r)) => Some(r),
                _ => None,
            },
            kv.version,
        ),
        Ok(CompareTarget::Lease) => int(
            match c.target_union {
                Some(TargetUnion::Lease(r)) => Some(r),
                _ => None,
            },
            kv.lease,
        ),
        Err(_) => Ordering::Equal,
    };
    match CompareResult::try_from(c.result) {
        Ok(CompareResult::Equal) => result.is_eq(),
        Ok(CompareResult::NotEqual) => result.is_ne(),
        Ok(CompareResult::Greater) => result.is_gt(),
        Ok(CompareResult::Less) => result.is_lt(),
        Err(_) => true,
    }
}

/// Whether a compare needs the stored value (VALUE and LEASE targets); the others are answered
/// from the key index alone.
pub fn needs_value(c: &Compare) -> bool {
    matches!(
        CompareTarget::try_from(c.target),
        Ok(CompareTarget::Value | CompareTarget::Lease)
    )
}

/// Whether a compare over no key at all succeeds (VALUE compares on missing keys always fail).
pub fn compare_missing(c: &Compare) -> bool {
    if c.target == CompareTarget::Value as i32 {
        return false;
    }
    compare_kv(c, &KeyValue::default())
}

/// The ops a txn runs on the path `taken` decided.
pub fn branch(req: &TxnRequest, succeeded: bool) -> &[keel_proto::etcdserverpb::RequestOp] {
    if succeeded {
        &req.success
    } else {
        &req.failure
    }
}

/// Whether a txn only reads: every op of both branches is a range (etcd's `isTxnReadonly`;
/// as there, a nested txn counts as a write).
pub fn is_txn_readonly(req: &TxnRequest) -> bool {
    ranges(req).all(|r| r.is_some())
}

/// Whether every op of both branches is a serializable range (etcd's `isTxnSerializable`).
pub fn is_txn_serializable(req: &TxnRequest) -> bool {
    ranges(req).all(|r| r.is_some_and(|r| r.serializable))
}

/// Each op of both branches as a range, or `None` for any other op.
fn ranges(
    req: &TxnRequest,
) -> impl Iterator<Item = Option<&keel_proto::etcdserverpb::RangeRequest>> {
    req.success
        .iter()
        .chain(&req.failure)
        .map(|op| match &op.request {
            Some(Request::RequestRange(r)) => Some(r),
            _ => None,
        })
}

/// Nested txns of a branch, in order.
pub fn nested(ops: &[keel_proto::etcdserverpb::RequestOp]) -> impl Iterator<Item = &TxnRequest> {
    ops.iter().filter_map(|op| match &op.request {
        Some(Request::RequestTxn(t)) => Some(t),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(target: CompareTarget, result: CompareResult, u: TargetUnion) -> Compare {
        Compare {
            target: target as i32,
            result: result as i32,
            key: b"k".to_vec(),
            target_union: Some(u),
            ..Default::default()
        }
    }

    #[test]
    fn int_targets() {
        let kv = KeyValue {
            version: 3,
            mod_revision: 7,
            create_revision: 5,
            lease: 9,
            ..Default::default()
        };
        assert!(compare_kv(
            &cmp(
                CompareTarget::Version,
                CompareResult::Equal,
                TargetUnion::Version(3)
            ),
            &kv
        ));
        assert!(compare_kv(
            &cmp(
                CompareTarget::Mod,
                CompareResult::Greater,
                TargetUnion::ModRevision(6)
            ),
            &kv
        ));
        assert!(compare_kv(
            &cmp(
                CompareTarget::Create,
                CompareResult::Less,
                TargetUnion::CreateRevision(6)
            ),
            &kv
        ));
        assert!(compare_kv(
            &cmp(
                CompareTarget::Lease,
                CompareResult::NotEqual,
                TargetUnion::Lease(1)
            ),
            &kv
        ));
        assert!(!compare_kv(
            &cmp(
                CompareTarget::Lease,
                CompareResult::Equal,
                TargetUnion::Lease(1)
            ),
            &kv
        ));
    }

    #[test]
    fn value_target_and_missing_keys() {
        let kv = KeyValue {
            value: b"b".to_vec(),
            ..Default::default()
        };
        assert!(compare_kv(
            &cmp(
                CompareTarget::Value,
                CompareResult::Greater,
                TargetUnion::Value(b"a".to_vec())
            ),
            &kv
        ));
        assert!(compare_kv(
            &cmp(
                CompareTarget::Value,
                CompareResult::Equal,
                TargetUnion::Value(b"b".to_vec())
            ),
            &kv
        ));
        let c = cmp(
            CompareTarget::Value,
            CompareResult::NotEqual,
            TargetUnion::Value(b"x".to_vec()),
        );
        assert!(!compare_missing(&c));
        let c = cmp(
            CompareTarget::Mod,
            CompareResult::Equal,
            TargetUnion::ModRevision(0),
        );
        assert!(compare_missing(&c));
        let c = cmp(
            CompareTarget::Version,
            CompareResult::Greater,
            TargetUnion::Version(0),
        );
        assert!(!compare_missing(&c));
    }

    #[test]
    fn mismatched_union_compares_with_zero() {
        let kv = KeyValue {
            version: 0,
            ..Default::default()
        };
        let c = cmp(
            CompareTarget::Version,
            CompareResult::Equal,
            TargetUnion::ModRevision(5),
        );
        assert!(compare_kv(&c, &kv));
    }

    #[test]
    fn read_only_and_serializable_as_etcd() {
        use keel_proto::etcdserverpb::{PutRequest, RangeRequest, RequestOp};
        let range = |serializable| RequestOp {
            request: Some(Request::RequestRange(RangeRequest {
                serializable,
                ..Default::default()
            })),
        };
        let txn = |success: Vec<RequestOp>, failure: Vec<RequestOp>| TxnRequest {
            success,
            failure,
            ..Default::default()
        };
        let empty = TxnRequest::default();
        assert!(is_txn_readonly(&empty) && is_txn_serializable(&empty));
        let t = txn(vec![range(true)], vec![range(false)]);
        assert!(is_txn_readonly(&t) && !is_txn_serializable(&t));
        let t = txn(vec![range(true)], vec![range(true)]);
        assert!(is_txn_readonly(&t) && is_txn_serializable(&t));
        let put = RequestOp {
            request: Some(Request::RequestPut(PutRequest::default())),
        };
        assert!(!is_txn_readonly(&txn(vec![], vec![put])));
        // As in etcd, a nested txn counts as a write, even one that only reads.
        let nested = RequestOp {
            request: Some(Request::RequestTxn(txn(vec![range(true)], vec![]))),
        };
        assert!(!is_txn_readonly(&txn(vec![nested], vec![])));
    }
}
