//! `keel bench put`: one `KV.Put` per request, keys random or sequential in the key space.

use std::sync::Arc;

use keel_proto::etcdserverpb::PutRequest;

use crate::args::{BenchArgs, PutArgs};
use crate::keys::{KeyMaker, Rng};
use crate::runner::{MakeRequest, Request};

/// Builds the requests of a put benchmark. As in etcd, every put carries the same random value.
pub fn requests(args: &BenchArgs, put: &PutArgs) -> anyhow::Result<MakeRequest> {
    let keys = KeyMaker::new(put.prefix.as_bytes(), args.key_size, args.key_space_size)?;
    let value = Rng::seeded(u64::MAX).bytes(args.val_size);
    let sequential = args.sequential_keys;
    Ok(Arc::new(move |n, rng| {
        let number = if sequential {
            n
        } else {
            rng.below(keys.key_space_size())
        };
        Request::Put(PutRequest {
            key: keys.key(number),
            value: value.clone(),
            ..Default::default()
        })
    }))
}
