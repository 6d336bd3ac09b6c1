//! Power-loss tests: every acknowledged write survives a power cut, not only a `kill -9`.
//!
//! `kill -9` leaves the kernel's page cache intact, so a crash test cannot tell a missing
//! fsync, or a rename or a new file whose directory was never fsynced, from a correct one.
//! Here the data dir lives on a `keel_lazyfs` mount, which keeps everything not yet made
//! durable in a volatile layer that a cut drops (see that crate for what is durable when).
//!
//! One `keel store` runs with a small `--snapshot-count` and small WAL segments (the hidden
//! `--wal-segment-bytes`), so that snapshots, segment rolls and WAL purges (segment deletes,
//! directory fsyncs) happen every few hundred milliseconds. Each
//! round, concurrent writers put unique keys and record every acknowledged put; at a random
//! moment the power is cut (every later filesystem call fails with EIO), the process is
//! killed, the filesystem unmounted and mounted again with the durable state alone, and the
//! store restarted on it. It must start, hold every write acknowledged in any round so far
//! (value and mod_revision), never report a lower revision than one acknowledged, and take a
//! new write above it. Some rounds cut the power again while the restarted store is still
//! recovering (replaying its WAL, repairing a torn tail) before it serves.
//!
//! `KEEL_POWER_CUTS` sets the number of cuts (80 by default); the cut moments come from a
//! seeded PRNG whose seed is printed, replayable with `KEEL_TEST_SEED`. Needs FUSE (root and
//! `/dev/fuse`, as CI has); elsewhere it is skipped, saying so, and in CI a skip is a failure.

use std::path::Path;
use std::time::{Duration, Instant};

use keel_testkit::acked::{Acked, Writers, put_after_restart, verify};
use keel_testkit::disk::power_test;
use keel_testkit::{Flavor, Rng, Server, ServerOpts, target_flavor};

/// Concurrent writers per round.
const WRITERS: usize = 4;
/// The keys this test writes under.
const PREFIX: &str = "pl/";
/// Entries between snapshots (each followed by a WAL purge).
const SNAPSHOT_COUNT: &str = "--snapshot-count=40";
/// A WAL segment size (keel only) that makes purges delete segments every few snapshots.
const WAL_SEGMENT_BYTES: &str = "--wal-segment-bytes=4096";

/// The names of the WAL segment files in `data_dir` (their sequence numbers tell how many
/// rolls there were; the missing ones were purged).
fn wal_segments(data_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data_dir.join("member").join("wal"))
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_power_cuts() {
    let Some((mut disk, cuts, guard)) = power_test("power_loss", "KEEL_POWER_CUTS", 80) else {
        return;
    };
    let seed = guard.seed;
    let mut rng = Rng::new(seed);
    let flavor = target_flavor();
    let opts = ServerOpts {
        data_dir: Some(disk.mnt.join("data")),
        args: match flavor {
            Flavor::Keel => vec![SNAPSHOT_COUNT.into(), WAL_SEGMENT_BYTES.into()],
            Flavor::Etcd => vec![SNAPSHOT_COUNT.into()],
        },
        ..Default::default()
    };
    let mut server = Server::start_with(flavor, opts);
    let started = Instant::now();
    let mut all = Acked::new();
    let mut max_rev = 1;
    let mut recovery_cuts = 0;
    for round in 0..cuts {
        let context = format!("cut {round} (KEEL_TEST_SEED={seed})");
        let writers = Writers::start(&server, PREFIX, round, WRITERS).await;
        writers.wait_acked(1 + rng.below(30) as usize).await;
        tokio::time::sleep(Duration::from_millis(rng.below(400))).await;
        disk.cut();
        server.kill();
        let acked = writers.finish().await;
        max_rev = max_rev.max(acked.values().map(|(_, r)| *r).max().unwrap_or(0));
        all.extend(acked);
        disk.remount();
        if rng.chance(1, 5) {
            // Cut again while the store recovers from the first cut.
            recovery_cuts += 1;
            server.respawn();
            std::thread::sleep(Duration::from_millis(rng.below(300)));
            disk.cut();
            server.kill();
            disk.remount();
        }
        server.restart();
        max_rev = verify(&mut server, PREFIX, &all, max_rev, &context).await;
        let key = format!("{PREFIX}after/{round}");
        max_rev = put_after_restart(&mut server, &key, max_rev, &context).await;
    }
    let segments = wal_segments(&server.data_dir);
    eprintln!(
        "power_loss: {cuts} cuts (+{recovery_cuts} during recovery), {} acknowledged writes \
         kept, revision {max_rev}, in {:.1?}; WAL segments now: {segments:?}",
        all.len(),
        started.elapsed()
    );
    server.kill();
    std::mem::forget(guard);
}
