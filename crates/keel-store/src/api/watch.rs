//! The etcd `Watch` service: the thin async shell around the watch core.
//!
//! Each `Watch` call gets a [`WatchStreamHandle`]. A reader task feeds the client's requests
//! (create, cancel, progress) to it in order and ticks the stream's progress notifications;
//! it reads the next request only while fewer than etcd's 16 control responses wait to be
//! sent, so a client that sends requests without reading responses is held back by HTTP/2
//! flow control rather than growing the server's queue;
//! the response stream pops queued responses, fills their headers and encodes them (each
//! event is encoded once, however many watchers receive it), split into fragments when the
//! watcher asked for it.
//! tonic polls the response stream only when the connection can take more, so a slow client
//! leaves responses in the core's bounded queue, where the core turns its watchers into
//! catch-up watchers instead of buffering without bound.
//!
//! As in etcd, a client that half-closes its request stream keeps receiving events; the call
//! ends when the client goes away.

use keel_process::AbortOnDrop;
use keel_process::faults::{self, Fault};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::Stream;
use keel_proto::encoded::{PreEncoded, watch_server::Watch};
use keel_proto::etcdserverpb::WatchRequest;
use keel_proto::etcdserverpb::watch_request::RequestUnion;
use tonic::{Request, Response, Status, Streaming};

use super::GRPC_OVERHEAD_BYTES;
use super::require_leader::{requires_leader, until_leader_lost};
use crate::error::EtcdError;
use crate::server::Store;
use crate::watch::WatchStreamHandle;

/// The Watch service of one member.
pub struct WatchService {
    store: Arc<Store>,
}

impl WatchService {
    /// Serves watches on `store`.
    pub fn new(store: Arc<Store>) -> Self {
        WatchService { store }
    }
}

/// The response stream of one `Watch` call.
type ResponseStream = Pin<Box<dyn Stream<Item = Result<PreEncoded, Status>> + Send>>;

/// State shared by the reader task and the response stream.
struct Shared {
    handle: WatchStreamHandle,
    /// The client's request stream failed: end the call.
    ended: AtomicBool,
}

/// The response side of a call.
struct Sender {
    shared: Arc<Shared>,
    store: Arc<Store>,
    /// Encoded responses (fragments of one response) waiting to be sent.
    ready: VecDeque<PreEncoded>,
    max_bytes: usize,
    /// Aborts the reader task when the response stream is dropped.
    _reader: AbortOnDrop,
}

impl Sender {
    async fn next(mut self) -> Option<(Result<PreEncoded, Status>, Sender)> {
        loop {
            if let Some(resp) = self.ready.pop_front() {
                faults::process().pause(Fault::WatchSendStall).await;
                return Some((Ok(resp), self));
            }
            if let Some(out) = self.shared.handle.pop() {
                let revision = out.response.header.as_ref().map_or(0, |h| h.revision);
                let header = self.store.header(revision);
                self.ready.extend(out.encode(header, self.max_bytes));
                continue;
            }
            if self.shared.ended.load(Ordering::Acquire) {
                return None;
            }
            self.shared.handle.wait().await;
        }
    }
}

/// Reads the client's requests in order and ticks progress notifications.
async fn read_requests(shared: Arc<Shared>, mut inbound: Streaming<WatchRequest>, tick: Duration) {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + tick, tick);
    let mut open = true;
    loop {
        tokio::select! {
            msg = next_request(&shared.handle, &mut inbound), if open => match msg {
                Ok(Some(req)) => handle_request(&shared.handle, req),
                Ok(None) => open = false,
                Err(_) => {
                    shared.ended.store(true, Ordering::Release);
                    shared.handle.wake();
                    return;
                }
            },
            _ = ticker.tick() => shared.handle.progress_tick(),
        }
    }
}

/// The client's next request, read once the stream has room for its reply.
async fn next_request(
    handle: &WatchStreamHandle,
    inbound: &mut Streaming<WatchRequest>,
) -> Result<Option<WatchRequest>, Status> {
    handle.wait_for_room().await;
    inbound.message().await
}

fn handle_request(handle: &WatchStreamHandle, req: WatchRequest) {
    match req.request_union {
        Some(RequestUnion::CreateRequest(c)) => handle.create(&c),
        Some(RequestUnion::CancelRequest(c)) => handle.cancel(c.watch_id),
        Some(RequestUnion::ProgressRequest(_)) => handle.request_progress(),
        None => {}
    }
}

/// etcd's progress period plus up to a tenth of jitter, so streams opened together do not
/// notify together.
fn progress_period(base: Duration) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    let tenth = (base.as_nanos() / 10).max(1);
    base + Duration::from_nanos((u128::from(nanos) % tenth) as u64)
}

#[tonic::async_trait]
impl Watch for WatchService {
    type WatchStream = ResponseStream;

    async fn watch(
        &self,
        request: Request<Streaming<WatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let require_leader = requires_leader(request.metadata());
        if require_leader && self.store.leader() == 0 {
            return Err(EtcdError::NoLeader.into());
        }
        let hub = self.store.watch_hub().clone();
        hub.ensure_resync_task();
        let shared = Arc::new(Shared {
            handle: hub.open_stream(),
            ended: AtomicBool::new(false),
        });
        let tick = progress_period(self.store.config().watch_progress_notify_interval());
        let reader = tokio::spawn(read_requests(shared.clone(), request.into_inner(), tick));
        let sender = Sender {
            shared,
            store: self.store.clone(),
            ready: VecDeque::new(),
            max_bytes: self.store.config().max_request_bytes as usize + GRPC_OVERHEAD_BYTES,
            _reader: AbortOnDrop(reader.abort_handle()),
        };
        let stream = futures::stream::unfold(sender, Sender::next);
        Ok(Response::new(if require_leader {
            Box::pin(until_leader_lost(self.store.clone(), stream))
        } else {
            Box::pin(stream)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreHandle;
    use keel_proto::etcdserverpb::kv_client::KvClient;
    use keel_proto::etcdserverpb::watch_client::WatchClient;
    use keel_proto::etcdserverpb::{
        DeleteRangeRequest, PutRequest, WatchCancelRequest, WatchCreateRequest,
        WatchProgressRequest, WatchResponse,
    };
    use tokio::sync::mpsc;
    use tokio_stream::StreamExt;
    use tokio_stream::wrappers::ReceiverStream;
    use tonic::transport::Channel;

    /// A store on a free port with a small `--max-request-bytes`, and a channel to it.
    async fn start(dir: &std::path::Path) -> (StoreHandle, Channel) {
        let config = crate::config::parse_for_test(&[
            "--data-dir",
            dir.to_str().unwrap(),
            "--listen-client-urls",
            "http://127.0.0.1:0",
            "--advertise-client-urls",
            "http://127.0.0.1:0",
            "--listen-peer-urls",
            "http://127.0.0.1:0",
            "--max-request-bytes",
            "4096",
        ]);
        let handle = StoreHandle::start(config).await.unwrap();
        let url = format!("http://{}", handle.addrs()[0]);
        let ch = Channel::from_shared(url).unwrap().connect().await.unwrap();
        (handle, ch)
    }

    async fn open_stream(
        ch: &Channel,
        creates: Vec<WatchCreateRequest>,
    ) -> (mpsc::Sender<WatchRequest>, Streaming<WatchResponse>) {
        let (tx, rx) = mpsc::channel(16);
        for c in creates {
            tx.send(WatchRequest {
                request_union: Some(RequestUnion::CreateRequest(c)),
            })
            .await
            .unwrap();
        }
        let mut req = Request::new(ReceiverStream::new(rx));
        req.metadata_mut()
            .insert("hasleader", "true".parse().unwrap());
        // Like etcd's client, accept responses of any size: a catch-up response carries up to
        // 1000 revisions.
        let stream = WatchClient::new(ch.clone())
            .max_decoding_message_size(usize::MAX)
            .watch(req)
            .await
            .unwrap()
            .into_inner();
        (tx, stream)
    }

    async fn next(s: &mut Streaming<WatchResponse>) -> WatchResponse {
        tokio::time::timeout(Duration::from_secs(20), s.next())
            .await
            .expect("a watch response in time")
            .expect("the stream is open")
            .expect("no stream error")
    }

    /// Polls `check` until it returns a value, for at most 60 s (then `None`).
    async fn until<T>(mut check: impl FnMut() -> Option<T>) -> Option<T> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(found) = check() {
                return Some(found);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn put_all(ch: &Channel, keys: impl Iterator<Item = String>, value: usize) {
        let keys: Vec<String> = keys.collect();
        let mut tasks = tokio::task::JoinSet::new();
        for chunk in keys.chunks(keys.len().div_ceil(8).max(1)) {
            let mut kv = KvClient::new(ch.clone());
            let chunk = chunk.to_vec();
            tasks.spawn(async move {
                for k in chunk {
                    kv.put(PutRequest {
                        key: k.into_bytes(),
                        value: vec![b'v'; value],
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                }
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn progress_fragments_and_slow_consumers_over_grpc() {
        let dir = tempfile::tempdir().unwrap();
        let (handle, ch) = start(dir.path()).await;
        let store = handle.store().clone();

        // Progress request: answered with watch id -1 at the current revision.
        let (tx, mut s) = open_stream(
            &ch,
            vec![WatchCreateRequest {
                key: b"p".to_vec(),
                ..Default::default()
            }],
        )
        .await;
        let created = next(&mut s).await;
        assert!(created.created);
        let header = created.header.unwrap();
        assert_eq!(header.member_id, store.member_id());
        assert_eq!(header.cluster_id, store.cluster_id());
        tx.send(WatchRequest {
            request_union: Some(RequestUnion::ProgressRequest(WatchProgressRequest {})),
        })
        .await
        .unwrap();
        let progress = next(&mut s).await;
        assert_eq!(progress.watch_id, -1);
        assert!(progress.events.is_empty());
        assert_eq!(
            progress.header.unwrap().revision,
            store.mvcc().current_revision()
        );

        // A slow stream: nobody reads it while 1500 puts of 3 KiB go by. With prev_kv that is
        // about 9 MB, far more than the stream queue, the server's send buffer and the
        // client's 2 MiB HTTP/2 window can hold between them.
        let (_slow_tx, mut slow) = open_stream(
            &ch,
            vec![WatchCreateRequest {
                key: b"s/".to_vec(),
                range_end: b"s0".to_vec(),
                prev_kv: true,
                ..Default::default()
            }],
        )
        .await;
        assert!(next(&mut slow).await.created);
        let from = store.mvcc().current_revision() + 1;
        put_all(&ch, (0..1500).map(|i| format!("s/{:02}", i % 40)), 3072).await;
        let to = store.mvcc().current_revision();
        assert!(
            store.watch_hub().stats().unsynced >= 1,
            "the slow watcher fell back to catch-up"
        );
        let mut revs = Vec::new();
        while revs.len() < 1500 {
            let r = next(&mut slow).await;
            for e in &r.events {
                let kv = e.kv.as_ref().unwrap();
                if kv.version > 1 {
                    assert!(e.prev_kv.is_some(), "update without prev_kv");
                }
                revs.push(kv.mod_revision);
            }
        }
        assert_eq!(
            revs,
            (from..=to).collect::<Vec<_>>(),
            "ordered, unique, complete"
        );

        // Fragments: one delete revision larger than max-request-bytes + 512 KiB.
        put_all(&ch, (0..700).map(|i| format!("f/{i:04}")), 1024).await;
        let (_ftx, mut f) = open_stream(
            &ch,
            vec![WatchCreateRequest {
                key: b"f/".to_vec(),
                range_end: b"f0".to_vec(),
                prev_kv: true,
                fragment: true,
                ..Default::default()
            }],
        )
        .await;
        assert!(next(&mut f).await.created);
        KvClient::new(ch.clone())
            .delete_range(DeleteRangeRequest {
                key: b"f/".to_vec(),
                range_end: b"f0".to_vec(),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut parts = 0;
        let mut events = 0;
        loop {
            let r = next(&mut f).await;
            parts += 1;
            events += r.events.len();
            if !r.fragment {
                break;
            }
        }
        assert!(parts > 1, "the delete revision was fragmented");
        assert_eq!(events, 700);
        drop(handle);
    }

    /// A client that sends create/cancel pairs without reading the replies is held back: the
    /// server's queue stays at etcd's control buffer, and every reply arrives once it reads.
    ///
    /// The requests are all ready at once, so they travel in large DATA frames: a client that
    /// trickles tiny frames the server is not reading is disconnected by h2's own defence
    /// against framing overhead (GOAWAY `ENHANCE_YOUR_CALM`), which bounds the server too.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_does_not_read_cannot_grow_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let (handle, _) = start(dir.path()).await;
        let hub = handle.store().watch_hub().clone();
        const PAIRS: i64 = 5000;
        let requests = (1..=PAIRS).flat_map(|id| {
            let create = RequestUnion::CreateRequest(WatchCreateRequest {
                key: b"k".to_vec(),
                watch_id: id,
                ..Default::default()
            });
            let cancel = RequestUnion::CancelRequest(WatchCancelRequest { watch_id: id });
            [create, cancel].map(|r| WatchRequest {
                request_union: Some(r),
            })
        });
        // HTTP/2's smallest windows, so the replies the client does not read fill the
        // transport (about a thousand of the 10,000 fit) and the server must hold back.
        let url = format!("http://{}", handle.addrs()[0]);
        let narrow = Channel::from_shared(url.clone())
            .unwrap()
            .initial_stream_window_size(65_535)
            .initial_connection_window_size(65_535)
            .connect()
            .await
            .unwrap();
        let mut s = WatchClient::new(narrow)
            .watch(futures::stream::iter(requests.collect::<Vec<_>>()))
            .await
            .unwrap()
            .into_inner();
        // The server reads requests until etcd's control buffer is full, then waits for the
        // client to read: wait for that, so the test cannot pass before the server has read
        // anything. Held back, the stream reads no request, so its queue cannot grow.
        let held_back = || {
            until(|| {
                let s = hub.stats();
                (s.held_back == 1).then_some(s)
            })
        };
        let held = held_back()
            .await
            .unwrap_or_else(|| panic!("never held back: {:?}", hub.stats()));
        let bound = crate::watch::core::CTRL_QUEUE_CAPACITY + 2;
        assert!(
            held.queued <= bound,
            "{} responses queued for a client that does not read",
            held.queued
        );
        // A write elsewhere goes through the store and its watch hub meanwhile: once it is
        // applied, the stream is still held back within the bound, though thousands of its
        // requests are still waiting to be read. (On a connection of its own: the held
        // stream's unread replies hold its connection's window.)
        let other = Channel::from_shared(url).unwrap().connect().await.unwrap();
        KvClient::new(other)
            .put(PutRequest {
                key: b"elsewhere".to_vec(),
                value: b"v".to_vec(),
                ..Default::default()
            })
            .await
            .unwrap();
        let after = held_back()
            .await
            .unwrap_or_else(|| panic!("no longer held back: {:?}", hub.stats()));
        assert!(
            after.queued <= bound,
            "{} responses queued for a client that does not read",
            after.queued
        );
        for id in 1..=PAIRS {
            let created = next(&mut s).await;
            assert!(created.created && created.watch_id == id, "{created:?}");
            let canceled = next(&mut s).await;
            assert!(canceled.canceled && canceled.watch_id == id, "{canceled:?}");
        }
        assert_eq!(hub.stats().watchers, 0);
        drop(handle);
    }

    #[test]
    fn progress_period_has_at_most_a_tenth_of_jitter() {
        let base = Duration::from_secs(600);
        let p = progress_period(base);
        assert!(p >= base && p < base + Duration::from_secs(60));
    }
}
