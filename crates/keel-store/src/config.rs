//! The flags of `keel store`: etcd's names, defaults and `ETCD_*` environment variables, so
//! scripts written for etcd run unchanged.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

/// etcd's default `--quota-backend-bytes` (2 GiB) when the flag is 0.
pub const DEFAULT_QUOTA_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// How `--auto-compaction-retention` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompactionMode {
    /// Retain a time window (e.g. `1h`, `30m`; a bare number is hours).
    Periodic,
    /// Retain a number of revisions.
    Revision,
}

/// Configuration of one `keel store` member.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Human-readable name of this member.
    #[arg(long, env = "ETCD_NAME", default_value = "default")]
    pub name: String,
    /// Path to the data directory [default: ${name}.etcd].
    #[arg(long, env = "ETCD_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Comma-separated URLs to listen on for client traffic (gRPC and HTTP on the same port).
    #[arg(
        long,
        env = "ETCD_LISTEN_CLIENT_URLS",
        default_value = "http://localhost:2379"
    )]
    pub listen_client_urls: String,
    /// Comma-separated client URLs advertised to the cluster and to clients.
    #[arg(
        long,
        env = "ETCD_ADVERTISE_CLIENT_URLS",
        default_value = "http://localhost:2379"
    )]
    pub advertise_client_urls: String,
    /// Comma-separated URLs to listen on for peer traffic.
    #[arg(
        long,
        env = "ETCD_LISTEN_PEER_URLS",
        default_value = "http://localhost:2380"
    )]
    pub listen_peer_urls: String,
    /// Comma-separated peer URLs advertised to the rest of the cluster.
    #[arg(
        long,
        env = "ETCD_INITIAL_ADVERTISE_PEER_URLS",
        default_value = "http://localhost:2380"
    )]
    pub initial_advertise_peer_urls: String,
    /// Initial cluster configuration for bootstrapping: `name=peerURL,...`.
    #[arg(
        long,
        env = "ETCD_INITIAL_CLUSTER",
        default_value = "default=http://localhost:2380"
    )]
    pub initial_cluster: String,
    /// Initial cluster state: `new` or `existing`.
    #[arg(long, env = "ETCD_INITIAL_CLUSTER_STATE", default_value = "new", value_parser = ["new", "existing"])]
    pub initial_cluster_state: String,
    /// Initial cluster token for the cluster during bootstrap.
    #[arg(
        long,
        env = "ETCD_INITIAL_CLUSTER_TOKEN",
        default_value = "etcd-cluster"
    )]
    pub initial_cluster_token: String,
    /// Reject membership changes that could cost the cluster its quorum (etcd's
    /// `--strict-reconfig-check`: enough started members, a connected quorum).
    #[arg(
        long,
        env = "ETCD_STRICT_RECONFIG_CHECK",
        default_value_t = true,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub strict_reconfig_check: bool,
    /// Raise the NOSPACE alarm when the backend exceeds this many bytes (0 = 2 GiB).
    #[arg(long, env = "ETCD_QUOTA_BACKEND_BYTES", default_value_t = 0)]
    pub quota_backend_bytes: u64,
    /// Maximum client request size in bytes the server will accept.
    #[arg(long, env = "ETCD_MAX_REQUEST_BYTES", default_value_t = 1_572_864)]
    pub max_request_bytes: u32,
    /// Maximum number of operations permitted in a transaction.
    #[arg(long, env = "ETCD_MAX_TXN_OPS", default_value_t = 128)]
    pub max_txn_ops: u32,
    /// Maximum concurrent streams that each client can open at a time (HTTP/2's
    /// SETTINGS_MAX_CONCURRENT_STREAMS on every client connection; 0 and the default, 2^32-1,
    /// set no limit, as in etcd and grpc-go).
    #[arg(long, env = "ETCD_MAX_CONCURRENT_STREAMS", default_value_t = u32::MAX)]
    pub max_concurrent_streams: u32,
    /// Interpretation of --auto-compaction-retention: `periodic` or `revision`.
    #[arg(
        long,
        env = "ETCD_AUTO_COMPACTION_MODE",
        value_enum,
        default_value = "periodic"
    )]
    pub auto_compaction_mode: CompactionMode,
    /// Auto compaction retention (periodic: `1h`, `30m`, or hours; revision: a count). 0 disables.
    #[arg(long, env = "ETCD_AUTO_COMPACTION_RETENTION", default_value = "0")]
    pub auto_compaction_retention: String,
    /// Log format: `console` (human-readable lines, coloured only on a terminal) or `json`
    /// (one JSON object per line: time, level, component, member, message and fields).
    #[arg(long, env = "ETCD_LOG_FORMAT", default_value = "console", value_parser = ["console", "json"])]
    pub log_format: String,
    /// Number of committed entries between log snapshots (after which the WAL is purged).
    #[arg(long, env = "ETCD_SNAPSHOT_COUNT", default_value_t = 10_000)]
    pub snapshot_count: u64,
    /// Size in bytes at which a WAL segment is closed and the next one started (64 MiB, as in
    /// etcd). Hidden: only tests that want segment rolls and purges to happen often set it.
    #[arg(long, hide = true, default_value_t = 64 * 1024 * 1024)]
    pub wal_segment_bytes: u64,
    /// Time (in milliseconds) of a heartbeat interval.
    #[arg(long, env = "ETCD_HEARTBEAT_INTERVAL", default_value_t = 100)]
    pub heartbeat_interval: u64,
    /// Time (in milliseconds) for an election to timeout.
    #[arg(long, env = "ETCD_ELECTION_TIMEOUT", default_value_t = 1000)]
    pub election_timeout: u64,
    /// The etcd version reported by Status and /version. Clients such as kube-apiserver enable
    /// features by this version, so it must not claim what keel does not serve yet. The
    /// default is 3.5.13, the first 3.5 release whose watch progress requests kube-apiserver
    /// trusts (`endpointSupportsRequestWatchProgress`: ≥ 3.5.13 or ≥ 3.4.31): keel answers a
    /// progress request only once every watcher of the stream is caught up, as that release
    /// does, so a kube-apiserver on keel serves consistent lists from its watch cache.
    #[arg(long, env = "ETCD_EMULATED_ETCD_VERSION", default_value = "3.5.13")]
    pub emulated_etcd_version: String,
    /// Period of the progress notifications of `progress_notify` watchers (Go duration, e.g.
    /// `10m`, `500ms`; at least 100ms, as etcd enforces).
    #[arg(
        long,
        env = "ETCD_EXPERIMENTAL_WATCH_PROGRESS_NOTIFY_INTERVAL",
        default_value = "10m",
        value_parser = keel_process::go_duration::parse
    )]
    pub experimental_watch_progress_notify_interval: Duration,
    /// Specify the cost / strength of the bcrypt algorithm for hashing auth passwords. Valid
    /// values are between 4 and 31.
    #[arg(long, env = "ETCD_BCRYPT_COST", default_value_t = crate::auth::DEFAULT_BCRYPT_COST)]
    pub bcrypt_cost: u32,
}

/// etcd's minimum watch progress notification period.
pub const MIN_WATCH_PROGRESS_NOTIFY_INTERVAL: Duration = Duration::from_millis(100);

impl Config {
    /// The bcrypt cost in force: `--bcrypt-cost`, or etcd's default when it is out of range
    /// (etcd warns and uses the default; see [`Config::validate`]).
    pub fn bcrypt_cost(&self) -> u32 {
        if crate::auth::BCRYPT_COSTS.contains(&self.bcrypt_cost) {
            self.bcrypt_cost
        } else {
            crate::auth::DEFAULT_BCRYPT_COST
        }
    }

    /// The progress notification period in force (raised to etcd's 100ms minimum).
    pub fn watch_progress_notify_interval(&self) -> Duration {
        self.experimental_watch_progress_notify_interval
            .max(MIN_WATCH_PROGRESS_NOTIFY_INTERVAL)
    }
}

/// A configuration error, reported before anything starts.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A URL that is not `http://host:port`.
    #[error("invalid URL {url:?} in --{flag}: {reason}")]
    BadUrl {
        /// The flag it came from.
        flag: &'static str,
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An `--initial-cluster` that does not fit this member.
    #[error("--initial-cluster: {0}")]
    BadCluster(String),
    /// An `--auto-compaction-retention` that cannot be read.
    #[error(
        "invalid --auto-compaction-retention {0:?}: use a duration like 1h or 30m, or a revision count"
    )]
    BadRetention(String),
    /// `--heartbeat-interval` and `--election-timeout` that etcd would refuse (its words).
    #[error("{0}")]
    BadRaftTiming(String),
}

/// etcd's longest `--election-timeout`, in milliseconds (`maxElectionMs`).
const MAX_ELECTION_MS: u64 = 50_000;

/// What `--auto-compaction-*` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// Keep this much history in time.
    Period(Duration),
    /// Keep this many revisions.
    Revisions(i64),
}

impl Config {
    /// The data directory (`--data-dir`, or `${name}.etcd` as etcd does).
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("{}.etcd", self.name)))
    }

    /// The socket addresses to serve clients on.
    pub fn client_listen_addrs(&self) -> Result<Vec<SocketAddr>, ConfigError> {
        split(&self.listen_client_urls)
            .map(|u| parse_url("listen-client-urls", u))
            .collect()
    }

    /// The advertised client URLs.
    pub fn advertised_client_urls(&self) -> Vec<String> {
        split(&self.advertise_client_urls)
            .map(str::to_string)
            .collect()
    }

    /// The socket addresses to serve peers on.
    pub fn peer_listen_addrs(&self) -> Result<Vec<SocketAddr>, ConfigError> {
        split(&self.listen_peer_urls)
            .map(|u| parse_url("listen-peer-urls", u))
            .collect()
    }

    /// The members of `--initial-cluster`: each name with its peer URLs (a name may be given
    /// several times, once per URL), in order of first appearance.
    pub fn initial_members(&self) -> Result<Vec<(String, Vec<String>)>, ConfigError> {
        parse_initial_cluster(&self.initial_cluster)
    }

    /// The advertised peer URLs.
    pub fn advertised_peer_urls(&self) -> Vec<String> {
        split(&self.initial_advertise_peer_urls)
            .map(str::to_string)
            .collect()
    }

    /// How long a proposal may wait to commit (etcd's `ReqTimeout`: 5 s plus two election
    /// timeouts).
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(5) + 2 * Duration::from_millis(self.election_timeout)
    }

    /// The backend quota in bytes.
    pub fn quota_bytes(&self) -> u64 {
        if self.quota_backend_bytes == 0 {
            DEFAULT_QUOTA_BYTES
        } else {
            self.quota_backend_bytes
        }
    }

    /// The auto-compaction setting, `None` when disabled.
    pub fn retention(&self) -> Result<Option<Retention>, ConfigError> {
        let raw = self.auto_compaction_retention.trim();
        let bad = || ConfigError::BadRetention(raw.to_string());
        match self.auto_compaction_mode {
            CompactionMode::Revision => {
                let n: i64 = raw.parse().map_err(|_| bad())?;
                Ok((n > 0).then_some(Retention::Revisions(n)))
            }
            CompactionMode::Periodic => {
                let period = match raw.parse::<f64>() {
                    Ok(hours) if hours >= 0.0 => Duration::from_secs_f64(hours * 3600.0),
                    Ok(_) => return Err(bad()),
                    Err(_) => parse_duration(raw).ok_or_else(bad)?,
                };
                Ok((!period.is_zero()).then_some(Retention::Period(period)))
            }
        }
    }

    /// Checks every flag that can be checked before start-up.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.client_listen_addrs()?;
        for url in split(&self.listen_peer_urls) {
            parse_url("listen-peer-urls", url)?;
        }
        for url in split(&self.advertise_client_urls) {
            parse_url("advertise-client-urls", url)?;
        }
        self.peer_listen_addrs()?;
        self.initial_members()?;
        self.retention()?;
        self.check_raft_timing()?;
        Ok(())
    }

    /// etcd's checks of the Raft timings, in its order and words (`embed.Config.Validate`).
    fn check_raft_timing(&self) -> Result<(), ConfigError> {
        let (tick, election) = (self.heartbeat_interval, self.election_timeout);
        let refusal = if tick == 0 {
            format!("--heartbeat-interval must be >0 (set to {tick}ms)")
        } else if election == 0 {
            format!("--election-timeout must be >0 (set to {election}ms)")
        } else if tick.saturating_mul(5) > election {
            format!(
                "--election-timeout[{election}ms] should be at least as 5 times as --heartbeat-interval[{tick}ms]"
            )
        } else if election > MAX_ELECTION_MS {
            format!(
                "--election-timeout[{election}ms] is too long, and should be set less than {MAX_ELECTION_MS}ms"
            )
        } else {
            return Ok(());
        };
        Err(ConfigError::BadRaftTiming(refusal))
    }

    /// Logs, once at start, the flags whose value is replaced rather than refused (as etcd
    /// does): a `--bcrypt-cost` outside bcrypt's range.
    pub fn warn_replaced_values(&self) {
        if self.bcrypt_cost() != self.bcrypt_cost {
            let costs = crate::auth::BCRYPT_COSTS;
            tracing::warn!(
                min_cost = costs.start(),
                max_cost = costs.end(),
                default_cost = crate::auth::DEFAULT_BCRYPT_COST,
                given_cost = self.bcrypt_cost,
                "use default bcrypt cost instead of the invalid given cost"
            );
        }
    }

    /// Checks that `--initial-cluster` names this member with its advertised peer URLs, as a
    /// member that bootstraps needs (one restarted on its data directory ignores the flag).
    pub fn validate_initial_cluster(&self) -> Result<(), ConfigError> {
        check_initial_member(
            &self.name,
            &self.initial_members()?,
            &self.initial_advertise_peer_urls,
        )
    }
}

/// The members of an `--initial-cluster` list (`name=peerURL,...`): each name with its peer
/// URLs (a name may be given several times, once per URL), in order of first appearance.
pub fn parse_initial_cluster(list: &str) -> Result<Vec<(String, Vec<String>)>, ConfigError> {
    let mut members: Vec<(String, Vec<String>)> = Vec::new();
    for m in split(list) {
        let (name, url) = m
            .split_once('=')
            .ok_or_else(|| ConfigError::BadCluster(format!("{m:?} is not name=peerURL")))?;
        parse_url("initial-cluster", url)?;
        match members.iter_mut().find(|(n, _)| n == name) {
            Some((_, urls)) => urls.push(url.to_string()),
            None => members.push((name.to_string(), vec![url.to_string()])),
        }
    }
    Ok(members)
}

/// Checks that the member `name` is in `members` (see [`parse_initial_cluster`]) with the
/// very URLs of `advertised` (an `--initial-advertise-peer-urls` list), as etcd does before
/// bootstrapping a member or restoring a snapshot for one.
pub fn check_initial_member(
    name: &str,
    members: &[(String, Vec<String>)],
    advertised: &str,
) -> Result<(), ConfigError> {
    let Some((_, urls)) = members.iter().find(|(n, _)| n == name) else {
        return Err(ConfigError::BadCluster(format!(
            "couldn't find local name {name:?} in the initial cluster configuration"
        )));
    };
    let mut listed = urls.clone();
    let mut mine: Vec<String> = split(advertised).map(str::to_string).collect();
    listed.sort();
    mine.sort();
    if listed != mine {
        return Err(ConfigError::BadCluster(format!(
            "--initial-cluster has {name}={} but missing from --initial-advertise-peer-urls={advertised} (the URLs of this member must be the same in both)",
            urls.join(","),
        )));
    }
    Ok(())
}

/// The items of a comma-separated flag value (`a, b,,c`: `a`, `b`, `c`).
pub(crate) fn split(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// Parses `http://host:port` into a socket address (`localhost` is 127.0.0.1).
fn parse_url(flag: &'static str, url: &str) -> Result<SocketAddr, ConfigError> {
    let bad = |reason: &str| ConfigError::BadUrl {
        flag,
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let rest = match url.split_once("://") {
        Some(("http", rest)) => rest,
        Some(("https", _)) => return Err(bad("TLS is not supported yet; use http://")),
        Some((scheme, _)) => {
            return Err(bad(&format!("unsupported scheme {scheme:?}; use http://")));
        }
        None => return Err(bad("missing scheme; use http://host:port")),
    };
    let hostport = rest.trim_end_matches('/');
    let (host, port) = hostport
        .rsplit_once(':')
        .ok_or_else(|| bad("missing port"))?;
    let port: u16 = port.parse().map_err(|_| bad("port is not a number"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    let ip = host
        .parse()
        .map_err(|_| bad("host must be an IP address or localhost"))?;
    Ok(SocketAddr::new(ip, port))
}

/// Parses durations like `1h`, `30m`, `90s`, `1h30m`.
fn parse_duration(s: &str) -> Option<Duration> {
    let mut total = 0.0;
    let mut number = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let n: f64 = number.parse().ok()?;
        number.clear();
        total += n * match c {
            'h' => 3600.0,
            'm' => 60.0,
            's' => 1.0,
            _ => return None,
        };
    }
    (number.is_empty() && total >= 0.0).then(|| Duration::from_secs_f64(total))
}

/// A configuration parsed from `args` (the flags after `keel store`), for tests.
#[cfg(test)]
pub(crate) fn parse_for_test(args: &[&str]) -> Config {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        config: Config,
    }
    <Cli as clap::Parser>::try_parse_from(std::iter::once("keel").chain(args.iter().copied()))
        .unwrap()
        .config
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Config {
        parse_for_test(args)
    }

    #[test]
    fn raft_timings_checked_as_etcd() {
        let refusal = |args: &[&str]| parse(args).validate().unwrap_err().to_string();
        assert_eq!(
            refusal(&["--heartbeat-interval", "0"]),
            "--heartbeat-interval must be >0 (set to 0ms)"
        );
        assert_eq!(
            refusal(&["--election-timeout", "0"]),
            "--election-timeout must be >0 (set to 0ms)"
        );
        assert_eq!(
            refusal(&["--heartbeat-interval", "300", "--election-timeout", "1000"]),
            "--election-timeout[1000ms] should be at least as 5 times as --heartbeat-interval[300ms]"
        );
        assert_eq!(
            refusal(&["--election-timeout", "50001"]),
            "--election-timeout[50001ms] is too long, and should be set less than 50000ms"
        );
        for ok in [
            &["--heartbeat-interval", "200", "--election-timeout", "1000"][..],
            &["--election-timeout", "50000"],
        ] {
            parse(ok).validate().unwrap();
        }
    }

    #[test]
    fn bcrypt_cost_as_etcd() {
        assert_eq!(parse(&[]).bcrypt_cost(), 10);
        assert_eq!(parse(&["--bcrypt-cost", "4"]).bcrypt_cost(), 4);
        assert_eq!(parse(&["--bcrypt-cost", "31"]).bcrypt_cost(), 31);
        // etcd 3.5 warns and uses its default for a cost bcrypt does not accept.
        for cost in ["3", "32"] {
            let config = parse(&["--bcrypt-cost", cost]);
            assert!(config.validate().is_ok());
            assert_eq!(config.bcrypt_cost(), 10);
        }
    }

    #[test]
    fn defaults_match_etcd() {
        let c = parse(&[]);
        assert_eq!(c.data_dir(), PathBuf::from("default.etcd"));
        assert_eq!(
            c.client_listen_addrs().unwrap(),
            vec!["127.0.0.1:2379".parse().unwrap()]
        );
        assert_eq!(c.quota_bytes(), DEFAULT_QUOTA_BYTES);
        assert_eq!(c.retention().unwrap(), None);
        c.validate().unwrap();
        c.validate_initial_cluster().unwrap();
    }

    #[test]
    fn strict_reconfig_check_is_an_etcd_boolean_flag() {
        assert!(parse(&[]).strict_reconfig_check);
        assert!(parse(&["--strict-reconfig-check"]).strict_reconfig_check);
        assert!(!parse(&["--strict-reconfig-check=false"]).strict_reconfig_check);
    }

    #[test]
    fn retention_forms() {
        let c = parse(&["--auto-compaction-retention", "1h30m"]);
        assert_eq!(
            c.retention().unwrap(),
            Some(Retention::Period(Duration::from_secs(5400)))
        );
        let c = parse(&["--auto-compaction-retention", "2"]);
        assert_eq!(
            c.retention().unwrap(),
            Some(Retention::Period(Duration::from_secs(7200)))
        );
        let c = parse(&[
            "--auto-compaction-mode",
            "revision",
            "--auto-compaction-retention",
            "100",
        ]);
        assert_eq!(c.retention().unwrap(), Some(Retention::Revisions(100)));
        assert!(
            parse(&["--auto-compaction-retention", "soon"])
                .retention()
                .is_err()
        );
    }

    #[test]
    fn bad_urls_and_clusters_are_errors() {
        assert!(
            parse(&["--listen-client-urls", "https://127.0.0.1:1"])
                .validate()
                .is_err()
        );
        assert!(
            parse(&["--listen-client-urls", "127.0.0.1:1"])
                .validate()
                .is_err()
        );
        assert!(parse(&["--initial-cluster", "default"]).validate().is_err());
        assert!(parse(&["--name", "x"]).validate_initial_cluster().is_err());
        assert!(
            parse(&["--initial-cluster", "default=http://a:1,b=http://b:1"])
                .validate_initial_cluster()
                .is_err()
        );
    }

    #[test]
    fn watch_progress_interval_is_a_go_duration_with_etcd_minimum() {
        let c = parse(&[]);
        assert_eq!(c.watch_progress_notify_interval(), Duration::from_secs(600));
        let c = parse(&["--experimental-watch-progress-notify-interval", "1m30s"]);
        assert_eq!(c.watch_progress_notify_interval(), Duration::from_secs(90));
        let c = parse(&["--experimental-watch-progress-notify-interval", "10ms"]);
        assert_eq!(
            c.watch_progress_notify_interval(),
            MIN_WATCH_PROGRESS_NOTIFY_INTERVAL
        );
    }
}
