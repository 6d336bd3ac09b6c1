//! Command-line flags of `keel bench`, named and defaulted like etcd's `tools/benchmark`, and
//! of `keel bench apiserver`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

/// Flags of `keel bench`.
///
/// The flags shared by every benchmark are global: like etcd's `benchmark`, they may be given
/// before the subcommand (`keel bench --conns 8 put`) or after it (`keel bench put --conns 8`).
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// gRPC endpoints, comma separated (`host:port`, with or without `http://`).
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "127.0.0.1:2379"
    )]
    pub endpoints: Vec<String>,

    /// Total number of gRPC connections.
    #[arg(long, global = true, default_value_t = 1)]
    pub conns: usize,

    /// Total number of concurrent clients, spread round-robin over the connections.
    #[arg(long, global = true, default_value_t = 1)]
    pub clients: usize,

    /// Total number of requests.
    #[arg(long, global = true, default_value_t = 10_000)]
    pub total: u64,

    /// Maximum requests per second over all clients (0 is no limit).
    #[arg(long, global = true, default_value_t = 0)]
    pub rate: u64,

    /// Key size of each put, in bytes.
    #[arg(long, global = true, default_value_t = 8)]
    pub key_size: usize,

    /// Value size of each put, in bytes.
    #[arg(long, global = true, default_value_t = 8)]
    pub val_size: usize,

    /// Number of distinct keys written.
    #[arg(long, global = true, default_value_t = 1)]
    pub key_space_size: u64,

    /// Put keys in order (request i writes key i mod key-space-size) instead of at random;
    /// txn-put always writes in order, as in etcd.
    #[arg(long, global = true)]
    pub sequential_keys: bool,

    /// Timeout for establishing each gRPC connection.
    #[arg(long, global = true, default_value = "5s", value_parser = parse_duration)]
    pub dial_timeout: Duration,

    /// Output format of the report.
    #[arg(short = 'w', long, global = true, value_enum, default_value_t = OutputFormat::Simple)]
    pub write_out: OutputFormat,

    /// Print the report as one JSON object (same as `-w json`).
    #[arg(long, global = true)]
    pub json: bool,

    /// The benchmark to run.
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// Output format of a benchmark report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Human-readable report in the layout of etcd's `benchmark`.
    Simple,
    /// One JSON object on one line, for scripts.
    Json,
}

/// The benchmarks `keel bench` can run.
#[derive(Debug, Clone, Subcommand)]
pub enum BenchCommand {
    /// Benchmark Put.
    Put(PutArgs),
    /// Benchmark Range.
    Range(RangeArgs),
    /// Benchmark Txn requests made of puts.
    TxnPut(TxnPutArgs),
    /// Benchmark watch: event delivery latency, lost and duplicate events, server memory.
    Watch(WatchArgs),
    /// Benchmark lease keepalive round trips on LeaseKeepAlive streams.
    LeaseKeepalive(LeaseKeepaliveArgs),
    /// Benchmark put and range latency while the server compacts its history.
    Compact(CompactArgs),
    /// Benchmark a Kubernetes API server: lease renewals (GET + PUT, like kubelets) watched by
    /// many watchers; request and watch delivery latency, conflicts and lost events.
    Apiserver(Box<ApiserverArgs>),
}

/// Flags of `keel bench put`.
#[derive(Debug, Clone, Args)]
pub struct PutArgs {
    /// Prefix prepended to every key.
    #[arg(long, default_value = "")]
    pub prefix: String,
}

/// Flags of `keel bench range`.
#[derive(Debug, Clone, Args)]
pub struct RangeArgs {
    /// Key to read (with `--prefix`, the prefix to read).
    pub key: String,

    /// End of the range, exclusive (absent: the single key).
    pub end: Option<String>,

    /// Linearizable (`l`) or serializable (`s`) reads.
    #[arg(long, value_enum, default_value_t = Consistency::L)]
    pub consistency: Consistency,

    /// Maximum number of keys per response (0 is no limit).
    #[arg(long, default_value_t = 0)]
    pub limit: i64,

    /// Return only the count of keys.
    #[arg(long, conflicts_with = "keys_only")]
    pub count_only: bool,

    /// Return only the keys, without values.
    #[arg(long)]
    pub keys_only: bool,

    /// Read every key that starts with KEY.
    #[arg(long, conflicts_with = "end")]
    pub prefix: bool,
}

/// Read consistency of `keel bench range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Consistency {
    /// Linearizable: a read index round through the leader.
    L,
    /// Serializable: served from the member's local state.
    S,
}

/// Flags of `keel bench txn-put`.
#[derive(Debug, Clone, Args)]
pub struct TxnPutArgs {
    /// Number of puts in each transaction.
    #[arg(long, default_value_t = 1)]
    pub txn_ops: u64,
}

/// Flags of `keel bench watch`.
///
/// Opens `--streams` Watch streams (stream `i` on connection `i % conns`) with
/// `--watch-per-stream` watchers each, then puts `--put-total` keys at `--put-rate` through
/// `--clients` clients. By default every watcher watches the whole `--prefix`, so each receives
/// every put; with `--watched-key-total N` watcher `w` watches the single key `w mod N` and put
/// `i` writes key `i mod N`, as in etcd's benchmark. Each value carries the number of its put, so
/// every event is matched to the put that caused it: delivery latency runs from the moment the
/// put was sent to the moment its event was received.
#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// Number of Watch streams.
    #[arg(long, default_value_t = 10)]
    pub streams: usize,

    /// Watchers on each stream.
    #[arg(long, default_value_t = 100)]
    pub watch_per_stream: usize,

    /// Watch this many single keys instead of the whole prefix (0: every watcher watches the
    /// prefix and receives every put).
    #[arg(long, default_value_t = 0)]
    pub watched_key_total: u64,

    /// Prefix of every key put (and the range watched).
    #[arg(long, default_value = "/keel-bench/watch/")]
    pub prefix: String,

    /// Puts per second over all clients (0 is no limit).
    #[arg(long, default_value_t = 0)]
    pub put_rate: u64,

    /// Number of puts (0: only open the watchers, measure memory and close them).
    #[arg(long, default_value_t = 1000)]
    pub put_total: u64,

    /// Ask for the previous key-value in every event.
    #[arg(long)]
    pub prev_kv: bool,

    /// PID of the server (same machine): its VmRSS is read from /proc before and after opening
    /// the streams and the watchers, to give memory per stream and per idle watcher.
    #[arg(long)]
    pub server_pid: Option<u32>,

    /// Pause before each VmRSS reading, so the server settles.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub settle: Duration,

    /// After the last put is answered, how long to wait for missing events before counting them
    /// as lost.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
}

/// Flags of `keel bench lease-keepalive`.
///
/// One lease is granted per client of `--clients` before the clock starts; then each client
/// opens one LeaseKeepAlive stream and sends keepalives on it one at a time, renewing the
/// leases in turn, until `--total` keepalives are answered over all clients; each round trip
/// (request sent to response received) is one sample.
#[derive(Debug, Clone, Args)]
pub struct LeaseKeepaliveArgs {
    /// TTL of the granted leases, in seconds (etcd's benchmark grants 100).
    #[arg(long, default_value_t = 100)]
    pub ttl: i64,

    /// Open a new LeaseKeepAlive stream for every keepalive, as etcd's `KeepAliveOnce`-based
    /// benchmark does, instead of one stream per client.
    #[arg(long)]
    pub stream_per_request: bool,
}

/// Flags of `keel bench compact`.
///
/// Half of `--clients` put random keys of `--key-space-size`, the other half read one random
/// key each. After `--baseline` of this load, one physical Compact to the store's revision is
/// sent; the load stops when it is answered. Reports the latencies of the requests sent during
/// the compaction (each kind alone and together), those of the baseline, and the compaction's
/// duration.
#[derive(Debug, Clone, Args)]
pub struct CompactArgs {
    /// Load before the compaction starts, measured as the baseline.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub baseline: Duration,

    /// Linearizable (`l`) or serializable (`s`) reads.
    #[arg(long, value_enum, default_value_t = Consistency::L)]
    pub consistency: Consistency,
}

/// Flags of `keel bench apiserver`.
///
/// Reaches the API server through a kubeconfig (server URL, CA, bearer token or client
/// certificate). In a fresh namespace `keel-bench-<random>` (created, and deleted at the end),
/// each of `--clients` renewers creates its `--leases-per-client` coordination.k8s.io/v1 Leases
/// and then renews them in turn as the kubelet renews its node lease: GET the lease, set
/// `spec.renewTime` to now, PUT it with the resourceVersion read (on 409 Conflict: GET again
/// and retry), all renewers together paced to `--rate` updates per second for `--duration`.
/// Meanwhile `--watchers` watchers each watch the namespace's leases from the resourceVersion
/// of the initial list; every acknowledged update must reach every watcher as a MODIFIED event
/// with the resourceVersion the PUT returned. Delivery latency runs from the PUT being sent (its
/// `renewTime`) to the event being received. After the updates, the watchers are given
/// `--drain-timeout` to catch up; an acknowledged update a watcher never saw is lost, and a
/// lost, duplicated or mismatched event makes the run fail after its report.
///
/// `--clients` and `--rate` are this benchmark's own (defaults 100 and 2000); the other etcd
/// flags (`--endpoints`, `--conns`, `--total`, key and value sizes) do not apply; `--json` and
/// `--dial-timeout` do.
#[derive(Debug, Clone, Args)]
pub struct ApiserverArgs {
    /// The kubeconfig to use (default: the first file of $KUBECONFIG, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    pub context: Option<String>,

    /// Lease renewers, each renewing its own leases one request at a time.
    #[arg(long, default_value_t = 100)]
    pub clients: usize,

    /// Leases each renewer owns (and renews in turn).
    #[arg(long, default_value_t = 1)]
    pub leases_per_client: usize,

    /// Watchers of the namespace's leases.
    #[arg(long, default_value_t = 100)]
    pub watchers: usize,

    /// Lease updates per second over all renewers (0 is no limit).
    #[arg(long, default_value_t = 2000)]
    pub rate: u64,

    /// How long the renewers run.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Namespace to use (it must exist; its benchmark leases are deleted at the end). Default: a
    /// fresh `keel-bench-<random>` namespace, created and deleted.
    #[arg(long)]
    pub namespace: Option<String>,

    /// Renewers sharing one HTTP/2 connection.
    #[arg(long, default_value_t = 10)]
    pub clients_per_conn: usize,

    /// Watchers sharing one HTTP/2 connection.
    #[arg(long, default_value_t = 10)]
    pub watchers_per_conn: usize,

    /// Speak HTTP/1.1 (one keep-alive connection per renewer and per watcher) even if the
    /// server offers HTTP/2.
    #[arg(long)]
    pub http1: bool,

    /// After the last update is answered, how long to wait for the watchers to catch up before
    /// counting missing events as lost.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub drain_timeout: Duration,

    /// Timeout of each GET and PUT.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: Duration,
}

impl BenchArgs {
    /// The output format chosen by `--json` or `-w`.
    pub fn output(&self) -> OutputFormat {
        if self.json {
            OutputFormat::Json
        } else {
            self.write_out
        }
    }
}

/// Parses durations such as `500ms`, `5s`, `2m` or a bare number of seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?}"))?;
    let seconds = match unit {
        "" | "s" => number,
        "ms" => number / 1e3,
        "us" | "µs" => number / 1e6,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => {
            return Err(format!(
                "invalid duration unit in {text:?} (use ms, s, m or h)"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("invalid duration {text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn apiserver(line: &str) -> (BenchArgs, ApiserverArgs) {
        use clap::Parser;
        let cli = Cli::try_parse_from(std::iter::once("x").chain(line.split_whitespace()))
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        match &cli.bench.command {
            BenchCommand::Apiserver(a) => {
                let a = (**a).clone();
                (cli.bench, a)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn apiserver_has_its_own_clients_and_rate() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let (_, a) = apiserver("apiserver");
        assert_eq!((a.clients, a.rate, a.watchers), (100, 2000, 100));
        assert_eq!(a.duration, Duration::from_secs(30));
        let (_, a) = apiserver("apiserver --clients 7 --rate 50 --duration 2s");
        assert_eq!(
            (a.clients, a.rate, a.duration),
            (7, 50, Duration::from_secs(2))
        );
        let (b, a) = apiserver("--clients 5 --json apiserver --watchers 3");
        assert_eq!((a.clients, a.watchers), (5, 3));
        assert!(b.json);
        // The etcd benchmarks keep their own defaults.
        let cli = <Cli as clap::Parser>::try_parse_from(["x", "put"]).unwrap();
        assert_eq!((cli.bench.clients, cli.bench.rate), (1, 0));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("5 parsecs").is_err());
    }
}
