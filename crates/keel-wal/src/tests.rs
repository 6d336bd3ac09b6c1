//! Unit tests of the log's public behaviour: round trip, rollover, truncation, purge, gaps.

use super::*;

fn opts(segment_bytes: u64) -> WalOptions {
    WalOptions {
        segment_bytes,
        zero_fill: false,
    }
}

fn entries(range: std::ops::RangeInclusive<u64>, tag: &str) -> Vec<(u64, Vec<u8>)> {
    range
        .map(|i| (i, format!("{tag}{i}").into_bytes()))
        .collect()
}

fn append(wal: &mut Wal, range: std::ops::RangeInclusive<u64>, tag: &str) {
    for e in entries(range, tag) {
        let batch = Batch {
            entries: vec![e],
            ..Batch::default()
        };
        wal.append(&batch).expect("append");
    }
}

fn reopen(dir: &Path, segment_bytes: u64) -> (Wal, Recovered) {
    Wal::open(dir, opts(segment_bytes)).expect("open")
}

#[test]
fn wal_is_send() {
    fn send<T: Send>() {}
    send::<Wal>();
}

#[test]
fn creates_missing_dir_and_starts_empty() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("a/b/wal");
    let (wal, rec) = reopen(&dir, 1024);
    assert_eq!(rec, Recovered::default());
    assert_eq!((wal.last_index(), wal.segment_count()), (0, 1));
    assert_eq!(wal.dir(), dir);
    assert!(dir.join("0000000000000000-0000000000000001.wal").is_file());
    drop(wal);
    assert_eq!(reopen(&dir, 1024).1, Recovered::default());
}

#[test]
fn round_trip() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = reopen(tmp.path(), 1 << 20);
    let batch = Batch {
        truncate_from: None,
        entries: entries(1..=3, "e"),
        state: Some(b"term=1".to_vec()),
    };
    let stats = wal.append(&batch).expect("append");
    assert!(stats.bytes > 0 && stats.bytes % 8 == 0);
    let empty = wal.append(&Batch::default()).expect("empty batch");
    assert_eq!(empty.bytes, 0);
    let batch = Batch {
        entries: vec![(4, Vec::new())],
        state: Some(b"term=2".to_vec()),
        ..Batch::default()
    };
    wal.append(&batch).expect("append");
    assert_eq!(wal.last_index(), 4);
    drop(wal);

    let (wal, rec) = reopen(tmp.path(), 1 << 20);
    let mut want = entries(1..=3, "e");
    want.push((4, Vec::new()));
    assert_eq!(rec.entries, want);
    assert_eq!(rec.state.as_deref(), Some(&b"term=2"[..]));
    assert_eq!((rec.purged, wal.last_index()), (0, 4));
}

#[test]
fn rollover_across_many_small_segments() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = reopen(tmp.path(), 128);
    append(&mut wal, 1..=200, "entry-");
    let count = wal.segment_count();
    assert!(count > 20, "only {count} segments");
    drop(wal);

    let mut names: Vec<_> = fs::read_dir(tmp.path())
        .expect("read_dir")
        .map(|d| d.expect("dirent").file_name().into_string().expect("utf8"))
        .collect();
    names.sort();
    assert_eq!(names.len(), count);
    let mut last_first = 0;
    for (seq, name) in names.iter().enumerate() {
        let (s, f) = name.trim_end_matches(".wal").split_once('-').expect("name");
        assert_eq!(u64::from_str_radix(s, 16).expect("seq"), seq as u64);
        let first = u64::from_str_radix(f, 16).expect("first index");
        assert!(first > last_first || seq == 0);
        last_first = first;
    }
    let (wal, rec) = reopen(tmp.path(), 128);
    assert_eq!(rec.entries, entries(1..=200, "entry-"));
    assert_eq!((wal.last_index(), wal.segment_count()), (200, count));
}

#[test]
fn truncate_then_reappend_across_segments() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = reopen(tmp.path(), 96);
    append(&mut wal, 1..=30, "old");
    assert!(wal.segment_count() > 3);
    let batch = Batch {
        truncate_from: Some(6),
        entries: entries(6..=8, "new"),
        state: None,
    };
    wal.append(&batch).expect("truncate + append");
    assert_eq!(wal.last_index(), 8);
    // Truncating without new entries shortens the log.
    let batch = Batch {
        truncate_from: Some(8),
        ..Batch::default()
    };
    wal.append(&batch).expect("truncate");
    assert_eq!(wal.last_index(), 7);
    drop(wal);

    let (mut wal, rec) = reopen(tmp.path(), 96);
    let mut want = entries(1..=5, "old");
    want.extend(entries(6..=7, "new"));
    assert_eq!(rec.entries, want);
    append(&mut wal, 8..=9, "more");
    drop(wal);
    want.extend(entries(8..=9, "more"));
    assert_eq!(reopen(tmp.path(), 96).1.entries, want);
}

#[test]
fn purge_deletes_old_segments_and_keeps_state() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = reopen(tmp.path(), 128);
    let batch = Batch {
        state: Some(b"hard-state".to_vec()),
        ..Batch::default()
    };
    wal.append(&batch).expect("state");
    append(&mut wal, 1..=100, "e");
    let before = wal.segment_count();
    wal.purge(90).expect("purge");
    let after = wal.segment_count();
    assert!(after < before / 4, "{before} -> {after} segments");
    assert_eq!(fs::read_dir(tmp.path()).expect("read_dir").count(), after);
    // Purging backwards is a no-op.
    wal.purge(10).expect("stale purge");
    assert_eq!(wal.last_index(), 100);
    drop(wal);

    let (mut wal, rec) = reopen(tmp.path(), 128);
    assert_eq!(rec.state.as_deref(), Some(&b"hard-state"[..]));
    assert_eq!(rec.purged, 90);
    assert_eq!(rec.entries, entries(91..=100, "e"));

    // Purging past the end empties the log; it then continues above the purge point.
    wal.purge(120).expect("purge all");
    assert_eq!((wal.last_index(), wal.segment_count()), (120, 1));
    let gap = wal.append(&Batch {
        entries: entries(101..=101, "x"),
        ..Batch::default()
    });
    assert!(matches!(
        gap,
        Err(WalError::Gap {
            expected: 121,
            got: 101
        })
    ));
    append(&mut wal, 121..=125, "y");
    drop(wal);
    let (_, rec) = reopen(tmp.path(), 128);
    assert_eq!(rec.state.as_deref(), Some(&b"hard-state"[..]));
    assert_eq!(rec.purged, 120);
    assert_eq!(rec.entries, entries(121..=125, "y"));
}

#[test]
fn bad_indexes_are_rejected_and_write_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = reopen(tmp.path(), 1 << 20);
    append(&mut wal, 1..=3, "e");
    let offset = wal.offset;
    let cases = [
        (vec![5], 4, 5),
        (vec![3], 4, 3),
        (vec![4, 6], 5, 6),
        (vec![4, 4], 5, 4),
    ];
    for (indexes, expected, got) in cases {
        let batch = Batch {
            entries: indexes.iter().map(|&i| (i, vec![1])).collect(),
            state: Some(b"never".to_vec()),
            ..Batch::default()
        };
        match wal.append(&batch) {
            Err(WalError::Gap {
                expected: e,
                got: g,
            }) => assert_eq!((e, g), (expected, got)),
            other => panic!("{indexes:?}: expected a gap, got {other:?}"),
        }
    }
    let batch = Batch {
        truncate_from: Some(2),
        entries: vec![(3, vec![])],
        ..Batch::default()
    };
    assert!(matches!(
        wal.append(&batch),
        Err(WalError::Gap {
            expected: 2,
            got: 3
        })
    ));
    assert_eq!(wal.offset, offset);
    assert_eq!(
        fs::metadata(&wal.segments[0].path).expect("stat").len(),
        offset
    );
    drop(wal);
    let (_, rec) = reopen(tmp.path(), 1 << 20);
    assert_eq!(rec.entries, entries(1..=3, "e"));
    assert_eq!(rec.state, None);
}
