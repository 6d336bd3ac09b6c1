//! A damaged or shortened WAL stops the member with a clear error instead of silently dropping
//! acknowledged writes, as etcd refuses to start on a corrupt WAL.
//!
//! - A flipped bit in the length field of a record in the middle of the live segment, with
//!   acknowledged batches after it: the member exits non-zero naming the corrupt segment, and
//!   the segment is left untouched (no "torn tail" truncation).
//! - The live segment cut at a record boundary half-way through, as a file system that lost
//!   its tail would leave it: the commit point is lost with the tail, but the live segment's
//!   file always extends past its last write (zero-filled ahead), so the member exits non-zero
//!   naming the truncated segment instead of starting at an older revision.
//! - Every WAL segment gone (a data folder of one segment, the usual case, that lost it):
//!   the member exits non-zero saying its log is lost, instead of starting an empty log
//!   under its old identity (forgetting acknowledged writes and its vote).
//! - A log that ends before the persisted commit point (here the last entries removed with a
//!   Truncate record, which is what any undetected loss of the tail looks like): the member
//!   exits non-zero saying acknowledged entries are missing.

use std::fs;
use std::path::{Path, PathBuf};

use keel_testkit::kv::put;
use keel_testkit::{Flavor, Server};
use keel_wal::{Batch, Wal, WalOptions};

/// Puts acknowledged before the damage.
const PUTS: usize = 40;

/// The live (highest-named) WAL segment of `server`.
fn live_segment(server: &Server) -> PathBuf {
    let dir = server.data_dir.join("member/wal");
    let mut segs: Vec<_> = fs::read_dir(&dir)
        .expect("read wal dir")
        .map(|d| d.expect("dirent").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    segs.sort();
    segs.pop().expect("a WAL segment")
}

/// Offsets of the records in a segment (`len: u32` with the end-of-batch flag in bit 31, then
/// the CRC and the body, padded to 8 bytes), up to the zero-filled tail.
fn record_offsets(data: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut off = 0;
    while off + 8 <= data.len() {
        let len = u32::from_le_bytes(data[off..off + 4].try_into().unwrap()) & !(1 << 31);
        if len == 0 {
            break;
        }
        offsets.push(off);
        off += (8 + len as usize).next_multiple_of(8);
    }
    offsets
}

async fn started_with_writes() -> Server {
    let server = Server::start(Flavor::Keel);
    for i in 0..PUTS {
        put(&server, &format!("k/{i:03}")).await.expect("put");
    }
    server
}

/// Restarts `server` and returns its log, asserting that it did not become ready but exited
/// non-zero.
fn assert_refuses_to_start(server: &mut Server) -> String {
    let err = server
        .try_restart()
        .expect_err("the member must refuse to start");
    // The harness reaped the process and says how it ended: an exit code, and not 0.
    assert!(
        err.contains("exited with exit status: ")
            && !err.contains("exited with exit status: 0 before"),
        "the member must exit non-zero: {err}"
    );
    err
}

#[tokio::test]
async fn flipped_length_bit_mid_segment_stops_the_member() {
    let mut server = started_with_writes().await;
    server.kill();
    let seg = live_segment(&server);
    let mut data = fs::read(&seg).expect("read segment");
    let offsets = record_offsets(&data);
    assert!(offsets.len() > PUTS, "{} records", offsets.len());
    let at = offsets[offsets.len() / 2];
    data[at] ^= 0x04;
    fs::write(&seg, &data).expect("damage a length field");

    let err = assert_refuses_to_start(&mut server);
    assert!(
        err.contains("wal corrupt") && err.contains(&format!("at offset {at}")),
        "{err}"
    );
    assert_eq!(
        fs::read(&seg).expect("read segment"),
        data,
        "nothing truncated"
    );
}

#[tokio::test]
async fn live_segment_cut_at_a_record_boundary_stops_the_member() {
    let mut server = started_with_writes().await;
    server.kill();
    let seg = live_segment(&server);
    let data = fs::read(&seg).expect("read segment");
    let offsets = record_offsets(&data);
    assert!(offsets.len() > PUTS, "{} records", offsets.len());
    let at = offsets[offsets.len() / 2];
    fs::write(&seg, &data[..at]).expect("cut the segment");

    let err = assert_refuses_to_start(&mut server);
    assert!(err.contains("wal corrupt"), "{err}");
    assert_eq!(
        fs::read(&seg).expect("read segment").len(),
        at,
        "nothing changed"
    );
}

#[tokio::test]
async fn a_lost_wal_stops_the_member() {
    let mut server = started_with_writes().await;
    server.kill();
    let seg = live_segment(&server);
    fs::remove_file(&seg).expect("lose the only segment");
    assert!(
        !fs::read_dir(seg.parent().unwrap()).unwrap().any(|d| d
            .unwrap()
            .path()
            .extension()
            .is_some_and(|e| e == "wal")),
        "one segment only"
    );

    let err = assert_refuses_to_start(&mut server);
    assert!(err.contains("this member's log is lost"), "{err}");
}

#[tokio::test]
async fn log_shorter_than_its_commit_point_stops_the_member() {
    // No wait for the commit point: the puts are sequential, and keel acknowledges a put only
    // once its entry is fsynced in a WAL batch that also carries the commit point as it was
    // when the batch was written (openraft saves the commit point before it applies, and a
    // put is answered after it is applied). So when the last put is answered, the WAL holds a
    // commit point at or past the put before it: truncating the last 5 entries cuts below it.
    // `truncate_last` checks exactly that in the WAL before it truncates.
    let mut server = started_with_writes().await;
    server.kill();
    truncate_last(&server.data_dir.join("member/wal"), 5);

    let err = assert_refuses_to_start(&mut server);
    assert!(err.contains("acknowledged entries are missing"), "{err}");
}

/// The durable commit point in the WAL's state record, as a WAL index (keel's log store:
/// `vote_len: u8`, the vote, `purged_len: u8`, the last purged log id, then the committed log
/// id, `term: u64` and Raft `index: u64` little-endian; WAL index = Raft index + 1).
fn durable_commit(state: &[u8]) -> Option<u64> {
    let vote_len = *state.first()? as usize;
    let rest = state.get(1 + vote_len..)?;
    let purged_len = *rest.first()? as usize;
    let committed = rest.get(1 + purged_len..)?;
    let index = committed.get(8..16)?;
    Some(u64::from_le_bytes(index.try_into().ok()?) + 1)
}

/// Drops the last `n` entries of the WAL in `dir`, after checking that the WAL's durable
/// commit point covers the first of them (so the log ends before it afterwards).
fn truncate_last(dir: &Path, n: u64) {
    let (mut wal, recovered) = Wal::open(dir, WalOptions::default()).expect("open wal");
    let from = wal.last_index() - n + 1;
    let state = recovered.state.expect("the WAL has a state record");
    let committed = durable_commit(&state)
        .unwrap_or_else(|| panic!("the WAL's state record holds no commit point: {state:?}"));
    assert!(
        committed >= from,
        "the durable commit point is WAL index {committed}, before the entries from {from} to \
         {} that are about to be dropped: the last acknowledged put's batch should have \
         carried the commit point of the put before it",
        wal.last_index()
    );
    wal.append(&Batch {
        truncate_from: Some(from),
        ..Batch::default()
    })
    .expect("truncate");
}
