//! Power cuts during `keel snapshot restore`: the target folder is either absent (the old
//! state: nothing) or the complete restored one, never a half-written store.
//!
//! A backup of a keel store holding 2,000 keys (some of 8 KiB) is made once with `keel
//! snapshot save`. Each round restores it with `keel snapshot restore` into a new folder on a
//! `keel_lazyfs` mount (which drops everything not made durable when the power is cut) and
//! cuts the power: in even rounds after a delay the seeded PRNG picks within the first four
//! fifths of the time an uncut restore takes, in odd rounds as soon as the restore exits
//! successfully (what it reported done must survive). The restore is killed, the mount
//! remounted with its durable state alone, and then: if the target folder exists, a `keel
//! store` started on its store must serve every key of the backup; if it does not, nothing
//! was promised (but a restore that exited successfully must have left it). With 6 cuts or
//! more, some must have landed before the folder appeared.
//!
//! `KEEL_RESTORE_CUTS` sets the number of cuts (8 by default); the seed is printed and
//! replayable with `KEEL_TEST_SEED`. Needs FUSE (root and `/dev/fuse`, as CI has); elsewhere
//! it is skipped, saying so, and in CI a skip is a failure.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use keel_testkit::disk::power_test;
use keel_testkit::{CtlVersion, Flavor, Rng, Server, ServerOpts, etcdctl, keel_bin};

/// Keys in the backup.
const KEYS: usize = 2000;

/// Puts `KEYS` keys into the store at `endpoint` (in txns of 100), every tenth with an
/// 8 KiB value.
fn fill(endpoint: &str) {
    for batch in 0..KEYS / 100 {
        let mut ops = String::from("\n");
        for i in batch * 100..(batch + 1) * 100 {
            let value = if i % 10 == 0 {
                "v".repeat(8 << 10)
            } else {
                format!("v{i}")
            };
            ops.push_str(&format!("put k/{i:05} {value}\n"));
        }
        ops.push_str("\n\n");
        let out = etcdctl(CtlVersion::V35, endpoint, &["txn".into()], Some(&ops));
        assert_eq!(out.code, 0, "txn: {}", out.stderr);
    }
}

/// The number of keys under `k/` the store at `endpoint` serves.
fn count(endpoint: &str) -> usize {
    let args = ["get", "k/", "--prefix", "--keys-only"].map(String::from);
    let out = etcdctl(CtlVersion::V35, endpoint, &args, None);
    assert_eq!(out.code, 0, "get: {}", out.stderr);
    out.stdout.lines().filter(|l| l.starts_with("k/")).count()
}

/// `keel snapshot restore BACKUP --data-dir TARGET`, as a child process.
fn restore(backup: &Path, target: &Path) -> Command {
    let mut cmd = Command::new(keel_bin());
    cmd.args(["snapshot", "restore"])
        .arg(backup)
        .arg(format!("--data-dir={}", target.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd
}

#[test]
fn a_power_cut_during_a_restore_leaves_no_folder_or_the_whole_one() {
    let Some((mut disk, cuts, seed)) =
        power_test("snapshot_restore_power_loss", "KEEL_RESTORE_CUTS", 8)
    else {
        return;
    };
    let mut rng = Rng::new(seed.seed);
    let source = Server::start(Flavor::Keel);
    fill(&source.endpoint);
    let work = tempfile::tempdir().unwrap();
    let backup = work.path().join("backup");
    let out = Command::new(keel_bin())
        .args(["snapshot", "save"])
        .arg(&backup)
        .arg(format!("--etcd-servers={}", source.client_url))
        .output()
        .expect("run keel snapshot save");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(source);

    // How long an uncut restore takes on this mount.
    let started = Instant::now();
    let status = restore(&backup, &disk.mnt.join("timed")).status().unwrap();
    assert!(status.success(), "an uncut restore failed");
    let full = started.elapsed();
    let (mut before, mut after) = (0, 0);
    for round in 0..cuts {
        let target = disk.mnt.join(format!("round-{round}"));
        let mut child = restore(&backup, &target).spawn().unwrap();
        let started = Instant::now();
        if round % 2 == 0 {
            // While it runs: somewhere in the first four fifths of an uncut restore's time.
            let delay = rng.below(full.as_micros() as u64 * 4 / 5 + 1);
            std::thread::sleep(Duration::from_micros(delay));
        } else {
            // Right after it answered: what it reported done must be durable.
            let status = child.wait().unwrap();
            assert!(status.success(), "round {round}: an uncut restore failed");
        }
        let delay = started.elapsed();
        disk.cut();
        let _ = child.kill();
        let _ = child.wait();
        disk.remount();
        if !target.exists() {
            assert!(
                round % 2 == 0,
                "round {round}: a restore that exited successfully lost its folder to the cut"
            );
            before += 1;
            eprintln!("round {round}: cut after {delay:?}: no folder");
            continue;
        }
        after += 1;
        let store = Server::start_with(
            Flavor::Keel,
            ServerOpts {
                data_dir: Some(target.join("main")),
                ..Default::default()
            },
        );
        assert_eq!(
            count(&store.endpoint),
            KEYS,
            "round {round}: cut after {delay:?}: the restored folder misses keys"
        );
        eprintln!("round {round}: cut after {delay:?}: complete folder");
    }
    eprintln!("cuts: {before} before the folder appeared, {after} after (uncut: {full:?})");
    if cuts >= 2 {
        assert!(after > 0, "no restore reported done survived its power cut");
    }
    if cuts >= 6 {
        assert!(before > 0, "no cut landed before the folder appeared");
    }
    std::mem::forget(seed);
}
