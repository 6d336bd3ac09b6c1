//! The etcd `Watch` service: the thin async shell around the watch core.
//!
//! Each `Watch` call gets a [`WatchStreamHandle`]. A reader task feeds the client's requests
//! (create, cancel, progress) to it in order and ticks the stream's progress notifications;
//! the response stream pops queued responses, fills their headers and splits fragmented ones.
//! tonic polls the response stream only when the connection can take more, so a slow client
//! leaves responses in the core's bounded queue, where the core turns its watchers into
//! catch-up watchers instead of buffering without bound.
//!
//! As in etcd, a client that half-closes its request stream keeps receiving events; the call
//! ends when the client goes away.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::Stream;
use keel_proto::etcdserverpb::watch_request::RequestUnion;
use keel_proto::etcdserverpb::{WatchRequest, WatchResponse, watch_server::Watch};
use tonic::{Request, Response, Status, Streaming};

use super::error::EtcdError;
use crate::server::Store;
use crate::watch::WatchStreamHandle;
use crate::watch::fragment::fragments;

/// gRPC's own framing allowance etcd adds to `--max-request-bytes` when fragmenting.
const GRPC_OVERHEAD_BYTES: usize = 512 * 1024;

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

/// Whether the call carries etcd's `hasleader=true` metadata (`clientv3.WithRequireLeader`).
fn requires_leader(metadata: &tonic::metadata::MetadataMap) -> bool {
    metadata
        .get("hasleader")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == "true")
}

/// The response stream of one `Watch` call.
type ResponseStream = Pin<Box<dyn Stream<Item = Result<WatchResponse, Status>> + Send>>;

/// State shared by the reader task and the response stream.
struct Shared {
    handle: WatchStreamHandle,
    /// The client's request stream failed: end the call.
    ended: AtomicBool,
}

/// Aborts the reader task when the response stream is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The response side of a call.
struct Sender {
    shared: Arc<Shared>,
    store: Arc<Store>,
    fragments: VecDeque<WatchResponse>,
    max_bytes: usize,
    _reader: AbortOnDrop,
}

impl Sender {
    async fn next(mut self) -> Option<(Result<WatchResponse, Status>, Sender)> {
        loop {
            if let Some(resp) = self.fragments.pop_front() {
                return Some((Ok(resp), self));
            }
            if let Some(out) = self.shared.handle.pop() {
                let mut resp = out.response;
                let revision = resp.header.as_ref().map_or(0, |h| h.revision);
                resp.header = Some(self.store.header(revision));
                if out.fragment {
                    self.fragments.extend(fragments(resp, self.max_bytes));
                    continue;
                }
                return Some((Ok(resp), self));
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
            msg = inbound.message(), if open => match msg {
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
        if requires_leader(request.metadata()) && self.store.leader() == 0 {
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
            fragments: VecDeque::new(),
            max_bytes: self.store.config().max_request_bytes as usize + GRPC_OVERHEAD_BYTES,
            _reader: AbortOnDrop(reader),
        };
        let stream = futures::stream::unfold(sender, Sender::next);
        Ok(Response::new(Box::pin(stream)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hasleader_metadata_is_recognised() {
        let mut md = tonic::metadata::MetadataMap::new();
        assert!(!requires_leader(&md));
        md.insert("hasleader", "true".parse().unwrap());
        assert!(requires_leader(&md));
        let status = Status::from(EtcdError::NoLeader);
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), "etcdserver: no leader");
    }

    #[test]
    fn progress_period_has_at_most_a_tenth_of_jitter() {
        let base = Duration::from_secs(600);
        let p = progress_period(base);
        assert!(p >= base && p < base + Duration::from_secs(60));
    }
}
