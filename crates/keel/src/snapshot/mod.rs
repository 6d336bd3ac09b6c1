//! `keel snapshot`: backups of every store of a control plane (`save`, `restore`), as
//! etcd-format snapshots that `etcdctl` and `etcdutl` read, with a manifest naming them.

mod manifest;
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

/// Runs a `keel snapshot` subcommand.
pub async fn run(command: SnapshotCommand) -> anyhow::Result<()> {
    match command {
        SnapshotCommand::Save(args) => {
            let stores = match &args.data_dir {
                Some(dir) => stores::read(dir)?,
                None => from_flags(&args.etcd_servers, &args.etcd_servers_overrides),
            };
            let manifest = save::save(&args.dir, &stores).await?;
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
            eprintln!(
                "every file matches {} (keel {})",
                dir.join(manifest::MANIFEST).display(),
                manifest.keel_version
            );
            Ok(())
        }
    }
}
