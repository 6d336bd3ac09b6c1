//! `keel sim nodes`: the run's steps (see the module comment of [`crate::sim`]) and the
//! cleanup.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, bail};
use http::{Method, StatusCode};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::signal::unix::{SignalKind, signal};
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
use super::{cpu, events, watch as node_watch};
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

    // Ctrl-C or SIGTERM: the first stops the run (and cleans up), the second the cleanup.
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let (interrupts_tx, interrupts) = watch::channel(0u32);
    let interrupt_listener = tokio::spawn(async move {
        loop {
            tokio::select! {
                signal = tokio::signal::ctrl_c() => if signal.is_err() { break },
                _ = terminate.recv() => {}
            }
            interrupts_tx.send_modify(|n| *n += 1);
        }
    });

    // Step 1: every connection is up before the first node registers.
    let mut control = endpoint.connect().await?;
    let rv = node_watch::start_rv(&shared, &mut control).await?;
    let watch_conn = control.fork().await?;
    let mut slots = Vec::with_capacity(args.conns);
    for _ in 0..args.conns {
        slots.push(
            endpoint
                .connect()
                .await?
                .share(args.streams_per_conn)
                .await?,
        );
    }
    let (phase, phase_rx) = watch::channel(Phase::Register);
    let watching = tokio::spawn(node_watch::run(
        shared.clone(),
        watch_conn,
        rv,
        phase_rx.clone(),
    ));
    let workers = slots
        .into_iter()
        .enumerate()
        .map(|(w, slots)| {
            let worker = Worker::new(
                w as u32,
                args.conns as u32,
                args.count,
                shared.clone(),
                slots,
            );
            tokio::spawn(worker.run(phase_rx.clone()))
        })
        .collect();
    let writers = events::start(&shared, &endpoint, &args, &phase_rx).await?;
    let mut run = Run {
        summary: SimSummary {
            server: endpoint.server().to_string(),
            protocol: control.protocol().to_string(),
            connections: args.conns,
            kept: args.keep,
            event_rate: args.event_rate,
            ..SimSummary::default()
        },
        args,
        shared,
        control,
        phase,
        workers,
        interrupts,
    };

    // Steps 2 and 3, then the stop.
    let outcome = match run.register().await {
        Ok(true) => run.steady().await,
        Ok(false) => Ok(()),
        Err(e) => Err(e),
    };
    let _ = run.phase.send(Phase::Stop);
    let mut launched = Vec::new();
    let mut fatal = None;
    for worker in std::mem::take(&mut run.workers) {
        match worker.await {
            Ok(finished) => {
                launched.extend(finished.launched);
                fatal = fatal.or(finished.fatal);
            }
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => {}
        }
    }
    writers.join().await;
    let _ = watching.await;
    run.summary.count(&run.shared);

    // Step 4.
    let cleanup = if run.args.keep {
        Ok(())
    } else {
        cleanup(&run.shared, &run.control, launched, run.interrupts).await
    };
    interrupt_listener.abort();
    let summary = run.summary;
    if run.args.json {
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
        let first = most_common(&summary.error_messages, "no renewal was attempted");
        bail!("no lease renewal succeeded, e.g.: {first}");
    }
    if summary.event_writers > 0 && summary.events_created == 0 {
        let first = most_common(&summary.events_error_messages, "no event was attempted");
        bail!("no event was created, e.g.: {first}");
    }
    Ok(())
}

/// The most frequent of `messages`, or `none` without any.
fn most_common(messages: &std::collections::BTreeMap<String, u64>, none: &str) -> String {
    messages
        .iter()
        .max_by_key(|(_, n)| **n)
        .map_or(none.to_string(), |(m, _)| m.clone())
}

/// The nodes `--fail` stops: `failed` of `count`, spread evenly over the numbers (so over the
/// zones and the workers).
fn failing(count: u32, failed: u32) -> Vec<u32> {
    (0..failed)
        .map(|k| ((2 * u64::from(k) + 1) * u64::from(count) / (2 * u64::from(failed))) as u32)
        .collect()
}

/// A progress bar on stderr of `len` steps.
fn progress(len: u64, template: &str, prefix: String) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(prefix);
    bar
}

/// A run under way.
struct Run {
    args: NodesArgs,
    shared: Arc<Shared>,
    /// The connection for the run's own requests (lists, metrics, cleanup).
    control: Conn,
    phase: watch::Sender<Phase>,
    workers: Vec<JoinHandle<Finished>>,
    interrupts: watch::Receiver<u32>,
    summary: SimSummary,
}

impl Run {
    /// Whether a worker stopped (it gave up on a node).
    fn worker_stopped(&self) -> bool {
        self.workers.iter().any(JoinHandle::is_finished)
    }

    /// Step 2: waits, with a progress bar, until every node is registered (true) or a worker
    /// gave up (false); Ctrl-C is an error.
    async fn register(&mut self) -> anyhow::Result<bool> {
        let started = Instant::now();
        let count = u64::from(self.args.count);
        let bar = progress(
            count,
            "{prefix} {wide_bar} {pos}/{len} {per_sec} {elapsed}",
            "registering".into(),
        );
        loop {
            let registered = self.shared.registered.load(Ordering::Relaxed);
            bar.set_position(registered);
            if registered >= count {
                break;
            }
            if self.worker_stopped() {
                bar.abandon();
                return Ok(false);
            }
            tokio::select! {
                _ = self.interrupts.changed() => {
                    bar.abandon();
                    bail!("interrupted");
                }
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
        bar.finish_and_clear();
        self.summary.registration_s = started.elapsed().as_secs_f64();
        Ok(true)
    }

    /// Step 3: the steady phase, with its live line, measured from before to after it; the
    /// failing nodes stop `--fail-after` into it. Ctrl-C ends it early, as an error.
    async fn steady(&mut self) -> anyhow::Result<()> {
        let (duration, timeout) = (self.args.duration, self.args.request_timeout);
        let own_before = cpu::own();
        let server_before = cpu::server(&mut self.control, timeout).await;
        let started = Instant::now();
        let _ = self.shared.fail_at.set(started + self.shared.fail_after);
        self.shared.steady.store(true, Ordering::Relaxed);
        let _ = self.phase.send(Phase::Run);
        let prefix = format!("{} nodes", self.args.count);
        let line = progress(
            duration.as_millis() as u64,
            "{prefix} {elapsed}/{duration} {msg}",
            prefix,
        );
        let mut live = LiveLine::default();
        let mut last = Instant::now();
        let mut interrupted = false;
        while started.elapsed() < duration && !self.worker_stopped() {
            let wait = Duration::from_secs(1).min(duration.saturating_sub(started.elapsed()));
            tokio::select! {
                _ = self.interrupts.changed() => {
                    interrupted = true;
                    break;
                }
                _ = tokio::time::sleep(wait) => {}
            }
            line.set_position(started.elapsed().as_millis() as u64);
            line.set_message(live.next(&self.shared, last.elapsed().as_secs_f64()));
            last = Instant::now();
        }
        self.shared.steady.store(false, Ordering::Relaxed);
        self.summary.duration_s = started.elapsed().as_secs_f64();
        let own_after = cpu::own();
        let server_after = cpu::server(&mut self.control, timeout).await;
        line.finish_and_clear();
        let renewals = self.shared.renewals.load(Ordering::Relaxed);
        self.summary.cpu_us_per_renewal = cpu::per_renewal(own_before, own_after, renewals);
        self.summary.server_cpu_us_per_renewal =
            cpu::per_renewal(server_before, server_after, renewals);
        if interrupted {
            bail!("interrupted");
        }
        Ok(())
    }
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
    let template = "{prefix} {wide_bar} {pos}/{len} {elapsed}";
    let bar = progress(launched.len() as u64, template, "cleaning up".into());
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
