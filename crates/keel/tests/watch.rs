//! Watch differential tests: the same watches opened on a real etcd 3.5.1 and on the server
//! under test, after the same writes, must deliver the same events.
//!
//! Responses may batch events differently (both are allowed to), so each watch is compared as a
//! flattened transcript: the `created` acknowledgement (watch id), every event in order (type,
//! key, value, revisions, version, lease, prev_kv), and the cancellation (compact_revision,
//! cancel_reason) if the server ended the watch. Covered: historical watches on a key, a prefix
//! and from-key, with prev_kv and the NOPUT/NODELETE filters; a watch from a compacted revision
//! (must report compact_revision and cancel, not fail the RPC); a live watch receiving writes
//! made after it was created; several watchers multiplexed on one stream.

use std::time::Duration;

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::watch_client::WatchClient;
use keel_proto::etcdserverpb::watch_request::RequestUnion;
use keel_proto::etcdserverpb::{
    CompactionRequest, DeleteRangeRequest, PutRequest, RequestOp, TxnRequest, WatchCreateRequest,
    WatchRequest, WatchResponse,
};
use keel_proto::mvccpb::Event;
use keel_testkit::{Flavor, Server, target_flavor};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// Upper bound on waiting for the next watch response.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(15);

/// One open watch stream.
struct Stream {
    // Kept open: dropping it would end the request stream.
    _tx: mpsc::Sender<WatchRequest>,
    rx: tonic::codec::Streaming<WatchResponse>,
    name: &'static str,
}

impl Stream {
    /// Opens a Watch stream with `creates` already queued (etcd sends the response headers
    /// only with the first response, so the stream must carry a request before we wait).
    async fn open(ch: Channel, name: &'static str, creates: Vec<WatchCreateRequest>) -> Stream {
        let (tx, rx) = mpsc::channel(16);
        for c in creates {
            tx.send(WatchRequest {
                request_union: Some(RequestUnion::CreateRequest(c)),
            })
            .await
            .expect("queue watch create request");
        }
        let rx = WatchClient::new(ch)
            .watch(ReceiverStream::new(rx))
            .await
            .unwrap_or_else(|e| panic!("{name}: Watch RPC failed: {e}"))
            .into_inner();
        Stream { _tx: tx, rx, name }
    }

    /// The next response, failing the test if none arrives in time.
    async fn next(&mut self, waiting_for: &str) -> WatchResponse {
        match tokio::time::timeout(RESPONSE_TIMEOUT, self.rx.next()).await {
            Ok(Some(Ok(r))) => r,
            Ok(Some(Err(e))) => panic!(
                "{}: watch stream failed while waiting for {waiting_for}: {e}",
                self.name
            ),
            Ok(None) => panic!(
                "{}: watch stream ended while waiting for {waiting_for}",
                self.name
            ),
            Err(_) => panic!(
                "{}: no watch response within {RESPONSE_TIMEOUT:?} while waiting for {waiting_for}",
                self.name
            ),
        }
    }
}

/// Renders an event with every field that matters to clients.
fn event_line(watch_id: i64, e: &Event) -> String {
    format!("watch {watch_id}: {e:?}")
}

/// Reads responses until each `(watch id, n)` in `want` got `n` events or was cancelled;
/// returns the flattened transcript.
async fn transcript(s: &mut Stream, want: &[(i64, usize)]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut counts = vec![0usize; want.len()];
    let mut done = vec![false; want.len()];
    while done.iter().any(|d| !d) {
        let r = s
            .next(&format!(
                "(watch id, events) {want:?}; events so far {counts:?}"
            ))
            .await;
        if r.created {
            lines.push(format!("created watch {}", r.watch_id));
        }
        for e in &r.events {
            lines.push(event_line(r.watch_id, e));
        }
        if r.canceled || r.compact_revision != 0 {
            lines.push(format!(
                "watch {} canceled={} compact_revision={} cancel_reason={:?}",
                r.watch_id, r.canceled, r.compact_revision, r.cancel_reason
            ));
        }
        if let Some(i) = want.iter().position(|(id, _)| *id == r.watch_id) {
            counts[i] += r.events.len();
            if counts[i] >= want[i].1 || r.canceled || r.compact_revision != 0 {
                done[i] = true;
            }
        }
    }
    lines
}

/// The same writes on both servers; returns the revision after them.
async fn write_history(ch: Channel) -> i64 {
    let mut kv = KvClient::new(ch);
    let put = |k: &str, v: &str| PutRequest {
        key: k.into(),
        value: v.into(),
        ..Default::default()
    };
    for (k, v) in [
        ("w/a", "1"),
        ("w/b", "1"),
        ("w/a", "2"),
        ("x", "1"),
        ("w/c", "1"),
    ] {
        kv.put(put(k, v)).await.expect("put");
    }
    kv.delete_range(DeleteRangeRequest {
        key: "w/b".into(),
        ..Default::default()
    })
    .await
    .expect("delete");
    // One revision with several changes: events of one revision must arrive together.
    kv.txn(TxnRequest {
        success: vec![
            RequestOp {
                request: Some(Request::RequestPut(put("w/d", "1"))),
            },
            RequestOp {
                request: Some(Request::RequestDeleteRange(DeleteRangeRequest {
                    key: "w/c".into(),
                    ..Default::default()
                })),
            },
            RequestOp {
                request: Some(Request::RequestPut(put("w/a", "3"))),
            },
        ],
        ..Default::default()
    })
    .await
    .expect("txn");
    kv.put(put("w/b", "again")).await.expect("put");
    kv.delete_range(DeleteRangeRequest {
        key: "w/".into(),
        range_end: "w0".into(),
        prev_kv: true,
    })
    .await
    .expect("delete prefix")
    .into_inner()
    .header
    .unwrap()
    .revision
}

fn create(
    key: &str,
    end: &str,
    start: i64,
    prev_kv: bool,
    filters: Vec<i32>,
) -> WatchCreateRequest {
    WatchCreateRequest {
        key: key.into(),
        range_end: end.into(),
        start_revision: start,
        prev_kv,
        filters,
        ..Default::default()
    }
}

/// Runs `f` against both servers and fails with both transcripts if they differ.
async fn compare<F, Fut>(what: &str, f: F)
where
    F: Fn(Channel, &'static str) -> Fut,
    Fut: std::future::Future<Output = Vec<String>>,
{
    let reference = Server::start(Flavor::Etcd);
    let target = Server::start(target_flavor());
    let (r, t) = tokio::join!(
        f(reference.channel().await, "etcd"),
        f(target.channel().await, target.flavor.name())
    );
    assert!(!r.is_empty(), "{what}: empty transcript from etcd");
    if r != t {
        panic!(
            "{what}: watch transcripts differ\n--- etcd 3.5.1 ---\n{}\n--- {} ---\n{}",
            r.join("\n"),
            target.flavor.name(),
            t.join("\n")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn historical_watches_match() {
    compare("historical watches", |ch, name| async move {
        let end = write_history(ch.clone()).await;
        // Watch ids are assigned in creation order on a stream, starting at 0.
        let creates = vec![
            create("w/", "w0", 1, true, vec![]),
            create("w/a", "", 1, false, vec![]),
            create("w/", "w0", 1, true, vec![0]),  // NOPUT
            create("w/", "w0", 1, false, vec![1]), // NODELETE
            create("w/b", "\0", 4, true, vec![]),
        ];
        let mut s = Stream::open(ch, name, creates).await;
        let mut lines = vec![format!("history ends at revision {end}")];
        // The number of events each watch sees in `write_history`, i.e. its whole history.
        let want = [(0, 12), (1, 4), (2, 5), (3, 7), (4, 8)];
        lines.extend(transcript(&mut s, &want).await);
        // Responses of different watches may interleave differently; each watch's own
        // events keep their order under a stable sort on the watch id prefix.
        lines.sort_by_key(|l| l.split(':').next().unwrap_or_default().to_string());
        lines
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_compacted_revision_is_canceled_with_compact_revision() {
    compare("compacted watch", |ch, name| async move {
        let end = write_history(ch.clone()).await;
        KvClient::new(ch.clone())
            .compact(CompactionRequest {
                revision: end - 2,
                physical: true,
            })
            .await
            .expect("compact");
        let mut s = Stream::open(ch, name, vec![create("w/", "w0", 2, true, vec![])]).await;
        transcript(&mut s, &[(0, usize::MAX)]).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_watch_receives_new_writes() {
    compare("live watch", |ch, name| async move {
        let creates = vec![create("w/", "w0", 0, true, vec![])];
        let mut s = Stream::open(ch.clone(), name, creates).await;
        let created = s.next("the created response").await;
        assert!(
            created.created,
            "{name}: first response is not `created`: {created:?}"
        );
        let mut lines = vec![format!("created watch {}", created.watch_id)];
        write_history(ch).await;
        lines.extend(transcript(&mut s, &[(created.watch_id, 12)]).await);
        lines
    })
    .await;
}
