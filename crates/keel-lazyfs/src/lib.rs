//! A FUSE filesystem that forgets, on a simulated power cut, everything that was not made
//! durable, after the model of LazyFS (used by Jepsen's etcd tests). `kill -9` keeps the
//! page cache, so only a filesystem like this one shows whether a program orders its
//! `fsync`, `rename` and directory `fsync` calls correctly.
//!
//! [`mount`] serves a backing folder at a mountpoint. What a program does through the mount
//! lands in one of two layers:
//!
//! | operation | volatile until | what a cut leaves |
//! |---|---|---|
//! | `write`, `pwrite` | `fsync`/`fdatasync` of the file | the file's bytes as of its last fsync |
//! | `truncate`, `ftruncate`, `fallocate` | `fsync`/`fdatasync` of the file | the size and bytes as of its last fsync |
//! | `creat`/`open(O_CREAT)`, `mkdir` | `fsync` of the parent directory | no entry (the inode's fsynced bytes are unreachable) |
//! | `unlink`, `rmdir` | `fsync` of the parent directory | the entry and the inode's durable content |
//! | `rename` | `fsync` of the destination directory | the old entries, old contents under both names |
//!
//! An fsync makes durable exactly its own inode: a file's bytes, or a directory's entries
//! (the inodes they name keep whatever durable content they have; a new file's bytes need
//! their own fsync). A new directory is reachable after a cut only once its parent was
//! fsynced too, and so on up to the root. A rename counts as one transaction for its
//! destination, as ext4's journal commits it: the fsync of the destination directory also
//! removes the old entry. Fsyncing only the source directory makes just the removal
//! durable, so the file is in neither place after a cut; this is stricter than ext4, whose
//! journal commits every earlier namespace change with any fsync. Permissions, owners and
//! times live in memory only and are outside the model.
//!
//! The durable layer is the backing folder itself: at every moment it holds exactly the
//! state a cut would leave (plus a hidden staging folder for the fsynced bytes of files no
//! durable entry names yet). The volatile layer is in memory: per file, the bytes written
//! since its last fsync over its durable bytes (see `pending`); per directory, its current
//! entries beside its durable ones (see `tree`). [`LazyFs::cut_power`] drops the volatile
//! layer and answers every later request with EIO; after the writers are gone,
//! [`LazyFs::unmount`] leaves the backing folder as the durable state alone, ready to be
//! mounted again or read directly. Each fsync is atomic: a cut never leaves half of one.
//!
//! Mounting needs `/dev/fuse` and, without `fusermount3`, root. Hard links, symbolic links
//! and device nodes are refused.

mod fuse;
mod pending;
mod tree;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fuser::{BackgroundSession, Config, MountOption};
use parking_lot::Mutex;

use crate::tree::Tree;

/// A mounted lazy filesystem; dropping it cuts the power and unmounts.
pub struct LazyFs {
    tree: Arc<Mutex<Tree>>,
    fsync_delay: Arc<AtomicU64>,
    session: Option<BackgroundSession>,
    mountpoint: PathBuf,
}

/// Serves `backing` (an existing folder whose content is the durable state) at `mountpoint`.
pub fn mount(backing: &Path, mountpoint: &Path) -> io::Result<LazyFs> {
    let tree = Arc::new(Mutex::new(Tree::load(backing)?));
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("lazyfs".to_string()),
        MountOption::Subtype("keel-lazyfs".to_string()),
    ];
    let fsync_delay = Arc::new(AtomicU64::new(0));
    let fs = fuse::LazyFuse {
        tree: tree.clone(),
        fsync_delay: fsync_delay.clone(),
    };
    let session = fuser::spawn_mount(fs, mountpoint, &config)?;
    Ok(LazyFs {
        tree,
        fsync_delay,
        session: Some(session),
        mountpoint: mountpoint.to_path_buf(),
    })
}

impl LazyFs {
    /// Cuts the power: the volatile layer is gone and every later request fails with EIO.
    pub fn cut_power(&self) {
        self.tree.lock().cut();
    }

    /// Makes every later fsync (of a file or a directory) wait `delay` before it runs, as on
    /// a slow or overloaded disk; zero turns it off. Other requests are served meanwhile.
    pub fn set_fsync_delay(&self, delay: std::time::Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.fsync_delay.store(micros, Ordering::Relaxed);
    }

    /// Bytes written through the mount and not yet fsynced.
    pub fn pending_bytes(&self) -> usize {
        self.tree.lock().pending_bytes()
    }

    /// Where the filesystem is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Cuts the power (if not cut yet) and unmounts, waiting until no process uses the mount
    /// any more; the backing folder then holds the durable state alone.
    pub fn unmount(mut self) -> io::Result<()> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> io::Result<()> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        self.cut_power();
        // A lazy detach never fails on a busy mount; the session ends when its last user goes.
        nix::mount::umount2(&self.mountpoint, nix::mount::MntFlags::MNT_DETACH)?;
        session
            .join()
            .map_err(|e| io::Error::other(format!("the FUSE session failed: {e}")))?;
        let staging = self.tree.lock().staging().to_path_buf();
        std::fs::remove_dir_all(staging)
    }
}

impl Drop for LazyFs {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}
