//! The load loop shared by every benchmark: `--clients` workers pull request numbers from one
//! counter, optionally paced by `--rate`, and record each answer's latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::{PutRequest, RangeRequest, TxnRequest};
use tokio::task::JoinSet;
use tonic::transport::Channel;

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
}

/// Builds request number `n` (0-based) of a run; `rng` is the calling worker's own generator.
pub type MakeRequest = Arc<dyn Fn(u64, &mut Rng) -> Request + Send + Sync>;

/// Latencies a worker buffers before adding them to the shared statistics.
const FLUSH_EVERY: usize = 256;

/// Sends `total` requests made by `make` through `clients` (one worker per client) and
/// returns the report. `rate` caps requests per second over all workers (0: no cap).
pub async fn drive(
    op: &str,
    clients: Vec<KvClient<Channel>>,
    total: u64,
    rate: u64,
    make: MakeRequest,
) -> Report {
    let progress = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    progress.set_style(
        ProgressStyle::with_template("{prefix} {wide_bar} {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    progress.set_prefix(op.to_string());

    let next = Arc::new(AtomicU64::new(0));
    let stats = Arc::new(Mutex::new(Stats::new()));
    let limiter = (rate > 0).then(|| Arc::new(Limiter::new(rate)));

    let started = Instant::now();
    let mut workers = JoinSet::new();
    for (id, client) in clients.into_iter().enumerate() {
        let worker = Worker {
            client,
            next: next.clone(),
            total,
            limiter: limiter.clone(),
            make: make.clone(),
            stats: stats.clone(),
            progress: progress.clone(),
            rng: Rng::seeded(id as u64),
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
    let elapsed = started.elapsed();
    progress.finish_and_clear();

    let stats = std::mem::take(&mut *stats.lock().unwrap_or_else(|e| e.into_inner()));
    Report {
        op: op.to_string(),
        elapsed,
        stats,
        watch: None,
    }
}

/// One client's loop.
struct Worker {
    client: KvClient<Channel>,
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
            let outcome = match request {
                Request::Put(r) => self.client.put(r).await.map(drop),
                Request::Range(r) => self.client.range(r).await.map(drop),
                Request::Txn(r) => self.client.txn(r).await.map(drop),
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
