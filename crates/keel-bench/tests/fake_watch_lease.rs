//! Runs `keel bench watch` and `keel bench lease-keepalive` against a small in-memory server
//! (KV, Watch and Lease), including one that drops and duplicates events on purpose.

mod common;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use common::{Cli, args};
use futures::StreamExt;
use futures::channel::mpsc;
use keel_proto::etcdserverpb::kv_server::{Kv, KvServer};
use keel_proto::etcdserverpb::lease_server::{Lease, LeaseServer};
use keel_proto::etcdserverpb::watch_server::{Watch, WatchServer};
use keel_proto::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse,
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseLeasesRequest, LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse, PutRequest, PutResponse, RangeRequest,
    RangeResponse, RangeStreamResponse, ResponseHeader, TxnRequest, TxnResponse, WatchRequest,
    WatchResponse, watch_request,
};
use keel_proto::mvccpb::{Event, KeyValue};
use tokio::sync::broadcast;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

/// Faults the fake server injects into watch streams.
#[derive(Clone, Copy, Default)]
struct Faults {
    /// Never deliver this revision to the first watcher of each stream.
    drop_revision: Option<i64>,
    /// Deliver this revision twice to the second watcher of each stream.
    duplicate_revision: Option<i64>,
}

/// An in-memory server: puts are broadcast to every watch stream.
#[derive(Clone)]
struct Fake {
    revision: Arc<AtomicI64>,
    events: broadcast::Sender<KeyValue>,
    /// Held from taking a revision to broadcasting it, so events go out in revision order.
    commit: Arc<Mutex<()>>,
    faults: Faults,
    puts: Arc<AtomicU64>,
    watchers: Arc<AtomicU64>,
    streams: Arc<AtomicU64>,
    leases: Arc<Mutex<HashSet<i64>>>,
    grants: Arc<AtomicU64>,
    revokes: Arc<AtomicU64>,
    keepalives: Arc<AtomicU64>,
    keepalive_streams: Arc<AtomicU64>,
}

impl Fake {
    fn new(faults: Faults) -> Self {
        Self {
            revision: Arc::new(AtomicI64::new(1)),
            events: broadcast::channel(1 << 16).0,
            commit: Arc::default(),
            faults,
            puts: Arc::default(),
            watchers: Arc::default(),
            streams: Arc::default(),
            leases: Arc::default(),
            grants: Arc::default(),
            revokes: Arc::default(),
            keepalives: Arc::default(),
            keepalive_streams: Arc::default(),
        }
    }

    fn header(&self) -> Option<ResponseHeader> {
        Some(ResponseHeader {
            revision: self.revision.load(Ordering::SeqCst),
            ..Default::default()
        })
    }
}

#[tonic::async_trait]
impl Kv for Fake {
    async fn range(&self, _r: Request<RangeRequest>) -> Result<Response<RangeResponse>, Status> {
        Ok(Response::new(RangeResponse::default()))
    }

    type RangeStreamStream = futures::stream::Empty<Result<RangeStreamResponse, Status>>;

    async fn range_stream(
        &self,
        _r: Request<RangeRequest>,
    ) -> Result<Response<Self::RangeStreamStream>, Status> {
        Err(Status::unimplemented("range stream"))
    }

    async fn put(&self, r: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let r = r.into_inner();
        let _commit = self.commit.lock().unwrap();
        let revision = self.revision.fetch_add(1, Ordering::SeqCst) + 1;
        self.puts.fetch_add(1, Ordering::SeqCst);
        let _ = self.events.send(KeyValue {
            key: r.key,
            value: r.value,
            create_revision: revision,
            mod_revision: revision,
            version: 1,
            lease: 0,
        });
        Ok(Response::new(PutResponse {
            header: self.header(),
            prev_kv: None,
        }))
    }

    async fn delete_range(
        &self,
        _r: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        Err(Status::unimplemented("delete"))
    }

    async fn txn(&self, _r: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        Err(Status::unimplemented("txn"))
    }

    async fn compact(
        &self,
        _r: Request<CompactionRequest>,
    ) -> Result<Response<CompactionResponse>, Status> {
        Err(Status::unimplemented("compact"))
    }
}

/// Whether `key` is in the watched range `[start, end)` (`end` empty: the key `start` only).
fn matches(key: &[u8], start: &[u8], end: &[u8]) -> bool {
    if end.is_empty() {
        key == start
    } else {
        key >= start && (end == b"\0" || key < end)
    }
}

#[tonic::async_trait]
impl Watch for Fake {
    type WatchStream = mpsc::UnboundedReceiver<Result<WatchResponse, Status>>;

    async fn watch(
        &self,
        r: Request<Streaming<WatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let mut inbound = r.into_inner();
        let (tx, rx) = mpsc::unbounded();
        let mut events = self.events.subscribe();
        let fake = self.clone();
        fake.streams.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            let mut watchers: Vec<(i64, Vec<u8>, Vec<u8>)> = Vec::new();
            loop {
                tokio::select! {
                    request = inbound.next() => {
                        let Some(Ok(request)) = request else { return };
                        if let Some(watch_request::RequestUnion::CreateRequest(c)) =
                            request.request_union
                        {
                            let id = watchers.len() as i64;
                            watchers.push((id, c.key, c.range_end));
                            fake.watchers.fetch_add(1, Ordering::SeqCst);
                            let _ = tx.unbounded_send(Ok(WatchResponse {
                                header: fake.header(),
                                watch_id: id,
                                created: true,
                                ..Default::default()
                            }));
                        }
                    }
                    kv = events.recv() => {
                        let Ok(kv) = kv else { return };
                        for (id, start, end) in &watchers {
                            if !matches(&kv.key, start, end) {
                                continue;
                            }
                            let rev = kv.mod_revision;
                            if *id == 0 && fake.faults.drop_revision == Some(rev) {
                                continue;
                            }
                            let copies =
                                if *id == 1 && fake.faults.duplicate_revision == Some(rev) { 2 } else { 1 };
                            for _ in 0..copies {
                                let _ = tx.unbounded_send(Ok(WatchResponse {
                                    header: fake.header(),
                                    watch_id: *id,
                                    events: vec![Event { r#type: 0, kv: Some(kv.clone()), prev_kv: None }],
                                    ..Default::default()
                                }));
                            }
                        }
                    }
                }
            }
        });
        Ok(Response::new(rx))
    }
}

#[tonic::async_trait]
impl Lease for Fake {
    async fn lease_grant(
        &self,
        r: Request<LeaseGrantRequest>,
    ) -> Result<Response<LeaseGrantResponse>, Status> {
        let id = self.grants.fetch_add(1, Ordering::SeqCst) as i64 + 100;
        self.leases.lock().unwrap().insert(id);
        Ok(Response::new(LeaseGrantResponse {
            header: self.header(),
            id,
            ttl: r.into_inner().ttl,
            error: String::new(),
        }))
    }

    async fn lease_revoke(
        &self,
        r: Request<LeaseRevokeRequest>,
    ) -> Result<Response<LeaseRevokeResponse>, Status> {
        self.revokes.fetch_add(1, Ordering::SeqCst);
        self.leases.lock().unwrap().remove(&r.into_inner().id);
        Ok(Response::new(LeaseRevokeResponse {
            header: self.header(),
        }))
    }

    type LeaseKeepAliveStream = mpsc::UnboundedReceiver<Result<LeaseKeepAliveResponse, Status>>;

    async fn lease_keep_alive(
        &self,
        r: Request<Streaming<LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        let mut inbound = r.into_inner();
        let (tx, rx) = mpsc::unbounded();
        let fake = self.clone();
        fake.keepalive_streams.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            while let Some(Ok(request)) = inbound.next().await {
                fake.keepalives.fetch_add(1, Ordering::SeqCst);
                let known = fake.leases.lock().unwrap().contains(&request.id);
                let _ = tx.unbounded_send(Ok(LeaseKeepAliveResponse {
                    header: fake.header(),
                    id: request.id,
                    ttl: if known { 30 } else { 0 },
                }));
            }
        });
        Ok(Response::new(rx))
    }

    async fn lease_time_to_live(
        &self,
        _r: Request<LeaseTimeToLiveRequest>,
    ) -> Result<Response<LeaseTimeToLiveResponse>, Status> {
        Err(Status::unimplemented("ttl"))
    }

    async fn lease_leases(
        &self,
        _r: Request<LeaseLeasesRequest>,
    ) -> Result<Response<LeaseLeasesResponse>, Status> {
        Err(Status::unimplemented("leases"))
    }
}

async fn serve(fake: Fake) -> SocketAddr {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .add_service(KvServer::new(fake.clone()))
            .add_service(WatchServer::new(fake.clone()))
            .add_service(LeaseServer::new(fake))
            .serve_with_incoming(incoming),
    );
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prefix_delivers_every_event_to_every_watcher() {
    let fake = Fake::new(Faults::default());
    let addr = serve(fake.clone()).await;
    let a = args(&format!(
        "--endpoints {addr} --conns 2 --clients 3 watch --streams 3 --watch-per-stream 4 \
         --put-total 50 --key-space-size 7 --server-pid {} --settle 0s",
        std::process::id()
    ));
    let report = keel_bench::execute(&a).await.unwrap();
    let watch = report.watch.as_ref().unwrap();
    assert_eq!((watch.streams, watch.watchers), (3, 12));
    assert_eq!(fake.streams.load(Ordering::SeqCst), 3);
    assert_eq!(fake.watchers.load(Ordering::SeqCst), 12);
    assert_eq!(fake.puts.load(Ordering::SeqCst), 50);
    assert_eq!(
        (watch.expected, watch.received, watch.lost, watch.duplicates),
        (600, 600, 0, 0)
    );
    assert_eq!(
        (watch.out_of_order, watch.unexpected, watch.canceled),
        (0, 0, 0)
    );
    assert_eq!(report.stats.succeeded(), 600);
    assert_eq!(watch.put_stats.succeeded(), 50);
    assert_eq!(watch.create_stats.succeeded(), 12);
    let rss = watch.rss.expect("--server-pid given");
    assert!(rss.before_kib > 0 && rss.after_kib.is_some());
    let json = report.to_json();
    for needle in [
        "\"op\":\"watch\"",
        "\"lost\":0",
        "\"duplicates\":0",
        "\"expected_events\":600",
        "\"latency\":\"put-sent-to-event-received\"",
        "\"bytes_per_watcher\":",
        "\"rss_after_kib\":",
    ] {
        assert!(json.contains(needle), "{needle} missing in {json}");
    }
    let text = report.to_text();
    for needle in [
        "Watch creation summary",
        "Put summary",
        "Lost:\t\t0",
        "Per watcher:",
    ] {
        assert!(text.contains(needle), "{needle} missing in {text}");
    }
    keel_bench::run(a).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_keys_spread_watchers_and_puts_like_etcd() {
    let fake = Fake::new(Faults::default());
    let addr = serve(fake.clone()).await;
    let a = args(&format!(
        "--endpoints {addr} watch --streams 2 --watch-per-stream 3 --watched-key-total 4 \
         --put-total 10 --put-rate 500"
    ));
    let report = keel_bench::execute(&a).await.unwrap();
    let watch = report.watch.unwrap();
    // Watchers 0..6 watch keys 0,1,2,3,0,1; puts 0..10 write keys 0,1,2,3,0,1,2,3,0,1.
    assert_eq!((watch.expected, watch.received, watch.lost), (16, 16, 0));
    assert_eq!(watch.unexpected, 0);
    assert!(
        report.elapsed >= Duration::from_millis(15),
        "{:?}",
        report.elapsed
    );
    assert!(watch.rss.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_and_duplicate_events_are_counted_and_fail_the_run() {
    let fake = Fake::new(Faults {
        drop_revision: Some(3),
        duplicate_revision: Some(4),
    });
    let addr = serve(fake.clone()).await;
    let a = args(&format!(
        "--endpoints {addr} watch --streams 2 --watch-per-stream 2 --put-total 5 \
         --drain-timeout 300ms"
    ));
    let report = keel_bench::execute(&a).await.unwrap();
    let watch = report.watch.as_ref().unwrap();
    assert_eq!((watch.expected, watch.received), (20, 18));
    assert_eq!((watch.lost, watch.duplicates), (2, 2));
    assert!(report.to_json().contains("\"lost\":2,\"duplicates\":2"));
    // Again on a fresh server (revisions start over), through `run`, which prints and fails.
    fake.revision.store(1, Ordering::SeqCst);
    let err = keel_bench::run(a).await.unwrap_err().to_string();
    assert!(err.contains("2 events lost and 2 duplicated"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_watchers_only_with_put_total_zero() {
    let fake = Fake::new(Faults::default());
    let addr = serve(fake.clone()).await;
    let a = args(&format!(
        "--endpoints {addr} --conns 3 watch --streams 5 --watch-per-stream 20 --put-total 0 \
         --server-pid {} --settle 0s",
        std::process::id()
    ));
    let report = keel_bench::execute(&a).await.unwrap();
    assert_eq!(fake.watchers.load(Ordering::SeqCst), 100);
    assert_eq!(fake.puts.load(Ordering::SeqCst), 0);
    let watch = report.watch.as_ref().unwrap();
    assert_eq!(watch.expected, 0);
    assert!(watch.bytes_per_watcher().is_some() && watch.bytes_per_stream().is_some());
    assert!(watch.rss.unwrap().after_kib.is_none());
    assert!(report.to_json().contains("\"bytes_per_stream\":"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_keepalive_renews_on_one_stream_per_client() {
    let fake = Fake::new(Faults::default());
    let addr = serve(fake.clone()).await;
    let a = args(&format!(
        "--endpoints {addr} --conns 2 --clients 4 lease-keepalive --total 100 --ttl 30"
    ));
    let report = keel_bench::execute(&a).await.unwrap();
    assert_eq!(report.op, "lease-keepalive");
    assert_eq!((report.stats.succeeded(), report.stats.failed()), (100, 0));
    assert_eq!(fake.grants.load(Ordering::SeqCst), 4);
    assert_eq!(fake.revokes.load(Ordering::SeqCst), 4);
    assert_eq!(fake.keepalive_streams.load(Ordering::SeqCst), 4);
    // Each client opens its stream with its first keepalive.
    assert_eq!(fake.keepalives.load(Ordering::SeqCst), 100);
    assert!(fake.leases.lock().unwrap().is_empty());
    assert!(
        report
            .to_json()
            .starts_with("{\"op\":\"lease-keepalive\",\"total\":100,")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_keepalive_stream_per_request_and_rate() {
    let fake = Fake::new(Faults::default());
    let addr = serve(fake.clone()).await;
    let a = args(&format!(
        "--endpoints {addr} --clients 2 --rate 400 lease-keepalive --total 21 --stream-per-request"
    ));
    let report = keel_bench::execute(&a).await.unwrap();
    assert_eq!(report.stats.succeeded(), 21);
    assert_eq!(fake.keepalive_streams.load(Ordering::SeqCst), 21);
    assert!(
        report.elapsed >= Duration::from_millis(45),
        "{:?}",
        report.elapsed
    );
}

#[test]
fn watch_and_lease_flags_match_etcd_benchmark() {
    match args("watch").command {
        keel_bench::BenchCommand::Watch(w) => {
            assert_eq!(
                (w.streams, w.watch_per_stream, w.watched_key_total),
                (10, 100, 0)
            );
            assert_eq!((w.put_total, w.put_rate), (1000, 0));
            assert!(w.server_pid.is_none() && !w.prev_kv);
        }
        other => panic!("{other:?}"),
    }
    match args("--conns 8 lease-keepalive --clients 64 --total 5").command {
        keel_bench::BenchCommand::LeaseKeepalive(l) => {
            assert_eq!(l.ttl, 100);
            assert!(!l.stream_per_request);
        }
        other => panic!("{other:?}"),
    }
    assert!(Cli::try_parse_from(["x", "watch", "--server-pid", "abc"]).is_err());
}
