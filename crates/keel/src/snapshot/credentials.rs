//! The files of a `keel up` folder that live outside its stores: the apiserver's CA,
//! serving certificate and tokens (`DIR/apiserver`) and the admin kubeconfig
//! (`DIR/kubeconfig`). A backup of a `keel up` folder keeps them beside the stores' snapshots
//! (mode 0600: the CA key and the tokens are secrets), listed in the manifest with their
//! sha256, and a restore puts them back, so every kubeconfig and token handed out before
//! still works against the restored keel up.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::manifest::hex;
use super::stores::plain_name;

/// The folder of the apiserver's certificates and tokens, in a `keel up` folder and a backup.
const APISERVER: &str = "apiserver";
/// The admin kubeconfig, in a `keel up` folder and a backup.
const KUBECONFIG: &str = "kubeconfig";

/// One file kept with a backup, by its path relative to the `keel up` folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// `apiserver/<name>` or `kubeconfig`.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its sha256, in hex.
    pub sha256: String,
}

impl Kept {
    /// The entry as JSON (`path`, `size`, `sha256`).
    pub fn to_json(&self) -> Value {
        json!({"path": self.path, "size": self.size, "sha256": self.sha256})
    }

    /// The entry [`Kept::to_json`] wrote, refused unless its path is one a backup keeps.
    pub fn from_json(v: &Value, manifest: &Path) -> anyhow::Result<Kept> {
        let bad = || {
            format!(
                "{}: a kept file without path, size or sha256",
                manifest.display()
            )
        };
        let kept = Kept {
            path: v["path"].as_str().with_context(bad)?.to_string(),
            size: v["size"].as_u64().with_context(bad)?,
            sha256: v["sha256"].as_str().with_context(bad)?.to_string(),
        };
        let allowed =
            kept.path == KUBECONFIG || kept.path.strip_prefix("apiserver/").is_some_and(plain_name);
        if !allowed {
            bail!(
                "{}: {:?} is not a file a backup keeps",
                manifest.display(),
                kept.path
            );
        }
        Ok(kept)
    }
}

/// Copies the credentials of the `keel up` folder `data_dir` into the backup folder `backup`
/// (each file written whole and fsynced); what it copied.
pub fn save(data_dir: &Path, backup: &Path) -> anyhow::Result<Vec<Kept>> {
    let mut paths = vec![KUBECONFIG.to_string()];
    let certs = data_dir.join(APISERVER);
    if certs.is_dir() {
        let listed = std::fs::read_dir(&certs)
            .with_context(|| format!("cannot list {}", certs.display()))?;
        for entry in listed {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // Dot files are scratch files of an atomic write, not credentials.
            if entry.file_type()?.is_file() && plain_name(&name) && !name.starts_with('.') {
                paths.push(format!("{APISERVER}/{name}"));
            }
        }
    }
    paths.sort();
    keel_wal::dir::create_all(&backup.join(APISERVER))?;
    let mut kept = Vec::new();
    for path in paths {
        let from = data_dir.join(&path);
        let bytes = match std::fs::read(&from) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            read => read.with_context(|| format!("cannot read {}", from.display()))?,
        };
        let to = backup.join(&path);
        keel_wal::dir::write_atomic(&to, &bytes, 0o600)
            .with_context(|| format!("cannot write {}", to.display()))?;
        kept.push(Kept {
            path,
            size: bytes.len() as u64,
            sha256: hex(&Sha256::digest(&bytes)),
        });
    }
    Ok(kept)
}

/// Checks every kept file of the backup folder `backup` against its size and sha256.
pub fn verify(backup: &Path, kept: &[Kept]) -> anyhow::Result<()> {
    for file in kept {
        let path = backup.join(&file.path);
        let bytes = read_regular(&path)?;
        if bytes.len() as u64 != file.size || hex(&Sha256::digest(&bytes)) != file.sha256 {
            bail!(
                "the kept file {} is corrupt: it does not match the manifest",
                path.display()
            );
        }
    }
    Ok(())
}

/// Copies the kept files of `backup` into the new `keel up` folder `target`.
pub fn restore(backup: &Path, kept: &[Kept], target: &Path) -> anyhow::Result<()> {
    for file in kept {
        let bytes = read_regular(&backup.join(&file.path))?;
        let to = target.join(&file.path);
        if let Some(parent) = to.parent() {
            keel_wal::dir::create_all(parent)?;
        }
        keel_wal::dir::write_atomic(&to, &bytes, 0o600)
            .with_context(|| format!("cannot write {}", to.display()))?;
    }
    Ok(())
}

/// The bytes of the regular file at `path` (a link or a device is refused).
fn read_regular(path: &Path) -> anyhow::Result<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path)
        .with_context(|| format!("the kept file {} is missing", path.display()))?;
    if !meta.is_file() {
        bail!("the kept file {} is not a regular file", path.display());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}
