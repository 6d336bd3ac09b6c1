//! The layer model through a real mount: system calls made by `std::fs`, a cut, an unmount,
//! and what the backing folder holds afterwards. Needs `/dev/fuse` and root, as CI has;
//! elsewhere each test is skipped, saying so (`keel_testkit::skip`: a failure when `CI=true`).

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use keel_lazyfs::LazyFs;

/// A backing folder and a mountpoint in a fresh temp folder.
struct Place {
    _tmp: tempfile::TempDir,
    backing: PathBuf,
    mnt: PathBuf,
}

impl Place {
    fn new() -> Place {
        let tmp = tempfile::tempdir().unwrap();
        let (backing, mnt) = (tmp.path().join("backing"), tmp.path().join("mnt"));
        fs::create_dir(&backing).unwrap();
        fs::create_dir(&mnt).unwrap();
        Place {
            _tmp: tmp,
            backing,
            mnt,
        }
    }

    /// The test's first mount; `None` when this machine cannot mount FUSE, after
    /// [`keel_testkit::skip`] has said so.
    fn first_mount(&self, test: &str) -> Option<LazyFs> {
        keel_lazyfs::mount(&self.backing, &self.mnt)
            .inspect_err(|e| {
                keel_testkit::skip(
                    test,
                    &format!("cannot mount a FUSE filesystem (needs /dev/fuse and root): {e}"),
                )
            })
            .ok()
    }

    /// A mount again, once the first one worked.
    fn mount(&self) -> LazyFs {
        keel_lazyfs::mount(&self.backing, &self.mnt)
            .unwrap_or_else(|e| panic!("mount the lazy filesystem again: {e}"))
    }

    fn at(&self, path: &str) -> PathBuf {
        self.mnt.join(path)
    }
}

fn sync_dir(path: &Path) {
    File::open(path).unwrap().sync_all().unwrap();
}

fn write_file(path: &Path, bytes: &[u8], sync: bool) {
    let mut f = File::create(path).unwrap();
    f.write_all(bytes).unwrap();
    if sync {
        f.sync_data().unwrap();
    }
}

#[test]
fn a_cut_keeps_exactly_what_was_made_durable() {
    let p = Place::new();
    let Some(fs1) = p.first_mount("a_cut_keeps_exactly_what_was_made_durable") else {
        return;
    };
    fs::create_dir(p.at("member")).unwrap();
    write_file(&p.at("member/synced"), b"kept", true);
    write_file(&p.at("member/unsynced"), b"lost", false);
    write_file(&p.at("member/renamed.tmp"), b"renamed", true);
    sync_dir(&p.at("member"));
    sync_dir(&p.mnt);
    fs::rename(p.at("member/renamed.tmp"), p.at("member/renamed")).unwrap();
    let mut f = OpenOptions::new()
        .append(true)
        .open(p.at("member/synced"))
        .unwrap();
    f.write_all(b" and more").unwrap();
    assert_eq!(fs::read(p.at("member/synced")).unwrap(), b"kept and more");
    assert!(fs1.pending_bytes() > 0);

    fs1.cut_power();
    let err = f.write_all(b"x").and_then(|()| f.sync_data()).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EIO), "{err}");
    drop(f);
    fs1.unmount().unwrap();

    let mut names: Vec<String> = fs::read_dir(p.backing.join("member"))
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["renamed.tmp", "synced", "unsynced"]);
    assert_eq!(fs::read(p.backing.join("member/synced")).unwrap(), b"kept");
    assert_eq!(fs::read(p.backing.join("member/unsynced")).unwrap(), b"");
    assert_eq!(
        fs::read_dir(&p.backing).unwrap().count(),
        1,
        "no staging left"
    );

    // Mounted again, the durable state is what a program sees.
    let fs2 = p.mount();
    let mut s = String::new();
    File::open(p.at("member/renamed.tmp"))
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    assert_eq!(s, "renamed");
    fs::rename(p.at("member/renamed.tmp"), p.at("member/renamed")).unwrap();
    sync_dir(&p.at("member"));
    fs::remove_file(p.at("member/unsynced")).unwrap();
    assert_eq!(
        fs::metadata(p.at("member/unsynced")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    drop(fs2);
    assert!(p.backing.join("member/renamed").exists());
    assert!(
        p.backing.join("member/unsynced").exists(),
        "the unlink was not fsynced"
    );
}

#[test]
fn a_big_file_written_in_pieces_reads_back_and_survives_its_fsync() {
    let p = Place::new();
    let Some(lazy) = p.first_mount("a_big_file_written_in_pieces_reads_back") else {
        return;
    };
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut f = File::create(p.at("big")).unwrap();
    for chunk in data.chunks(70_000) {
        f.write_all(chunk).unwrap();
    }
    f.sync_all().unwrap();
    f.set_len(1_000_000).unwrap();
    assert_eq!(fs::read(p.at("big")).unwrap(), data[..1_000_000]);
    sync_dir(&p.mnt);
    drop(f);
    lazy.unmount().unwrap();
    assert_eq!(fs::read(p.backing.join("big")).unwrap(), data);
}

#[test]
fn a_delayed_fsync_waits_while_reads_and_writes_go_on() {
    let p = Place::new();
    let Some(lazy) = p.first_mount("a_delayed_fsync_waits_while_reads_and_writes_go_on") else {
        return;
    };
    write_file(&p.at("other"), b"readable", true);
    let delay = std::time::Duration::from_millis(1500);
    lazy.set_fsync_delay(delay);
    let path = p.at("slow");
    let syncing = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        write_file(&path, b"durable", true);
        started.elapsed()
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Other files are read and written while the fsync waits.
    assert_eq!(fs::read(p.at("other")).unwrap(), b"readable");
    write_file(&p.at("meanwhile"), b"x", false);
    assert!(!syncing.is_finished(), "the fsync did not wait");
    let took = syncing.join().unwrap();
    assert!(took >= delay, "an fsync delayed by {delay:?} took {took:?}");
    lazy.set_fsync_delay(std::time::Duration::ZERO);
    sync_dir(&p.mnt);
    lazy.unmount().unwrap();
    assert_eq!(fs::read(p.backing.join("slow")).unwrap(), b"durable");
}
