//! Small client calls the cluster tests share: who leads, a put, the `k/` keys, a watch
//! stream, and whether every member holds the same data.

use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::watch_client::WatchClient;
use keel_proto::etcdserverpb::watch_request::RequestUnion;
use keel_proto::etcdserverpb::{
    HashKvRequest, PutRequest, RangeRequest, StatusRequest, WatchCreateRequest, WatchRequest,
    WatchResponse,
};
use tokio::sync::mpsc;
use tonic::transport::Channel;

use super::{Cluster, Server};

/// The leader `m` reports, if any.
pub async fn leader_of(m: &Server) -> Option<u64> {
    let mut c = MaintenanceClient::new(m.channel().await);
    let st = c.status(StatusRequest {}).await.ok()?.into_inner();
    (st.leader != 0).then_some(st.leader)
}

/// Puts `key` = `v-<key>` through `m`; the revision of the write.
pub async fn put(m: &Server, key: &str) -> Result<i64, tonic::Status> {
    let mut kv = KvClient::new(m.channel().await);
    let resp = kv
        .put(PutRequest {
            key: key.as_bytes().to_vec(),
            value: format!("v-{key}").into_bytes(),
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok(resp.header.expect("put header").revision)
}

/// Opens a Watch stream on `channel` whose first request is `create`, with etcd's
/// `hasleader` metadata if `require_leader`. Returns the sender of further requests (the
/// client's side of the stream ends when it is dropped) and the responses.
pub async fn watch(
    channel: Channel,
    create: WatchCreateRequest,
    require_leader: bool,
) -> Result<(mpsc::Sender<WatchRequest>, tonic::Streaming<WatchResponse>), tonic::Status> {
    let (tx, rx) = mpsc::channel(4);
    let create = WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(create)),
    };
    tx.send(create).await.expect("the receiver is alive");
    let mut req = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    if require_leader {
        req.metadata_mut()
            .insert("hasleader", "true".parse().expect("ascii"));
    }
    let stream = WatchClient::new(channel).watch(req).await?.into_inner();
    Ok((tx, stream))
}

/// Every key under `k/` as `(key, value)`, read on `m`.
pub async fn keys(m: &Server, serializable: bool) -> Result<Vec<(String, String)>, tonic::Status> {
    let mut kv = KvClient::new(m.channel().await);
    let resp = kv
        .range(RangeRequest {
            key: b"k/".to_vec(),
            range_end: b"k0".to_vec(),
            serializable,
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok(resp
        .kvs
        .into_iter()
        .map(|kv| {
            (
                String::from_utf8(kv.key).unwrap(),
                String::from_utf8(kv.value).unwrap(),
            )
        })
        .collect())
}

/// Waits (up to `limit`) until every member of `members` reports the same HashKV at the
/// highest revision any of them has: same data at the same revision.
pub async fn assert_same_hashkv(members: &[&Server], limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let mut revision = 0;
        for m in members {
            let mut c = MaintenanceClient::new(m.channel().await);
            if let Ok(st) = c.status(StatusRequest {}).await {
                revision = revision.max(st.into_inner().header.unwrap().revision);
            }
        }
        let mut hashes = Vec::new();
        for m in members {
            let mut c = MaintenanceClient::new(m.channel().await);
            match c.hash_kv(HashKvRequest { revision }).await {
                Ok(h) => {
                    let h = h.into_inner();
                    hashes.push(Some((h.hash, h.compact_revision)));
                }
                Err(_) => hashes.push(None),
            }
        }
        if hashes[0].is_some() && hashes.iter().all(|h| *h == hashes[0]) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "HashKV at revision {revision} differs: {hashes:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The index of the member that all of `asked` name as leader, once they agree; fails the
/// test if they do not within `limit`.
pub async fn agreed_leader(cluster: &Cluster, asked: &[usize], limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    loop {
        let mut leaders = Vec::new();
        for &i in asked {
            leaders.push(leader_of(&cluster.members[i]).await);
        }
        if let Some(Some(l)) = leaders.first()
            && leaders.iter().all(|x| *x == Some(*l))
        {
            for (i, m) in cluster.members.iter().enumerate() {
                if asked.contains(&i) && m.ids().await.1 == *l {
                    return i;
                }
            }
        }
        assert!(Instant::now() < deadline, "no agreed leader: {leaders:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
