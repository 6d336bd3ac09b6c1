//! The flags of `keel sim nodes`, and how many nodes `--fail` stops.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::args::parse_duration;

/// `keel sim`: simulators that drive a Kubernetes API server as a fleet of components would.
#[derive(Debug, Clone, Args)]
pub struct SimArgs {
    /// What to simulate.
    #[command(subcommand)]
    pub command: SimCommand,
}

/// The simulators.
#[derive(Debug, Clone, Subcommand)]
pub enum SimCommand {
    /// Simulate kubelets: register Nodes with their Leases, renew the leases and post node
    /// status as the kubelet does, stop some to watch them go NotReady, then clean up.
    Nodes(NodesArgs),
}

/// `keel sim nodes`.
///
/// Registers `--count` Nodes with a kubelet's status (conditions, capacity, allocatable,
/// addresses, nodeInfo) and their Leases in `kube-node-lease` (holderIdentity the node,
/// `--lease-duration`, owner reference to the Node), then for `--duration` renews each lease
/// every `--renew-interval` (jitter 0.04) as the kubelet's lease controller does and posts each
/// node's status every `--status-interval`. With `--fail`, that many nodes stop `--fail-after`
/// into the run, and the time each takes to turn NotReady is measured from its last heartbeat.
/// With `--event-writers`, that many writers create core/v1 Events about the nodes through
/// the API server during the run, `--event-rate` a second in all (0: as fast as they can).
/// At the end it prints a summary (one JSON object with `--json`) and deletes the Leases and
/// Nodes it simulated (`--keep` leaves them; the Events are left to expire with the server's
/// `--event-ttl`).
#[derive(Debug, Clone, Args)]
pub struct NodesArgs {
    /// The kubeconfig to use (default: the first file of $KUBECONFIG, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    pub context: Option<String>,

    /// Nodes to simulate.
    #[arg(long, default_value_t = 100)]
    pub count: u32,

    /// How often each node renews its lease (the kubelet's: a quarter of the lease duration).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub renew_interval: Duration,

    /// `spec.leaseDurationSeconds` of the node leases (the kubelet's nodeLeaseDurationSeconds).
    #[arg(long, default_value_t = 40)]
    pub lease_duration: u32,

    /// How often each node posts its status (the kubelet's nodeStatusReportFrequency).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub status_interval: Duration,

    /// How long the simulation runs once every node is registered.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub duration: Duration,

    /// Nodes to stop: a count (`5`) or a share of `--count` (`1%`).
    #[arg(long, default_value = "0", value_parser = parse_fail)]
    pub fail: Fail,

    /// When the `--fail` nodes stop, counted from the start of the simulation.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub fail_after: Duration,

    /// Zones the nodes are spread over (label topology.kubernetes.io/zone).
    #[arg(long, default_value_t = 3)]
    pub zones: u32,

    /// Node `i` is named this prefix followed by `i`.
    #[arg(long, default_value = "keel-sim-node-")]
    pub name_prefix: String,

    /// HTTP/2 connections the nodes are spread over.
    #[arg(long, default_value_t = 4)]
    pub conns: usize,

    /// Requests in flight at most on each connection.
    #[arg(long, default_value_t = 64)]
    pub streams_per_conn: usize,

    /// Timeout of each request (the kubelet's heartbeat client uses its status update period).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Timeout of each connection's establishment.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub dial_timeout: Duration,

    /// Speak HTTP/1.1 (one keep-alive connection per request in flight) even if the server
    /// offers HTTP/2.
    #[arg(long)]
    pub http1: bool,

    /// Event writers: each creates core/v1 Events about the nodes (as a kubelet reports them),
    /// one at a time, from the start of the steady phase to its end, at the lowest CPU
    /// priority (they stand for clients on other machines).
    #[arg(long, default_value_t = 0)]
    pub event_writers: u32,

    /// Events a second offered by all the writers together; 0: each writes as fast as the
    /// server answers (a closed loop, the flood).
    #[arg(long, default_value_t = 0)]
    pub event_rate: u32,

    /// Leave the Nodes and Leases in place at the end.
    #[arg(long)]
    pub keep: bool,

    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// How many nodes `--fail` stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fail {
    /// This many.
    Count(u32),
    /// This percentage of `--count`, rounded up.
    Percent(f64),
}

impl Fail {
    /// The number of nodes to stop out of `count`.
    pub fn of(self, count: u32) -> u32 {
        match self {
            Fail::Count(n) => n.min(count),
            Fail::Percent(p) => ((f64::from(count) * p / 100.0).ceil() as u32).min(count),
        }
    }
}

/// Parses `--fail`: a count or a percentage.
fn parse_fail(text: &str) -> Result<Fail, String> {
    let text = text.trim();
    if let Some(percent) = text.strip_suffix('%') {
        let p: f64 = percent
            .trim()
            .parse()
            .map_err(|_| format!("invalid percentage {text:?}"))?;
        if !(0.0..=100.0).contains(&p) {
            return Err(format!("{text:?} is not between 0% and 100%"));
        }
        return Ok(Fail::Percent(p));
    }
    text.parse()
        .map(Fail::Count)
        .map_err(|_| format!("invalid count {text:?} (a number of nodes, or a share like 1%)"))
}

impl NodesArgs {
    /// The checks clap cannot make alone.
    pub fn validate(&self) -> Result<(), String> {
        if self.count == 0 {
            return Err("--count must be at least 1".into());
        }
        if self.renew_interval.is_zero() || self.status_interval.is_zero() {
            return Err("--renew-interval and --status-interval must be positive".into());
        }
        if self.conns == 0 || self.streams_per_conn == 0 {
            return Err("--conns and --streams-per-conn must be at least 1".into());
        }
        if self.zones == 0 {
            return Err("--zones must be at least 1".into());
        }
        if self.event_rate > 0 && self.event_writers == 0 {
            return Err("--event-rate needs --event-writers".into());
        }
        if self.fail.of(self.count) > 0 && self.fail_after >= self.duration {
            return Err(format!(
                "--fail-after ({:?}) must be shorter than --duration ({:?})",
                self.fail_after, self.duration
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        sim: SimCommand,
    }

    fn nodes(line: &str) -> NodesArgs {
        let words = std::iter::once("sim").chain(line.split_whitespace());
        match Cli::try_parse_from(words).expect("parses").sim {
            SimCommand::Nodes(args) => args,
        }
    }

    #[test]
    fn defaults_and_flags() {
        let a = nodes("nodes");
        assert_eq!(a.count, 100);
        assert_eq!(a.renew_interval, Duration::from_secs(10));
        assert_eq!(a.status_interval, Duration::from_secs(300));
        assert_eq!(a.duration, Duration::from_secs(600));
        assert_eq!(a.fail, Fail::Count(0));
        assert_eq!(a.lease_duration, 40);
        assert_eq!((a.event_writers, a.event_rate), (0, 0));
        assert!(a.validate().is_ok());
        let a = nodes("nodes --event-writers 4 --event-rate 500");
        assert_eq!((a.event_writers, a.event_rate), (4, 500));
        assert!(a.validate().is_ok());
        let a = nodes("nodes --event-rate 500");
        assert!(a.validate().unwrap_err().contains("--event-writers"));
        let a = nodes(
            "nodes --count 50 --renew-interval 1s --duration 10s --fail 1% --fail-after 2s --json --keep",
        );
        assert_eq!((a.count, a.fail.of(a.count)), (50, 1));
        assert!(a.json && a.keep);
        assert!(a.validate().is_ok());
        let a = nodes("nodes --fail 3 --fail-after 10m --duration 10m");
        assert!(a.validate().unwrap_err().contains("--fail-after"));
        assert!(nodes("nodes --count 0").validate().is_err());
    }

    #[test]
    fn fail_shares() {
        assert_eq!(parse_fail("5"), Ok(Fail::Count(5)));
        assert_eq!(parse_fail("1%"), Ok(Fail::Percent(1.0)));
        assert_eq!(Fail::Percent(1.0).of(50_000), 500);
        assert_eq!(Fail::Percent(1.0).of(50), 1);
        assert_eq!(Fail::Percent(0.0).of(50), 0);
        assert_eq!(Fail::Count(80).of(50), 50);
        assert!(parse_fail("150%").is_err());
        assert!(parse_fail("some").is_err());
    }
}
