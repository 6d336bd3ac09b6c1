//! Durable directory changes: a created, renamed or removed directory entry survives a power
//! cut only once its parent directory is fsynced.

use std::fs::{self, File};
use std::io;
use std::path::Path;

/// Fsyncs the directory `dir`, making creations, renames and removals of its entries durable.
pub fn sync(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `dir` and its missing ancestors, fsyncing the parent of each directory created.
pub fn create_all(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    create_all(parent)?;
    match fs::create_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e),
        Ok(()) => sync(parent),
    }
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
