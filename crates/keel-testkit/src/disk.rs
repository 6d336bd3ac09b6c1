//! A data folder on a `keel_lazyfs` mount, whose power can be cut: the power-loss tests.

use std::path::PathBuf;

use keel_lazyfs::LazyFs;

use super::{SeedReport, base_seed};

/// A backing folder, the mountpoint a store's data dir lives under, and the mount, in a
/// temp folder of their own.
pub struct Disk {
    // Declared before the temp folder, so it is unmounted before the folder is removed.
    fs: Option<LazyFs>,
    backing: PathBuf,
    /// Where the lazy filesystem is mounted.
    pub mnt: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Disk {
    /// Mounts an empty lazy filesystem in a fresh temp folder named after `test`; why not,
    /// if this machine cannot.
    pub fn new(test: &str) -> Result<Disk, String> {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("keel-{test}-"))
            .tempdir()
            .map_err(|e| format!("create a temp folder: {e}"))?;
        let (backing, mnt) = (tmp.path().join("backing"), tmp.path().join("mnt"));
        for d in [&backing, &mnt] {
            std::fs::create_dir(d).map_err(|e| format!("create {}: {e}", d.display()))?;
        }
        let fs = keel_lazyfs::mount(&backing, &mnt).map_err(|e| {
            format!("cannot mount a FUSE filesystem (needs /dev/fuse and root): {e}")
        })?;
        Ok(Disk {
            fs: Some(fs),
            backing,
            mnt,
            _tmp: tmp,
        })
    }

    /// Cuts the power: from now on the store's filesystem calls fail with EIO.
    pub fn cut(&self) {
        self.fs.as_ref().expect("mounted").cut_power();
    }

    /// Makes every later fsync wait `delay` first (a slow disk); zero turns it off.
    pub fn slow_fsync(&self, delay: std::time::Duration) {
        self.fs.as_ref().expect("mounted").set_fsync_delay(delay);
    }

    /// Unmounts (the store must be gone) and mounts the durable state again.
    pub fn remount(&mut self) {
        self.fs
            .take()
            .expect("mounted")
            .unmount()
            .expect("unmount the lazy filesystem");
        let fs = keel_lazyfs::mount(&self.backing, &self.mnt).expect("mount the durable state");
        self.fs = Some(fs);
    }
}

/// Sets up the power-loss test `test`: its [`Disk`], its number of cuts (the environment
/// variable `cuts_var`, else `default_cuts`) and its seed, both printed, the seed again if it
/// fails while the guard lives. `None` if this machine cannot mount the disk: the test is
/// skipped, saying so ([`super::skip`]).
pub fn power_test(
    test: &'static str,
    cuts_var: &str,
    default_cuts: usize,
) -> Option<(Disk, usize, SeedReport)> {
    let disk = match Disk::new(test) {
        Ok(disk) => disk,
        Err(e) => {
            super::skip(test, &e);
            return None;
        }
    };
    let cuts = std::env::var(cuts_var)
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("{cuts_var} must be a number, not `{s}`"))
        })
        .unwrap_or(default_cuts);
    let seed = base_seed();
    eprintln!("{test}: {cuts} cuts, seed {seed}");
    Some((disk, cuts, SeedReport { test, seed }))
}
