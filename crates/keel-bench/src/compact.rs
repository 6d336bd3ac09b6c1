//! `keel bench compact`: put and range latency while the server compacts a large history.
//!
//! Half of `--clients` put random keys of the key space, the other half read one random key
//! each (`--consistency`). After `--baseline` of this load, one Compact to the store's
//! revision is sent with `physical` set, so its answer comes when the server has removed what
//! it compacted (etcd's meaning of the flag); the load stops with that answer. The report's
//! statistics are those of the requests sent during the compaction; the summary adds each
//! kind alone, the baseline, and how long the compaction took. The history to compact is
//! written beforehand, e.g. with `txn-put --txn-ops 100 --key-space-size N --total N*R/100`
//! (N keys, R revisions each).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use anyhow::Context;
use keel_proto::etcdserverpb::{
    CompactionRequest, CompactionResponse, PutRequest, PutResponse, RangeRequest, RangeResponse,
};
use tokio::task::JoinSet;

use crate::args::{BenchArgs, CompactArgs, Consistency};
use crate::grpc::GrpcConn;
use crate::keys::{KeyMaker, Rng};
use crate::report::{CompactionSummary, Report, Stats};
use crate::runner::PUT;

const RANGE: &str = "/etcdserverpb.KV/Range";
const COMPACT: &str = "/etcdserverpb.KV/Compact";

/// The phase a request was sent in.
const BASELINE: u8 = 0;
const COMPACTING: u8 = 1;
const DONE: u8 = 2;

/// What one client does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Put,
    Range,
}

/// What every client shares.
struct Plan {
    keys: KeyMaker,
    value: Vec<u8>,
    serializable: bool,
    phase: AtomicU8,
}

/// Runs the benchmark (see the module docs).
pub async fn execute(args: &BenchArgs, compact: &CompactArgs) -> anyhow::Result<Report> {
    let clients = crate::client::connect(
        &args.endpoints,
        args.conns,
        args.clients.max(2),
        args.dial_timeout,
    )
    .await?;
    let admin = clients[0].clone();
    let plan = Arc::new(Plan {
        keys: KeyMaker::new(b"", args.key_size, args.key_space_size)?,
        value: Rng::seeded(u64::MAX).bytes(args.val_size),
        serializable: compact.consistency == Consistency::S,
        phase: AtomicU8::new(BASELINE),
    });
    let mut workers = JoinSet::new();
    for (i, client) in clients.into_iter().enumerate() {
        let kind = if i % 2 == 0 { Kind::Put } else { Kind::Range };
        workers.spawn(work(client, kind, plan.clone(), Rng::seeded(i as u64)));
    }
    tokio::time::sleep(compact.baseline).await;
    let current = admin
        .call::<_, RangeResponse>(
            RANGE,
            &RangeRequest {
                key: b"\0".to_vec(),
                count_only: true,
                serializable: true,
                ..Default::default()
            },
        )
        .await
        .context("reading the store revision")?;
    let revision = current.header.map_or(0, |h| h.revision);
    plan.phase.store(COMPACTING, Ordering::Relaxed);
    let started = Instant::now();
    let answer = admin
        .call::<_, CompactionResponse>(
            COMPACT,
            &CompactionRequest {
                revision,
                physical: true,
            },
        )
        .await;
    let compaction = started.elapsed();
    plan.phase.store(DONE, Ordering::Relaxed);
    answer.with_context(|| format!("compacting to revision {revision}"))?;
    let mut summary = CompactionSummary {
        revision,
        compaction,
        baseline: compact.baseline,
        ..CompactionSummary::default()
    };
    while let Some(joined) = workers.join_next().await {
        let (kind, [baseline, during]) = joined?;
        let (b, d) = match kind {
            Kind::Put => (&mut summary.baseline_put, &mut summary.put),
            Kind::Range => (&mut summary.baseline_range, &mut summary.range),
        };
        b.merge(&baseline);
        d.merge(&during);
    }
    let mut stats = summary.put.clone();
    stats.merge(&summary.range);
    Ok(Report {
        op: "compact".into(),
        elapsed: compaction,
        stats,
        watch: None,
        compaction: Some(summary),
        apiserver: None,
    })
}

/// One client: requests of its kind until the compaction is answered; latencies by the phase
/// each request was sent in.
async fn work(client: GrpcConn, kind: Kind, plan: Arc<Plan>, mut rng: Rng) -> (Kind, [Stats; 2]) {
    let mut stats = [Stats::new(), Stats::new()];
    loop {
        let phase = plan.phase.load(Ordering::Relaxed);
        if phase == DONE {
            break;
        }
        let key = plan.keys.key(rng.below(plan.keys.key_space_size()));
        let start = Instant::now();
        let outcome = match kind {
            Kind::Put => {
                let put = PutRequest {
                    key,
                    value: plan.value.clone(),
                    ..Default::default()
                };
                client.call::<_, PutResponse>(PUT, &put).await.map(drop)
            }
            Kind::Range => {
                let range = RangeRequest {
                    key,
                    serializable: plan.serializable,
                    ..Default::default()
                };
                client
                    .call::<_, RangeResponse>(RANGE, &range)
                    .await
                    .map(drop)
            }
        };
        let latency = start.elapsed();
        let s = &mut stats[usize::from(phase)];
        match outcome {
            Ok(()) => s.record(latency),
            Err(status) => s.record_error(crate::client::status_message(&status)),
        }
    }
    (kind, stats)
}
