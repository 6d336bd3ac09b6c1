//! A new directory built whole beside its final place and moved there in one rename: a crash
//! or a power cut leaves the target absent (or the empty folder it was), or complete, never
//! half-made. The scratch folder (`.<name>.<tag>-<pid>-<n>` beside the target, so the rename
//! stays on one file system) is removed on any error; its builder holds a lock on
//! `<scratch>.lock` beside it, and scratch folders whose lock nobody holds (a kill or a power
//! cut mid-build) are removed at the next start.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::dir;

/// Why a directory could not be staged or moved into place.
#[derive(Debug, thiserror::Error)]
pub enum StagingError {
    /// The target exists and is not an empty directory.
    #[error("{0} exists and is not an empty folder")]
    NotEmpty(PathBuf),
    /// The target is a mount point, which a rename cannot replace.
    #[error("{0} is a mount point, which cannot be replaced: use a new folder inside it")]
    MountPoint(PathBuf),
    /// A file-system operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
}

/// An i/o error on `path`.
fn io_at(path: &Path) -> impl FnOnce(io::Error) -> StagingError + '_ {
    move |source| StagingError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A directory being built for `target`; dropped without [`Staging::commit`], it is removed.
#[derive(Debug)]
pub struct Staging {
    scratch: PathBuf,
    target: PathBuf,
    parent: PathBuf,
    committed: bool,
    /// `<scratch>.lock`, locked while this process builds: how another one tells a scratch
    /// folder in use from an abandoned one, across PID namespaces too.
    lock: (PathBuf, fs::File),
}

impl Staging {
    /// Starts building `target`, which must be absent or an empty folder (not a mount point):
    /// creates its parent (durably) and an empty scratch folder beside it named with `tag`,
    /// after removing the scratch folders for `target` and `tag` whose lock nobody holds.
    pub fn begin(target: &Path, tag: &str) -> Result<Staging, StagingError> {
        let name = named(target)?;
        let parent = dir::parent_of(target).to_path_buf();
        dir::create_all(&parent).map_err(io_at(&parent))?;
        refuse_occupied(target, &parent)?;
        let prefix = format!(".{name}.{tag}-");
        remove_abandoned(&parent, &prefix);
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let scratch = parent.join(format!(
            "{prefix}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let lock_path = lock_of(&scratch);
        let lock = fs::File::create(&lock_path).map_err(io_at(&lock_path))?;
        lock.lock().map_err(io_at(&lock_path))?;
        let _ = fs::remove_dir_all(&scratch);
        fs::create_dir(&scratch).map_err(io_at(&scratch))?;
        Ok(Staging {
            scratch,
            target: target.to_path_buf(),
            parent,
            committed: false,
            lock: (lock_path, lock),
        })
    }

    /// The scratch folder to build in.
    pub fn path(&self) -> &Path {
        &self.scratch
    }

    /// Moves the scratch folder into place: fsyncs it, checks the target is still absent or
    /// empty, renames it over the target and fsyncs the parent. The caller has made the
    /// contents durable.
    pub fn commit(mut self) -> Result<(), StagingError> {
        dir::sync(&self.scratch).map_err(io_at(&self.scratch))?;
        // Checked again: the target may have been filled while the scratch was built.
        refuse_occupied(&self.target, &self.parent)?;
        if self.target.exists() {
            fs::remove_dir(&self.target).map_err(io_at(&self.target))?;
        }
        fs::rename(&self.scratch, &self.target).map_err(io_at(&self.target))?;
        self.committed = true;
        dir::sync(&self.parent).map_err(io_at(&self.parent))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.scratch);
        }
        let _ = fs::remove_file(&self.lock.0);
    }
}

/// The lock file beside the scratch folder `scratch`.
fn lock_of(scratch: &Path) -> PathBuf {
    let mut name = scratch.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Refuses a `target` that exists and is not an empty folder, or is a mount point, as
/// [`Staging::begin`] would, without creating anything: a cheap check before a long build.
pub fn check(target: &Path) -> Result<(), StagingError> {
    named(target)?;
    refuse_occupied(target, dir::parent_of(target))
}

/// The last component of `target`, which must name the new folder itself (not `.` or `..`).
fn named(target: &Path) -> Result<String, StagingError> {
    match target.file_name() {
        Some(name) => Ok(name.to_string_lossy().into_owned()),
        None => Err(StagingError::Io {
            path: target.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::InvalidInput,
                "name the new folder itself (not . or ..)",
            ),
        }),
    }
}

/// Refuses a `target` (in `parent`) that exists and is not an empty folder, or is a mount
/// point.
fn refuse_occupied(target: &Path, parent: &Path) -> Result<(), StagingError> {
    let meta = match fs::symlink_metadata(target) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_at(target)(e)),
        Ok(meta) => meta,
    };
    let empty = meta.is_dir()
        && fs::read_dir(target)
            .map_err(io_at(target))?
            .next()
            .is_none();
    if !empty {
        return Err(StagingError::NotEmpty(target.to_path_buf()));
    }
    let parent_dev = fs::metadata(parent).map_err(io_at(parent))?.dev();
    if meta.dev() != parent_dev {
        return Err(StagingError::MountPoint(target.to_path_buf()));
    }
    Ok(())
}

/// Removes the scratch folders in `parent` named `<prefix>...` (and their lock files) whose
/// lock no process holds: their builder was killed or lost its power.
fn remove_abandoned(parent: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| n.starts_with(prefix)) else {
            continue;
        };
        let scratch = parent.join(name.strip_suffix(".lock").unwrap_or(name));
        let lock_path = lock_of(&scratch);
        let abandoned = match fs::File::open(&lock_path) {
            Ok(lock) => lock.try_lock().is_ok(),
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        };
        if abandoned {
            let _ = fs::remove_dir_all(&scratch);
            let _ = fs::remove_file(&lock_path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_beside_and_moves_into_place() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("a/new");
        let staging = Staging::begin(&target, "restoring").unwrap();
        fs::write(staging.path().join("f"), b"x").unwrap();
        staging.commit().unwrap();
        assert_eq!(fs::read(target.join("f")).unwrap(), b"x");
        let left: Vec<_> = fs::read_dir(tmp.path().join("a")).unwrap().collect();
        assert_eq!(left.len(), 1, "only the target remains");
    }

    #[test]
    fn an_empty_target_is_replaced_and_a_full_one_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("t");
        fs::create_dir(&target).unwrap();
        let staging = Staging::begin(&target, "x").unwrap();
        // Filled while the scratch was built: refused, the scratch removed.
        fs::write(target.join("keep"), b"k").unwrap();
        let scratch = staging.path().to_path_buf();
        assert!(matches!(staging.commit(), Err(StagingError::NotEmpty(_))));
        assert!(!scratch.exists());
        assert_eq!(fs::read(target.join("keep")).unwrap(), b"k");
        assert!(matches!(
            Staging::begin(&target, "x"),
            Err(StagingError::NotEmpty(_))
        ));
        let file = tmp.path().join("file");
        fs::write(&file, b"").unwrap();
        assert!(matches!(
            Staging::begin(&file, "x"),
            Err(StagingError::NotEmpty(_))
        ));
    }

    #[test]
    fn dropped_unfinished_it_is_removed_and_abandoned_ones_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("t");
        let staging = Staging::begin(&target, "x").unwrap();
        let scratch = staging.path().to_path_buf();
        drop(staging);
        assert!(!scratch.exists() && !target.exists());
        // A scratch folder whose builder is gone: no lock held on it.
        let abandoned = tmp.path().join(".t.x-4294967295-0");
        fs::create_dir(&abandoned).unwrap();
        let other = tmp.path().join(".u.x-4294967295-0");
        fs::create_dir(&other).unwrap();
        let _staging = Staging::begin(&target, "x").unwrap();
        assert!(!abandoned.exists(), "an abandoned scratch folder stayed");
        assert!(
            other.exists(),
            "another target's scratch folder was removed"
        );
    }
}
