//! Crash tests: every acknowledged write survives `kill -9`, and a torn WAL tail is repaired.
//!
//! Each round runs concurrent writers that put unique keys and record every acknowledged put
//! (key, value, revision), kills the server with SIGKILL at a random moment, restarts it on the
//! same data dir, and then checks that every write acknowledged in any round so far is read back
//! with its value and acknowledged mod_revision, and that the store revision never went
//! backwards. The torn-write variant also writes a partial record right after the last record
//! of the live WAL segment (`<data-dir>/member/wal/*.wal`, the highest name; zero-filled ahead
//! in both keel and etcd) before restarting, as a write cut short by the crash leaves it when
//! sectors are written whole or not at all: a record header claiming more than one sector,
//! random bytes up to the end of the header's sector, and the record's later sectors never
//! written (zeros). Random bytes with a random length field are not a torn write under that
//! model but damage, which keel and etcd both refuse to start on (`--test wal_damage`).
//!
//! Run against etcd 3.5.1 (`KEEL_TEST_TARGET=etcd`) these tests can fail, and that is etcd's
//! bug, not the test's: its consistent index is not saved atomically with the data, so a kill
//! can drop an acknowledged write and shift every later revision down by one
//! (etcd-io/etcd#13766, fixed in 3.5.3).
//!
//! The kill moment comes from a seeded PRNG; the seed is printed on failure and can be replayed
//! with `KEEL_TEST_SEED`.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_proto::etcdserverpb::PutRequest;
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_testkit::acked::{Acked, Writers, put_after_restart, verify};
use keel_testkit::{Flavor, Rng, Server, base_seed, target_flavor};

/// Concurrent writers per round.
const WRITERS: usize = 6;
/// The keys every crash test writes under.
const PREFIX: &str = "crash/";

/// Runs writers against `server` until it is killed at a random moment, returning what they
/// saw acknowledged.
async fn load_and_kill(server: &mut Server, round: usize, rng: &mut Rng) -> Acked {
    let writers = Writers::start(server, PREFIX, round, WRITERS).await;
    // Let some writes through first so every round has acknowledged data to lose.
    writers.wait_acked(20).await;
    tokio::time::sleep(Duration::from_millis(rng.below(1500))).await;
    server.kill();
    writers.finish().await
}

/// The live WAL segment: the highest-named `*.wal` file in `<data-dir>/member/wal`.
fn live_wal_segment(data_dir: &Path) -> PathBuf {
    let dir = data_dir.join("member").join("wal");
    let mut segs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    segs.sort();
    segs.pop()
        .unwrap_or_else(|| panic!("no *.wal segment in {}", dir.display()))
}

/// Where the records of a WAL segment end: the first frame whose length field is zero (both
/// keel and etcd keep the live segment zero-filled ahead of the last record), or the file end.
///
/// Frames are 8-byte aligned in both formats. keel: `len: u32` (bit 31 = end of batch) + `crc:
/// u32` + body of `len` bytes, padded to 8. etcd: `u64` length field whose low 56 bits are the
/// record size and, when bit 63 is set, bits 56..59 the padding.
fn logical_end(flavor: Flavor, bytes: &[u8]) -> usize {
    let mut off = 0usize;
    while off + 8 <= bytes.len() {
        let word = u64::from_le_bytes(bytes[off..off + 8].try_into().unwrap());
        if word == 0 {
            return off;
        }
        let frame = match flavor {
            Flavor::Keel => {
                let body = (word as u32 & 0x7fff_ffff) as usize;
                (8 + body).div_ceil(8) * 8
            }
            Flavor::Etcd => {
                let rec = (word & 0x00ff_ffff_ffff_ffff) as usize;
                let pad = if word >> 63 == 1 {
                    ((word >> 56) & 0x7) as usize
                } else {
                    0
                };
                8 + rec + pad
            }
        };
        off += frame;
    }
    bytes.len().min(off)
}

/// Writes a torn record right after the last record of `path` (where the next write would
/// have gone), as a write cut short at a sector boundary leaves it (see the file docs).
/// Returns a description for failure messages.
fn write_torn_record(flavor: Flavor, path: &Path, rng: &mut Rng) -> String {
    const SECTOR: usize = 512;
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let at = logical_end(flavor, &bytes);
    // The sector holding the header was written; the record runs at least one sector past it.
    let written = (at + 8).next_multiple_of(SECTOR) - at;
    let claimed = (written + SECTOR) as u64 + rng.below(4096);
    let mut torn = claimed.to_le_bytes().to_vec();
    torn.extend((8..written).map(|_| rng.next_u64() as u8));
    let kind = format!("a header claiming {claimed} bytes written up to its sector's end");
    let mut f = OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    // The zero-filled region covers every write (the server extends it before writing).
    let end = (at as u64 + 8 + claimed).next_multiple_of(8);
    if end > bytes.len() as u64 {
        f.set_len(end).expect("extend the zero-filled region");
    }
    f.seek(SeekFrom::Start(at as u64))
        .expect("seek to the end of the records");
    f.write_all(&torn).expect("write torn record");
    f.sync_all().expect("sync wal segment");
    format!(
        "{kind} at offset {at} (file length {}) of {}",
        bytes.len(),
        path.display()
    )
}

/// Runs `rounds` kill/restart rounds (`KEEL_CRASH_ROUNDS` overrides it, for a soak); with
/// `torn`, each restart follows a torn WAL tail.
async fn crash_rounds(rounds: usize, torn: bool) {
    let rounds: usize = std::env::var("KEEL_CRASH_ROUNDS").map_or(rounds, |s| {
        s.parse()
            .unwrap_or_else(|_| panic!("KEEL_CRASH_ROUNDS must be a number, not `{s}`"))
    });
    let seed = base_seed();
    eprintln!("crash test seed: KEEL_TEST_SEED={seed}");
    let mut rng = Rng::new(seed);
    let mut server = Server::start(target_flavor());
    let mut all = Acked::new();
    let mut max_rev = 1;
    for round in 0..rounds {
        let acked = load_and_kill(&mut server, round, &mut rng).await;
        let round_max = acked.values().map(|(_, r)| *r).max().unwrap_or(0);
        max_rev = max_rev.max(round_max);
        all.extend(acked);
        let mut context = format!("round {round} (KEEL_TEST_SEED={seed})");
        if torn {
            let seg = live_wal_segment(&server.data_dir);
            let what = write_torn_record(server.flavor, &seg, &mut rng);
            eprintln!("round {round}: wrote {what}");
            context.push_str(&format!(", after writing {what}"));
        }
        server.restart();
        max_rev = verify(&mut server, PREFIX, &all, max_rev, &context).await;
        let key = format!("{PREFIX}after/{round}");
        max_rev = put_after_restart(&mut server, &key, max_rev, &context).await;
    }
    assert!(
        all.len() >= 20 * rounds,
        "only {} writes were acknowledged in {rounds} rounds",
        all.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9() {
    crash_rounds(5, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_wal_tail_is_repaired() {
    crash_rounds(3, true).await;
}

/// A server killed while idle restarts with exactly the same data, twice in a row (recovery
/// must itself be crash-safe, e.g. a repair interrupted by another kill).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_restarts_without_writes_keep_everything() {
    let mut server = Server::start(target_flavor());
    let mut kv = KvClient::new(server.channel().await);
    let mut acked = Acked::new();
    for i in 0..50 {
        let key = format!("crash/idle/{i:03}");
        let value = format!("v{i}");
        let rev = kv
            .put(PutRequest {
                key: key.clone().into_bytes(),
                value: value.clone().into_bytes(),
                ..Default::default()
            })
            .await
            .expect("put")
            .into_inner()
            .header
            .unwrap()
            .revision;
        acked.insert(key, (value, rev));
    }
    let mut rev = acked.values().map(|(_, r)| *r).max().unwrap();
    for attempt in 0..3 {
        server.restart();
        let now = verify(
            &mut server,
            PREFIX,
            &acked,
            rev,
            &format!("idle restart {attempt}"),
        )
        .await;
        assert_eq!(
            now, rev,
            "idle restart {attempt}: revision changed without writes"
        );
        rev = now;
    }
}
