//! `keel snapshot restore` and `rewrite`: a backup made by `keel snapshot save` back into new
//! data folders (every store, or none: the files are all checked first, and the folders are
//! built beside the target and moved into place in one rename), a single etcd snapshot into
//! a keel store data folder (as `etcdutl snapshot restore`), and an etcd snapshot rewritten
//! with its revisions bumped, for stores that stay on etcd.
//!
//! A restore goes back in time, so by default a backup is restored with its revisions bumped
//! by [`DEFAULT_BUMP`] and marked compacted (etcd 3.6's `--bump-revision` and
//! `--mark-compacted`): no resourceVersion is served again for another object, and every
//! client that resumes a watch from before the restore gets 410 Gone and relists.

use std::path::Path;

use anyhow::Context;
use keel_store::exchange::{self, RestoreOptions};
use keel_wal::staging::Staging;

use super::credentials;
use super::manifest::Manifest;

/// The bump a backup is restored with unless `--bump-revision` says otherwise: a billion, the
/// amount etcd's documentation gives for a Kubernetes cluster's store.
pub const DEFAULT_BUMP: u64 = 1_000_000_000;

/// The peer URL `keel up` listens on by default for the store in `folder`.
fn up_peer_url(folder: &str) -> &'static str {
    match folder {
        "events" => "http://127.0.0.1:2384",
        _ => "http://127.0.0.1:2380",
    }
}

/// Restores the backup in `backup` into the new folder `target`: a `keel up` folder for a
/// backup of `keel up` (its stores in their folders), else one keel store data folder per
/// store (`target/<name>`). `base` carries the member flags and the bump; `peer_urls`, when
/// given, the main store's peer URLs (a `keel up` store's default to keel up's).
pub fn restore_backup(
    backup: &Path,
    target: &Path,
    base: &RestoreOptions,
    peer_urls: Option<&str>,
) -> anyhow::Result<()> {
    let manifest = Manifest::read(backup)?;
    keel_wal::staging::check(target)?;
    manifest.verify(backup)?;
    let staging = Staging::begin(target, "restore")?;
    restore_into(backup, &manifest, staging.path(), base, peer_urls)?;
    let keel_up = manifest.stores.iter().all(|e| e.store.folder.is_some());
    if keel_up {
        credentials::restore(backup, &manifest.kept, staging.path())?;
    }
    staging.commit()?;
    let events = manifest
        .stores
        .iter()
        .any(|e| e.store.folder.as_deref() == Some("events"));
    if keel_up {
        eprintln!(
            "restored; start it with: keel up --data-dir {}{}",
            target.display(),
            if events { " --events-store" } else { "" }
        );
    } else {
        for entry in &manifest.stores {
            eprintln!(
                "start the {} store with: keel store --data-dir {} --name {} (its own client and \
                 peer URLs for each store on one machine)",
                entry.store.name,
                target.join(&entry.store.name).display(),
                base.name
            );
        }
    }
    Ok(())
}

/// Restores every store of `manifest` into `scratch`, a folder of its own each.
fn restore_into(
    backup: &Path,
    manifest: &Manifest,
    scratch: &Path,
    base: &RestoreOptions,
    peer_urls: Option<&str>,
) -> anyhow::Result<()> {
    for entry in &manifest.stores {
        let store = &entry.store;
        let mut opts = base.clone();
        let main = store.name == "main";
        if let Some(urls) = peer_urls.filter(|_| main) {
            opts.initial_advertise_peer_urls = urls.to_string();
        } else if let Some(folder) = &store.folder {
            opts.initial_advertise_peer_urls = up_peer_url(folder).to_string();
        }
        if !main || peer_urls.is_some() || store.folder.is_some() {
            opts.initial_cluster = format!("{}={}", opts.name, opts.initial_advertise_peer_urls);
        }
        let folder = store.folder.clone().unwrap_or_else(|| store.name.clone());
        opts.data_dir = Some(scratch.join(&folder));
        let restored = exchange::restore(&backup.join(&entry.file), &opts)
            .with_context(|| format!("restoring the {} store", store.name))?;
        eprintln!(
            "restored the {} store: revision {} in the backup, now {} (compacted up to {}), {} leases, into {}",
            store.name,
            entry.revision,
            restored.revision,
            restored.compact_revision,
            restored.leases,
            folder
        );
    }
    Ok(())
}
