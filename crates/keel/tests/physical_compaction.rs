//! A physical Compact is answered only once the member removed what it compacted (etcd's
//! `physical` flag): the backend hash taken right after the answer does not change later.
//! Without the flag keel answers as soon as the Compact is applied and removes in the
//! background, as etcd does.

use std::time::Duration;

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::{
    CompactionRequest, HashRequest, PutRequest, RequestOp, TxnRequest, request_op,
};
use keel_testkit::{Server, target_flavor};

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
    kv.compact(CompactionRequest {
        revision,
        physical: true,
    })
    .await
    .expect("compact");
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
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        hash().await,
        right_after,
        "removals went on after the answer"
    );
}
