//! A backup's `manifest.json`: what each store's snapshot file holds (the store's resources,
//! revision, size, the sha256 of its database that the file ends in, when it was taken, by
//! which keel), written last and atomically, so a folder without one is no backup, and read back to check every file before a restore.

use std::path::Path;

use anyhow::{Context, bail};
use keel_store::exchange::sealed_hash;
use serde_json::{Value, json};

use super::credentials::{self, Kept};
use super::stores::{StoreEntry, check_names, plain_name};

/// The manifest's file name in a backup folder.
pub const MANIFEST: &str = "manifest.json";

/// The backup format this keel writes and reads (`format` in the manifest; a manifest
/// without one is of this format).
const FORMAT: u64 = 1;

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
    /// The sha256 of the database, in hex: the one the file ends in, as etcd's snapshots do.
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
    /// The credentials of a `keel up` folder kept with its stores (none for other backups).
    pub kept: Vec<Kept>,
}

impl Manifest {
    /// Writes the manifest into `dir` (atomically: the old one or the new one survives a crash).
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let doc = json!({
            "format": FORMAT,
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
            "kept": self.kept.iter().map(Kept::to_json).collect::<Vec<_>>(),
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
        if let Some(format) = doc.get("format")
            && format.as_u64() != Some(FORMAT)
        {
            bail!(
                "{} is in backup format {format}, which this keel ({}) does not know: restore it \
                 with the keel that saved it ({})",
                path.display(),
                env!("CARGO_PKG_VERSION"),
                doc["keelVersion"]
            );
        }
        let missing = |field: &str| format!("{}: a store without {field:?}", path.display());
        let text_of = |v: &Value, field: &str| -> anyhow::Result<String> {
            v[field]
                .as_str()
                .map(String::from)
                .with_context(|| missing(field))
        };
        let mut stores = Vec::new();
        let mut files = std::collections::HashSet::new();
        for s in doc["stores"].as_array().into_iter().flatten() {
            let entry = Entry {
                store: StoreEntry::from_json(s),
                file: text_of(s, "file")?,
                revision: s["revision"]
                    .as_i64()
                    .with_context(|| missing("revision"))?,
                size: s["size"].as_u64().with_context(|| missing("size"))?,
                sha256: text_of(s, "sha256")?,
                time: text_of(s, "time")?,
            };
            if !plain_name(&entry.file) || !files.insert(entry.file.clone()) {
                bail!(
                    "{}: {:?} cannot name a snapshot file of the backup",
                    path.display(),
                    entry.file
                );
            }
            stores.push(entry);
        }
        if stores.first().is_none_or(|s| s.store.name != "main") {
            bail!("{} names no main store", path.display());
        }
        let entries: Vec<StoreEntry> = stores.iter().map(|e| e.store.clone()).collect();
        check_names(&entries, &path)?;
        let kept = doc["kept"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| Kept::from_json(v, &path))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Manifest {
            keel_version: doc["keelVersion"].as_str().unwrap_or_default().to_string(),
            stores,
            kept,
        })
    }

    /// Checks every store's file in `dir` against the manifest (a regular file of its size
    /// ending in the sha256 it names) and that sha256 against the database before it, and
    /// every kept file against its sha256, naming the first one that fails.
    pub fn verify(&self, dir: &Path) -> anyhow::Result<()> {
        for entry in &self.stores {
            let path = dir.join(&entry.file);
            let name = &entry.store.name;
            let meta = std::fs::symlink_metadata(&path).with_context(|| {
                format!(
                    "the {name} store's snapshot {} is missing or unreadable",
                    path.display()
                )
            })?;
            if !meta.is_file() {
                bail!(
                    "the {name} store's snapshot {} is not a regular file",
                    path.display()
                );
            }
            if meta.len() != entry.size {
                bail!(
                    "the {name} store's snapshot {} is corrupt: {} bytes, the manifest says {}",
                    path.display(),
                    meta.len(),
                    entry.size
                );
            }
            let sealed = sealed_hash(&path).with_context(|| {
                format!("the {name} store's snapshot {} is corrupt", path.display())
            })?;
            if hex(&sealed) != entry.sha256 {
                bail!(
                    "the {name} store's snapshot {} is corrupt: it ends in sha256 {}, the \
                     manifest says {}",
                    path.display(),
                    hex(&sealed),
                    entry.sha256
                );
            }
        }
        credentials::verify(dir, &self.kept)
    }
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
