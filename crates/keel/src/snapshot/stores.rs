//! The stores a backup covers: the main store and those `--etcd-servers-overrides` gives some
//! resources, named from the flags (`keel apiserver`'s) or read from the `stores.json` a
//! `keel up` writes in its folder when it starts.

use std::path::Path;

use anyhow::Context;
use keel_apiserver::config::{ServersOverride, group_overrides};
use serde_json::{Value, json};

/// The file in a `keel up` folder that names its stores.
pub const STORES_FILE: &str = "stores.json";

/// One store of a control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreEntry {
    /// `main`, `events` for a store of Events alone, else `override-<index>`; the backup's
    /// file is `<name>.db`.
    pub name: String,
    /// The resources it keeps, as the override flag writes them (`/events`,
    /// `coordination.k8s.io/leases`); empty for the main store (every other resource).
    pub resources: Vec<String>,
    /// Its client URLs.
    pub servers: Vec<String>,
    /// For a store of `keel up`, its data folder inside the `keel up` folder (`store`,
    /// `events`).
    pub folder: Option<String>,
}

/// The stores of `keel apiserver --etcd-servers SERVERS --etcd-servers-overrides OVERRIDES`.
pub fn from_flags(servers: &[String], overrides: &[ServersOverride]) -> Vec<StoreEntry> {
    let mut stores = vec![StoreEntry {
        name: "main".into(),
        resources: Vec::new(),
        servers: servers.to_vec(),
        folder: None,
    }];
    for (i, store) in group_overrides(overrides).into_iter().enumerate() {
        let name = match store.resources.as_slice() {
            [(group, resource)] if group.is_empty() && resource == "events" => "events".into(),
            _ => format!("override-{i}"),
        };
        stores.push(StoreEntry {
            name,
            resources: store
                .resources
                .iter()
                .map(|(g, r)| format!("{g}/{r}"))
                .collect(),
            servers: store.servers,
            folder: None,
        });
    }
    stores
}

impl StoreEntry {
    /// The entry as JSON (`name`, `resources`, `servers`, `folder`).
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "resources": self.resources,
            "servers": self.servers,
            "folder": self.folder,
        })
    }

    /// The entry [`StoreEntry::to_json`] wrote (missing fields empty).
    pub fn from_json(v: &Value) -> StoreEntry {
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        };
        StoreEntry {
            name: v["name"].as_str().unwrap_or_default().to_string(),
            resources: strings(&v["resources"]),
            servers: strings(&v["servers"]),
            folder: v["folder"].as_str().map(String::from),
        }
    }
}

/// Writes `stores` as the `stores.json` of the `keel up` folder `dir` (replacing it whole).
pub fn write(dir: &Path, stores: &[StoreEntry]) -> anyhow::Result<()> {
    let doc = json!({"stores": stores.iter().map(StoreEntry::to_json).collect::<Vec<_>>()});
    let path = dir.join(STORES_FILE);
    keel_wal::dir::write_atomic(&path, serde_json::to_string_pretty(&doc)?.as_bytes(), 0o644)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The stores named in the `stores.json` of the `keel up` folder `dir`.
pub fn read(dir: &Path) -> anyhow::Result<Vec<StoreEntry>> {
    let path = dir.join(STORES_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {}: is {} the folder of a keel up (started by this version)?",
            path.display(),
            dir.display()
        )
    })?;
    let doc: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let stores: Vec<StoreEntry> = doc["stores"]
        .as_array()
        .into_iter()
        .flatten()
        .map(StoreEntry::from_json)
        .collect();
    if stores
        .first()
        .is_none_or(|s| s.name != "main" || s.servers.is_empty())
    {
        anyhow::bail!("{} names no main store", path.display());
    }
    check_names(&stores, &path)?;
    running(dir)?;
    Ok(stores)
}

/// Refuses the `keel up` folder `dir` unless a keel up holds its lock: its `stores.json`
/// names the ports of the keel up that wrote it, which another one may have taken since.
fn running(dir: &Path) -> anyhow::Result<()> {
    let path = dir.join("keel.lock");
    let not_running = || {
        anyhow::anyhow!(
            "no keel up is running in {}: start it (keel up --data-dir {}) and save again",
            dir.display(),
            dir.display()
        )
    };
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_running()),
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
    };
    match file.try_lock() {
        Ok(()) => Err(not_running()),
        Err(std::fs::TryLockError::WouldBlock) => Ok(()),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot check the lock {}", path.display()))
        }
    }
}

/// Whether `name` can name a file or folder inside another folder and nothing else: one
/// plain path component.
pub fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Refuses stores (read from `source`) whose names or folders are not plain names, or are
/// named twice: each becomes a file or folder of a backup or a restore.
pub fn check_names(stores: &[StoreEntry], source: &Path) -> anyhow::Result<()> {
    let mut seen = std::collections::HashSet::new();
    for store in stores {
        let folder = store.folder.as_deref();
        for name in std::iter::once(store.name.as_str()).chain(folder) {
            // A backup of keel up keeps its credentials under these names beside the stores.
            if !plain_name(name) || matches!(name, "apiserver" | "kubeconfig") {
                anyhow::bail!(
                    "{}: {name:?} cannot name a store's file or folder",
                    source.display()
                );
            }
        }
        if !seen.insert(("name", store.name.clone()))
            || folder.is_some_and(|f| !seen.insert(("folder", f.to_string())))
        {
            anyhow::bail!(
                "{}: the {} store is named twice",
                source.display(),
                store.name
            );
        }
    }
    Ok(())
}
