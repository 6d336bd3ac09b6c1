//! Durable directory changes: a created, renamed or removed directory entry survives a power
//! cut only once its parent directory is fsynced.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The directory `path` is in (`.` for a bare name).
pub fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Fsyncs the directory `dir`, making creations, renames and removals of its entries durable.
pub fn sync(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `dir` and its missing ancestors, fsyncing the parent of each directory created.
pub fn create_all(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = parent_of(dir);
    create_all(parent)?;
    match fs::create_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e),
        Ok(()) => sync(parent),
    }
}

/// Writes `contents` to `path` so that a crash leaves the old file or the new one, never a
/// torn one: a temporary file in the same directory created with `mode`, written and fsynced,
/// renamed over `path`, then the directory fsynced.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = parent_of(path);
    let Some(name) = path.file_name() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not name a file", path.display()),
        ));
    };
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync(dir)
}

#[cfg(test)]
mod tests {
    #[test]
    fn creates_nested_dirs_and_accepts_existing_ones() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("a/b/c");
        super::create_all(&dir).expect("create");
        assert!(dir.is_dir());
        super::create_all(&dir).expect("exists already");
        std::fs::write(tmp.path().join("f"), b"").expect("file");
        assert!(super::create_all(&tmp.path().join("f/x")).is_err());
    }
}
