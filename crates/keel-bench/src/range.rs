//! `keel bench range`: the same `KV.Range` request, linearizable or serializable, repeated.

use std::sync::Arc;

use keel_proto::etcdserverpb::RangeRequest;
use keel_proto::prefix_end;

use crate::args::{Consistency, RangeArgs};
use crate::runner::{MakeRequest, Request};

/// The request a range benchmark sends.
pub fn request(range: &RangeArgs) -> RangeRequest {
    let key = range.key.as_bytes().to_vec();
    let range_end = if range.prefix {
        prefix_end(&key)
    } else {
        range
            .end
            .as_ref()
            .map(|end| end.as_bytes().to_vec())
            .unwrap_or_default()
    };
    RangeRequest {
        key,
        range_end,
        limit: range.limit,
        serializable: range.consistency == Consistency::S,
        keys_only: range.keys_only,
        count_only: range.count_only,
        ..Default::default()
    }
}

/// Builds the requests of a range benchmark.
pub fn requests(range: &RangeArgs) -> MakeRequest {
    let request = request(range);
    Arc::new(move |_n, _rng| Request::Range(request.clone()))
}
