//! `keel bench watch`: opens many watchers, puts at a fixed rate, and checks that every watcher
//! receives every event of its keys exactly once, measuring each event's delivery latency.
//!
//! Steps: (1) open `--streams` Watch streams, each with its first watcher; (2) create the other
//! watchers; (3) put `--put-total` keys at `--put-rate`; (4) wait until every expected event has
//! arrived (or `--drain-timeout` passed since the last put was answered). With `--server-pid` the
//! server's VmRSS is read before (1), after (1), after (2) and after (4).
//!
//! Every value starts with the number of its put (8 bytes, little endian), so each event names
//! the put that caused it: its delivery latency runs from that put being **sent** to the event
//! being received (so it includes the put's own commit time), and a per-watcher bitset of put
//! numbers counts lost and duplicate events exactly.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use keel_proto::etcdserverpb::{
    PutRequest, PutResponse, WatchCreateRequest, WatchRequest, watch_request,
};
use tokio::task::JoinSet;

use crate::args::{BenchArgs, WatchArgs};
use crate::client::{connect, status_message};
use crate::grpc::{GrpcConn, GrpcStream};
use crate::keys::{KeyMaker, Rng};
use crate::report::{Report, RssSamples, Stats, WatchSummary};
use crate::runner::{Limiter, PUT};
use crate::watch_wire::WatchAnswer;
use keel_proto::prefix_end;

/// The gRPC path of the Watch method.
const WATCH: &str = "/etcdserverpb.Watch/Watch";

/// Bytes at the front of each value that carry the put number.
const STAMP: usize = 8;

/// Which key each put writes and which puts each watcher must see.
#[derive(Debug, Clone)]
pub struct Plan {
    keys: KeyMaker,
    prefix: Vec<u8>,
    /// 0: every watcher watches the prefix; N: watcher `w` watches key `w mod N`.
    watched_keys: u64,
    sequential: bool,
    watchers: u64,
    puts: u64,
}

impl Plan {
    /// The plan of a run.
    pub fn new(args: &BenchArgs, watch: &WatchArgs) -> anyhow::Result<Self> {
        if watch.streams == 0 || watch.watch_per_stream == 0 {
            bail!("--streams and --watch-per-stream must be at least 1");
        }
        if args.val_size < STAMP {
            bail!("watch needs --val-size of at least {STAMP} (each value carries its put number)");
        }
        let space = if watch.watched_key_total > 0 {
            watch.watched_key_total
        } else {
            args.key_space_size
        };
        Ok(Self {
            keys: KeyMaker::new(watch.prefix.as_bytes(), args.key_size, space)?,
            prefix: watch.prefix.as_bytes().to_vec(),
            watched_keys: watch.watched_key_total,
            sequential: args.sequential_keys,
            watchers: (watch.streams * watch.watch_per_stream) as u64,
            puts: watch.put_total,
        })
    }

    /// The create request of watcher `w` (global number).
    pub fn create_request(&self, w: u64, prev_kv: bool) -> WatchRequest {
        let (key, range_end) = if self.watched_keys == 0 {
            (self.prefix.clone(), prefix_end(&self.prefix))
        } else {
            (self.keys.key(w % self.watched_keys), Vec::new())
        };
        WatchRequest {
            request_union: Some(watch_request::RequestUnion::CreateRequest(
                WatchCreateRequest {
                    key,
                    range_end,
                    prev_kv,
                    ..Default::default()
                },
            )),
        }
    }

    /// The key put number `i` writes.
    pub fn put_key(&self, i: u64, rng: &mut Rng) -> Vec<u8> {
        if self.watched_keys > 0 || self.sequential {
            self.keys.key(i)
        } else {
            self.keys.key(rng.below(self.keys.key_space_size()))
        }
    }

    /// Whether watcher `w` must receive the event of put `i`.
    pub fn expects(&self, w: u64, i: u64) -> bool {
        i < self.puts && (self.watched_keys == 0 || i % self.watched_keys == w % self.watched_keys)
    }

    /// Number of watchers that must receive the event of put `i`.
    pub fn watchers_of(&self, i: u64) -> u64 {
        match self.watched_keys {
            0 => self.watchers,
            n => self.watchers / n + u64::from(i % n < self.watchers % n),
        }
    }

    /// The class of watchers that see the same puts as watcher `w`.
    fn class(&self, w: u64) -> u64 {
        if self.watched_keys == 0 {
            0
        } else {
            w % self.watched_keys
        }
    }
}

/// Writes put number `i` into the front of `value`.
fn stamp(value: &mut [u8], i: u64) {
    value[..STAMP].copy_from_slice(&i.to_le_bytes());
}

/// The put number at the front of `value`, if it has one.
fn unstamp(value: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(value.get(..STAMP)?.try_into().ok()?))
}

/// A growable set of put numbers.
#[derive(Debug, Clone, Default)]
struct Bits(Vec<u64>);

impl Bits {
    fn with_len(len: u64) -> Self {
        Self(vec![0; len.div_ceil(64) as usize])
    }

    /// Adds `i`; false if it was already there.
    fn insert(&mut self, i: u64) -> bool {
        let (word, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        let fresh = self.0[word] & bit == 0;
        self.0[word] |= bit;
        fresh
    }

    fn contains(&self, i: u64) -> bool {
        self.0[(i / 64) as usize] & (1u64 << (i % 64)) != 0
    }

    /// Number of members also in `mask`.
    fn count_in(&self, mask: &Bits) -> u64 {
        self.0
            .iter()
            .zip(&mask.0)
            .map(|(a, b)| u64::from((a & b).count_ones()))
            .sum()
    }
}

/// What every stream task shares with the put loop.
struct Shared {
    plan: Plan,
    /// Start of the put phase.
    base: Instant,
    /// When each put was sent, in nanoseconds after `base` plus one (0: not sent yet).
    sent: Vec<AtomicU64>,
    /// Expected events not received yet.
    remaining: AtomicI64,
    progress: ProgressBar,
}

/// One Watch stream and what its watchers received.
struct Stream {
    stream: GrpcStream,
    /// Global number of this stream's watcher 0.
    first: u64,
    ids: HashMap<i64, usize>,
    received: Vec<Bits>,
    last_revision: Vec<i64>,
    stats: Stats,
    create_stats: Stats,
    duplicates: u64,
    out_of_order: u64,
    unexpected: u64,
    canceled: u64,
    last_event: Option<Instant>,
}

impl Stream {
    /// Opens a stream on `conn` with watcher number `first`, waiting for it to be created.
    async fn open(
        conn: GrpcConn,
        plan: &Plan,
        first: u64,
        watch: &WatchArgs,
    ) -> anyhow::Result<Self> {
        let started = Instant::now();
        let open_failed = |s: tonic::Status| {
            anyhow::anyhow!("cannot open a watch stream: {}", status_message(&s))
        };
        let mut grpc = conn.open_stream(WATCH).await.map_err(open_failed)?;
        grpc.send(&plan.create_request(first, watch.prev_kv))
            .map_err(open_failed)?;
        let mut stream = Self {
            stream: grpc,
            first,
            ids: HashMap::new(),
            received: Vec::new(),
            last_revision: Vec::new(),
            stats: Stats::new(),
            create_stats: Stats::new(),
            duplicates: 0,
            out_of_order: 0,
            unexpected: 0,
            canceled: 0,
            last_event: None,
        };
        stream.await_created(started).await?;
        Ok(stream)
    }

    /// Creates `count` more watchers, one after the other.
    async fn add_watchers(
        &mut self,
        plan: &Plan,
        count: usize,
        prev_kv: bool,
    ) -> anyhow::Result<()> {
        for _ in 0..count {
            let w = self.first + self.ids.len() as u64;
            let started = Instant::now();
            self.stream
                .send(&plan.create_request(w, prev_kv))
                .map_err(|s| anyhow::anyhow!("watch stream failed: {}", status_message(&s)))?;
            self.await_created(started).await?;
        }
        Ok(())
    }

    /// Reads responses until the `created` answer of the watcher just requested.
    async fn await_created(&mut self, started: Instant) -> anyhow::Result<()> {
        loop {
            let payload = self
                .stream
                .payload()
                .await
                .map_err(|s| anyhow::anyhow!("watch stream failed: {}", status_message(&s)))?
                .context("watch stream closed by the server while creating watchers")?;
            let response = WatchAnswer::parse(&payload)?;
            if response.created {
                if response.canceled {
                    bail!("watch creation refused: {}", response.cancel_reason);
                }
                self.create_stats.record(started.elapsed());
                self.ids.insert(response.watch_id, self.ids.len());
                self.received.push(Bits::default());
                self.last_revision.push(0);
                return Ok(());
            }
            self.unexpected += response.events().count() as u64;
        }
    }

    /// Receives events until `stop` fires or the stream ends.
    async fn receive(
        mut self,
        shared: Arc<Shared>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        for bits in &mut self.received {
            *bits = Bits::with_len(shared.plan.puts);
        }
        loop {
            let message = tokio::select! {
                biased;
                _ = stop.changed() => break,
                message = self.stream.payload() => message,
            };
            match message {
                Ok(Some(payload)) => {
                    if let Err(err) = self.on_payload(&payload, &shared) {
                        self.stats.record_error(err.to_string());
                        break;
                    }
                }
                Ok(None) => {
                    self.stats
                        .record_error("watch stream closed by the server".to_string());
                    break;
                }
                Err(status) => {
                    self.stats.record_error(status_message(&status));
                    break;
                }
            }
        }
        self
    }

    fn on_payload(&mut self, payload: &Bytes, shared: &Shared) -> anyhow::Result<()> {
        let now = Instant::now();
        let response = WatchAnswer::parse(payload)?;
        let Some(&local) = self.ids.get(&response.watch_id) else {
            self.unexpected += response.events().count() as u64;
            return Ok(());
        };
        if response.canceled {
            self.canceled += 1;
            let reason = if response.compact_revision != 0 {
                format!("watch canceled: compacted at {}", response.compact_revision)
            } else {
                format!("watch canceled: {}", response.cancel_reason)
            };
            self.stats.record_error(reason);
        }
        let w = self.first + local as u64;
        let since_base = now.saturating_duration_since(shared.base);
        let mut fresh = 0;
        for event in response.events() {
            let event = event?;
            let put = unstamp(event.value)
                .filter(|&i| event.has_kv && event.put && shared.plan.expects(w, i));
            let Some(i) = put else {
                self.unexpected += 1;
                continue;
            };
            if event.mod_revision < self.last_revision[local] {
                self.out_of_order += 1;
            }
            self.last_revision[local] = self.last_revision[local].max(event.mod_revision);
            if !self.received[local].insert(i) {
                self.duplicates += 1;
                continue;
            }
            fresh += 1;
            let sent = shared.sent[i as usize].load(Ordering::Acquire);
            let sent = Duration::from_nanos(sent.saturating_sub(1));
            self.stats.record(since_base.saturating_sub(sent));
        }
        if fresh > 0 {
            self.last_event = Some(now);
            shared.remaining.fetch_sub(fresh as i64, Ordering::AcqRel);
            shared.progress.inc(fresh);
        }
        Ok(())
    }
}

/// The server's VmRSS in KiB, from `/proc/PID/status`.
pub fn vmrss_kib(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {path} (--server-pid)"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no VmRSS line in {path}"))
}

/// Reads the server's VmRSS after `--settle`, if `--server-pid` was given.
async fn sample_rss(watch: &WatchArgs) -> anyhow::Result<Option<u64>> {
    match watch.server_pid {
        None => Ok(None),
        Some(pid) => {
            tokio::time::sleep(watch.settle).await;
            vmrss_kib(pid).map(Some)
        }
    }
}

/// Runs the watch benchmark.
pub async fn execute(args: &BenchArgs, watch: &WatchArgs) -> anyhow::Result<Report> {
    let plan = Plan::new(args, watch)?;
    if args.clients == 0 {
        bail!("--clients must be at least 1");
    }
    let conns = connect(&args.endpoints, args.conns, args.conns, args.dial_timeout).await?;
    let before = sample_rss(watch).await?;

    // (1) every stream with its first watcher.
    let opens = (0..watch.streams).map(|s| {
        let conn = conns[s % conns.len()].clone();
        Stream::open(conn, &plan, (s * watch.watch_per_stream) as u64, watch)
    });
    let mut streams = futures::future::try_join_all(opens).await?;
    let with_streams = sample_rss(watch).await?;

    // (2) the other watchers, every stream at once.
    let adds = streams
        .iter_mut()
        .map(|s| s.add_watchers(&plan, watch.watch_per_stream - 1, watch.prev_kv));
    futures::future::try_join_all(adds).await?;
    let with_watchers = sample_rss(watch).await?;

    let mut summary = WatchSummary {
        streams: watch.streams,
        watchers: plan.watchers as usize,
        ..WatchSummary::default()
    };
    for stream in &streams {
        summary.create_stats.merge(&stream.create_stats);
    }
    let rss = |after| {
        Some(RssSamples {
            before_kib: before?,
            streams_kib: with_streams?,
            watchers_kib: with_watchers?,
            after_kib: after,
        })
    };
    if plan.puts == 0 {
        summary.rss = rss(None);
        return Ok(Report {
            op: "watch".to_string(),
            elapsed: Duration::ZERO,
            stats: Stats::new(),
            watch: Some(summary),
            compaction: None,
            apiserver: None,
        });
    }

    // (3) receive in one task per stream while the puts run.
    let expected: u64 = (0..plan.puts).map(|i| plan.watchers_of(i)).sum();
    let progress = ProgressBar::with_draw_target(Some(expected), ProgressDrawTarget::stderr());
    progress.set_style(
        ProgressStyle::with_template("{prefix} {wide_bar} {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    progress.set_prefix("watch events");
    let shared = Arc::new(Shared {
        plan: plan.clone(),
        base: Instant::now(),
        sent: (0..plan.puts).map(|_| AtomicU64::new(0)).collect(),
        remaining: AtomicI64::new(expected as i64),
        progress: progress.clone(),
    });
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut receivers = JoinSet::new();
    for stream in streams.drain(..) {
        receivers.spawn(stream.receive(shared.clone(), stopped.clone()));
    }

    let (put_stats, failed) = put_all(args, watch, &conns, &shared).await;
    let put_elapsed = shared.base.elapsed();

    // (4) wait for the missing events.
    // A stream the server ended is joined early; once every stream has ended, stop waiting.
    let deadline = Instant::now() + watch.drain_timeout;
    let mut done = Vec::with_capacity(watch.streams);
    let mut stopping = false;
    loop {
        let joined = if stopping {
            receivers.join_next().await
        } else {
            receivers.try_join_next()
        };
        match joined {
            Some(Ok(stream)) => done.push(stream),
            Some(Err(err)) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            Some(Err(err)) => bail!("watch receiver failed: {err}"),
            None if stopping || receivers.is_empty() => break,
            None if shared.remaining.load(Ordering::Acquire) <= 0 || Instant::now() >= deadline => {
                let _ = stop.send(true);
                stopping = true;
            }
            None => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
    drop(stop);
    progress.finish_and_clear();
    let after = sample_rss(watch).await?;

    // Count: expected events of successful puts, per class of watchers.
    let mut ok = Bits::with_len(plan.puts);
    for i in 0..plan.puts {
        if !failed.contains(i) {
            ok.insert(i);
        }
    }
    let mut ok_per_class: HashMap<u64, u64> = HashMap::new();
    let mut stats = Stats::new();
    let mut last_event = None;
    for stream in &done {
        stats.merge(&stream.stats);
        summary.duplicates += stream.duplicates;
        summary.out_of_order += stream.out_of_order;
        summary.unexpected += stream.unexpected;
        summary.canceled += stream.canceled;
        last_event = last_event.max(stream.last_event);
        for (local, bits) in stream.received.iter().enumerate() {
            let w = stream.first + local as u64;
            let class = plan.class(w);
            let want = *ok_per_class.entry(class).or_insert_with(|| {
                (0..plan.puts)
                    .filter(|&i| ok.contains(i) && plan.expects(w, i))
                    .count() as u64
            });
            let got = bits.count_in(&ok);
            summary.expected += want;
            summary.received += got;
            summary.lost += want.saturating_sub(got);
        }
    }
    summary.put_stats = put_stats;
    summary.put_elapsed = put_elapsed;
    summary.rss = rss(after);
    drop(done);
    let elapsed = last_event
        .map(|t| t.saturating_duration_since(shared.base))
        .unwrap_or(put_elapsed);
    Ok(Report {
        op: "watch".to_string(),
        elapsed,
        stats,
        watch: Some(summary),
        compaction: None,
        apiserver: None,
    })
}

/// Sends every put through `--clients` clients at `--put-rate`; returns their statistics and
/// the numbers of the puts that failed.
async fn put_all(
    args: &BenchArgs,
    watch: &WatchArgs,
    conns: &[GrpcConn],
    shared: &Arc<Shared>,
) -> (Stats, Bits) {
    let next = Arc::new(AtomicU64::new(0));
    let limiter = (watch.put_rate > 0).then(|| Arc::new(Limiter::new(watch.put_rate)));
    let mut filler = Rng::seeded(u64::MAX).bytes(args.val_size);
    stamp(&mut filler, 0);
    let mut workers = JoinSet::new();
    for c in 0..args.clients {
        let client = conns[c % conns.len()].clone();
        let (next, limiter, shared, filler) = (
            next.clone(),
            limiter.clone(),
            shared.clone(),
            filler.clone(),
        );
        workers.spawn(async move {
            let mut rng = Rng::seeded(c as u64);
            let mut stats = Stats::new();
            let mut failed = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= shared.plan.puts {
                    break;
                }
                if let Some(limiter) = &limiter {
                    limiter.wait().await;
                }
                let mut value = filler.clone();
                stamp(&mut value, i);
                let request = PutRequest {
                    key: shared.plan.put_key(i, &mut rng),
                    value,
                    ..Default::default()
                };
                let started = Instant::now();
                let nanos = started.saturating_duration_since(shared.base).as_nanos();
                shared.sent[i as usize].store(nanos as u64 + 1, Ordering::Release);
                match client.call::<_, PutResponse>(PUT, &request).await {
                    Ok(_) => stats.record(started.elapsed()),
                    Err(status) => {
                        stats.record_error(format!("put: {}", status_message(&status)));
                        shared
                            .remaining
                            .fetch_sub(shared.plan.watchers_of(i) as i64, Ordering::AcqRel);
                        failed.push(i);
                    }
                }
            }
            (stats, failed)
        });
    }
    let mut stats = Stats::new();
    let mut failed = Bits::with_len(shared.plan.puts);
    while let Some(joined) = workers.join_next().await {
        match joined {
            Ok((s, f)) => {
                stats.merge(&s);
                for i in f {
                    failed.insert(i);
                }
            }
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            Err(err) => stats.record_error(format!("put worker failed: {err}")),
        }
    }
    (stats, failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn plan(line: &str) -> Plan {
        let cli = Cli::try_parse_from(std::iter::once("x").chain(line.split_whitespace())).unwrap();
        match &cli.bench.command {
            crate::BenchCommand::Watch(w) => Plan::new(&cli.bench, w).unwrap(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn prefix_plan_sends_every_put_to_every_watcher() {
        let p = plan("watch --streams 2 --watch-per-stream 3 --put-total 10");
        assert_eq!(p.watchers, 6);
        assert!((0..6).all(|w| (0..10).all(|i| p.expects(w, i))));
        assert!(!p.expects(0, 10));
        assert_eq!(p.watchers_of(3), 6);
        let r = p.create_request(4, true);
        match r.request_union {
            Some(watch_request::RequestUnion::CreateRequest(c)) => {
                assert_eq!(c.key, b"/keel-bench/watch/");
                assert_eq!(c.range_end, b"/keel-bench/watch0");
                assert!(c.prev_kv);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn watched_keys_plan_matches_etcd() {
        let p = plan("watch --streams 1 --watch-per-stream 5 --watched-key-total 2 --put-total 5");
        // Watchers 0, 2, 4 watch key 0 (puts 0, 2, 4); watchers 1, 3 watch key 1 (puts 1, 3).
        assert_eq!((p.watchers_of(0), p.watchers_of(1)), (3, 2));
        assert!(p.expects(2, 4) && !p.expects(2, 3) && p.expects(3, 1));
        let mut rng = Rng::seeded(1);
        assert_eq!(p.put_key(3, &mut rng), p.keys.key(1));
        let total: u64 = (0..5).map(|i| p.watchers_of(i)).sum();
        assert_eq!(total, 3 * 3 + 2 * 2);
    }

    #[test]
    fn stamps_and_bits() {
        let mut v = vec![7u8; 12];
        stamp(&mut v, 0x0102_0304_0506);
        assert_eq!(unstamp(&v), Some(0x0102_0304_0506));
        assert_eq!(&v[8..], &[7; 4]);
        assert_eq!(unstamp(b"short"), None);
        let mut b = Bits::with_len(130);
        assert!(b.insert(129) && b.insert(0) && !b.insert(129));
        let mut mask = Bits::with_len(130);
        mask.insert(129);
        assert_eq!(b.count_in(&mask), 1);
        assert!(b.contains(0) && !b.contains(1));
    }

    #[test]
    fn small_values_are_refused() {
        let cli = Cli::try_parse_from(["x", "watch", "--val-size", "4"]).unwrap();
        match &cli.bench.command {
            crate::BenchCommand::Watch(w) => {
                let err = Plan::new(&cli.bench, w).unwrap_err().to_string();
                assert!(err.contains("--val-size"), "{err}");
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn vmrss_of_this_process() {
        let kib = vmrss_kib(std::process::id()).unwrap();
        assert!(kib > 100, "{kib}");
    }
}
