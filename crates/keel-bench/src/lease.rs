//! `keel bench lease-keepalive`: each client grants a lease and renews it on a LeaseKeepAlive
//! stream, one keepalive in flight at a time; each round trip is one latency sample.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::bail;
use futures::channel::mpsc;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use keel_proto::etcdserverpb::lease_client::LeaseClient;
use keel_proto::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseKeepAliveResponse, LeaseRevokeRequest,
};
use tokio::task::JoinSet;
use tonic::Streaming;
use tonic::transport::Channel;

use crate::args::{BenchArgs, LeaseKeepaliveArgs};
use crate::client::{connect_channels, status_message};
use crate::report::{Report, Stats};
use crate::runner::Limiter;

/// One open LeaseKeepAlive stream.
struct KeepAlive {
    requests: mpsc::UnboundedSender<LeaseKeepAliveRequest>,
    responses: Streaming<LeaseKeepAliveResponse>,
}

impl KeepAlive {
    /// Opens a stream and renews `id` once on it (the first message opens the stream).
    async fn open(client: &mut LeaseClient<Channel>, id: i64) -> Result<(Self, i64), String> {
        let (requests, rx) = mpsc::unbounded();
        requests
            .unbounded_send(LeaseKeepAliveRequest { id })
            .map_err(|e| e.to_string())?;
        let responses = client
            .lease_keep_alive(rx)
            .await
            .map_err(|s| status_message(&s))?
            .into_inner();
        let mut stream = Self {
            requests,
            responses,
        };
        let ttl = stream.answer().await?;
        Ok((stream, ttl))
    }

    /// Renews `id` once on this stream; returns the TTL answered.
    async fn renew(&mut self, id: i64) -> Result<i64, String> {
        self.requests
            .unbounded_send(LeaseKeepAliveRequest { id })
            .map_err(|e| e.to_string())?;
        self.answer().await
    }

    async fn answer(&mut self) -> Result<i64, String> {
        match self.responses.message().await {
            Ok(Some(response)) => Ok(response.ttl),
            Ok(None) => Err("keepalive stream closed by the server".to_string()),
            Err(status) => Err(status_message(&status)),
        }
    }
}

/// Runs the lease keepalive benchmark.
pub async fn execute(args: &BenchArgs, lease: &LeaseKeepaliveArgs) -> anyhow::Result<Report> {
    if args.clients == 0 {
        bail!("--clients must be at least 1");
    }
    if lease.ttl <= 0 {
        bail!("--ttl must be positive");
    }
    let channels = connect_channels(&args.endpoints, args.conns, args.dial_timeout).await?;
    let mut clients: Vec<LeaseClient<Channel>> = (0..args.clients)
        .map(|c| LeaseClient::new(channels[c % channels.len()].clone()))
        .collect();

    // Every lease granted and every stream opened before the clock starts.
    let setups = clients.iter_mut().map(|client| async move {
        let granted = client
            .lease_grant(LeaseGrantRequest {
                ttl: lease.ttl,
                id: 0,
            })
            .await
            .map_err(|s| anyhow::anyhow!("cannot grant a lease: {}", status_message(&s)))?
            .into_inner();
        if !granted.error.is_empty() {
            bail!("cannot grant a lease: {}", granted.error);
        }
        let stream = if lease.stream_per_request {
            None
        } else {
            let (stream, _) = KeepAlive::open(client, granted.id)
                .await
                .map_err(|e| anyhow::anyhow!("cannot open a keepalive stream: {e}"))?;
            Some(stream)
        };
        Ok::<_, anyhow::Error>((granted.id, stream))
    });
    let setups = futures::future::try_join_all(setups).await?;

    let progress = ProgressBar::with_draw_target(Some(args.total), ProgressDrawTarget::stderr());
    progress.set_style(
        ProgressStyle::with_template("{prefix} {wide_bar} {pos}/{len} {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    progress.set_prefix("lease-keepalive");
    let next = Arc::new(AtomicU64::new(0));
    let limiter = (args.rate > 0).then(|| Arc::new(Limiter::new(args.rate)));
    let started = Instant::now();
    let mut workers = JoinSet::new();
    for (mut client, (id, mut stream)) in clients.iter().cloned().zip(setups) {
        let (next, limiter, progress, total) =
            (next.clone(), limiter.clone(), progress.clone(), args.total);
        workers.spawn(async move {
            let mut stats = Stats::new();
            while next.fetch_add(1, Ordering::Relaxed) < total {
                if let Some(limiter) = &limiter {
                    limiter.wait().await;
                }
                let sent = Instant::now();
                let answer = match &mut stream {
                    Some(stream) => stream.renew(id).await,
                    None => KeepAlive::open(&mut client, id).await.map(|(_, ttl)| ttl),
                };
                match answer {
                    Ok(ttl) if ttl > 0 => stats.record(sent.elapsed()),
                    Ok(_) => stats.record_error("etcdserver: requested lease not found".into()),
                    Err(message) => {
                        stats.record_error(message);
                        if stream.is_some() {
                            // The stream is gone: reopen it for the next keepalive.
                            stream = KeepAlive::open(&mut client, id).await.ok().map(|(s, _)| s);
                        }
                    }
                }
                progress.inc(1);
            }
            drop(stream);
            (client, id, stats)
        });
    }
    let mut stats = Stats::new();
    let mut leases = Vec::new();
    while let Some(joined) = workers.join_next().await {
        match joined {
            Ok((client, id, s)) => {
                stats.merge(&s);
                leases.push((client, id));
            }
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            Err(err) => stats.record_error(format!("keepalive worker failed: {err}")),
        }
    }
    let elapsed = started.elapsed();
    progress.finish_and_clear();

    // Leave the server as found (best effort).
    let revokes = leases.into_iter().map(|(mut client, id)| async move {
        let _ = client.lease_revoke(LeaseRevokeRequest { id }).await;
    });
    futures::future::join_all(revokes).await;

    Ok(Report {
        op: "lease-keepalive".to_string(),
        elapsed,
        stats,
        watch: None,
    })
}
