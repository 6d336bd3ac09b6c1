//! Read-only txns are served as ranges are (etcd's `isTxnReadonly`): a linearizable one waits
//! for the read barrier but adds no log entry, and one whose ops are all serializable ranges
//! (`isTxnSerializable`) is answered by a member that has lost its leader, where a
//! linearizable one is refused.
//!
//! Runs against keel (default) or a real etcd 3.5 cluster (`KEEL_TEST_TARGET=etcd`).

use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::response_op::Response;
use keel_proto::etcdserverpb::{
    Compare, RangeRequest, RequestOp, StatusRequest, TxnRequest, TxnResponse,
};
use keel_testkit::kv::{leader_of, put};
use keel_testkit::{Cluster, Server, target_flavor};

/// A txn that compares `k/a`'s version and reads it in either branch.
fn read_txn(serializable: bool) -> TxnRequest {
    let range = || RequestOp {
        request: Some(Request::RequestRange(RangeRequest {
            key: b"k/a".to_vec(),
            serializable,
            ..Default::default()
        })),
    };
    TxnRequest {
        compare: vec![Compare {
            key: b"k/a".to_vec(),
            target: CompareTarget::Version as i32,
            result: CompareResult::Greater as i32,
            target_union: Some(TargetUnion::Version(0)),
            ..Default::default()
        }],
        success: vec![range()],
        failure: vec![range()],
    }
}

async fn txn(m: &Server, req: TxnRequest) -> Result<TxnResponse, tonic::Status> {
    let mut kv = KvClient::new(m.channel().await);
    let call = kv.txn(req);
    match tokio::time::timeout(Duration::from_secs(15), call).await {
        Ok(r) => r.map(tonic::Response::into_inner),
        Err(_) => Err(tonic::Status::deadline_exceeded("no answer in 15 s")),
    }
}

/// The value `k/a` had in the txn's answer.
fn value(resp: &TxnResponse) -> Vec<u8> {
    assert!(resp.succeeded);
    let Some(Response::ResponseRange(r)) = &resp.responses[0].response else {
        panic!("a range response: {resp:?}");
    };
    r.kvs[0].value.clone()
}

/// The last index of `m`'s Raft log.
async fn raft_index(m: &Server) -> u64 {
    let mut c = MaintenanceClient::new(m.channel().await);
    c.status(StatusRequest {})
        .await
        .unwrap()
        .into_inner()
        .raft_index
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_txns_add_no_log_entry_and_serializable_ones_need_no_leader() {
    let flavor = target_flavor();
    let mut cluster = Cluster::start(flavor, 3, &[]);
    let revision = put(&cluster.members[0], "k/a").await.unwrap();

    // Through every member, leader and followers: answered, nothing appended.
    for m in &cluster.members {
        let before = raft_index(m).await;
        for serializable in [false, true] {
            for _ in 0..5 {
                let resp = txn(m, read_txn(serializable)).await.unwrap();
                assert_eq!(value(&resp), b"v-k/a");
                assert!(resp.header.unwrap().revision >= revision);
            }
        }
        assert_eq!(
            raft_index(m).await,
            before,
            "a read-only txn added a log entry"
        );
    }

    // A member alone loses its leader: serializable reads still answer, linearizable ones not.
    cluster.members[1].kill();
    cluster.members[2].kill();
    let m = &cluster.members[0];
    let deadline = Instant::now() + Duration::from_secs(30);
    while leader_of(m).await.is_some() {
        assert!(
            Instant::now() < deadline,
            "the lone member still reports a leader"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let resp = txn(m, read_txn(true)).await.unwrap();
    assert_eq!(value(&resp), b"v-k/a");
    assert!(txn(m, read_txn(false)).await.is_err());
}
