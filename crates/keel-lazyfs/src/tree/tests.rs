//! The layer model, driven directly: what a program sees, and what a cut leaves on disk.

use super::*;

/// A tree over a fresh backing folder.
struct Fixture {
    dir: tempfile::TempDir,
    tree: Tree,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let tree = Tree::load(dir.path()).unwrap();
        Fixture { dir, tree }
    }

    /// A fixture whose durable state already holds `files` (path, content).
    fn with(files: &[(&str, &[u8])]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let p = dir.path().join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, content).unwrap();
        }
        let tree = Tree::load(dir.path()).unwrap();
        Fixture { dir, tree }
    }

    /// The inode at `path` (`""` is the root).
    fn ino(&mut self, path: &str) -> u64 {
        let mut ino = ROOT;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            ino = self.tree.lookup(ino, OsStr::new(part)).unwrap().ino;
        }
        ino
    }

    /// The parent inode and last name of `path`.
    fn split<'a>(&mut self, path: &'a str) -> (u64, &'a OsStr) {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        (self.ino(dir), OsStr::new(name))
    }

    fn create(&mut self, path: &str) -> u64 {
        let (parent, name) = self.split(path);
        let ino = self
            .tree
            .create(parent, name, Meta::new(0o644, 0, 0))
            .unwrap()
            .ino;
        self.tree.release(ino).unwrap();
        ino
    }

    fn mkdir(&mut self, path: &str) {
        let (parent, name) = self.split(path);
        self.tree
            .mkdir(parent, name, Meta::new(0o755, 0, 0))
            .unwrap();
    }

    fn write(&mut self, path: &str, offset: u64, bytes: &[u8]) {
        let ino = self.ino(path);
        self.tree.write(ino, offset, bytes).unwrap();
    }

    fn read(&mut self, path: &str) -> Vec<u8> {
        let ino = self.ino(path);
        self.tree.read(ino, 0, u32::MAX).unwrap()
    }

    fn fsync(&mut self, path: &str) {
        let ino = self.ino(path);
        self.tree.fsync(ino).unwrap();
    }

    fn rename(&mut self, from: &str, to: &str) {
        let (p, n) = self.split(from);
        let (np, nn) = self.split(to);
        self.tree.rename(p, n, np, nn, false).unwrap();
    }

    fn unlink(&mut self, path: &str) {
        let (p, n) = self.split(path);
        self.tree.unlink(p, n).unwrap();
    }

    /// Cuts the power and loads what survived, as a remount does.
    fn cut_and_remount(&mut self) {
        self.tree.cut();
        self.tree = Tree::load(self.dir.path()).unwrap();
    }

    /// The content of `path` in the durable state, read from the backing folder.
    fn durable(&self, path: &str) -> Option<Vec<u8>> {
        fs::read(self.dir.path().join(path)).ok()
    }

    /// Every name in the backing folder (without the staging folder), sorted.
    fn durable_names(&self) -> Vec<String> {
        fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
            for dent in fs::read_dir(dir).unwrap() {
                let dent = dent.unwrap();
                let name = format!("{prefix}{}", dent.file_name().to_string_lossy());
                if name == STAGING {
                    continue;
                }
                if dent.file_type().unwrap().is_dir() {
                    walk(&dent.path(), &format!("{name}/"), out);
                }
                out.push(name);
            }
        }
        let mut out = Vec::new();
        walk(self.dir.path(), "", &mut out);
        out.sort();
        out
    }
}

#[test]
fn a_write_without_fsync_is_lost_and_one_with_fsync_kept() {
    let mut f = Fixture::with(&[("a", b"old"), ("b", b"old")]);
    f.write("a", 0, b"new!");
    f.write("b", 0, b"new!");
    f.fsync("b");
    assert_eq!(f.read("a"), b"new!", "the program sees its write");
    assert_eq!(f.durable("a").unwrap(), b"old", "not durable before fsync");
    f.cut_and_remount();
    assert_eq!(f.read("a"), b"old");
    assert_eq!(f.read("b"), b"new!");
}

#[test]
fn a_new_file_needs_an_fsync_of_its_directory() {
    let mut f = Fixture::new();
    f.create("synced-file-only");
    f.write("synced-file-only", 0, b"data");
    f.fsync("synced-file-only");
    f.cut_and_remount();
    assert!(f.durable_names().is_empty(), "{:?}", f.durable_names());

    f.create("both");
    f.write("both", 0, b"data");
    f.fsync("both");
    f.create("dir-only");
    f.write("dir-only", 0, b"data");
    f.fsync("");
    f.cut_and_remount();
    assert_eq!(f.read("both"), b"data");
    assert_eq!(
        f.read("dir-only"),
        b"",
        "the entry survives, the unsynced bytes do not"
    );
}

#[test]
fn a_rename_without_a_directory_fsync_is_rolled_back() {
    let mut f = Fixture::with(&[("db", b"old")]);
    f.create("db.tmp");
    f.write("db.tmp", 0, b"new");
    f.fsync("db.tmp");
    f.rename("db.tmp", "db");
    assert_eq!(f.read("db"), b"new");
    f.cut_and_remount();
    assert_eq!(f.durable_names(), ["db"]);
    assert_eq!(f.read("db"), b"old");

    f.create("db.tmp");
    f.write("db.tmp", 0, b"new");
    f.fsync("db.tmp");
    f.rename("db.tmp", "db");
    f.fsync("");
    f.cut_and_remount();
    assert_eq!(f.durable_names(), ["db"]);
    assert_eq!(f.read("db"), b"new");
}

#[test]
fn an_unlink_without_a_directory_fsync_is_rolled_back() {
    let mut f = Fixture::with(&[("a", b"1"), ("b", b"2")]);
    f.unlink("a");
    f.unlink("b");
    assert!(f.tree.lookup(ROOT, OsStr::new("a")).is_err());
    f.cut_and_remount();
    assert_eq!(f.durable_names(), ["a", "b"]);
    f.unlink("a");
    f.fsync("");
    f.cut_and_remount();
    assert_eq!(f.durable_names(), ["b"]);
    assert!(
        fs::read_dir(f.tree.staging()).unwrap().next().is_none(),
        "the removed file left nothing behind"
    );
}

#[test]
fn a_truncate_needs_an_fsync() {
    let mut f = Fixture::with(&[("a", b"0123456789"), ("b", b"0123456789")]);
    for name in ["a", "b"] {
        let ino = f.ino(name);
        let set = SetAttr {
            size: Some(3),
            ..SetAttr::default()
        };
        f.tree.setattr(ino, set).unwrap();
        f.write(name, 5, b"x");
    }
    assert_eq!(f.read("a"), b"012\0\0x");
    f.fsync("b");
    f.cut_and_remount();
    assert_eq!(f.read("a"), b"0123456789");
    assert_eq!(f.read("b"), b"012\0\0x");
}

#[test]
fn fallocate_grows_the_file_in_the_volatile_layer() {
    let mut f = Fixture::with(&[("a", b"abc")]);
    let ino = f.ino("a");
    f.tree.fallocate(ino, 0, 8, 0).unwrap();
    assert_eq!(f.read("a"), b"abc\0\0\0\0\0");
    f.tree
        .fallocate(
            ino,
            1,
            1,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        )
        .unwrap();
    assert_eq!(f.read("a"), b"a\0c\0\0\0\0\0");
    assert_eq!(f.tree.fallocate(ino, 0, 1, 0x40), Err(Errno::EOPNOTSUPP));
    f.cut_and_remount();
    assert_eq!(f.read("a"), b"abc");
}

#[test]
fn a_new_directory_is_durable_with_its_parent_and_keeps_its_own_entries() {
    let mut f = Fixture::new();
    f.mkdir("member");
    f.mkdir("member/wal");
    f.create("member/wal/0.wal");
    f.write("member/wal/0.wal", 0, b"rec");
    f.fsync("member/wal/0.wal");
    f.fsync("member/wal");
    f.fsync("member");
    f.cut_and_remount();
    assert!(
        f.durable_names().is_empty(),
        "the root was not fsynced: {:?}",
        f.durable_names()
    );

    f.mkdir("member");
    f.mkdir("member/wal");
    f.create("member/wal/0.wal");
    f.write("member/wal/0.wal", 0, b"rec");
    f.fsync("member/wal/0.wal");
    f.fsync("member/wal");
    f.fsync("member");
    f.fsync("");
    f.cut_and_remount();
    assert_eq!(
        f.durable_names(),
        ["member", "member/wal", "member/wal/0.wal"]
    );
    assert_eq!(f.read("member/wal/0.wal"), b"rec");
}

#[test]
fn a_rename_across_directories_is_durable_with_its_destination() {
    let mut f = Fixture::with(&[("a/x", b"1"), ("a/y", b"2"), ("b/keep", b"")]);
    f.rename("a/x", "b/x");
    f.rename("a/y", "b/y");
    f.fsync("b");
    // Only the source of y's move is synced later: y is lost in both places.
    f.rename("b/y", "a/y2");
    f.fsync("b");
    f.cut_and_remount();
    assert_eq!(f.durable_names(), ["a", "b", "b/keep", "b/x"]);
    assert_eq!(f.read("b/x"), b"1");
}

#[test]
fn an_open_unlinked_file_stays_usable() {
    let mut f = Fixture::with(&[("a", b"data")]);
    let ino = f.ino("a");
    f.tree.open(ino).unwrap();
    f.unlink("a");
    f.fsync("");
    f.tree.write(ino, 4, b"+").unwrap();
    f.tree.fsync(ino).unwrap();
    assert_eq!(f.tree.read(ino, 0, 100).unwrap(), b"data+");
    f.tree.release(ino).unwrap();
    assert!(fs::read_dir(f.tree.staging()).unwrap().next().is_none());
    f.cut_and_remount();
    assert!(f.durable_names().is_empty());
}

#[test]
fn after_a_cut_every_operation_fails_with_eio() {
    let mut f = Fixture::with(&[("a", b"data")]);
    let ino = f.ino("a");
    f.tree.cut();
    assert_eq!(f.tree.read(ino, 0, 10), Err(Errno::EIO));
    assert_eq!(f.tree.write(ino, 0, b"x"), Err(Errno::EIO));
    assert_eq!(f.tree.fsync(ino).unwrap_err(), Errno::EIO);
    assert_eq!(
        f.tree.lookup(ROOT, OsStr::new("a")).unwrap_err(),
        Errno::EIO
    );
}

#[test]
fn the_staging_folder_is_hidden() {
    let mut f = Fixture::new();
    assert_eq!(
        f.tree.lookup(ROOT, OsStr::new(STAGING)).unwrap_err(),
        Errno::ENOENT
    );
    let names: Vec<OsString> = f
        .tree
        .readdir(ROOT)
        .unwrap()
        .into_iter()
        .map(|e| e.2)
        .collect();
    assert_eq!(names, [".", ".."]);
    let meta = Meta::new(0o644, 0, 0);
    assert_eq!(
        f.tree.create(ROOT, OsStr::new(STAGING), meta).unwrap_err(),
        Errno::EPERM
    );
}
