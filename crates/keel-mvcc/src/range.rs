//! Range reads, in two phases so that readers hold the index lock only to resolve revisions.
//!
//! [`resolve`] runs under the index read lock: it validates the requested revision against the
//! current and compact revisions (etcd's `rangeKeys`), counts the keys in range and picks the
//! backend revisions to read. [`materialize`] then reads those values from a backend snapshot
//! and applies etcd's `Range` post-processing: min/max mod/create filters, sorting (Go's
//! unstable sort, as etcd), `limit` and `more`, `keys_only`.

use keel_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
use keel_proto::etcdserverpb::{RangeRequest, RangeResponse, ResponseHeader};
use keel_proto::mvccpb::KeyValue;

use crate::error::MvccError;
use crate::gosort::go_sort;
use crate::index::{KeyRange, TreeIndex};
use crate::revision::Rev;

/// Where the values of resolved revisions are read from.
pub trait ValueSource {
    /// The key-value stored at `rev` (never a tombstone).
    fn value(&self, rev: Rev) -> Result<KeyValue, MvccError>;
}

/// The outcome of [`resolve`].
#[derive(Debug, Default)]
pub struct Resolved {
    /// Backend revisions to read, in key order.
    pub revs: Vec<Rev>,
    /// Keys in range at the read revision, ignoring `limit`.
    pub total: usize,
}

fn needs_full_scan(req: &RangeRequest) -> bool {
    req.sort_order != SortOrder::None as i32
        || req.min_mod_revision != 0
        || req.max_mod_revision != 0
        || req.min_create_revision != 0
        || req.max_create_revision != 0
}

/// Validates the read revision and picks the revisions to read (etcd's `rangeKeys` on the index).
pub fn resolve(
    index: &TreeIndex,
    req: &RangeRequest,
    cur_rev: i64,
    compact_rev: i64,
) -> Result<Resolved, MvccError> {
    let mut limit = req.limit;
    if needs_full_scan(req) {
        limit = 0;
    }
    if limit > 0 {
        limit += 1;
    }
    let mut rev = req.revision;
    if rev > cur_rev {
        return Err(MvccError::FutureRevision);
    }
    if rev <= 0 {
        rev = cur_rev;
    }
    if rev < compact_rev {
        return Err(MvccError::Compacted);
    }
    let range = KeyRange::new(&req.key, &req.range_end);
    if req.count_only {
        return Ok(Resolved {
            revs: Vec::new(),
            total: index.count(range, rev),
        });
    }
    let mut out = Resolved::default();
    index.visit(range, rev, |_, found| {
        if limit <= 0 || (out.revs.len() as i64) < limit {
            out.revs.push(found.modified);
        }
        out.total += 1;
        true
    });
    Ok(out)
}

/// Reads the resolved values and shapes the response (etcd's `applierV3backend.Range`).
pub fn materialize(
    values: &dyn ValueSource,
    resolved: Resolved,
    req: &RangeRequest,
    header_rev: i64,
) -> Result<RangeResponse, MvccError> {
    let mut kvs = Vec::with_capacity(resolved.revs.len());
    for rev in resolved.revs {
        kvs.push(values.value(rev)?);
    }
    if req.max_mod_revision != 0 {
        kvs.retain(|kv| kv.mod_revision <= req.max_mod_revision);
    }
    if req.min_mod_revision != 0 {
        kvs.retain(|kv| kv.mod_revision >= req.min_mod_revision);
    }
    if req.max_create_revision != 0 {
        kvs.retain(|kv| kv.create_revision <= req.max_create_revision);
    }
    if req.min_create_revision != 0 {
        kvs.retain(|kv| kv.create_revision >= req.min_create_revision);
    }
    let mut order = req.sort_order;
    if req.sort_target != SortTarget::Key as i32 && order == SortOrder::None as i32 {
        order = SortOrder::Ascend as i32;
    }
    if order == SortOrder::Ascend as i32 || order == SortOrder::Descend as i32 {
        let key: fn(&KeyValue, &KeyValue) -> bool = match SortTarget::try_from(req.sort_target) {
            Ok(SortTarget::Version) => |a, b| a.version < b.version,
            Ok(SortTarget::Create) => |a, b| a.create_revision < b.create_revision,
            Ok(SortTarget::Mod) => |a, b| a.mod_revision < b.mod_revision,
            Ok(SortTarget::Value) => |a, b| a.value < b.value,
            _ => |a, b| a.key < b.key,
        };
        if order == SortOrder::Ascend as i32 {
            go_sort(&mut kvs, key);
        } else {
            go_sort(&mut kvs, |a, b| key(b, a));
        }
    }
    let mut more = false;
    if req.limit > 0 && kvs.len() as i64 > req.limit {
        kvs.truncate(req.limit as usize);
        more = true;
    }
    if req.keys_only {
        for kv in &mut kvs {
            kv.value = Vec::new();
        }
    }
    Ok(RangeResponse {
        header: Some(ResponseHeader {
            revision: header_rev,
            ..Default::default()
        }),
        kvs,
        more,
        count: resolved.total as i64,
    })
}
