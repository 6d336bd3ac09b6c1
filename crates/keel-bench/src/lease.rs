//! `keel bench lease-keepalive`: one lease granted per client before the clock starts, then
//! keepalives renewing them in turn, each client one at a time on its own LeaseKeepAlive
//! stream (or on a new stream per keepalive); each round trip is one latency sample. The load
//! runs like the KV benchmarks' (see [`crate::runner`]); the leases are revoked afterwards.

use std::sync::Arc;

use anyhow::bail;
use keel_proto::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseRevokeRequest, LeaseRevokeResponse,
};

use crate::args::{BenchArgs, LeaseKeepaliveArgs};
use crate::client::{connect, status_message};
use crate::report::Report;
use crate::runner::{self, MakeRequest, Request};

const LEASE_GRANT: &str = "/etcdserverpb.Lease/LeaseGrant";
const LEASE_REVOKE: &str = "/etcdserverpb.Lease/LeaseRevoke";

/// Runs the lease keepalive benchmark.
pub async fn execute(args: &BenchArgs, lease: &LeaseKeepaliveArgs) -> anyhow::Result<Report> {
    if lease.ttl <= 0 {
        bail!("--ttl must be positive");
    }
    let clients = connect(
        &args.endpoints,
        args.conns.min(args.clients.max(1)),
        args.clients,
        args.dial_timeout,
    )
    .await?;
    let grants = clients.iter().map(|client| async move {
        let request = LeaseGrantRequest {
            ttl: lease.ttl,
            id: 0,
        };
        let granted: LeaseGrantResponse = client
            .call(LEASE_GRANT, &request)
            .await
            .map_err(|s| anyhow::anyhow!("cannot grant a lease: {}", status_message(&s)))?;
        if !granted.error.is_empty() {
            bail!("cannot grant a lease: {}", granted.error);
        }
        Ok(granted.id)
    });
    let ids = Arc::new(futures::future::try_join_all(grants).await?);

    let new_stream = lease.stream_per_request;
    let leases = ids.clone();
    let make: MakeRequest = Arc::new(move |n, _rng| Request::KeepAlive {
        id: leases[n as usize % leases.len()],
        new_stream,
    });
    let report = runner::run("lease-keepalive", args, make).await;

    // Leave the server as found (best effort).
    let revokes = ids
        .iter()
        .zip(clients.iter().cycle())
        .map(|(&id, client)| async move {
            let _ = client
                .call::<_, LeaseRevokeResponse>(LEASE_REVOKE, &LeaseRevokeRequest { id })
                .await;
        });
    futures::future::join_all(revokes).await;
    report
}
