//! `keel snapshot save DIR`: a snapshot of every store of a control plane, streamed with the
//! etcd Maintenance API (what `etcdctl snapshot save` calls, so it works against keel store
//! and etcd alike), each checked against its trailing sha256 and made durable before the
//! manifest that names them all is written.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use keel_proto::etcdserverpb::SnapshotRequest;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use tonic::transport::{Channel, Endpoint};

use super::manifest::{self, Entry, Manifest};
use super::stores::StoreEntry;

/// Saves a snapshot of every store in `stores` into `dir` (which must hold no backup yet).
pub async fn save(dir: &Path, stores: &[StoreEntry]) -> anyhow::Result<Manifest> {
    if dir.join(manifest::MANIFEST).exists() {
        bail!(
            "{} already holds a backup ({} exists); choose an empty folder",
            dir.display(),
            manifest::MANIFEST
        );
    }
    keel_wal::dir::create_all(dir)
        .with_context(|| format!("cannot create the backup folder {}", dir.display()))?;
    let mut entries = Vec::new();
    for store in stores {
        entries.push(save_one(dir, store).await?);
    }
    let manifest = Manifest {
        keel_version: env!("CARGO_PKG_VERSION").to_string(),
        stores: entries,
    };
    manifest.write(dir)?;
    Ok(manifest)
}

/// Streams the snapshot of one store into `dir/<name>.db`.
async fn save_one(dir: &Path, store: &StoreEntry) -> anyhow::Result<Entry> {
    let file = format!("{}.db", store.name);
    let path = dir.join(&file);
    let partial = dir.join(format!("{file}.part"));
    let time = keel_apiserver::registry::time::Time::now().rfc3339();
    let channel = connect(&store.servers).await?;
    let streamed = stream(channel, &partial, &store.name).await;
    if let Err(e) = streamed {
        let _ = std::fs::remove_file(&partial);
        return Err(e.context(format!("saving the {} store", store.name)));
    }
    let (size, sha256, trailing_ok) = manifest::digest(&partial)?;
    if !trailing_ok {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "the {} store's snapshot fails its trailing sha256 (the stream was damaged); try again",
            store.name
        );
    }
    let revision = snapshot_revision(&partial).with_context(|| {
        format!(
            "the {} store's snapshot is not an etcd-format database",
            store.name
        )
    })?;
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

/// A channel to the first of `servers` that accepts a connection.
async fn connect(servers: &[String]) -> anyhow::Result<Channel> {
    let mut last = None;
    for url in servers {
        let endpoint = Endpoint::from_shared(url.clone())
            .with_context(|| format!("{url:?} is not a URL"))?
            .connect_timeout(Duration::from_secs(5));
        match endpoint.connect().await {
            Ok(channel) => return Ok(channel),
            Err(e) => last = Some(format!("{url}: {e}")),
        }
    }
    bail!(
        "cannot reach the store at {} ({}); is it running?",
        servers.join(","),
        last.unwrap_or_default()
    )
}

/// Writes the Snapshot stream of `channel` into `path` (fsynced), with a progress bar.
async fn stream(channel: Channel, path: &PathBuf, name: &str) -> anyhow::Result<()> {
    let mut out =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut stream = MaintenanceClient::new(channel)
        .max_decoding_message_size(usize::MAX)
        .snapshot(SnapshotRequest {})
        .await
        .context("the store refused the snapshot")?
        .into_inner();
    let bar = ProgressBar::new(0).with_prefix(name.to_string());
    bar.set_style(
        ProgressStyle::with_template("{prefix:>8} {wide_bar} {bytes}/{total_bytes} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut written = 0u64;
    while let Some(part) = stream
        .message()
        .await
        .context("the snapshot stream broke")?
    {
        out.write_all(&part.blob)?;
        written += part.blob.len() as u64;
        bar.set_length(written + part.remaining_bytes);
        bar.set_position(written);
    }
    out.sync_all()?;
    bar.finish();
    Ok(())
}

/// The revision of an etcd-format snapshot: the main revision of the last row of its `key`
/// bucket (rows are keyed by revision).
pub fn snapshot_revision(path: &Path) -> anyhow::Result<i64> {
    let db = keel_bbolt::Db::open(path)?;
    let mut last = None;
    for row in db.entries(b"key")? {
        last = Some(row?.0);
    }
    let key = last.unwrap_or_default();
    let main: [u8; 8] = key
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .unwrap_or_default();
    Ok(i64::from_be_bytes(main))
}
