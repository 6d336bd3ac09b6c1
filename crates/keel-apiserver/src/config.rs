//! The flags of `keel apiserver`: kube-apiserver's names and defaults where it has them, so
//! an operator's muscle memory and scripts carry over.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

/// Configuration of one apiserver.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// The etcd servers to connect to, comma-separated (`http://host:port`).
    #[arg(long, value_delimiter = ',', required = true)]
    pub etcd_servers: Vec<String>,
    /// Resources kept in stores of their own, as kube-apiserver reads the flag:
    /// `group/resource#servers`, the servers `;`-separated, several overrides
    /// `,`-separated; the core group is empty (`/events#http://127.0.0.1:2383`). Every part
    /// that reads or writes such a resource (its watch cache, the compactor, the health checks,
    /// the object counts) uses its store.
    #[arg(long, value_delimiter = ',', value_parser = parse_servers_override)]
    pub etcd_servers_overrides: Vec<ServersOverride>,
    /// The prefix of every key in etcd.
    #[arg(long, default_value = "/registry")]
    pub etcd_prefix: String,
    /// How often the store is compacted (to the revision seen one interval earlier); 0
    /// disables compaction by this server.
    #[arg(long, default_value = "5m", value_parser = keel_process::go_duration::parse)]
    pub etcd_compaction_interval: Duration,
    /// How often the objects of each resource are counted in the store for
    /// `apiserver_storage_objects` (by one background task: `/metrics` only reads the last
    /// counts, so a scrape never waits on the store); 0 disables the counting.
    #[arg(long, default_value = "1m0s", value_parser = keel_process::go_duration::parse)]
    pub etcd_count_metric_poll_period: Duration,
    /// The IP address to serve on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// The port to serve HTTPS on.
    #[arg(long, default_value_t = 6443)]
    pub secure_port: u16,
    /// Where the generated CA and serving certificate are kept (ignored with
    /// `--tls-cert-file`); the admin token and kubeconfig are written beside them.
    #[arg(long, default_value = "/var/run/kubernetes")]
    pub cert_dir: PathBuf,
    /// The serving certificate (PEM, with its chain); a CA and certificate are generated in
    /// `--cert-dir` when unset.
    #[arg(long, requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's private key (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,
    /// Bearer tokens (`token,user,uid,"group1,group2"` per line); when unset an admin token
    /// is generated into `--cert-dir`/tokens.csv at first start.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// Log format: `text` (human-readable lines, coloured only on a terminal) or `json` (one
    /// JSON object per line: time, level, component, message and fields).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub logging_format: String,
    /// How long events are kept.
    #[arg(long, default_value = "1h", value_parser = keel_process::go_duration::parse)]
    pub event_ttl: Duration,
    /// The longest a store lease is reused for objects written with a TTL (events): one lease
    /// serves every such write within min(this, 5 % of the TTL), so a flood of events does not
    /// cost a lease grant each.
    #[arg(long, default_value_t = 60)]
    pub lease_reuse_duration_seconds: i64,
    /// The most read-only requests served at once (0: no limit).
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: u32,
    /// The most mutating requests served at once (0: no limit).
    #[arg(long, default_value_t = 200)]
    pub max_mutating_requests_inflight: u32,
    /// How long a request may take before it is answered 504 (watches excepted).
    #[arg(long, default_value = "1m0s", value_parser = keel_process::go_duration::parse)]
    pub request_timeout: Duration,
    /// Serve watches from a watch cache per resource (events excepted, as kube-apiserver
    /// leaves them out): one store watch per resource, each event decoded and encoded once for
    /// all its watchers. `--watch-cache=false` gives every watch a store watch of its own.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub watch_cache: bool,
    /// Whether deletes set the garbage collector's `orphan` and `foregroundDeletion`
    /// finalizers (kube-apiserver's `--enable-garbage-collector`). Off, an orphaning or
    /// foreground delete removes the object at once, as when no collector will ever run:
    /// `keel apiserver` without `--controllers=garbagecollector` and no kube-controller-manager
    /// beside it.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub enable_garbage_collector: bool,
    /// Admission plugins to enable beside the default ones, by kube-apiserver's names
    /// (comma-separated). keel runs `Priority`, `DefaultStorageClass` and
    /// `StorageObjectInUseProtection` (all on by default, as upstream) and accepts the other
    /// names kube-apiserver registers without running them; an unknown name is an error.
    #[arg(long, value_delimiter = ',')]
    pub enable_admission_plugins: Vec<String>,
    /// Admission plugins to turn off, even those on by default, by kube-apiserver's names.
    #[arg(long, value_delimiter = ',')]
    pub disable_admission_plugins: Vec<String>,
    /// Serve plain HTTP instead of HTTPS, without authentication: only allowed on a loopback
    /// `--bind-address`, for local experiments.
    #[arg(long)]
    pub plain_http: bool,
    /// The IP address the `default/kubernetes` Service's Endpoints point clients at (as
    /// kube-apiserver's `--advertise-address`); unset: `--bind-address`, or when that is
    /// unspecified or loopback, the address of the host's default route.
    #[arg(long)]
    pub advertise_address: Option<IpAddr>,
    /// The range Service cluster IPs come from (CIDR; a second, comma-separated, for dual
    /// stack); the `default/kubernetes` Service gets its first address (`10.0.0.1`).
    #[arg(long, default_value = "10.0.0.0/24", value_parser = parse_service_ip_range)]
    pub service_cluster_ip_range: IpAddr,
    /// The controllers kube-controller-manager would run, by its names and flags.
    #[command(flatten)]
    pub controller_manager: ControllerManagerConfig,
}

/// The controllers run beside the apiserver, with kube-controller-manager's flags and
/// defaults.
#[derive(Debug, Clone, Args)]
pub struct ControllerManagerConfig {
    /// The controllers to run, by kube-controller-manager's names: `nodelifecycle`,
    /// `serviceaccount`, `root-ca-cert-publisher`, `namespace`, `garbagecollector`,
    /// `clusterrole-aggregation`, `pvc-protection`, `pv-protection`. `*` runs them all, `name` runs one, `-name` leaves one
    /// out; the first entry naming a controller decides.
    /// Unset, `keel apiserver` runs only `namespace`, `pvc-protection` and `pv-protection`
    /// (the ones without which deletes hang: of namespaces, and of the claims and volumes
    /// the apiserver's own admission gives finalizers; their work is idempotent, so a
    /// kube-controller-manager beside it does no harm) and `keel up` runs `*`.
    #[arg(long, value_delimiter = ',')]
    pub controllers: Option<Vec<String>>,
    /// How often the node lifecycle controller checks the nodes' heartbeats.
    #[arg(long, default_value = "5s", value_parser = keel_process::go_duration::parse)]
    pub node_monitor_period: Duration,
    /// How long a node may go without a heartbeat (its Lease renewed, or its Ready
    /// condition's heartbeat changed) before it is marked Unknown (NotReady). Time while the
    /// store has no leader or cannot be reached does not count.
    #[arg(long, default_value = "50s", value_parser = keel_process::go_duration::parse)]
    pub node_monitor_grace_period: Duration,
    /// How long a new node may go without posting its status before it is marked Unknown.
    #[arg(long, default_value = "1m0s", value_parser = keel_process::go_duration::parse)]
    pub node_startup_grace_period: Duration,
    /// Nodes per second whose NoExecute taint is set, per zone, while the zone is healthy
    /// (or fully disrupted while others are not).
    #[arg(long, default_value_t = 0.1)]
    pub node_eviction_rate: f32,
    /// Nodes per second whose NoExecute taint is set, per zone, while the zone is partly
    /// disrupted; 0 in zones of at most `--large-cluster-size-threshold` nodes.
    #[arg(long, default_value_t = 0.01)]
    pub secondary_node_eviction_rate: f32,
    /// Zones of more nodes than this are large: they keep tainting at the secondary rate
    /// while partly disrupted.
    #[arg(long, default_value_t = 50)]
    pub large_cluster_size_threshold: i32,
    /// The share of not-Ready nodes (at least three) from which a zone is partly disrupted.
    #[arg(long, default_value_t = 0.55)]
    pub unhealthy_zone_threshold: f32,
    /// The CA bundle (PEM) published in every namespace as the `kube-root-ca.crt`
    /// ConfigMap; unset: the CA this apiserver's serving certificate is verified with.
    #[arg(long)]
    pub root_ca_file: Option<PathBuf>,
}

impl ControllerManagerConfig {
    /// The controllers `keel apiserver` runs when `--controllers` is unset.
    pub const APISERVER_DEFAULT: &'static [&'static str] =
        &["namespace", "pvc-protection", "pv-protection"];
    /// The controllers `keel up` runs when `--controllers` is unset.
    pub const UP_DEFAULT: &'static [&'static str] = &["*"];
}

impl Config {
    /// The checks clap cannot make.
    pub fn validate(&self) -> Result<(), String> {
        if self.plain_http && !self.bind_address.is_loopback() {
            return Err(format!(
                "--plain-http serves without TLS or authentication and is only allowed on a \
                 loopback --bind-address (127.0.0.1 or ::1), not {}",
                self.bind_address
            ));
        }
        for url in &self.etcd_servers {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "--etcd-servers: {url:?} is not a URL; give http://host:port"
                ));
            }
        }
        if self.lease_reuse_duration_seconds <= 0 {
            return Err(format!(
                "--lease-reuse-duration-seconds should be greater than 0, but is {}",
                self.lease_reuse_duration_seconds
            ));
        }
        if self.request_timeout.is_zero() {
            return Err("--request-timeout must be greater than 0".into());
        }
        crate::controllers::Selection::new(self.controller_manager.controllers.as_deref())?;
        self.admission_plugins()?;
        Ok(())
    }

    /// The admission plugins the flags leave on.
    pub fn admission_plugins(&self) -> Result<crate::registry::admission::Plugins, String> {
        crate::registry::admission::Plugins::from_flags(
            &self.enable_admission_plugins,
            &self.disable_admission_plugins,
        )
    }
}

/// One `--etcd-servers-overrides` entry: a resource and the store servers that keep it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServersOverride {
    /// The API group ("" for the core group).
    pub group: String,
    /// The resource (plural, lowercase: `events`).
    pub resource: String,
    /// The store's client URLs.
    pub servers: Vec<String>,
}

/// A store `--etcd-servers-overrides` names, with the resources it keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideStore {
    /// The resources, as (group, resource).
    pub resources: Vec<(String, String)>,
    /// The store's client URLs.
    pub servers: Vec<String>,
}

/// The stores `--etcd-servers-overrides` names, in the order of first mention: resources
/// naming the same servers share a store, and a resource named twice goes to its last
/// override, as kube-apiserver reads the flag.
pub fn group_overrides(overrides: &[ServersOverride]) -> Vec<OverrideStore> {
    let mut stores: Vec<OverrideStore> = Vec::new();
    for o in overrides {
        let resource = (o.group.clone(), o.resource.clone());
        for store in &mut stores {
            store.resources.retain(|r| *r != resource);
        }
        match stores.iter_mut().find(|s| s.servers == o.servers) {
            Some(store) => store.resources.push(resource),
            None => stores.push(OverrideStore {
                resources: vec![resource],
                servers: o.servers.clone(),
            }),
        }
    }
    stores.retain(|s| !s.resources.is_empty());
    stores
}

/// Reads one `--etcd-servers-overrides` entry (`group/resource#url;url`), with
/// kube-apiserver's message for a malformed one.
pub fn parse_servers_override(s: &str) -> Result<ServersOverride, String> {
    const FORMAT: &str = "--etcd-servers-overrides invalid, must be of format: group/resource#servers, where servers are URLs, semicolon separated";
    let (target, servers) = s.split_once('#').ok_or(FORMAT)?;
    let (group, resource) = target.split_once('/').ok_or(FORMAT)?;
    if servers.contains('#') || resource.contains('/') || resource.is_empty() {
        return Err(FORMAT.into());
    }
    let servers: Vec<String> = servers
        .split(';')
        .filter(|url| !url.is_empty())
        .map(str::to_string)
        .collect();
    if servers.is_empty() {
        return Err(FORMAT.into());
    }
    for url in &servers {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "--etcd-servers-overrides: {url:?} is not a URL; give http://host:port"
            ));
        }
    }
    Ok(ServersOverride {
        group: group.to_string(),
        resource: resource.to_string(),
        servers,
    })
}

/// The first address of `--service-cluster-ip-range`'s (first) CIDR, as kube-apiserver's
/// `ServiceIPRange` gives the `kubernetes` Service.
pub fn parse_service_ip_range(s: &str) -> Result<IpAddr, String> {
    let primary = s.split(',').next().unwrap_or_default().trim();
    let bad = || format!("invalid CIDR address: {primary}");
    let (ip, bits) = primary.split_once('/').ok_or_else(bad)?;
    let ip: IpAddr = ip.parse().map_err(|_| bad())?;
    let bits: u32 = bits.parse().map_err(|_| bad())?;
    match ip {
        IpAddr::V4(v4) if bits < 32 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            Ok(IpAddr::V4((u32::from(v4) & mask).wrapping_add(1).into()))
        }
        IpAddr::V6(v6) if bits < 128 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            Ok(IpAddr::V6((u128::from(v6) & mask).wrapping_add(1).into()))
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_overrides_read_as_kube_apiserver_reads_them() {
        let events = parse_servers_override("/events#http://a:2379;http://b:2379").unwrap();
        assert_eq!(events.group, "");
        assert_eq!(events.resource, "events");
        assert_eq!(events.servers, ["http://a:2379", "http://b:2379"]);
        let leases = parse_servers_override("coordination.k8s.io/leases#http://c:2379").unwrap();
        assert_eq!(leases.group, "coordination.k8s.io");
        for bad in [
            "events#http://a:2379",
            "/events",
            "a/b/c#http://a",
            "/events#",
            "/#http://a",
        ] {
            assert!(
                parse_servers_override(bad)
                    .unwrap_err()
                    .starts_with("--etcd-servers-overrides invalid"),
                "{bad}"
            );
        }
        assert!(parse_servers_override("/events#a:2379").is_err());
    }

    #[test]
    fn the_kubernetes_service_gets_the_first_address_of_the_range() {
        assert_eq!(
            parse_service_ip_range("10.0.0.0/24"),
            Ok("10.0.0.1".parse().unwrap())
        );
        assert_eq!(
            parse_service_ip_range("10.96.3.7/12,fd00::/108"),
            Ok("10.96.0.1".parse().unwrap())
        );
        assert_eq!(
            parse_service_ip_range("fd00:10::/108"),
            Ok("fd00:10::1".parse().unwrap())
        );
        assert!(parse_service_ip_range("10.0.0.0").is_err());
        assert!(parse_service_ip_range("10.0.0.1/32").is_err());
    }

    #[test]
    fn the_count_metric_poll_period_defaults_to_kube_apiservers_minute() {
        use clap::Parser;
        #[derive(Parser)]
        struct Flags {
            #[command(flatten)]
            config: Config,
        }
        let parse = |extra: &[&str]| {
            let mut args = vec!["apiserver", "--etcd-servers", "http://127.0.0.1:2379"];
            args.extend_from_slice(extra);
            Flags::try_parse_from(args).map(|f| f.config.etcd_count_metric_poll_period)
        };
        assert_eq!(parse(&[]).unwrap(), Duration::from_secs(60));
        assert_eq!(
            parse(&["--etcd-count-metric-poll-period=5s"]).unwrap(),
            Duration::from_secs(5)
        );
        assert_eq!(
            parse(&["--etcd-count-metric-poll-period=0"]).unwrap(),
            Duration::ZERO
        );
    }

    #[test]
    fn the_watch_cache_flag_reads_as_a_go_bool_flag() {
        use clap::Parser;
        #[derive(Parser)]
        struct Flags {
            #[command(flatten)]
            config: Config,
        }
        let parse = |extra: &[&str]| {
            let mut args = vec!["apiserver", "--etcd-servers", "http://127.0.0.1:2379"];
            args.extend_from_slice(extra);
            Flags::try_parse_from(args).map(|f| f.config.watch_cache)
        };
        assert!(parse(&[]).unwrap());
        assert!(parse(&["--watch-cache"]).unwrap());
        assert!(!parse(&["--watch-cache=false"]).unwrap());
        assert!(parse(&["--watch-cache=true"]).unwrap());
        assert!(parse(&["--watch-cache=maybe"]).is_err());
    }
}
