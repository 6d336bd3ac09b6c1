//! `keel bench apiserver`: lease renewals against any Kubernetes API server, watched by many
//! watchers (see [`crate::ApiserverArgs`] for what is measured).
//!
//! Steps: (1) read the kubeconfig and connect; create the namespace (unless `--namespace`) and
//! the leases; list them for the resourceVersion the watches start from. (2) Split the renewer
//! groups and the watcher groups (each group one connection) over one thread per core, each
//! with its own single-threaded runtime, as the etcd benchmarks do: a request and its answer
//! never cross threads. Every thread connects and opens its watches; when all are open the
//! clock starts. (3) The renewers run for `--duration`, paced together by one limiter; each
//! renewal is GET, set `spec.renewTime`, PUT with the resourceVersion read, GET again on 409.
//! (4) When the last renewal is answered, wait until every watcher is past the highest
//! acknowledged resourceVersion (or `--drain-timeout`), then stop the watchers and check every
//! acknowledged update against every watcher's record (see [`crate::apiserver_watch`]).
//! (5) Delete the namespace (or, with `--namespace`, the leases).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use bytes::Bytes;
use http::{Method, StatusCode};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

use crate::apiserver_report::ApiserverSummary;
use crate::apiserver_watch::{LEASE_PREFIX, Record, Seen, WatchShared, Watcher};
use crate::args::{ApiserverArgs, BenchArgs};
use crate::https::{Conn, Endpoint};
use crate::report::{Report, Stats};
use crate::runner::Limiter;
use crate::{kubeconfig, microtime};

/// Attempts of one renewal (kubelet's `maxUpdateRetries`): GET and PUT again after a 409.
const MAX_ATTEMPTS: usize = 5;

/// Leases created (and deleted) at once.
const SETUP_CONCURRENCY: usize = 16;

/// `spec.leaseDurationSeconds` of the leases (the kubelet's node lease default).
const LEASE_DURATION_SECONDS: u64 = 40;

/// Where the run is; every thread follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Connecting and opening the watches.
    Setup,
    /// Renewing.
    Run,
    /// Renewers stop after their current renewal.
    StopUpdates,
    /// Watchers stop.
    StopWatchers,
}

/// What every thread shares.
struct Shared {
    endpoint: Arc<Endpoint>,
    /// The leases' collection path.
    leases_path: String,
    request_timeout: Duration,
    limiter: Option<Limiter>,
    /// Acknowledged updates, failed updates, conflicts (for the progress bar).
    updates: AtomicU64,
    failed: AtomicU64,
    conflicts: AtomicU64,
    /// The highest resourceVersion a PUT returned.
    max_acked: AtomicU64,
    watch: Arc<WatchShared>,
}

/// Runs the benchmark.
pub async fn execute(args: &BenchArgs, api: &ApiserverArgs) -> anyhow::Result<Report> {
    if api.clients == 0 || api.leases_per_client == 0 {
        bail!("--clients and --leases-per-client must be at least 1");
    }
    if api.clients_per_conn == 0 || api.watchers_per_conn == 0 {
        bail!("--clients-per-conn and --watchers-per-conn must be at least 1");
    }
    let leases = api.clients * api.leases_per_client;
    if u32::try_from(leases).is_err() {
        bail!("too many leases ({leases})");
    }
    let path = kubeconfig::default_path(api.kubeconfig.as_deref())?;
    let target = kubeconfig::load(&path, api.context.as_deref())?;
    let endpoint = Endpoint::new(target, api.http1, args.dial_timeout)?;
    let mut setup = endpoint.connect().await?;
    let (namespace, created) = match &api.namespace {
        Some(ns) => (ns.clone(), false),
        None => (fresh_namespace(), true),
    };
    if created {
        let body =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        let answer = timed(
            api.request_timeout,
            setup.call(Method::POST, "/api/v1/namespaces", Some(to_bytes(&body))),
        )
        .await
        .context("cannot create the namespace")?;
        if !answer.status.is_success() {
            bail!("cannot create namespace {namespace}: {}", answer.error());
        }
    }
    let leases_path = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases");
    let outcome = run(&endpoint, &mut setup, &leases_path, &namespace, api, leases).await;
    let cleanup = if created {
        match timed(
            api.request_timeout,
            setup.call(
                Method::DELETE,
                &format!("/api/v1/namespaces/{namespace}"),
                None,
            ),
        )
        .await
        {
            Ok(a) if a.status.is_success() || a.status == StatusCode::NOT_FOUND => Ok(()),
            Ok(a) => Err(a.error()),
            Err(e) => Err(format!("{e:#}")),
        }
    } else {
        let names = (0..leases as u32).map(|i| format!("{leases_path}/{LEASE_PREFIX}{i}"));
        for_all(
            &setup,
            names.collect(),
            api.request_timeout,
            Method::DELETE,
            |_| None,
        )
        .await
        .map_err(|e| format!("{e:#}"))
    };
    if let Err(err) = cleanup {
        eprintln!("keel bench: cannot delete the benchmark's objects in {namespace}: {err}");
    }
    let mut summary = outcome?;
    summary.server = endpoint.server().to_string();
    summary.protocol = setup.protocol().to_string();
    // HTTP/1.1 carries one request at a time: every renewer and watcher has its own.
    (summary.client_conns, summary.watcher_conns) = if setup.protocol() == "HTTP/2" {
        (
            api.clients.div_ceil(api.clients_per_conn),
            api.watchers.div_ceil(api.watchers_per_conn),
        )
    } else {
        (api.clients, api.watchers)
    };
    summary.namespace = namespace;
    Ok(Report {
        op: "apiserver".to_string(),
        elapsed: summary.update_elapsed,
        stats: summary.put.clone(),
        watch: None,
        compaction: None,
        apiserver: Some(summary),
    })
}

/// A fresh namespace name: `keel-bench-` and five random lowercase letters and digits.
fn fresh_namespace() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bits = uuid::Uuid::new_v4().as_u128();
    let suffix: String = (0..5)
        .map(|i| ALPHABET[((bits >> (i * 8)) % ALPHABET.len() as u128) as usize] as char)
        .collect();
    format!("keel-bench-{suffix}")
}

fn to_bytes(value: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("JSON values serialize"))
}

/// `call` within `limit`.
async fn timed<T>(
    limit: Duration,
    call: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result,
        Err(_) => bail!("timed out after {limit:?}"),
    }
}

/// How many times a setup request answered 429 is sent.
const SETUP_ATTEMPTS: u32 = 30;

/// Sends `method` to every path, `SETUP_CONCURRENCY` at a time, with `body(i)` for path `i`;
/// a 429 is retried a second later; fails with the first answer that is neither a success nor
/// 404/409 (already gone, already there).
async fn for_all(
    conn: &Conn,
    paths: Vec<String>,
    limit: Duration,
    method: Method,
    body: impl Fn(usize) -> Option<Bytes> + Sync,
) -> anyhow::Result<()> {
    let paths = &paths;
    let body = &body;
    let workers = (0..SETUP_CONCURRENCY.min(paths.len())).map(|w| {
        let method = method.clone();
        async move {
            let mut conn = conn.fork().await?;
            for i in (w..paths.len()).step_by(SETUP_CONCURRENCY) {
                // A server shedding load (429) is asked again after its Retry-After second,
                // as client-go does.
                let mut attempts = 0;
                let answer = loop {
                    let answer =
                        timed(limit, conn.call(method.clone(), &paths[i], body(i))).await?;
                    attempts += 1;
                    if answer.status != StatusCode::TOO_MANY_REQUESTS || attempts == SETUP_ATTEMPTS
                    {
                        break answer;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                };
                let status = answer.status;
                if !(status.is_success()
                    || status == StatusCode::NOT_FOUND
                    || status == StatusCode::CONFLICT)
                {
                    bail!("{method} {}: {}", paths[i], answer.error());
                }
            }
            anyhow::Ok(())
        }
    });
    futures::future::try_join_all(workers).await?;
    Ok(())
}

/// The lease objects' `metadata.resourceVersion`, as far as it is read.
#[derive(Deserialize)]
struct Versioned {
    metadata: VersionedMeta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct VersionedMeta {
    #[serde(default)]
    resource_version: String,
}

/// The resourceVersion of an object or list answer, as a number.
fn resource_version(body: &[u8]) -> Option<u64> {
    serde_json::from_slice::<Versioned>(body)
        .ok()?
        .metadata
        .resource_version
        .parse()
        .ok()
}

/// Steps (1) to (4) of the module comment in namespace `namespace`.
async fn run(
    endpoint: &Arc<Endpoint>,
    setup: &mut Conn,
    leases_path: &str,
    namespace: &str,
    api: &ApiserverArgs,
    leases: usize,
) -> anyhow::Result<ApiserverSummary> {
    let renew_time = microtime::format(microtime::micros(SystemTime::now()));
    let paths = vec![leases_path.to_string(); leases];
    for_all(setup, paths, api.request_timeout, Method::POST, |i| {
        let name = format!("{LEASE_PREFIX}{i}");
        Some(to_bytes(&json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                "renewTime": renew_time,
            },
        })))
    })
    .await
    .context("cannot create the leases")?;
    let list = timed(
        api.request_timeout,
        setup.call(Method::GET, leases_path, None),
    )
    .await
    .context("cannot list the leases")?;
    if list.status != StatusCode::OK {
        bail!("cannot list the leases: {}", list.error());
    }
    let list_rv = resource_version(&list.body)
        .context("the lease list has no numeric metadata.resourceVersion")?;

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let client_groups = api.clients.div_ceil(api.clients_per_conn);
    let watcher_groups = api.watchers.div_ceil(api.watchers_per_conn);
    let threads = cores.min(client_groups + watcher_groups).max(1);
    let shared = Arc::new(Shared {
        endpoint: endpoint.clone(),
        leases_path: leases_path.to_string(),
        request_timeout: api.request_timeout,
        limiter: (api.rate > 0).then(|| Limiter::new(api.rate)),
        updates: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        conflicts: AtomicU64::new(0),
        max_acked: AtomicU64::new(0),
        watch: Arc::new(WatchShared::new(api.watchers, list_rv)),
    });
    // Groups are dealt to the threads in turn, the watcher groups continuing the rotation.
    let mut plans = vec![Plan::default(); threads];
    for g in 0..client_groups {
        let first = g * api.clients_per_conn;
        let clients = first..(first + api.clients_per_conn).min(api.clients);
        let leases = clients
            .map(|c| {
                (0..api.leases_per_client)
                    .map(|k| (c * api.leases_per_client + k) as u32)
                    .collect()
            })
            .collect();
        plans[g % threads].renewers.push(leases);
    }
    for g in 0..watcher_groups {
        let first = g * api.watchers_per_conn;
        plans[(client_groups + g) % threads]
            .watchers
            .push((first..(first + api.watchers_per_conn).min(api.watchers)).collect());
    }

    let (phase, phase_rx) = watch::channel(Phase::Setup);
    let (mut ready, mut done, mut results) = (Vec::new(), Vec::new(), Vec::new());
    for (t, plan) in plans.into_iter().enumerate() {
        let (ready_tx, ready_rx) = oneshot::channel();
        let (done_tx, done_rx) = oneshot::channel();
        let (result_tx, result_rx) = oneshot::channel();
        ready.push(ready_rx);
        done.push(done_rx);
        results.push(result_rx);
        let (shared, phase_rx) = (shared.clone(), phase_rx.clone());
        std::thread::Builder::new()
            .name(format!("keel-bench-{t}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match runtime {
                    Ok(runtime) => {
                        let part = runtime
                            .block_on(shard(plan, list_rv, shared, phase_rx, ready_tx, done_tx));
                        let _ = result_tx.send(part);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.into()));
                    }
                }
            })?;
    }
    // A thread that panicked drops its senders: that is an error too.
    let mut setup_error = None;
    for ready in ready {
        let outcome = ready
            .await
            .unwrap_or_else(|_| Err(anyhow::anyhow!("a benchmark thread failed")));
        if let Err(e) = outcome {
            setup_error.get_or_insert(e);
        }
    }
    if let Some(err) = setup_error {
        let _ = phase.send(Phase::StopWatchers);
        for result in results {
            let _ = result.await;
        }
        return Err(err);
    }

    // (3) the renewals, with a progress bar.
    let progress = ProgressBar::with_draw_target(
        Some(api.duration.as_millis() as u64),
        ProgressDrawTarget::stderr(),
    );
    progress.set_style(
        ProgressStyle::with_template("{prefix} {wide_bar} {elapsed}/{duration} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    progress.set_prefix("apiserver");
    let started = Instant::now();
    let _ = phase.send(Phase::Run);
    while started.elapsed() < api.duration {
        tokio::time::sleep(Duration::from_millis(200).min(api.duration - started.elapsed())).await;
        let secs = started.elapsed().as_secs_f64().max(1e-9);
        let updates = shared.updates.load(Ordering::Relaxed);
        progress.set_position(started.elapsed().as_millis() as u64);
        progress.set_message(format!(
            "{updates} updates ({:.0}/s), {} conflicts, {} failed, {} events",
            updates as f64 / secs,
            shared.conflicts.load(Ordering::Relaxed),
            shared.failed.load(Ordering::Relaxed),
            shared.watch.events.load(Ordering::Relaxed),
        ));
    }
    let _ = phase.send(Phase::StopUpdates);
    for done in done {
        let _ = done.await;
    }
    let update_elapsed = started.elapsed();

    // (4) the drain.
    let drain_started = Instant::now();
    let max_acked = shared.max_acked.load(Ordering::Acquire);
    loop {
        let behind = shared.watch.behind(max_acked);
        if behind == 0 || drain_started.elapsed() >= api.drain_timeout {
            break;
        }
        progress.set_message(format!("draining: {behind} watchers behind"));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let drain = drain_started.elapsed();
    let _ = phase.send(Phase::StopWatchers);
    let mut parts = Vec::with_capacity(threads);
    for result in results {
        parts.push(result.await.context("a benchmark thread failed")?);
    }
    progress.finish_and_clear();

    let mut summary = ApiserverSummary {
        clients: api.clients,
        leases,
        watchers: api.watchers,
        target_rate: api.rate,
        update_elapsed,
        drain,
        conflicts: shared.conflicts.load(Ordering::Acquire),
        failed_updates: shared.failed.load(Ordering::Acquire),
        ..ApiserverSummary::default()
    };
    let mut acks = Vec::new();
    let mut records = Vec::new();
    for part in parts {
        summary.get.merge(&part.get);
        summary.put.merge(&part.put);
        acks.extend(part.acks);
        records.extend(part.records);
    }
    summary.updates = acks.len() as u64;
    check(&mut summary, &acks, &records);
    Ok(summary)
}

/// Checks every acknowledged update `(lease, resourceVersion)` against every watcher's record.
fn check(summary: &mut ApiserverSummary, acks: &[(u32, u64)], records: &[Record]) {
    for record in records {
        let (mut matched, mut mismatched) = (0, 0);
        for &(lease, rv) in acks {
            match record.seen.get(rv) {
                0 => {}
                tag if tag == Seen::tag(lease) => matched += 1,
                _ => mismatched += 1,
            }
        }
        summary.expected += acks.len() as u64;
        summary.received += matched;
        summary.mismatched += mismatched;
        summary.lost += acks.len() as u64 - matched - mismatched;
        summary.unacknowledged += record.fresh.saturating_sub(matched + mismatched) + record.other;
        summary.duplicates += record.duplicates;
        summary.out_of_order += record.out_of_order;
        summary.restarts += record.restarts;
        summary.delivery.merge(&record.delivery);
    }
}

/// One thread's groups: the leases of each renewer of each renewer group, and the watcher
/// numbers of each watcher group.
#[derive(Debug, Clone, Default)]
struct Plan {
    renewers: Vec<Vec<Vec<u32>>>,
    watchers: Vec<Vec<usize>>,
}

/// What one thread measured.
#[derive(Default)]
struct Part {
    get: Stats,
    put: Stats,
    acks: Vec<(u32, u64)>,
    records: Vec<Record>,
}

/// One thread: connects its groups, opens its watches, says it is ready, renews while the
/// phase is `Run`, says its renewers are done, and returns when the watchers stop.
async fn shard(
    plan: Plan,
    list_rv: u64,
    shared: Arc<Shared>,
    mut phase: watch::Receiver<Phase>,
    ready: oneshot::Sender<anyhow::Result<()>>,
    done: oneshot::Sender<()>,
) -> Part {
    let connected = async {
        let mut renewers = Vec::new();
        for group in plan.renewers {
            let conns = shared.endpoint.connect().await?.share(group.len()).await?;
            for (conn, leases) in conns.into_iter().zip(group) {
                renewers.push(Renewer::new(conn, leases));
            }
        }
        let mut watchers = Vec::new();
        for group in plan.watchers {
            let conns = shared.endpoint.connect().await?.share(group.len()).await?;
            let opens = conns
                .into_iter()
                .zip(group)
                .map(|(conn, w)| Watcher::open(w, conn, shared.leases_path.clone(), list_rv));
            watchers.extend(futures::future::try_join_all(opens).await?);
        }
        anyhow::Ok((renewers, watchers))
    };
    let (renewers, watchers) = match connected.await {
        Ok(both) => {
            let _ = ready.send(Ok(()));
            both
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            let _ = done.send(());
            return Part::default();
        }
    };
    let watching: Vec<_> = watchers
        .into_iter()
        .map(|w| tokio::spawn(w.run(shared.watch.clone(), phase.clone())))
        .collect();
    let _ = phase.wait_for(|p| *p >= Phase::Run).await;
    let renewing: Vec<_> = renewers
        .into_iter()
        .map(|r| tokio::spawn(r.run(shared.clone(), phase.clone())))
        .collect();
    let mut part = Part::default();
    for handle in renewing {
        match handle.await {
            Ok(r) => {
                part.get.merge(&r.get);
                part.put.merge(&r.put);
                part.acks.extend(r.acks);
            }
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => part.put.record_error(format!("renewer failed: {e}")),
        }
    }
    let _ = done.send(());
    for handle in watching {
        match handle.await {
            Ok(record) => part.records.push(record),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => {}
        }
    }
    part
}

/// One lease renewer: its connection, its leases and what it measured.
struct Renewer {
    conn: Conn,
    leases: Vec<u32>,
    get: Stats,
    put: Stats,
    /// `(lease, resourceVersion)` of each acknowledged update.
    acks: Vec<(u32, u64)>,
}

impl Renewer {
    fn new(conn: Conn, leases: Vec<u32>) -> Self {
        Self {
            conn,
            leases,
            get: Stats::new(),
            put: Stats::new(),
            acks: Vec::new(),
        }
    }

    /// Renews the leases in turn, each renewal on the limiter's next slot, until told to stop.
    async fn run(mut self, shared: Arc<Shared>, mut phase: watch::Receiver<Phase>) -> Self {
        for n in 0.. {
            if *phase.borrow() >= Phase::StopUpdates {
                break;
            }
            if let Some(limiter) = &shared.limiter {
                tokio::select! {
                    biased;
                    _ = phase.wait_for(|p| *p >= Phase::StopUpdates) => break,
                    _ = limiter.wait() => {}
                }
            }
            let lease = self.leases[n % self.leases.len()];
            match self.renew(lease, &shared).await {
                Ok(rv) => {
                    self.acks.push((lease, rv));
                    shared.updates.fetch_add(1, Ordering::Relaxed);
                    shared.max_acked.fetch_max(rv, Ordering::AcqRel);
                }
                Err(()) => {
                    shared.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self
    }

    /// One renewal of `lease`, as the kubelet does it: GET, bump `spec.renewTime`, PUT with
    /// the resourceVersion read; on 409 Conflict the same again, up to [`MAX_ATTEMPTS`] times.
    /// Returns the resourceVersion the PUT returned; errors are recorded in the statistics.
    async fn renew(&mut self, lease: u32, shared: &Shared) -> Result<u64, ()> {
        let path = format!("{}/{LEASE_PREFIX}{lease}", shared.leases_path);
        let limit = shared.request_timeout;
        for _ in 0..MAX_ATTEMPTS {
            let started = Instant::now();
            let got = match timed(limit, self.conn.call(Method::GET, &path, None)).await {
                Ok(answer) if answer.status == StatusCode::OK => answer,
                Ok(answer) => return self.failed(false, format!("GET: {}", answer.error())),
                Err(e) => {
                    self.conn.recover().await;
                    return self.failed(false, format!("GET: {e:#}"));
                }
            };
            self.get.record(started.elapsed());
            let Ok(mut object) = serde_json::from_slice::<Value>(&got.body) else {
                return self.failed(false, "GET: the answer is not a JSON object".into());
            };
            let renew_time = microtime::format(microtime::micros(SystemTime::now()));
            match object.get_mut("spec").and_then(Value::as_object_mut) {
                Some(spec) => {
                    spec.insert("renewTime".into(), Value::String(renew_time));
                }
                None => object["spec"] = json!({"renewTime": renew_time}),
            }
            let body = to_bytes(&object);
            let started = Instant::now();
            let put = match timed(limit, self.conn.call(Method::PUT, &path, Some(body))).await {
                Ok(answer) => answer,
                Err(e) => {
                    self.conn.recover().await;
                    return self.failed(true, format!("PUT: {e:#}"));
                }
            };
            match put.status {
                StatusCode::OK => {
                    self.put.record(started.elapsed());
                    return match resource_version(&put.body) {
                        Some(rv) => Ok(rv),
                        None => self.failed(
                            true,
                            "PUT: the answer has no numeric metadata.resourceVersion".into(),
                        ),
                    };
                }
                StatusCode::CONFLICT => {
                    self.put.record(started.elapsed());
                    shared.conflicts.fetch_add(1, Ordering::Relaxed);
                }
                _ => return self.failed(true, format!("PUT: {}", put.error())),
            }
        }
        self.failed(
            true,
            format!("PUT: 409 Conflict on each of {MAX_ATTEMPTS} attempts"),
        )
    }

    /// Records a failed renewal (`put`: of its PUT, else of its GET).
    fn failed(&mut self, put: bool, message: String) -> Result<u64, ()> {
        let stats = if put { &mut self.put } else { &mut self.get };
        stats.record_error(message);
        Err(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_and_versions() {
        let ns = fresh_namespace();
        assert!(ns.starts_with("keel-bench-") && ns.len() == 16, "{ns}");
        assert_ne!(ns, fresh_namespace());
        let body = br#"{"kind":"LeaseList","metadata":{"resourceVersion":"42"},"items":[]}"#;
        assert_eq!(resource_version(body), Some(42));
        assert_eq!(resource_version(br#"{"metadata":{}}"#), None);
    }

    #[test]
    fn every_ack_is_checked_against_every_watcher() {
        let shared = WatchShared::new(2, 10);
        let line = |lease: u32, rv: u64| {
            format!(
                "{{\"type\":\"MODIFIED\",\"object\":{{\"metadata\":{{\"name\":\"{LEASE_PREFIX}{lease}\",\"resourceVersion\":\"{rv}\"}},\"spec\":{{\"renewTime\":\"2025-01-01T00:00:00.000000Z\"}}}}}}\n"
            )
        };
        let mut a = Record::new(0, 10);
        let mut b = Record::new(1, 10);
        a.on_data((line(1, 11) + &line(2, 12)).as_bytes(), &shared)
            .unwrap();
        // b misses 11, sees 12 as another lease's, and sees one update never acknowledged.
        b.on_data((line(3, 12) + &line(1, 13)).as_bytes(), &shared)
            .unwrap();
        let mut summary = ApiserverSummary::default();
        check(&mut summary, &[(1, 11), (2, 12)], &[a, b]);
        assert_eq!(summary.expected, 4);
        assert_eq!(summary.received, 2);
        assert_eq!(summary.lost, 1);
        assert_eq!(summary.mismatched, 1);
        assert_eq!(summary.unacknowledged, 1);
        assert!(summary.watch_failed());
    }
}
