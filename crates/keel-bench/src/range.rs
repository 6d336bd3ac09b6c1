//! `keel bench range`: the same `KV.Range` request, linearizable or serializable, repeated.

use std::sync::Arc;

use keel_proto::etcdserverpb::RangeRequest;

use crate::args::{Consistency, RangeArgs};
use crate::runner::{MakeRequest, Request};

/// The range end that selects every key starting with `prefix` (etcd's `GetPrefixRangeEnd`).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte is 0xff (or the prefix is empty): read to the end of the key space.
    vec![0]
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"foo"), b"fop");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
        assert_eq!(prefix_end(b""), b"\0");
    }
}
