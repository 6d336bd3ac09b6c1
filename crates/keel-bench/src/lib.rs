//! `keel bench`: a load generator for any etcd v3 endpoint, with etcd `benchmark`'s flags.
//!
//! `keel bench [global flags] put|range|txn-put|lease-keepalive [flags]` opens `--conns` gRPC
//! connections, runs `--clients` concurrent clients over them until `--total` requests are
//! answered, and prints etcd's report (or one JSON object with `--json`). `keel bench watch`
//! opens many watchers, puts at a fixed rate and reports event delivery latency, lost and
//! duplicate events and the server's memory per watcher. `keel bench compact` measures put and
//! range latency while the server carries out one large compaction. `keel bench apiserver`
//! drives any Kubernetes API server instead: lease renewals as kubelets send them, watched by
//! many watchers, with request and watch delivery latency and lost events.
//!
//! `keel sim nodes` ([`sim`]) simulates a fleet of kubelets against any API server: node
//! registration, lease renewals, status posts and nodes that stop, on few connections, with
//! event writers beside them if asked.

mod apiserver;
mod apiserver_report;
mod apiserver_watch;
mod args;
mod client;
mod compact;
mod grpc;
pub mod https;
mod json_lines;
mod keys;
mod kube_watch;
pub mod kubeconfig;
mod lease;
mod microtime;
mod put;
mod range;
mod report;
mod runner;
pub mod sim;
mod txn_put;
mod watch;
mod watch_wire;

pub use apiserver_report::ApiserverSummary;
pub use args::{
    ApiserverArgs, BenchArgs, BenchCommand, CompactArgs, Consistency, LeaseKeepaliveArgs,
    OutputFormat, PutArgs, RangeArgs, TxnPutArgs, WatchArgs,
};
pub use report::{CompactionSummary, PERCENTILES, Report, RssSamples, Stats, WatchSummary};
pub use sim::SimArgs;
pub use watch::vmrss_kib;

use anyhow::bail;

/// Runs one benchmark and prints its report on stdout.
///
/// Fails with a clear message if an endpoint is malformed or unreachable, or if every request
/// failed; a run where only some requests failed succeeds and reports the errors. A watch or
/// apiserver run that lost, duplicated (or, apiserver, mismatched) an event fails after
/// printing its report, and so does an apiserver run without a single acknowledged update.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let report = execute(&args).await?;
    match args.output() {
        OutputFormat::Simple => print!("{}", report.to_text()),
        OutputFormat::Json => println!("{}", report.to_json()),
    }
    let failed = report.stats.failed();
    if report.stats.succeeded() == 0 && failed > 0 {
        let (first, _) = report
            .stats
            .errors()
            .iter()
            .max_by_key(|(_, n)| **n)
            .expect("failed > 0");
        bail!("all {failed} requests failed, e.g.: {first}");
    }
    if let Some(api) = &report.apiserver {
        if api.updates == 0 {
            let first = [&api.get, &api.put]
                .into_iter()
                .flat_map(|s| s.errors().iter())
                .max_by_key(|(_, n)| **n)
                .map_or("no renewal was attempted".to_string(), |(m, _)| m.clone());
            bail!("apiserver: no lease update succeeded, e.g.: {first}");
        }
        if api.watch_failed() {
            bail!(
                "watch: {} events lost, {} duplicated and {} mismatched (of {} expected)",
                api.lost,
                api.duplicates,
                api.mismatched,
                api.expected
            );
        }
    }
    if let Some(watch) = &report.watch
        && (watch.lost > 0 || watch.duplicates > 0)
    {
        bail!(
            "watch: {} events lost and {} duplicated (of {} expected)",
            watch.lost,
            watch.duplicates,
            watch.expected
        );
    }
    Ok(())
}

/// Runs one benchmark and returns its report without printing it.
pub async fn execute(args: &BenchArgs) -> anyhow::Result<Report> {
    let (op, make) = match &args.command {
        BenchCommand::Watch(watch) => return watch::execute(args, watch).await,
        BenchCommand::LeaseKeepalive(lease) => return lease::execute(args, lease).await,
        BenchCommand::Compact(compact) => return compact::execute(args, compact).await,
        BenchCommand::Apiserver(api) => return apiserver::execute(args, api).await,
        BenchCommand::Put(put) => ("put", put::requests(args, put)?),
        BenchCommand::TxnPut(txn) => ("txn-put", txn_put::requests(args, txn)?),
        BenchCommand::Range(range) => {
            if args.output() == OutputFormat::Simple {
                match range.consistency {
                    Consistency::L => println!("bench with linearizable range"),
                    Consistency::S => println!("bench with serializable range"),
                }
            }
            ("range", range::requests(range))
        }
    };
    runner::run(op, args, make).await
}
