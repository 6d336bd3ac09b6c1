//! `keel snapshot save DIR`: a snapshot of every store of a control plane, streamed with the
//! etcd Maintenance API (what `etcdctl snapshot save` calls, so it works against keel store
//! and etcd alike), each checked against its trailing sha256 and made durable before the
//! manifest that names them all is written.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use keel_proto::etcdserverpb::SnapshotRequest;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use tonic::transport::Channel;

use super::credentials;
use super::manifest::{self, Entry, Manifest};
use super::stores::StoreEntry;

/// The longest a snapshot stream may go without a message before the save gives up.
const STALL: Duration = Duration::from_secs(60);

/// The longest a store may take to start sending its snapshot: keel store writes the whole
/// etcd-format file before its first byte, etcd starts at once.
const FIRST: Duration = Duration::from_secs(30 * 60);

/// Saves a snapshot of every store in `stores` into `dir` (which must hold no backup yet),
/// and the credentials of the `keel up` folder `up`, if given.
pub async fn save(
    dir: &Path,
    stores: &[StoreEntry],
    up: Option<&Path>,
) -> anyhow::Result<Manifest> {
    if dir.join(manifest::MANIFEST).exists() {
        bail!(
            "{} already holds a backup ({} exists); choose an empty folder",
            dir.display(),
            manifest::MANIFEST
        );
    }
    keel_wal::dir::create_all(dir)
        .with_context(|| format!("cannot create the backup folder {}", dir.display()))?;
    // The snapshots hold every Secret in the clear, as etcdctl's (0600) do: only the owner
    // may list or read the backup.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot restrict {} to its owner", dir.display()))?;
    // One save at a time per folder (released when the process exits, however it exits).
    let lock_path = dir.join(".keel-save.lock");
    let lock = std::fs::File::create(&lock_path)
        .with_context(|| format!("cannot create {}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        bail!(
            "another keel snapshot save is writing into {}",
            dir.display()
        );
    }
    let mut entries = Vec::new();
    for store in stores {
        entries.push(save_one(dir, store).await?);
    }
    let kept = match up {
        Some(up) => credentials::save(up, dir)?,
        None => Vec::new(),
    };
    let manifest = Manifest {
        keel_version: env!("CARGO_PKG_VERSION").to_string(),
        stores: entries,
        kept,
    };
    manifest.write(dir)?;
    Ok(manifest)
}

/// Streams the snapshot of one store into `dir/<name>.db`.
async fn save_one(dir: &Path, store: &StoreEntry) -> anyhow::Result<Entry> {
    let file = format!("{}.db", store.name);
    let path = dir.join(&file);
    let partial = dir.join(format!("{file}.part"));
    let time = keel_apiserver::apimachinery::time::Time::now().rfc3339();
    let channel = crate::store_client::connect(&store.servers).await?;
    let streamed = stream(channel, &partial, &store.name).await;
    if let Err(e) = streamed {
        let _ = std::fs::remove_file(&partial);
        return Err(e.context(format!("saving the {} store", store.name)));
    }
    let checked = check(&partial, &store.name);
    let (size, sha256, revision) = match checked {
        Ok(checked) => checked,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    std::fs::rename(&partial, &path)?;
    keel_wal::dir::sync(dir)?;
    Ok(Entry {
        store: store.clone(),
        file,
        revision,
        size,
        sha256,
        time,
    })
}

/// The size, sha256 (of the database, the one the file ends in) and revision of the
/// snapshot streamed into `path` from the store `name`, once that sha256 and the format
/// are checked.
fn check(path: &Path, name: &str) -> anyhow::Result<(u64, String, i64)> {
    let sealed = keel_store::exchange::sealed_hash(path).with_context(|| {
        format!("the {name} store's snapshot is damaged (the stream broke?); try again")
    })?;
    let size = std::fs::metadata(path)?.len();
    let revision = keel_store::exchange::revision(path)
        .with_context(|| format!("the {name} store's snapshot is not an etcd-format database"))?;
    Ok((size, manifest::hex(&sealed), revision))
}

/// Writes the Snapshot stream of `channel` into `path` (fsynced), with a progress bar.
async fn stream(channel: Channel, path: &PathBuf, name: &str) -> anyhow::Result<()> {
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let bar = ProgressBar::new_spinner().with_prefix(name.to_string());
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix:>8} {spinner} the store is writing its snapshot {elapsed}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let mut client = MaintenanceClient::new(channel).max_decoding_message_size(usize::MAX);
    let call = client.snapshot(SnapshotRequest {});
    let mut stream = tokio::time::timeout(FIRST, call)
        .await
        .map_err(|_| anyhow::anyhow!("the store did not start its snapshot within {FIRST:?}"))?
        .context("the store refused the snapshot")?
        .into_inner();
    bar.disable_steady_tick();
    bar.set_style(
        ProgressStyle::with_template("{prefix:>8} {wide_bar} {bytes}/{total_bytes} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut written = 0u64;
    loop {
        let next = tokio::time::timeout(STALL, stream.message())
            .await
            .map_err(|_| anyhow::anyhow!("the store sent nothing for {STALL:?}; is it frozen?"))?;
        let Some(part) = next.context("the snapshot stream broke")? else {
            break;
        };
        out.write_all(&part.blob)?;
        written += part.blob.len() as u64;
        bar.set_length(written + part.remaining_bytes);
        bar.set_position(written);
    }
    out.sync_all()?;
    bar.finish();
    Ok(())
}
