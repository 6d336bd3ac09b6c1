//! `keel up`: keel store and the apiserver in one process, with all their state in one
//! folder (`DIR/store`: the store's data directory; `DIR/events`: the events store's, with
//! `--events-store`; `DIR/apiserver`: the CA, serving
//! certificate and tokens; `DIR/kubeconfig`: the admin kubeconfig). The apiserver reaches the
//! store with the same etcd v3 client code it uses for a remote etcd, on channels that call
//! the store's services directly; the store's client URL stays open for `etcdctl`. The folder is locked while
//! it runs, so a second `keel up` on it stops with an error instead of sharing the store.
//!
//! Its flags are `keel apiserver`'s and `keel store`'s own (the same definitions, so a flag
//! added to either is accepted here too), less the few that `keel up` sets itself.
//!
//! `--events-store` runs a second store in the same process for Events (`DIR/events`: its own
//! WAL, backend and lock, client URL `--events-listen-client-urls`), routed to as
//! `--etcd-servers-overrides=/events#...` would, so a flood of events never slows the writes of
//! the main store (node heartbeats first of all).

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Command, FromArgMatches};
use keel_apiserver::storage::StoreChannel;

/// What `keel up` shows as its apiserver's `--etcd-servers`: the store embedded in the process.
const IN_PROCESS_STORE: &str = "http://in-process.keel";

/// Flags `keel up` sets itself, with why, refused when given.
const SET_BY_UP: [(&str, &str); 4] = [
    (
        "etcd_servers",
        "the apiserver uses the store keel up runs (use keel apiserver for another store)",
    ),
    ("cert_dir", "certificates are kept in DIR/apiserver"),
    (
        "initial_cluster",
        "keel up's store is a cluster of one member named by --name",
    ),
    (
        "initial_cluster_state",
        "keel up's store is a new cluster of one member, or the one already in --data-dir",
    ),
];

/// `keel up`'s defaults where they differ from `keel apiserver`'s and `keel store`'s: serve on
/// loopback only, and keep everything in one folder of the current directory.
const UP_DEFAULTS: [(&str, &str); 4] = [
    ("bind_address", "127.0.0.1"),
    ("data_dir", "keel.data"),
    ("listen_client_urls", "http://127.0.0.1:2379"),
    ("listen_peer_urls", "http://127.0.0.1:2380"),
];

/// `keel up`'s flags: every `keel apiserver` and `keel store` flag that applies to one process
/// serving both.
#[derive(Debug, Clone)]
pub struct UpArgs {
    data_dir: PathBuf,
    /// The apiserver's flags.
    pub(crate) apiserver: keel_apiserver::Config,
    /// The store's flags.
    pub(crate) store: keel_store::Config,
    events: EventsStoreArgs,
}

/// The store for Events that `keel up` may run beside the main one.
#[derive(Debug, Clone, Args)]
struct EventsStoreArgs {
    /// Keep Events in a store of their own in DIR/events (its own WAL, backend and lock), as
    /// kube-apiserver's `--etcd-servers-overrides=/events#...` keeps them in another etcd, so
    /// a flood of events never slows the main store's writes
    #[arg(long, help_heading = "Events store")]
    events_store: bool,
    /// The events store's client URLs (for etcdctl)
    #[arg(
        long,
        default_value = "http://127.0.0.1:2383",
        help_heading = "Events store"
    )]
    events_listen_client_urls: String,
    /// The events store's peer URLs
    #[arg(
        long,
        default_value = "http://127.0.0.1:2384",
        help_heading = "Events store"
    )]
    events_listen_peer_urls: String,
}

impl Args for UpArgs {
    fn augment_args(cmd: Command) -> Command {
        let apiserver = ids(keel_apiserver::Config::augment_args(Command::new(
            "apiserver",
        )));
        let store = ids(keel_store::Config::augment_args(Command::new("store")));
        // Both flag structs are named `Config`, so clap would give both argument groups that
        // name: the apiserver's is renamed before the store's is added.
        let cmd =
            keel_apiserver::Config::augment_args(cmd).mut_group("Config", |g| g.id("apiserver"));
        let cmd = keel_store::Config::augment_args(cmd);
        let mut cmd = EventsStoreArgs::augment_args(cmd);
        cmd = cmd.mut_args(|arg| {
            let id = arg.get_id().to_string();
            let id = id.as_str();
            let heading = if store.iter().any(|s| s == id) {
                "Store flags (as keel store)"
            } else if apiserver.iter().any(|a| a == id) {
                "API server flags (as keel apiserver)"
            } else {
                return arg;
            };
            // keel up reads flags only: an ETCD_* variable meant for another member must not
            // reconfigure it.
            let arg = arg.env(None).help_heading(heading);
            match SET_BY_UP.iter().find(|(set, _)| *set == id) {
                Some(_) => arg.hide(true).required(false),
                None => arg,
            }
        });
        for (id, value) in UP_DEFAULTS {
            if cmd.get_arguments().any(|a| a.get_id() == id) {
                cmd = cmd.mut_arg(id, |a| a.default_value(value));
            }
        }
        cmd.mut_arg("etcd_servers", |a| a.default_value(IN_PROCESS_STORE))
            .mut_arg("advertise_client_urls", |a| {
                a.hide_default_value(true)
                    .help("Comma-separated client URLs advertised to clients [default: the --listen-client-urls]")
            })
            .mut_arg("initial_advertise_peer_urls", |a| {
                a.hide_default_value(true)
                    .help("Comma-separated peer URLs advertised to members joining later [default: the --listen-peer-urls]")
            })
            .mut_arg("data_dir", |a| {
                a.help_heading(None::<&str>).help(
                    "The folder for all state: the store's data (DIR/store), the events \
                     store's with --events-store (DIR/events), the apiserver's certificates \
                     and tokens (DIR/apiserver) and the admin kubeconfig (DIR/kubeconfig)",
                )
            })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for UpArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let given = |id: &str| {
            matches!(
                matches
                    .try_get_raw(id)
                    .ok()
                    .flatten()
                    .map(|_| matches.value_source(id)),
                Some(Some(ValueSource::CommandLine))
            )
        };
        for (id, why) in SET_BY_UP {
            if given(id) {
                return Err(clap::Error::raw(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "--{} does not apply to keel up: {why}\n",
                        id.replace('_', "-")
                    ),
                ));
            }
        }
        let mut apiserver = keel_apiserver::Config::from_arg_matches(matches)?;
        let mut store = keel_store::Config::from_arg_matches(matches)?;
        let events = EventsStoreArgs::from_arg_matches(matches)?;
        if events.events_store {
            check_distinct_ports(&[
                ("--listen-client-urls", &store.listen_client_urls),
                ("--listen-peer-urls", &store.listen_peer_urls),
                (
                    "--events-listen-client-urls",
                    &events.events_listen_client_urls,
                ),
                ("--events-listen-peer-urls", &events.events_listen_peer_urls),
            ])?;
        }
        let overridden = |o: &keel_apiserver::config::ServersOverride| {
            o.group.is_empty() && o.resource == "events"
        };
        if events.events_store && apiserver.etcd_servers_overrides.iter().any(overridden) {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ArgumentConflict,
                "--events-store and an --etcd-servers-overrides entry for /events both say where \
                 events go; give one of them\n",
            ));
        }
        let data_dir = store.data_dir.take().unwrap_or_else(|| "keel.data".into());
        apiserver.etcd_servers = vec![IN_PROCESS_STORE.to_string()];
        // keel up is the whole control plane: every controller runs unless --controllers says.
        let up_default = keel_apiserver::config::ControllerManagerConfig::UP_DEFAULT;
        apiserver
            .controller_manager
            .controllers
            .get_or_insert_with(|| up_default.iter().map(|s| s.to_string()).collect());
        apiserver.cert_dir = data_dir.join("apiserver");
        store.data_dir = Some(data_dir.join("store"));
        if !given("advertise_client_urls") {
            store.advertise_client_urls = store.listen_client_urls.clone();
        }
        if !given("initial_advertise_peer_urls") {
            store.initial_advertise_peer_urls = store.listen_peer_urls.clone();
        }
        let first_peer = store.initial_advertise_peer_urls.split(',').next();
        store.initial_cluster = format!("{}={}", store.name, first_peer.unwrap_or_default());
        store.initial_cluster_state = "new".into();
        Ok(UpArgs {
            data_dir,
            apiserver,
            store,
            events,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// Refuses two of `flags` (name, comma-separated URLs) that would listen on the same port of
/// the same address (`localhost` being 127.0.0.1, and a wildcard address every one): the
/// second store to start would fail to listen, after the first had started.
fn check_distinct_ports(flags: &[(&str, &str)]) -> Result<(), clap::Error> {
    let mut seen: Vec<(String, String, &str)> = Vec::new();
    for (flag, urls) in flags {
        for url in urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
            let addr = url.split_once("://").map_or(url, |(_, rest)| rest);
            let addr = addr.trim_end_matches('/');
            let Some((host, port)) = addr.rsplit_once(':') else {
                continue;
            };
            let host = match host {
                "localhost" => "127.0.0.1",
                other => other,
            };
            let wildcard = |h: &str| matches!(h, "0.0.0.0" | "[::]" | "");
            let clash = seen
                .iter()
                .find(|(h, p, _)| p == port && (h == host || wildcard(h) || wildcard(host)));
            if let Some((_, _, other)) = clash {
                return Err(clap::Error::raw(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "{flag} and {other} both listen on port {port} of {host}: give the events \
                         store ports of its own\n"
                    ),
                ));
            }
            seen.push((host.to_string(), port.to_string(), flag));
        }
    }
    Ok(())
}

/// The ids of a command's arguments.
fn ids(cmd: Command) -> Vec<String> {
    cmd.get_arguments()
        .map(|a| a.get_id().to_string())
        .collect()
}

/// Runs both until a signal or a failure of either.
pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    // Each folder created is made durable in its parent, or a power cut could lose the
    // whole data folder with every acknowledged write in it.
    keel_wal::dir::create_all(&args.data_dir)
        .with_context(|| format!("cannot create the data folder {}", args.data_dir.display()))?;
    let _lock = lock(&args.data_dir)?;
    check_events_store_unchanged(&args)?;
    // The events store runs on the low-priority runtime, its WAL and apply threads at its
    // priority: a flood of Events yields the CPU to the main store and the heartbeats.
    let events_store = match args.events.events_store {
        true => Some(
            keel_process::background::handle()
                .spawn(start_events_store(args.clone()))
                .await
                .context("the events store (--events-store) could not start")??,
        ),
        false => None,
    };
    write_stores(&args, events_store.is_some())?;
    let store = keel_store::StoreHandle::start(args.store).await?;
    let kubeconfig = args.data_dir.join("kubeconfig");
    let mut stores = keel_apiserver::server::StoreLinks {
        main: in_process(&store),
        overrides: keel_apiserver::server::connect_overrides(
            &args.apiserver.etcd_servers_overrides,
        )?,
    };
    if let Some((events, _)) = &events_store {
        stores.overrides.push(keel_apiserver::server::OverrideLink {
            resources: vec![(String::new(), "events".into())],
            servers: vec![args.events.events_listen_client_urls.clone()],
            link: in_process(events),
        });
    }
    let server =
        keel_apiserver::ApiServer::start(args.apiserver, stores, Some(kubeconfig.clone())).await?;
    let mut etcd = store
        .addrs()
        .first()
        .map(|a| format!("; the store answers etcdctl on http://{a}"))
        .unwrap_or_default();
    if let Some(a) = events_store.as_ref().and_then(|(e, _)| e.addrs().first()) {
        etcd.push_str(&format!(", the events store on http://{a}"));
    }
    crate::logging::announce(&format!(
        "keel is up: the Kubernetes API on {}{etcd}.\nNext: kubectl --kubeconfig {} get nodes",
        server.url,
        kubeconfig.display()
    ));
    // A signal reaches every store, but only the first to answer it is awaited below: each
    // is shut down again after (a second shutdown only syncs its backend once more).
    let stores: Vec<_> = std::iter::once(store.store().clone())
        .chain(events_store.as_ref().map(|(e, _)| e.store().clone()))
        .collect();
    let events_wait = async {
        match events_store {
            Some((events, _lock)) => events.wait().await,
            None => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        r = store.wait() => r.context("the store stopped"),
        r = events_wait => r.context("the events store stopped"),
        r = server.wait() => r.context("the apiserver stopped"),
    };
    for store in stores {
        store.shutdown().await;
    }
    result
}

/// Refuses to start a folder with `--events-store` turned on or off since it was created: the
/// events would change stores, hiding those written before and moving their resourceVersions
/// backwards under every client that watches them.
fn check_events_store_unchanged(args: &UpArgs) -> anyhow::Result<()> {
    let has_member = |folder: &str| args.data_dir.join(folder).join("member").exists();
    let dir = args.data_dir.display();
    if args.events.events_store && has_member("store") && !has_member("events") {
        anyhow::bail!(
            "{dir} was created without --events-store: its events are in the main store. Moving \
             them would hide them and send their resourceVersions backwards; start a new folder \
             with --events-store (events live at most --event-ttl), or start this one without it"
        );
    }
    if !args.events.events_store && has_member("events") {
        anyhow::bail!(
            "{dir} keeps its events in a store of their own ({dir}/events): start it with \
             --events-store (add --events-listen-client-urls if it used other ports)"
        );
    }
    Ok(())
}

/// Records in DIR/stores.json which stores hold what and where they answer, for
/// `keel snapshot save --data-dir DIR`.
fn write_stores(args: &UpArgs, events_store: bool) -> anyhow::Result<()> {
    let main: Vec<String> = args
        .store
        .advertise_client_urls
        .split(',')
        .map(str::to_string)
        .collect();
    let mut stores = crate::snapshot::from_flags(&main, &args.apiserver.etcd_servers_overrides);
    stores[0].folder = Some("store".into());
    if events_store {
        stores.push(crate::snapshot::StoreEntry {
            name: "events".into(),
            resources: vec!["/events".into()],
            servers: vec![args.events.events_listen_client_urls.clone()],
            folder: Some("events".into()),
        });
    }
    crate::snapshot::write_stores(&args.data_dir, &stores)
}

/// The apiserver's link to a store of this process: its service, called directly.
fn in_process(store: &keel_store::StoreHandle) -> keel_apiserver::server::StoreLink {
    keel_apiserver::server::StoreLink {
        requests: StoreChannel::new(store.in_process()),
        watches: StoreChannel::new(store.in_process()),
    }
}

/// Starts the events store with its data in DIR/events (locked by DIR/events/keel.lock while it
/// runs), configured as the main store but for its folder and URLs; its tasks run on the
/// runtime this is called on.
async fn start_events_store(args: UpArgs) -> anyhow::Result<(keel_store::StoreHandle, File)> {
    let dir = args.data_dir.join("events");
    keel_wal::dir::create_all(&dir)
        .with_context(|| format!("cannot create the events folder {}", dir.display()))?;
    let lock = lock(&dir)?;
    let mut config = args.store.clone();
    config.data_dir = Some(dir.clone());
    config.listen_client_urls = args.events.events_listen_client_urls.clone();
    config.advertise_client_urls = config.listen_client_urls.clone();
    config.listen_peer_urls = args.events.events_listen_peer_urls.clone();
    config.initial_advertise_peer_urls = config.listen_peer_urls.clone();
    let first_peer = config.initial_advertise_peer_urls.split(',').next();
    config.initial_cluster = format!("{}={}", config.name, first_peer.unwrap_or_default());
    let store = keel_store::StoreHandle::start(config)
        .await
        .context("the events store (--events-store) could not start")?;
    Ok((store, lock))
}

/// Locks the folder for this process (released when it exits, however it exits).
fn lock(dir: &Path) -> anyhow::Result<File> {
    let path = dir.join("keel.lock");
    let file = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "{} is in use by another keel up (its lock {} is held); stop that one first, or \
             choose another --data-dir",
            dir.display(),
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::ffi::OsString;

    #[derive(Parser)]
    struct Up {
        #[command(flatten)]
        args: UpArgs,
    }

    fn parse(extra: &[&str]) -> Result<UpArgs, clap::Error> {
        let args = std::iter::once("up").chain(extra.iter().copied());
        Up::try_parse_from(args.map(OsString::from)).map(|u| u.args)
    }

    #[test]
    fn every_folder_and_url_follows_from_the_data_dir_and_the_listen_urls() {
        let up = parse(&[
            "--data-dir",
            "/tmp/k",
            "--listen-peer-urls",
            "http://127.0.0.1:9",
        ])
        .unwrap();
        assert_eq!(up.data_dir, PathBuf::from("/tmp/k"));
        assert_eq!(up.store.data_dir, Some(PathBuf::from("/tmp/k/store")));
        assert_eq!(up.apiserver.cert_dir, PathBuf::from("/tmp/k/apiserver"));
        assert_eq!(
            up.apiserver.etcd_servers,
            vec![IN_PROCESS_STORE.to_string()]
        );
        assert_eq!(up.store.initial_cluster, "default=http://127.0.0.1:9");
        assert_eq!(up.store.advertise_client_urls, "http://127.0.0.1:2379");
        assert_eq!(up.apiserver.bind_address.to_string(), "127.0.0.1");
        assert_eq!(
            up.apiserver.controller_manager.controllers,
            Some(vec!["*".to_string()])
        );
    }

    #[test]
    fn flags_of_both_commands_are_accepted() {
        let up = parse(&[
            "--max-requests-inflight=7",
            "--watch-cache=false",
            "--quota-backend-bytes=1048576",
            "--snapshot-count=5",
            "--name=solo",
        ])
        .unwrap();
        assert_eq!(up.apiserver.max_requests_inflight, 7);
        assert!(!up.apiserver.watch_cache);
        assert_eq!(up.store.quota_backend_bytes, 1 << 20);
        assert_eq!(up.store.snapshot_count, 5);
        assert_eq!(up.store.initial_cluster, "solo=http://127.0.0.1:2380");
    }

    #[test]
    fn flags_keel_up_sets_itself_are_refused_with_the_reason() {
        let err = parse(&["--etcd-servers=http://10.0.0.1:2379"]).unwrap_err();
        assert!(
            err.to_string()
                .contains("--etcd-servers does not apply to keel up")
        );
        let err = parse(&["--initial-cluster=a=http://x:1"]).unwrap_err();
        assert!(err.to_string().contains("cluster of one member"), "{err}");
    }

    #[test]
    fn the_events_store_may_not_share_a_port_however_it_is_written() {
        let events = |client: &str| {
            parse(&[
                "--events-store",
                "--listen-client-urls=http://127.0.0.1:2379",
                &format!("--events-listen-client-urls={client}"),
            ])
        };
        for clash in [
            "http://127.0.0.1:2379",
            "http://localhost:2379/",
            "http://0.0.0.0:2379",
        ] {
            let err = events(clash).err().map(|e| e.to_string());
            assert!(
                err.as_deref()
                    .is_some_and(|e| e.contains("both listen on port 2379")),
                "{clash}: {err:?}"
            );
        }
        assert!(events("http://127.0.0.2:2379").is_ok());
        assert!(events("http://127.0.0.1:2389").is_ok());
    }
}
