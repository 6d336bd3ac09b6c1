//! Torn-tail repair and corruption detection, modelled on etcd's `repair_test.go`.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use keel_wal::{Batch, Recovered, Wal, WalError, WalOptions};

/// Opens without zero-fill, so file lengths are exactly the bytes of the batches written.
fn open(dir: &Path, segment_bytes: u64) -> Result<(Wal, Recovered), WalError> {
    Wal::open(
        dir,
        WalOptions {
            segment_bytes,
            zero_fill: false,
        },
    )
}

fn open_zero_filled(dir: &Path, segment_bytes: u64) -> Result<(Wal, Recovered), WalError> {
    Wal::open(
        dir,
        WalOptions {
            segment_bytes,
            zero_fill: true,
        },
    )
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<_> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|d| d.expect("dirent").path())
        .collect();
    paths.sort();
    paths
}

fn len(path: &Path) -> u64 {
    fs::metadata(path).expect("stat").len()
}

fn entry(i: u64, size: usize) -> (u64, Vec<u8>) {
    (i, (0..size).map(|b| (b as u64 + i) as u8 | 1).collect())
}

/// Appends one batch per index (entry + state) and returns the last segment's length after
/// each batch (`ends[i]` is the end of the batch of index `i + 1`).
fn write(wal: &mut Wal, indexes: std::ops::RangeInclusive<u64>, size: usize) -> Vec<u64> {
    indexes
        .map(|i| {
            let batch = Batch {
                entries: vec![entry(i, size)],
                state: Some(format!("s{i}").into_bytes()),
                ..Batch::default()
            };
            wal.append(&batch).expect("append");
            len(segments(wal.dir()).last().expect("a segment"))
        })
        .collect()
}

fn xor_byte(path: &Path, at: u64, mask: u8) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open");
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).expect("read");
    f.write_all_at(&[b[0] ^ mask], at).expect("write");
}

/// After repair the log holds 1..=`good` with the matching state, accepts further appends and
/// keeps them across a reopen.
fn check_repaired(dir: &Path, good: u64, size: usize) {
    let (mut wal, rec) = open(dir, 1 << 20).expect("open repairs the tail");
    assert_eq!(
        rec.entries,
        (1..=good).map(|i| entry(i, size)).collect::<Vec<_>>()
    );
    assert_eq!(rec.state, Some(format!("s{good}").into_bytes()));
    write(&mut wal, good + 1..=good + 3, size);
    drop(wal);
    let (_, rec) = open(dir, 1 << 20).expect("reopen");
    assert_eq!(
        rec.entries,
        (1..=good + 3).map(|i| entry(i, size)).collect::<Vec<_>>()
    );
}

#[test]
fn torn_last_batch_at_every_offset() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open(tmp.path(), 1 << 20).expect("open");
    let ends = write(&mut wal, 1..=10, 20);
    drop(wal);
    let seg = &segments(tmp.path())[0];
    let pristine = fs::read(seg).expect("read");
    let (start, end) = (ends[8], ends[9]);
    for cut in start..end {
        fs::write(seg, &pristine[..cut as usize]).expect("restore + cut");
        check_repaired(tmp.path(), 9, 20);
        assert!(
            len(seg) > start,
            "appends continue after the repaired point"
        );
    }
}

#[test]
fn a_cut_short_tail_is_repaired_and_a_whole_bad_record_is_corruption() {
    let mut lcg = 0x2545_f491_u64;
    let random: Vec<u8> = (0..3000)
        .map(|_| {
            lcg = lcg.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (lcg >> 33) as u8
        })
        .collect();
    let plausible_header = [16, 0, 0, 0x80, 1, 2, 3, 4, 2, 0, 0, 0, 0, 0, 0, 0];
    for (tail, torn) in [
        (vec![0u8; 4096], true),
        // Its first length field claims more than the file holds: a write cut short.
        (random, true),
        (plausible_header.to_vec(), false),
    ] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (mut wal, _) = open(tmp.path(), 1 << 20).expect("open");
        let ends = write(&mut wal, 1..=5, 30);
        drop(wal);
        let seg = &segments(tmp.path())[0];
        let mut data = fs::read(seg).expect("read");
        // Then a stale copy of the last record (the state), whose CRC chain cannot match.
        let last_record = data[data.len() - 16..].to_vec();
        data.extend_from_slice(&tail);
        data.extend_from_slice(&last_record);
        fs::write(seg, data).expect("write garbage");
        if !torn {
            // Bytes written whole after the last batch that do not chain: a torn write
            // leaves zeros or a short file, never these (etcd refuses such a WAL too).
            assert_corrupt(
                tmp.path(),
                false,
                seg,
                ends[4],
                "garbage after the last batch",
            );
            continue;
        }
        let (wal, _) = open(tmp.path(), 1 << 20).expect("open");
        assert_eq!(len(seg), ends[4], "file truncated to the last good batch");
        drop(wal);
        check_repaired(tmp.path(), 5, 30);
    }
}

#[test]
fn torn_middle_of_last_batch_drops_the_batch() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open(tmp.path(), 1 << 20).expect("open");
    write(&mut wal, 1..=3, 600);
    let start = len(&segments(tmp.path())[0]);
    let batch = Batch {
        entries: (4..=8).map(|i| entry(i, 600)).collect(),
        state: Some(b"s8".to_vec()),
        ..Batch::default()
    };
    wal.append(&batch).expect("append");
    drop(wal);
    // A sector inside the second record of the batch never reached the disk (sectors are
    // aligned to file offsets).
    let seg = &segments(tmp.path())[0];
    let f = OpenOptions::new().write(true).open(seg).expect("open");
    f.write_all_at(&[0; 512], (start + 700).next_multiple_of(512))
        .expect("zero a sector");
    check_repaired(tmp.path(), 3, 600);
}

/// Asserts that opening (with or without zero-fill) reports corruption at `offset` of `seg`
/// and truncates nothing.
fn assert_corrupt(dir: &Path, zero_fill: bool, seg: &Path, offset: u64, what: &str) {
    let before = len(seg);
    let opened = if zero_fill {
        open_zero_filled(dir, 1 << 20)
    } else {
        open(dir, 1 << 20)
    };
    match opened {
        Err(WalError::Corrupt {
            segment,
            offset: at,
        }) => {
            assert_eq!((segment.as_path(), at), (seg, offset), "{what}");
        }
        other => panic!("{what}: expected corruption, got {other:?}"),
    }
    assert_eq!(len(seg), before, "{what}: nothing was truncated");
}

#[test]
fn damage_followed_by_later_batches_is_corruption() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open(tmp.path(), 1 << 20).expect("open");
    let ends = write(&mut wal, 1..=9, 20);
    drop(wal);
    let seg = &segments(tmp.path())[0];
    // Each batch is an entry record of 40 bytes (8 header, 1 type, 8 index, 20 data, 3 pad)
    // and a state record of 16. Batch 5 has four batches after it; batch 8 only the last one,
    // so a damaged length field there leaves a single later batch to find.
    assert_eq!(ends[4] - ends[3], 40 + 16);
    for batch in [5, 8] {
        let start = ends[batch - 2];
        for at in start..ends[batch - 1] {
            let record = if at < start + 40 { start } else { start + 40 };
            for mask in [0x01, 0x10, 0x55, 0x80] {
                xor_byte(seg, at, mask);
                let what = format!("batch {batch}: flip {mask:#x} at {at}");
                assert_corrupt(tmp.path(), false, seg, record, &what);
                xor_byte(seg, at, mask);
            }
        }
    }
    // A record whose length now points past the end of the file, with later batches intact.
    let pristine = fs::read(seg).expect("read");
    let f = OpenOptions::new().write(true).open(seg).expect("open");
    f.write_all_at(&0x7fff_0000_u32.to_le_bytes(), ends[3])
        .expect("damage a length");
    assert_corrupt(tmp.path(), false, seg, ends[3], "length past the end");
    fs::write(seg, &pristine).expect("restore");
    // A bit flip in the last record of the last batch, written whole (no never-written
    // sector in it), is corruption too: a torn write leaves zeros or a short file.
    xor_byte(seg, ends[7] + 44, 0x55);
    assert_corrupt(
        tmp.path(),
        false,
        seg,
        ends[7] + 40,
        "flip in the last record",
    );
}

#[test]
fn damage_in_the_last_batch_is_torn_only_if_a_torn_write_explains_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open(tmp.path(), 1 << 20).expect("open");
    let ends = write(&mut wal, 1..=6, 20);
    drop(wal);
    let seg = &segments(tmp.path())[0];
    let pristine = fs::read(seg).expect("read");
    let start = ends[4];
    for at in start..ends[5] {
        fs::write(seg, &pristine).expect("restore");
        xor_byte(seg, at, 0x55);
        let state = start + 40;
        if at < state {
            // A flipped bit in the entry record, with its batch's state record intact after
            // it: a torn write leaves zeros, never flipped bits.
            assert_corrupt(tmp.path(), false, seg, start, &format!("flip at {at}"));
        } else if at < state + 4 && runs_past_the_end(seg, state) {
            // A length field that now claims more than the file holds: a write cut short.
            check_repaired(tmp.path(), 5, 20);
        } else {
            // The last record is all there: a flipped bit is not what a torn write leaves.
            assert_corrupt(tmp.path(), false, seg, state, &format!("flip at {at}"));
        }
    }
}

/// Whether the record at `off` of `seg` claims, by its length field, more bytes than the
/// file holds.
fn runs_past_the_end(seg: &Path, off: u64) -> bool {
    let data = fs::read(seg).expect("read");
    let off = off as usize;
    let len = u32::from_le_bytes(data[off..off + 4].try_into().unwrap()) & !(1 << 31);
    off + (8 + len as usize).div_ceil(8) * 8 > data.len()
}

#[test]
fn damage_before_a_zero_filled_tail_is_corruption() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open_zero_filled(tmp.path(), 1 << 20).expect("open");
    write(&mut wal, 1..=6, 20);
    drop(wal);
    let seg = &segments(tmp.path())[0];
    let data = fs::read(seg).expect("read");
    assert!(data.ends_with(&[0; 4096]), "the tail is zero-filled");
    // The header batch is 16 bytes (Seed) and each batch 56: flip bits in the length of
    // batch 3, which then points into later batches or into the zeros.
    let record = 16 + 2 * 56;
    for at in record..record + 4 {
        for mask in [0x04, 0x40] {
            xor_byte(seg, at, mask);
            let what = format!("flip {mask:#x} at {at}");
            assert_corrupt(tmp.path(), true, seg, record, &what);
            xor_byte(seg, at, mask);
        }
    }
}

#[test]
fn any_damage_in_a_non_last_segment_is_corruption() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open(tmp.path(), 128).expect("open");
    write(&mut wal, 1..=40, 20);
    drop(wal);
    let segs = segments(tmp.path());
    assert!(segs.len() >= 4, "{} segments", segs.len());
    for seg in &segs[..2] {
        for at in 0..len(seg) {
            xor_byte(seg, at, 0x01);
            match open(tmp.path(), 128) {
                Err(WalError::Corrupt { segment, offset }) => {
                    assert_eq!(&segment, seg);
                    assert!(offset <= at, "flip at {at} reported at {offset}");
                }
                other => panic!("flip at {at} of {seg:?}: expected corruption, got {other:?}"),
            }
            xor_byte(seg, at, 0x01);
        }
    }
    let (_, rec) = open(tmp.path(), 128).expect("intact again");
    assert_eq!(rec.entries.len(), 40);
}

#[test]
fn missing_segment_or_damaged_header_is_corruption() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open(tmp.path(), 128).expect("open");
    write(&mut wal, 1..=20, 20);
    drop(wal);
    let segs = segments(tmp.path());
    let last = segs.last().expect("last");

    // A header is durable before its segment exists, so a short one is not a torn write.
    let pristine = fs::read(last).expect("read");
    fs::write(last, &pristine[..5]).expect("cut header");
    assert!(matches!(
        open(tmp.path(), 128),
        Err(WalError::Corrupt { segment, offset: 0 }) if &segment == last
    ));
    fs::write(last, &pristine).expect("restore");

    fs::remove_file(&segs[1]).expect("remove a middle segment");
    assert!(matches!(
        open(tmp.path(), 128),
        Err(WalError::Corrupt { segment, offset: 0 }) if segment == segs[2]
    ));
}

#[test]
fn zero_filled_tail_is_kept_and_segments_close_exact() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open_zero_filled(tmp.path(), 8 * 1024).expect("open");
    write(&mut wal, 1..=40, 700);
    let segs = segments(tmp.path());
    assert!(segs.len() > 2, "rolled over: {segs:?}");
    let live = segs.last().expect("live segment");
    let live_len = len(live);
    drop(wal);
    let (mut wal, rec) = open_zero_filled(tmp.path(), 8 * 1024).expect("reopen");
    assert_eq!(rec.entries.len(), 40);
    assert_eq!(rec.state.as_deref(), Some(&b"s40"[..]));
    assert_eq!(len(live), live_len, "the zero tail is kept on open");
    for seg in &segs[..segs.len() - 1] {
        let data = fs::read(seg).expect("read closed segment");
        assert!(!data.ends_with(&[0; 8]), "{seg:?} is cut to its records");
    }
    // A torn, never-acknowledged write inside the zero-filled region is dropped, and the
    // zeros written over it keep a later, shorter batch from reading as damaged.
    write(&mut wal, 41..=41, 700);
    drop(wal);
    let live = segments(tmp.path()).last().expect("live").clone();
    let data = fs::read(&live).expect("read live");
    let used = data.iter().rposition(|&b| b != 0).expect("records") as u64 + 1;
    assert!(
        used < data.len() as u64,
        "the live segment has a zero-filled tail"
    );
    // A torn write of the next batch: the rest of its first 512-byte sector reached the disk,
    // the later sectors did not (zeros). Its bytes are those of batch 41 (an entry record of 720 bytes and a state
    // record of 16), whose CRCs do not continue the chain.
    let end = used.next_multiple_of(8);
    let batch = (end - 736) as usize;
    let f = OpenOptions::new()
        .write(true)
        .open(&live)
        .expect("open live");
    let first_sector = (end / 512 + 1) * 512 - end;
    f.write_all_at(&data[batch..batch + first_sector as usize], end)
        .expect("torn write");
    let (mut wal, rec) = open_zero_filled(tmp.path(), 8 * 1024).expect("reopen after torn write");
    assert_eq!(rec.entries.len(), 41);
    assert_eq!(rec.state.as_deref(), Some(&b"s41"[..]));
    write(&mut wal, 42..=42, 10);
    drop(wal);
    let (_, rec) = open_zero_filled(tmp.path(), 8 * 1024).expect("reopen after a short batch");
    assert_eq!(rec.entries.len(), 42);
}

/// The file of a zero-filled live segment always extends past its last batch, so one cut
/// anywhere before that (at a record boundary, inside a record, or just after the last batch)
/// was truncated after the fact and may have lost acknowledged batches: corruption. A cut in
/// the zeros beyond loses nothing.
#[test]
fn a_truncated_live_segment_is_corruption() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open_zero_filled(tmp.path(), 1 << 20).expect("open");
    write(&mut wal, 1..=10, 20);
    drop(wal);
    let seg = &segments(tmp.path())[0];
    let pristine = fs::read(seg).expect("read");
    let used = pristine.iter().rposition(|&b| b != 0).expect("records") + 1;
    let used = used.next_multiple_of(8);
    for cut in 0..used + keel_wal::TAIL_ZEROS as usize {
        fs::write(seg, &pristine[..cut]).expect("restore + cut");
        match open_zero_filled(tmp.path(), 1 << 20) {
            Err(WalError::Corrupt { segment, .. }) => assert_eq!(&segment, seg),
            other => panic!("cut at {cut} of {used}: expected corruption, got {other:?}"),
        }
    }
    for cut in [
        used + keel_wal::TAIL_ZEROS as usize,
        used + 100,
        pristine.len(),
    ] {
        fs::write(seg, &pristine[..cut]).expect("restore + cut");
        let (_, rec) = open_zero_filled(tmp.path(), 1 << 20).expect("a cut in the zeros");
        assert_eq!(rec.entries.len(), 10, "cut at {cut}");
    }
}

/// A crash after the next segment is created but before the finished one is cut leaves zeros
/// after its records: harmless, as the CRC chain into the next segment shows nothing is
/// missing, and open finishes the cut, so losing the segments after it later is still seen.
/// Anything but zeros there is corruption.
#[test]
fn zeros_after_a_finished_segment_are_harmless_and_cut_on_open() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open_zero_filled(tmp.path(), 4096).expect("open");
    write(&mut wal, 1..=30, 300);
    drop(wal);
    let segs = segments(tmp.path());
    assert!(segs.len() > 2, "rolled over: {segs:?}");
    let closed = &segs[segs.len() - 2];
    let exact = len(closed);
    let f = OpenOptions::new().write(true).open(closed).expect("open");
    f.set_len(exact + 4096).expect("extend with zeros");
    xor_byte(closed, exact + 100, 0x01);
    assert_corrupt(tmp.path(), true, closed, exact, "a byte after the records");
    xor_byte(closed, exact + 100, 0x01);

    let (_, rec) = open_zero_filled(tmp.path(), 4096).expect("zeros after records");
    assert_eq!(rec.entries.len(), 30);
    assert_eq!(len(closed), exact, "open finished the cut");
    fs::remove_file(segs.last().expect("last")).expect("lose the last segment");
    match open_zero_filled(tmp.path(), 4096) {
        Err(WalError::Corrupt { segment, .. }) => assert_eq!(&segment, closed),
        other => panic!("a lost last segment must be corruption, got {other:?}"),
    }
}

/// The oldest segments go only with a purge past them: missing ones are corruption, while
/// every segment a purge removed is accounted for by the durable purge point.
#[test]
fn missing_oldest_segments_are_corruption() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open(tmp.path(), 128).expect("open");
    write(&mut wal, 1..=20, 20);
    let before = segments(tmp.path());
    wal.purge(6).expect("purge");
    drop(wal);
    let after = segments(tmp.path());
    assert!(after.len() < before.len(), "the purge removed segments");
    let (_, rec) = open(tmp.path(), 128).expect("purged segments are accounted for");
    assert_eq!(rec.entries.first().map(|e| e.0), Some(7));

    fs::remove_file(&after[0]).expect("remove the oldest segment");
    assert!(matches!(
        open(tmp.path(), 128),
        Err(WalError::Corrupt { segment, offset: 0 }) if segment == after[1]
    ));
}
