//! A backup's `manifest.json`: what each store's snapshot file holds (the store's resources,
//! revision, size, sha256, when it was taken, by which keel), written last and atomically, so a
//! folder without one is no backup, and read back to check every file before a restore.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::stores::StoreEntry;

/// The manifest's file name in a backup folder.
pub const MANIFEST: &str = "manifest.json";

/// One store's snapshot in a backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The store: its name, resources, client URLs and `keel up` folder.
    pub store: StoreEntry,
    /// The snapshot file, in the backup folder (`<name>.db`).
    pub file: String,
    /// The store's revision in the snapshot.
    pub revision: i64,
    /// The file's size in bytes (its trailing sha256 included).
    pub size: u64,
    /// The sha256 of the whole file, in hex.
    pub sha256: String,
    /// When the snapshot was taken (RFC 3339).
    pub time: String,
}

/// A backup: every store's snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The keel that wrote it.
    pub keel_version: String,
    /// The stores, the main one first.
    pub stores: Vec<Entry>,
}

impl Manifest {
    /// Writes the manifest into `dir` (atomically: the old one or the new one survives a crash).
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let doc = json!({
            "keelVersion": self.keel_version,
            "stores": self.stores.iter().map(|e| {
                let mut v = e.store.to_json();
                v["file"] = json!(e.file);
                v["revision"] = json!(e.revision);
                v["size"] = json!(e.size);
                v["sha256"] = json!(e.sha256);
                v["time"] = json!(e.time);
                v
            }).collect::<Vec<_>>(),
        });
        let path = dir.join(MANIFEST);
        keel_wal::dir::write_atomic(&path, serde_json::to_string_pretty(&doc)?.as_bytes(), 0o644)
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Reads the manifest of the backup folder `dir`.
    pub fn read(dir: &Path) -> anyhow::Result<Manifest> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "cannot read {}: is {} a backup made by keel snapshot save?",
                path.display(),
                dir.display()
            )
        })?;
        let doc: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        let text_of = |v: &Value, field: &str| -> anyhow::Result<String> {
            v[field]
                .as_str()
                .map(String::from)
                .with_context(|| format!("{}: a store without {field:?}", path.display()))
        };
        let mut stores = Vec::new();
        for s in doc["stores"].as_array().into_iter().flatten() {
            stores.push(Entry {
                store: StoreEntry::from_json(s),
                file: text_of(s, "file")?,
                revision: s["revision"].as_i64().unwrap_or_default(),
                size: s["size"].as_u64().unwrap_or_default(),
                sha256: text_of(s, "sha256")?,
                time: text_of(s, "time")?,
            });
        }
        if stores.first().is_none_or(|s| s.store.name != "main") {
            bail!("{} names no main store", path.display());
        }
        Ok(Manifest {
            keel_version: doc["keelVersion"].as_str().unwrap_or_default().to_string(),
            stores,
        })
    }

    /// Checks every store's file in `dir` against the manifest (present, its size, its sha256)
    /// and its trailing sha256, naming the first one that fails.
    pub fn verify(&self, dir: &Path) -> anyhow::Result<()> {
        for entry in &self.stores {
            let path = dir.join(&entry.file);
            let (size, whole, trailing_ok) = digest(&path).with_context(|| {
                format!(
                    "the {} store's snapshot {} is missing or unreadable",
                    entry.store.name,
                    path.display()
                )
            })?;
            if size != entry.size || whole != entry.sha256 {
                bail!(
                    "the {} store's snapshot {} is corrupt: {size} bytes with sha256 {whole}, the \
                     manifest says {} bytes with sha256 {}",
                    entry.store.name,
                    path.display(),
                    entry.size,
                    entry.sha256
                );
            }
            if !trailing_ok {
                bail!(
                    "the {} store's snapshot {} fails its own trailing sha256",
                    entry.store.name,
                    path.display()
                );
            }
        }
        Ok(())
    }
}

/// A file's size, the sha256 of all of it (hex), and whether its last 32 bytes are the sha256
/// of the bytes before them (an etcd snapshot's trailing hash).
pub fn digest(path: &Path) -> std::io::Result<(u64, String, bool)> {
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    let body = size.saturating_sub(32);
    let (mut whole, mut head) = (Sha256::new(), Sha256::new());
    let mut tail = Vec::with_capacity(32);
    let mut buf = vec![0u8; 1 << 20];
    let mut read = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        whole.update(chunk);
        let in_body = (body.saturating_sub(read) as usize).min(n);
        head.update(&chunk[..in_body]);
        tail.extend_from_slice(&chunk[in_body..]);
        read += n as u64;
    }
    let trailing_ok = size >= 32 && head.finalize().as_slice() == tail.as_slice();
    Ok((size, hex(&whole.finalize()), trailing_ok))
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
