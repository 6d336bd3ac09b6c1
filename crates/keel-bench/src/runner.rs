//! The load loop shared by every benchmark: `--clients` workers pull request numbers from one
//! counter, optionally paced by `--rate`, and record each answer's latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use keel_proto::etcdserverpb::{
    LeaseKeepAliveRequest, LeaseKeepAliveResponse, PutRequest, PutResponse, RangeRequest,
    RangeResponse, TxnRequest, TxnResponse,
};
use tokio::task::JoinSet;
use tonic::Status;

use crate::args::BenchArgs;
use crate::grpc::{GrpcConn, GrpcStream};
use crate::keys::Rng;
use crate::report::{Report, Stats};

/// One request of a benchmark.
#[derive(Debug, Clone)]
pub enum Request {
    /// A `KV.Put`.
    Put(PutRequest),
    /// A `KV.Range`.
    Range(RangeRequest),
    /// A `KV.Txn`.
    Txn(TxnRequest),
    /// One keepalive of a lease on the client's LeaseKeepAlive stream (opened on first use),
    /// or on a stream of its own.
    KeepAlive {
        /// The lease.
        id: i64,
        /// Open a new stream for this keepalive only.
        new_stream: bool,
    },
}

/// Builds request number `n` (0-based) of a run; `rng` is the calling worker's own generator.
pub type MakeRequest = Arc<dyn Fn(u64, &mut Rng) -> Request + Send + Sync>;

/// The gRPC paths of the KV methods.
pub(crate) const PUT: &str = "/etcdserverpb.KV/Put";
const RANGE: &str = "/etcdserverpb.KV/Range";
const TXN: &str = "/etcdserverpb.KV/Txn";
const LEASE_KEEPALIVE: &str = "/etcdserverpb.Lease/LeaseKeepAlive";

/// Latencies a worker buffers before adding them to the shared statistics.
const FLUSH_EVERY: usize = 256;

/// Where and how hard to drive the load.
pub struct Load {
    /// Endpoints, spread over the connections round-robin.
    pub endpoints: Vec<String>,
    /// gRPC connections in all.
    pub conns: usize,
    /// Concurrent clients in all.
    pub clients: usize,
    /// How long to wait for each connection.
    pub dial_timeout: Duration,
    /// Requests in all.
    pub total: u64,
    /// Requests per second in all (0 = as fast as answered).
    pub rate: u64,
}

/// Runs `op` with `make`'s requests under the load of `args`'s global flags, on threads of
/// its own (see [`drive`]).
pub async fn run(op: &str, args: &BenchArgs, make: MakeRequest) -> anyhow::Result<Report> {
    let load = Load {
        endpoints: args.endpoints.clone(),
        conns: args.conns,
        clients: args.clients,
        dial_timeout: args.dial_timeout,
        total: args.total,
        rate: args.rate,
    };
    let op = op.to_string();
    tokio::task::spawn_blocking(move || drive(&op, load, make)).await?
}

/// Runs `load` and returns its report.
///
/// The clients are split over one thread per core (at most one per connection), each with its
/// own single-threaded runtime and its own connections, so a request and its answer never
/// cross threads: the load generator then spends as little CPU as it can on the cores it shares
/// with the server it measures. Every connection is established before the clock starts.
pub fn drive(op: &str, load: Load, make: MakeRequest) -> anyhow::Result<Report> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(load.conns).min(load.clients).max(1);
    let progress = ProgressBar::with_draw_target(Some(load.total), ProgressDrawTarget::stderr());
    progress.set_style(
        ProgressStyle::with_template("{prefix} {wide_bar} {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    progress.set_prefix(op.to_string());
    let shared = Shared {
        next: Arc::new(AtomicU64::new(0)),
        stats: Arc::new(Mutex::new(Stats::new())),
        limiter: (load.rate > 0).then(|| Arc::new(Limiter::new(load.rate))),
        progress: progress.clone(),
        total: load.total,
        make,
    };
    // Every thread connects, then all start together once everyone is connected.
    let connected = Arc::new(Barrier::new(threads + 1));
    let dial_failed = Arc::new(Mutex::new(None::<anyhow::Error>));
    let load = Arc::new(load);
    let mut handles = Vec::with_capacity(threads);
    for t in 0..threads {
        let (shared, connected, dial_failed, load) = (
            shared.clone(),
            connected.clone(),
            dial_failed.clone(),
            load.clone(),
        );
        let handle = std::thread::Builder::new()
            .name(format!("keel-bench-{t}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                let runtime = match runtime {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        *dial_failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.into());
                        connected.wait();
                        return;
                    }
                };
                runtime.block_on(shard(t, threads, &load, shared, &connected, &dial_failed));
            })?;
        handles.push(handle);
    }
    connected.wait();
    let started = Instant::now();
    for handle in handles {
        if let Err(panic) = handle.join() {
            std::panic::resume_unwind(panic);
        }
    }
    let elapsed = started.elapsed();
    progress.finish_and_clear();
    if let Some(err) = dial_failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(err);
    }
    let stats = std::mem::take(&mut *shared.stats.lock().unwrap_or_else(|e| e.into_inner()));
    Ok(Report {
        op: op.to_string(),
        elapsed,
        stats,
        watch: None,
        compaction: None,
        apiserver: None,
    })
}

/// What every client of every thread shares.
#[derive(Clone)]
struct Shared {
    next: Arc<AtomicU64>,
    stats: Arc<Mutex<Stats>>,
    limiter: Option<Arc<Limiter>>,
    progress: ProgressBar,
    total: u64,
    make: MakeRequest,
}

/// The share `part` of `n` things split over `parts`.
fn share(n: usize, parts: usize, part: usize) -> usize {
    n / parts + usize::from(part < n % parts)
}

/// One thread's part of the load: its connections and clients, on its own runtime.
async fn shard(
    t: usize,
    threads: usize,
    load: &Load,
    shared: Shared,
    connected: &Barrier,
    dial_failed: &Mutex<Option<anyhow::Error>>,
) {
    let (conns, clients) = (
        share(load.conns, threads, t),
        share(load.clients, threads, t),
    );
    // Offsets keep endpoints spread and random key streams distinct across threads.
    let first_conn: usize = (0..t).map(|i| share(load.conns, threads, i)).sum();
    let first_client: usize = (0..t).map(|i| share(load.clients, threads, i)).sum();
    let mut endpoints = load.endpoints.clone();
    if !endpoints.is_empty() {
        let shift = first_conn % endpoints.len();
        endpoints.rotate_left(shift);
    }
    let dialed = crate::client::connect(&endpoints, conns, clients, load.dial_timeout).await;
    let clients = match dialed {
        Ok(clients) => clients,
        Err(e) => {
            dial_failed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
            connected.wait();
            return;
        }
    };
    connected.wait();
    if dial_failed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .is_some()
    {
        return;
    }
    let mut workers = JoinSet::new();
    for (i, client) in clients.into_iter().enumerate() {
        let worker = Worker {
            client,
            keepalive: None,
            next: shared.next.clone(),
            total: shared.total,
            limiter: shared.limiter.clone(),
            make: shared.make.clone(),
            stats: shared.stats.clone(),
            progress: shared.progress.clone(),
            rng: Rng::seeded((first_client + i) as u64),
        };
        workers.spawn(worker.run());
    }
    while let Some(joined) = workers.join_next().await {
        if let Err(err) = joined
            && err.is_panic()
        {
            std::panic::resume_unwind(err.into_panic());
        }
    }
}

/// One client's loop.
struct Worker {
    client: GrpcConn,
    /// The client's LeaseKeepAlive stream, once opened.
    keepalive: Option<GrpcStream>,
    next: Arc<AtomicU64>,
    total: u64,
    limiter: Option<Arc<Limiter>>,
    make: MakeRequest,
    stats: Arc<Mutex<Stats>>,
    progress: ProgressBar,
    rng: Rng,
}

impl Worker {
    async fn run(mut self) {
        let mut latencies = Vec::with_capacity(FLUSH_EVERY);
        let mut errors = Vec::new();
        loop {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            if n >= self.total {
                break;
            }
            if let Some(limiter) = &self.limiter {
                limiter.wait().await;
            }
            let request = (self.make)(n, &mut self.rng);
            let start = Instant::now();
            let c = &self.client;
            let outcome = match request {
                Request::Put(r) => c.call::<_, PutResponse>(PUT, &r).await.map(drop),
                Request::Range(r) => c.call::<_, RangeResponse>(RANGE, &r).await.map(drop),
                Request::Txn(r) => c.call::<_, TxnResponse>(TXN, &r).await.map(drop),
                Request::KeepAlive { id, new_stream } => self.keep_alive(id, new_stream).await,
            };
            let latency = start.elapsed();
            match outcome {
                Ok(()) => latencies.push(latency),
                Err(status) => errors.push(crate::client::status_message(&status)),
            }
            self.progress.inc(1);
            if latencies.len() >= FLUSH_EVERY {
                self.flush(&mut latencies, &mut errors);
            }
        }
        self.flush(&mut latencies, &mut errors);
    }

    /// Renews lease `id` once and waits for the answer; a stream that failed is dropped and
    /// reopened by the next keepalive.
    async fn keep_alive(&mut self, id: i64, new_stream: bool) -> Result<(), Status> {
        let mut stream = match self.keepalive.take().filter(|_| !new_stream) {
            Some(stream) => stream,
            None => self.client.open_stream(LEASE_KEEPALIVE).await?,
        };
        stream.send(&LeaseKeepAliveRequest { id })?;
        let answer = stream.message::<LeaseKeepAliveResponse>().await;
        if !new_stream && matches!(answer, Ok(Some(_))) {
            self.keepalive = Some(stream);
        }
        match answer? {
            Some(r) if r.ttl > 0 => Ok(()),
            Some(_) => Err(Status::not_found("etcdserver: requested lease not found")),
            None => Err(Status::unavailable("keepalive stream closed by the server")),
        }
    }

    fn flush(&self, latencies: &mut Vec<Duration>, errors: &mut Vec<String>) {
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        for latency in latencies.drain(..) {
            stats.record(latency);
        }
        for error in errors.drain(..) {
            stats.record_error(error);
        }
    }
}

/// Paces requests to a fixed rate: each request takes the next free slot, one per interval.
pub(crate) struct Limiter {
    interval: Duration,
    next: Mutex<Instant>,
}

impl Limiter {
    /// A limiter letting `per_second` requests through each second.
    pub(crate) fn new(per_second: u64) -> Self {
        Self {
            interval: Duration::from_secs_f64(1.0 / per_second as f64),
            next: Mutex::new(Instant::now()),
        }
    }

    /// Waits for the next free slot.
    pub(crate) async fn wait(&self) {
        let slot = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let slot = (*next).max(Instant::now());
            *next = slot + self.interval;
            slot
        };
        tokio::time::sleep_until(slot.into()).await;
    }
}
