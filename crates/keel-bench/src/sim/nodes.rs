//! `keel sim nodes`: the run's steps (see the module comment of [`crate::sim`]) and the
//! cleanup.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, bail};
use http::{Method, StatusCode};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::args::NodesArgs;
use super::objects::Fleet;
use super::readiness::Readiness;
use super::report::{LiveLine, SimSummary};
use super::request::call;
use super::shared::{Phase, Shared};
use super::worker::{Finished, Worker};
use super::{cpu, watch as node_watch};
use crate::https::{Conn, Endpoint};
use crate::kubeconfig;

/// Deletions in flight at once during cleanup.
const CLEANUP_CONCURRENCY: usize = 64;

/// Runs `keel sim nodes` and prints its summary.
pub async fn run(args: NodesArgs) -> anyhow::Result<()> {
    args.validate().map_err(anyhow::Error::msg)?;
    let path = kubeconfig::default_path(args.kubeconfig.as_deref())?;
    let target = kubeconfig::load(&path, args.context.as_deref())?;
    let endpoint = Endpoint::new(target, args.http1, args.dial_timeout)?;
    let fleet = Fleet {
        prefix: args.name_prefix.clone(),
        zones: args.zones,
        lease_duration: args.lease_duration,
    };
    let readiness = Readiness::new(failing(args.count, args.fail.of(args.count)));
    let shared = Arc::new(Shared::new(endpoint.clone(), fleet, &args, readiness));

    // Ctrl-C: the first stops the run (and cleans up), the second the cleanup.
    let (interrupts_tx, interrupts) = watch::channel(0u32);
    let interrupt_listener = tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            interrupts_tx.send_modify(|n| *n += 1);
        }
    });

    let mut control = endpoint.connect().await?;
    let mut summary = SimSummary {
        server: endpoint.server().to_string(),
        protocol: control.protocol().to_string(),
        connections: args.conns,
        kept: args.keep,
        ..SimSummary::default()
    };
    let rv = node_watch::start_rv(&shared, &mut control).await?;
    let (phase, phase_rx) = watch::channel(Phase::Register);
    let watching = tokio::spawn(node_watch::run(
        shared.clone(),
        control.fork().await?,
        rv,
        phase_rx.clone(),
    ));
    let mut workers = Vec::with_capacity(args.conns);
    for w in 0..args.conns {
        let slots = endpoint
            .connect()
            .await?
            .share(args.streams_per_conn)
            .await?;
        let worker = Worker::new(
            w as u32,
            args.conns as u32,
            args.count,
            shared.clone(),
            slots,
        );
        workers.push(tokio::spawn(worker.run(phase_rx.clone())));
    }

    let outcome = simulate(
        &args,
        &shared,
        &mut control,
        &phase,
        &mut workers,
        interrupts.clone(),
        &mut summary,
    )
    .await;
    let _ = phase.send(Phase::Stop);
    let mut launched = Vec::new();
    let mut fatal = None;
    for worker in workers {
        match worker.await {
            Ok(Finished {
                launched: l,
                fatal: f,
            }) => {
                launched.extend(l);
                fatal = fatal.or(f);
            }
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => {}
        }
    }
    let _ = watching.await;
    summary.count(&shared);

    let cleanup = if args.keep {
        Ok(())
    } else {
        cleanup(&shared, &control, launched, interrupts).await
    };
    interrupt_listener.abort();
    if args.json {
        println!("{}", summary.to_json());
    } else {
        print!("{}", summary.to_text());
    }
    cleanup?;
    if let Some(message) = fatal {
        bail!("{message}");
    }
    outcome?;
    if summary.renewals == 0 {
        let first = summary
            .error_messages
            .iter()
            .max_by_key(|(_, n)| **n)
            .map_or("no renewal was attempted".to_string(), |(m, _)| m.clone());
        bail!("no lease renewal succeeded, e.g.: {first}");
    }
    Ok(())
}

/// The nodes `--fail` stops: `failed` of `count`, spread evenly over the numbers (so over the
/// zones and the workers).
fn failing(count: u32, failed: u32) -> Vec<u32> {
    (0..failed)
        .map(|k| ((2 * u64::from(k) + 1) * u64::from(count) / (2 * u64::from(failed))) as u32)
        .collect()
}

/// Steps 2 and 3: registration with its progress bar, then the steady phase with its live
/// line; stops early on Ctrl-C (an error) or when a worker gives up.
#[allow(clippy::too_many_arguments)]
async fn simulate(
    args: &NodesArgs,
    shared: &Arc<Shared>,
    control: &mut Conn,
    phase: &watch::Sender<Phase>,
    workers: &mut [JoinHandle<Finished>],
    mut interrupts: watch::Receiver<u32>,
    summary: &mut SimSummary,
) -> anyhow::Result<()> {
    let tick = Duration::from_millis(200);
    let started = Instant::now();
    let bar =
        ProgressBar::with_draw_target(Some(u64::from(args.count)), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix} {wide_bar} {pos}/{len} {per_sec} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix("registering");
    loop {
        let registered = shared.registered.load(Ordering::Relaxed);
        bar.set_position(registered);
        if registered >= u64::from(args.count) {
            break;
        }
        if workers.iter().any(JoinHandle::is_finished) {
            bar.abandon();
            return Ok(());
        }
        tokio::select! {
            _ = interrupts.changed() => {
                bar.abandon();
                bail!("interrupted");
            }
            _ = tokio::time::sleep(tick) => {}
        }
    }
    bar.finish_and_clear();
    summary.registration_s = started.elapsed().as_secs_f64();

    // The steady phase.
    let own_before = cpu::own();
    let server_before = cpu::server(control, args.request_timeout).await;
    let steady = Instant::now();
    let _ = shared.fail_at.set(steady + shared.fail_after);
    shared.steady.store(true, Ordering::Relaxed);
    let _ = phase.send(Phase::Run);
    let line = ProgressBar::with_draw_target(
        Some(args.duration.as_millis() as u64),
        ProgressDrawTarget::stderr(),
    );
    line.set_style(
        ProgressStyle::with_template("{prefix} {elapsed}/{duration} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    line.set_prefix(format!("{} nodes", args.count));
    let mut live = LiveLine::default();
    let mut last = Instant::now();
    let mut interrupted = false;
    while steady.elapsed() < args.duration {
        let wait = Duration::from_secs(1).min(args.duration - steady.elapsed());
        tokio::select! {
            _ = interrupts.changed() => {
                interrupted = true;
                break;
            }
            _ = tokio::time::sleep(wait) => {}
        }
        if workers.iter().any(JoinHandle::is_finished) {
            break;
        }
        line.set_position(steady.elapsed().as_millis() as u64);
        line.set_message(live.next(shared, last.elapsed().as_secs_f64()));
        last = Instant::now();
    }
    shared.steady.store(false, Ordering::Relaxed);
    summary.duration_s = steady.elapsed().as_secs_f64();
    let own_after = cpu::own();
    let server_after = cpu::server(control, args.request_timeout).await;
    line.finish_and_clear();
    let renewals = shared.renewals.load(Ordering::Relaxed);
    summary.cpu_us_per_renewal = cpu::per_renewal(own_before, own_after, renewals);
    summary.server_cpu_us_per_renewal = cpu::per_renewal(server_before, server_after, renewals);
    if interrupted {
        bail!("interrupted");
    }
    Ok(())
}

/// Step 4: deletes the leases, then the nodes, of every node whose registration was sent; a
/// second Ctrl-C leaves the rest.
async fn cleanup(
    shared: &Arc<Shared>,
    control: &Conn,
    mut launched: Vec<u32>,
    mut interrupts: watch::Receiver<u32>,
) -> anyhow::Result<()> {
    launched.sort_unstable();
    let bar =
        ProgressBar::with_draw_target(Some(launched.len() as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix} {wide_bar} {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix("cleaning up");
    interrupts.mark_unchanged();
    let launched = &launched;
    let bar_ref = &bar;
    let deleting = async {
        let workers = (0..CLEANUP_CONCURRENCY.min(launched.len())).map(|w| async move {
            let mut conn = control.fork().await?;
            let mut failures = Vec::new();
            for &node in launched.iter().skip(w).step_by(CLEANUP_CONCURRENCY) {
                let name = shared.fleet.name(node);
                let lease = format!("{}/{name}", Fleet::leases_path());
                for path in [lease, format!("/api/v1/nodes/{name}")] {
                    match call(
                        shared,
                        &mut conn,
                        Method::DELETE,
                        &path,
                        None,
                        &[StatusCode::NOT_FOUND],
                    )
                    .await
                    {
                        Ok(a) if a.status.is_success() || a.status == StatusCode::NOT_FOUND => {}
                        Ok(a) => failures.push(format!("DELETE {path}: {}", a.error())),
                        Err(e) => failures.push(e),
                    }
                }
                bar_ref.inc(1);
            }
            anyhow::Ok(failures)
        });
        let failures: Vec<String> = futures::future::try_join_all(workers)
            .await?
            .into_iter()
            .flatten()
            .collect();
        if let Some(first) = failures.first() {
            bail!(
                "{} simulated objects could not be deleted, e.g. {first}",
                failures.len()
            );
        }
        anyhow::Ok(())
    };
    let result = tokio::select! {
        result = deleting => result,
        _ = interrupts.changed() => Err(anyhow::anyhow!("interrupted: the simulated nodes were left in place")),
    };
    bar.finish_and_clear();
    result.context("cleanup")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_nodes_are_spread() {
        assert_eq!(failing(100, 4), [12, 37, 62, 87]);
        assert_eq!(failing(50, 1), [25]);
        assert_eq!(failing(3, 3), [0, 1, 2]);
        assert!(failing(10, 0).is_empty());
    }
}
