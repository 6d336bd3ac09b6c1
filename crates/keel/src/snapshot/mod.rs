//! `keel snapshot`: backups of every store of a control plane (`save`, `restore`), as
//! etcd-format snapshots that `etcdctl` and `etcdutl` read, with a manifest naming them.

mod credentials;
mod manifest;
mod restore;
mod save;
mod stores;

use std::path::PathBuf;

use clap::{Args, Subcommand};
use keel_apiserver::config::{ServersOverride, parse_servers_override};

pub use stores::{StoreEntry, from_flags, write as write_stores};

/// `keel snapshot` subcommands.
#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Save a snapshot of every store (the main one and each --etcd-servers-overrides one)
    /// into DIR, with DIR/manifest.json naming them
    Save(SaveArgs),
    /// Restore a backup folder (every store, into new data folders) or one etcd snapshot file
    /// (into a keel store data folder, as etcdutl snapshot restore)
    Restore(RestoreArgs),
    /// Write an etcd snapshot with its revisions bumped and compaction marked, for
    /// `etcdutl snapshot restore` (3.5) to restore into an etcd that never serves an old
    /// revision again
    Rewrite(RewriteArgs),
    /// Check a backup: every store's file against DIR/manifest.json and its own trailing
    /// sha256, and print what each holds
    Status {
        /// The backup folder
        dir: PathBuf,
    },
}

/// `keel snapshot save`'s flags.
#[derive(Debug, Args)]
pub struct SaveArgs {
    /// The folder to save into (created; must hold no backup yet)
    dir: PathBuf,
    /// The main store's client URLs, as keel apiserver's --etcd-servers
    #[arg(
        long,
        value_delimiter = ',',
        required_unless_present = "data_dir",
        conflicts_with = "data_dir"
    )]
    etcd_servers: Vec<String>,
    /// The other stores, as keel apiserver's --etcd-servers-overrides (group/resource#url;url)
    #[arg(long, value_delimiter = ',', value_parser = parse_servers_override, conflicts_with = "data_dir")]
    etcd_servers_overrides: Vec<ServersOverride>,
    /// The folder of a running keel up: its stores are read from DATA_DIR/stores.json
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

/// `keel snapshot restore`'s flags: etcdutl's, and etcd 3.6's revision bump.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// A backup folder (with a manifest.json) or one etcd snapshot file
    source: PathBuf,
    /// The folder to restore into: must not exist or be empty. For a backup of keel up, the
    /// new keel up folder; for other backups, one keel store data folder per store inside it
    #[arg(long)]
    data_dir: PathBuf,
    /// The member's name
    #[arg(long, default_value = "default")]
    name: String,
    /// The initial cluster (name=peer-url,...) of a single snapshot file's restore
    #[arg(long, default_value = "default=http://localhost:2380")]
    initial_cluster: String,
    /// The cluster token
    #[arg(long, default_value = "etcd-cluster")]
    initial_cluster_token: String,
    /// The member's peer URLs (a keel up store: keel up's, http://127.0.0.1:2380)
    #[arg(long)]
    initial_advertise_peer_urls: Option<String>,
    /// Accept a snapshot without its trailing sha256 (a db file copied from a data folder)
    #[arg(long)]
    skip_hash_check: bool,
    /// Start the revision this far past the snapshot's (default for a backup folder:
    /// 1000000000, with --mark-compacted; for one file: 0, as etcdutl)
    #[arg(long)]
    bump_revision: Option<u64>,
    /// Mark every revision up to the bumped one compacted, so clients resuming from an older
    /// resourceVersion get 410 Gone and relist (needs --bump-revision > 0)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    mark_compacted: Option<bool>,
}

/// `keel snapshot rewrite`'s arguments.
#[derive(Debug, Args)]
pub struct RewriteArgs {
    /// The etcd snapshot to read
    input: PathBuf,
    /// The snapshot to write (replaced if it exists)
    output: PathBuf,
    /// Move the revision this far past the snapshot's
    #[arg(long)]
    bump_revision: u64,
    /// Mark every revision up to the bumped one compacted
    #[arg(long)]
    mark_compacted: bool,
}

/// Runs a `keel snapshot` subcommand.
pub async fn run(command: SnapshotCommand) -> anyhow::Result<()> {
    match command {
        SnapshotCommand::Save(args) => {
            let stores = match &args.data_dir {
                Some(dir) => stores::read(dir)?,
                None => from_flags(&args.etcd_servers, &args.etcd_servers_overrides),
            };
            let manifest = save::save(&args.dir, &stores, args.data_dir.as_deref()).await?;
            for entry in &manifest.stores {
                eprintln!(
                    "saved the {} store at revision {} ({} bytes) to {}",
                    entry.store.name,
                    entry.revision,
                    entry.size,
                    args.dir.join(&entry.file).display()
                );
            }
            eprintln!(
                "backup complete: {}; restore with: keel snapshot restore {} --data-dir NEW_FOLDER",
                args.dir.join(manifest::MANIFEST).display(),
                args.dir.display()
            );
            Ok(())
        }
        SnapshotCommand::Restore(args) => {
            let backup = args.source.is_dir();
            if backup && !args.source.join(manifest::MANIFEST).exists() {
                anyhow::bail!(
                    "{} has no {}: it is not a complete backup (a save that failed writes none)",
                    args.source.display(),
                    manifest::MANIFEST
                );
            }
            let default_bump = if backup { restore::DEFAULT_BUMP } else { 0 };
            let bump = args.bump_revision.unwrap_or(default_bump);
            let mut opts = keel_store::exchange::RestoreOptions {
                data_dir: Some(args.data_dir.clone()),
                name: args.name.clone(),
                initial_cluster: args.initial_cluster.clone(),
                initial_cluster_token: args.initial_cluster_token.clone(),
                skip_hash_check: args.skip_hash_check,
                bump_revision: bump,
                mark_compacted: args.mark_compacted.unwrap_or(bump > 0),
                ..Default::default()
            };
            if backup {
                return restore::restore_backup(
                    &args.source,
                    &args.data_dir,
                    &opts,
                    args.initial_advertise_peer_urls.as_deref(),
                );
            }
            if let Some(urls) = &args.initial_advertise_peer_urls {
                opts.initial_advertise_peer_urls = urls.clone();
            }
            let restored = keel_store::exchange::restore(&args.source, &opts)?;
            eprintln!(
                "restored revision {} (compacted up to {}), {} leases into {}; start it with: \
                 keel store --data-dir {} --name {} --initial-cluster {} --initial-advertise-peer-urls {}",
                restored.revision,
                restored.compact_revision,
                restored.leases,
                restored.data_dir.display(),
                restored.data_dir.display(),
                opts.name,
                opts.initial_cluster,
                opts.initial_advertise_peer_urls
            );
            Ok(())
        }
        SnapshotCommand::Rewrite(args) => {
            let rewritten = keel_store::exchange::rewrite(
                &args.input,
                &args.output,
                args.bump_revision,
                args.mark_compacted,
            )?;
            eprintln!(
                "wrote {} at revision {} (compacted up to {}); restore it with: etcdutl snapshot restore {}",
                args.output.display(),
                rewritten.revision,
                rewritten.compact_revision,
                args.output.display()
            );
            Ok(())
        }
        SnapshotCommand::Status { dir } => {
            let manifest = manifest::Manifest::read(&dir)?;
            manifest.verify(&dir)?;
            println!(
                "{:<14} {:>12} {:>14}  {:<22} RESOURCES",
                "STORE", "REVISION", "SIZE", "SAVED"
            );
            for e in &manifest.stores {
                let resources = match e.store.resources.is_empty() {
                    true => "(all others)".to_string(),
                    false => e.store.resources.join(","),
                };
                println!(
                    "{:<14} {:>12} {:>14}  {:<22} {resources}",
                    e.store.name, e.revision, e.size, e.time
                );
            }
            if !manifest.kept.is_empty() {
                let kept: Vec<&str> = manifest.kept.iter().map(|k| k.path.as_str()).collect();
                eprintln!("kept with the stores: {}", kept.join(", "));
            }
            eprintln!(
                "every file matches {} (keel {})",
                dir.join(manifest::MANIFEST).display(),
                manifest.keel_version
            );
            Ok(())
        }
    }
}
