//! `keel up`: keel store and the apiserver in one process, with all their state in one
//! folder (`DIR/store`: the store's data directory; `DIR/apiserver`: the CA, serving
//! certificate and tokens; `DIR/kubeconfig`: the admin kubeconfig). The apiserver reaches the
//! store through an in-process channel with the same etcd v3 client code it uses for a
//! remote etcd; the store's client URL stays open for `etcdctl`. The folder is locked while
//! it runs, so a second `keel up` on it stops with an error instead of sharing the store.

use std::fs::File;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Parser};

/// `keel up`'s flags (the apiserver's and the store's own names).
#[derive(Debug, Clone, Args)]
pub struct UpArgs {
    /// The folder for all state: the store's data, the apiserver's certificates and tokens,
    /// and the admin kubeconfig.
    #[arg(long, default_value = "keel.data")]
    data_dir: PathBuf,
    /// The IP address the apiserver serves on.
    #[arg(long, default_value = "127.0.0.1")]
    bind_address: IpAddr,
    /// The port the apiserver serves HTTPS on.
    #[arg(long, default_value_t = 6443)]
    secure_port: u16,
    /// The store's client URLs (for etcdctl), comma-separated.
    #[arg(long, default_value = "http://127.0.0.1:2379")]
    listen_client_urls: String,
    /// The store's peer URLs, comma-separated.
    #[arg(long, default_value = "http://127.0.0.1:2380")]
    listen_peer_urls: String,
    /// How often the apiserver compacts the store; 0 disables.
    #[arg(long, default_value = "5m")]
    etcd_compaction_interval: String,
    /// How long events are kept.
    #[arg(long, default_value = "1h")]
    event_ttl: String,
}

/// The store's flags, as `keel store` would read them.
#[derive(Parser)]
struct StoreFlags {
    #[command(flatten)]
    config: keel_store::Config,
}

/// The apiserver's flags, as `keel apiserver` would read them.
#[derive(Parser)]
struct ApiserverFlags {
    #[command(flatten)]
    config: keel_apiserver::Config,
}

/// Runs both until a signal or a failure of either.
pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    // Each folder created is made durable in its parent, or a power cut could lose the
    // whole data folder with every acknowledged write in it.
    keel_wal::dir::create_all(&args.data_dir)
        .with_context(|| format!("cannot create the data folder {}", args.data_dir.display()))?;
    let _lock = lock(&args.data_dir)?;
    let store_dir = args.data_dir.join("store");
    let first_peer = args.listen_peer_urls.split(',').next().unwrap_or_default();
    let store = StoreFlags::try_parse_from([
        "keel-store".into(),
        "--data-dir".into(),
        store_dir.display().to_string(),
        "--listen-client-urls".into(),
        args.listen_client_urls.clone(),
        "--advertise-client-urls".into(),
        args.listen_client_urls.clone(),
        "--listen-peer-urls".into(),
        args.listen_peer_urls.clone(),
        "--initial-advertise-peer-urls".into(),
        args.listen_peer_urls.clone(),
        "--initial-cluster".into(),
        format!("default={first_peer}"),
    ])
    .map_err(|e| anyhow::anyhow!("{}", e.to_string().trim()))?
    .config;
    let store = keel_store::StoreHandle::start(store).await?;
    let apiserver_dir = args.data_dir.join("apiserver");
    let apiserver = ApiserverFlags::try_parse_from([
        "keel-apiserver".into(),
        "--etcd-servers".into(),
        "http://in-process.keel".into(),
        "--bind-address".into(),
        args.bind_address.to_string(),
        "--secure-port".into(),
        args.secure_port.to_string(),
        "--cert-dir".into(),
        apiserver_dir.display().to_string(),
        "--etcd-compaction-interval".into(),
        args.etcd_compaction_interval.clone(),
        "--event-ttl".into(),
        args.event_ttl.clone(),
    ])
    .map_err(|e| anyhow::anyhow!("{}", e.to_string().trim()))?
    .config;
    let kubeconfig = args.data_dir.join("kubeconfig");
    let server = keel_apiserver::ApiServer::start(
        apiserver,
        store.in_process_channel(),
        Some(kubeconfig.clone()),
    )
    .await?;
    let etcd = store
        .addrs()
        .first()
        .map(|a| format!("; the store answers etcdctl on http://{a}"))
        .unwrap_or_default();
    eprintln!(
        "keel is up: the Kubernetes API on {}{etcd}.\nNext: kubectl --kubeconfig {} get nodes",
        server.url,
        kubeconfig.display()
    );
    tokio::select! {
        r = store.wait() => r.context("the store stopped")?,
        r = server.wait() => r.context("the apiserver stopped")?,
    }
    Ok(())
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
