//! A physical Compact is answered only once the member removed what it compacted (etcd's
//! `physical` flag): the backend in use has shrunk by the answer, and the backend hash taken
//! right after the answer does not change later. Without the flag keel answers as soon as the
//! Compact is applied and removes in the background, as etcd does.

use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::{
    CompactionRequest, HashRequest, PutRequest, RequestOp, TxnRequest, request_op,
};
use keel_testkit::{Server, target_flavor};

const IN_USE: &str = "etcd_mvcc_db_total_size_in_use_in_bytes";

/// Txns of `KEYS` puts each: enough revisions that removing them takes many batches.
const TXNS: usize = 60;
const KEYS: usize = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_physical_compaction_is_answered_after_its_removals() {
    let server = Server::start(target_flavor());
    let channel = server.channel().await;
    let mut kv = KvClient::new(channel.clone());
    let mut revision = 0;
    for t in 0..TXNS {
        let success = (0..KEYS)
            .map(|k| RequestOp {
                request: Some(request_op::Request::RequestPut(PutRequest {
                    key: format!("key{k:03}").into_bytes(),
                    value: format!("value{t}").into_bytes(),
                    ..Default::default()
                })),
            })
            .collect();
        let resp = kv
            .txn(TxnRequest {
                success,
                ..Default::default()
            })
            .await
            .expect("txn")
            .into_inner();
        revision = resp.header.expect("header").revision;
    }
    let in_use_before = server.metric(IN_USE).expect("the backend's size in use");
    let asked = Instant::now();
    kv.compact(CompactionRequest {
        revision,
        physical: true,
    })
    .await
    .expect("compact");
    let took = asked.elapsed();
    let answered = Instant::now();
    let maintenance = MaintenanceClient::new(channel);
    let hash = || {
        let mut m = maintenance.clone();
        async move {
            m.hash(HashRequest {})
                .await
                .expect("hash")
                .into_inner()
                .hash
        }
    };
    let right_after = hash().await;
    // The removals were made by the answer: the backend in use shrank (so the check below is
    // not passed by a compaction that removes nothing at all).
    let in_use_after = server.metric(IN_USE).expect("the backend's size in use");
    assert!(
        in_use_after < in_use_before,
        "{IN_USE} is {in_use_after} after the physical compaction, {in_use_before} before"
    );
    // And none came after it. No event marks "no more removals", so the hash is watched over
    // a window anchored on the compaction's own cost: removing costs the same before and
    // after an answer, so a member that answered early would still be removing for up to as
    // long as the whole compaction took (twice that here, and at least a second).
    let window = (2 * took).max(Duration::from_secs(1));
    let mut looks = 0;
    while answered.elapsed() < window || looks < 5 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        looks += 1;
        assert_eq!(
            hash().await,
            right_after,
            "removals went on {:?} after the answer (the compaction took {took:?})",
            answered.elapsed()
        );
    }
}
