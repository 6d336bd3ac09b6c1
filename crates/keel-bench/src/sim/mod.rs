//! `keel sim`: simulators that load a Kubernetes API server as a fleet of real components
//! would. `keel sim nodes` is a kwok-like kubelet simulator for any API server reached
//! through a kubeconfig.
//!
//! A run of `keel sim nodes` ([`nodes`]):
//! 1. connects (`--conns` HTTP/2 connections), reads the resourceVersion to watch the
//!    simulated Nodes from and opens that one watch ([`watch`]);
//! 2. registers the nodes, a bounded number at a time, with a progress bar; each node starts
//!    heartbeating as soon as it is registered ([`worker`], [`schedule`]);
//! 3. the steady phase: for `--duration`, every node renews its lease as the kubelet does
//!    ([`renewal`]) and posts its status; the chosen nodes stop at `--fail-after`, and the
//!    watch times their way to NotReady ([`readiness`]); with `--event-writers`, writers
//!    create Events about the nodes beside them ([`events`]); a live line shows the rates;
//! 4. stops, prints the summary ([`report`]) with the CPU per renewal ([`cpu`]) and deletes
//!    the Leases and Nodes (unless `--keep`), also after Ctrl-C or SIGTERM (a second one
//!    leaves them).
//!
//! Cheap enough for 50,000 nodes from one process on two cores: no task per node (one task
//! per connection drives its nodes from a deadline queue), HTTP/2 multiplexing, and a renewal
//! that rewrites the bytes of the lease last written instead of parsing it.

mod args;
mod cpu;
mod events;
mod kubelet_event;
mod nodes;
mod objects;
mod readiness;
mod renewal;
mod report;
mod request;
mod schedule;
mod shared;
mod watch;
mod worker;

pub use args::{Fail, NodesArgs, SimArgs, SimCommand};
pub use report::SimSummary;

/// Runs one simulator and prints its report on stdout.
pub async fn run(args: SimArgs) -> anyhow::Result<()> {
    match args.command {
        SimCommand::Nodes(nodes) => nodes::run(nodes).await,
    }
}
