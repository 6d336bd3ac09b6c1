//! The layout of a member's data folder (`--data-dir`), owned here and nowhere else.
//!
//! ```text
//! <data-dir>/
//!   member/
//!     identity              this member's id and its cluster's id (written once, fsynced)
//!     wal/                  the Raft log: keel-wal segments `{seq:016x}-{first_index:016x}.wal`
//!     snap/
//!       db                  the backend: keel-mvcc's redb file, in etcd's bucket layout
//!       db.incoming.<n>     a backend snapshot being received from the leader
//!       snapshot-<pid>-<n>.tmp  the backend in etcd's snapshot format, for a Snapshot client
//! ```
//!
//! The names follow etcd's (`member/wal`, `member/snap/db`), so an operator finds their way
//! and tools that look for etcd's backend path find keel's. The `*.incoming.*` and `*.tmp`
//! files are scratch: a crash can leave them behind, and [`DataDir::create`] removes them.
//!
//! Every directory is created with its parent fsynced, and [`DataDir::sync`] fsyncs the chain
//! from `member/snap` up to the data folder's parent once the backend and WAL are open, so a
//! power cut right after a first start cannot lose a folder that fsynced files live in.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Prefix of a backend snapshot being received from the leader.
const INCOMING_PREFIX: &str = "db.incoming.";
/// Prefix and suffix of the backend in etcd's format being streamed to a Snapshot client.
const SNAPSHOT_TMP: (&str, &str) = ("snapshot-", ".tmp");

/// A member's data folder: the paths of everything in it.
#[derive(Clone, Debug)]
pub struct DataDir {
    root: PathBuf,
}

impl DataDir {
    /// The layout under `root`, without touching the disk.
    pub fn new(root: impl Into<PathBuf>) -> DataDir {
        DataDir { root: root.into() }
    }

    /// Creates the folders (fsyncing each new one into its parent) and removes the scratch
    /// files a crash left behind.
    pub fn create(root: impl Into<PathBuf>) -> io::Result<DataDir> {
        let dir = DataDir::new(root);
        keel_wal::dir::create_all(&dir.snap())?;
        keel_wal::dir::create_all(&dir.wal())?;
        for entry in std::fs::read_dir(dir.snap())? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let scratch = name.starts_with(INCOMING_PREFIX)
                || (name.starts_with(SNAPSHOT_TMP.0) && name.ends_with(SNAPSHOT_TMP.1));
            if scratch {
                std::fs::remove_file(entry.path())?;
            }
        }
        Ok(dir)
    }

    /// Fsyncs `member/snap`, `member/wal`, `member`, the data folder and its parent, making
    /// every entry in them durable (the backend file and the WAL's first segment included).
    pub fn sync(&self) -> io::Result<()> {
        let parent = keel_wal::dir::parent_of(&self.root).to_path_buf();
        for dir in [
            self.snap(),
            self.wal(),
            self.member(),
            self.root.clone(),
            parent,
        ] {
            keel_wal::dir::sync(&dir)?;
        }
        Ok(())
    }

    /// The data folder itself (`--data-dir`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `member/`: everything the member keeps.
    pub fn member(&self) -> PathBuf {
        self.root.join("member")
    }

    /// `member/identity`: the member and cluster ids.
    pub fn identity(&self) -> PathBuf {
        self.member().join("identity")
    }

    /// `member/wal/`: the Raft log.
    pub fn wal(&self) -> PathBuf {
        self.member().join("wal")
    }

    /// `member/snap/`: the backend and snapshots in transit.
    pub fn snap(&self) -> PathBuf {
        self.member().join("snap")
    }

    /// `member/snap/db`: the backend.
    pub fn backend(&self) -> PathBuf {
        self.snap().join("db")
    }

    /// A fresh `member/snap/db.incoming.<n>` for a snapshot received from the leader.
    pub fn incoming_snapshot(&self) -> PathBuf {
        self.snap()
            .join(format!("{INCOMING_PREFIX}{}", next_scratch_number()))
    }

    /// A fresh `member/snap/snapshot-<pid>-<n>.tmp` for an etcd-format snapshot sent to a
    /// client (see `crate::exchange`).
    pub fn snapshot_tmp(&self) -> PathBuf {
        let (prefix, suffix) = SNAPSHOT_TMP;
        self.snap().join(format!(
            "{prefix}{}-{}{suffix}",
            std::process::id(),
            next_scratch_number()
        ))
    }
}

/// A number no other scratch file of this process has used.
fn next_scratch_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_makes_the_folders_and_removes_scratch_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::create(tmp.path().join("a/b")).unwrap();
        assert!(dir.wal().is_dir() && dir.snap().is_dir());
        let incoming = dir.incoming_snapshot();
        let copy = dir.snapshot_tmp();
        std::fs::write(&incoming, b"half").unwrap();
        std::fs::write(&copy, b"half").unwrap();
        std::fs::write(dir.backend(), b"kept").unwrap();
        assert_ne!(incoming, dir.incoming_snapshot());
        let dir = DataDir::create(dir.root()).unwrap();
        dir.sync().unwrap();
        assert!(!incoming.exists() && !copy.exists());
        assert_eq!(std::fs::read(dir.backend()).unwrap(), b"kept");
    }

    #[test]
    fn layout_uses_etcds_names() {
        let dir = DataDir::new("/d");
        assert_eq!(dir.backend(), Path::new("/d/member/snap/db"));
        assert_eq!(dir.wal(), Path::new("/d/member/wal"));
        assert_eq!(dir.identity(), Path::new("/d/member/identity"));
    }
}
