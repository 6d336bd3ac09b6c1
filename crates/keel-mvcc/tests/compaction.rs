//! Incremental compaction: reads at or above the compaction revision answer the same before,
//! during and after it; a compaction cut short is finished after a reopen; the end result is
//! the one of a compaction carried out in one go.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use keel_mvcc::{CompactionStep, Mvcc, MvccError, MvccOptions};
use keel_proto::etcdserverpb::{
    CompactionRequest, DeleteRangeRequest, PutRequest, RangeRequest, RangeResponse,
};
use proptest::prelude::*;

fn no_leases(_: i64) -> bool {
    false
}

/// A store without the background compactor, removing `limit` revisions per step.
fn manual(path: &Path, limit: usize) -> Mvcc {
    let options = MvccOptions {
        compaction_batch_limit: limit,
        background_compaction: false,
        ..MvccOptions::default()
    };
    Mvcc::open_with(path, &options).unwrap()
}

/// One write of a history: put `key` (with a value naming the step) or delete it.
#[derive(Debug, Clone)]
enum Write {
    Put(u8),
    Delete(u8),
}

fn write_history(m: &Mvcc, history: &[Write], per_batch: usize) {
    for (n, chunk) in history.chunks(per_batch).enumerate() {
        let mut b = m.begin_apply(&no_leases);
        for (i, w) in chunk.iter().enumerate() {
            match w {
                Write::Put(k) => {
                    b.put(&PutRequest {
                        key: vec![b'k', *k],
                        value: format!("{n}.{i}").into_bytes(),
                        ..Default::default()
                    })
                    .unwrap();
                }
                Write::Delete(k) => {
                    b.delete_range(&DeleteRangeRequest {
                        key: vec![b'k', *k],
                        ..Default::default()
                    })
                    .unwrap();
                }
            }
        }
        b.commit(n as u64 + 1).unwrap();
    }
}

fn compact(m: &Mvcc, revision: i64, index: u64) {
    let mut b = m.begin_apply(&no_leases);
    b.compact(&CompactionRequest {
        revision,
        physical: false,
    })
    .unwrap();
    b.commit(index).unwrap();
}

fn range_at(m: &Mvcc, revision: i64) -> Result<RangeResponse, MvccError> {
    m.range(&RangeRequest {
        key: vec![0],
        range_end: vec![0],
        revision,
        ..Default::default()
    })
}

/// Every answer a read at `from..=current` gives (all keys, and each key alone).
fn answers(m: &Mvcc, from: i64, keys: u8) -> Vec<RangeResponse> {
    let mut out = Vec::new();
    for rev in from..=m.current_revision() {
        out.push(range_at(m, rev).unwrap());
        for k in 0..keys {
            out.push(
                m.range(&RangeRequest {
                    key: vec![b'k', k],
                    revision: rev,
                    ..Default::default()
                })
                .unwrap(),
            );
        }
    }
    out
}

fn history() -> impl Strategy<Value = Vec<Write>> {
    let write = prop_oneof![
        4 => (0..6u8).prop_map(Write::Put),
        1 => (0..6u8).prop_map(Write::Delete),
    ];
    prop::collection::vec(write, 1..80)
}

/// Runs the compaction at `back` revisions below the current one step by step, checking the
/// reads at every step; returns the compaction revision.
fn compact_step_by_step(m: &Mvcc, back: i64) -> i64 {
    let revision = (m.current_revision() - back).max(1);
    let before = answers(m, revision, 6);
    compact(m, revision, 1000);
    // HashKV skips what the compaction removes even before it is removed (unless nothing at
    // all is kept: then it counts what is still there, as etcd's does).
    let keeps = range_at(m, 0).unwrap().count > 0;
    let hash = m.hash_kv(0).unwrap();
    if revision > 1 {
        let below = range_at(m, revision - 1);
        assert!(matches!(below, Err(MvccError::Compacted)));
    }
    loop {
        assert_eq!(answers(m, revision, 6), before, "reads during compaction");
        if keeps {
            assert_eq!(m.hash_kv(0).unwrap(), hash, "HashKV during compaction");
        }
        match m.compaction_step().unwrap() {
            CompactionStep::Idle => break,
            CompactionStep::Progress { removed, .. } => assert!(removed <= 2),
            CompactionStep::Finished {
                revision: r,
                removed,
            } => assert_eq!((r, removed <= 2), (revision, true)),
        }
    }
    assert_eq!(m.finished_compact_revision(), revision);
    assert_eq!(answers(m, revision, 6), before, "reads after compaction");
    if keeps {
        assert_eq!(m.hash_kv(0).unwrap(), hash, "HashKV after compaction");
    }
    revision
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Two removals per step, reads checked between every two steps; the result is the one
    /// of the same compaction carried out in one go, and survives a reopen.
    #[test]
    fn reads_are_unchanged_by_every_step(
        history in history(),
        per_batch in 1..5usize,
        back in 0..12i64,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (stepped, whole) = (dir.path().join("stepped"), dir.path().join("whole"));
        let hash = {
            let m = manual(&stepped, 2);
            write_history(&m, &history, per_batch);
            compact_step_by_step(&m, back);
            m.hash().unwrap()
        };
        let oracle = manual(&whole, usize::MAX);
        write_history(&oracle, &history, per_batch);
        compact(&oracle, (oracle.current_revision() - back).max(1), 1000);
        prop_assert!(oracle.finish_compaction(Duration::from_secs(60)).unwrap());
        prop_assert_eq!(oracle.hash().unwrap(), hash);
        let m = manual(&stepped, 2);
        prop_assert_eq!(m.hash().unwrap(), hash);
        prop_assert_eq!(m.indexed_keys(), oracle.indexed_keys());
        prop_assert_eq!(m.compaction_step().unwrap(), CompactionStep::Idle);
    }
}

/// A big enough history that a compaction takes many steps.
fn many_revisions(m: &Mvcc) {
    let history: Vec<Write> = (0..600u32)
        .map(|i| {
            let k = (i % 40) as u8;
            if i % 7 == 6 {
                Write::Delete(k)
            } else {
                Write::Put(k)
            }
        })
        .collect();
    write_history(m, &history, 3);
}

/// A compaction cut short (its first removals durable, the rest never written) is finished
/// after the reopen, by the background compactor or step by step.
#[test]
fn a_compaction_cut_short_finishes_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let oracle_path = dir.path().join("oracle");
    let oracle = manual(&oracle_path, usize::MAX);
    many_revisions(&oracle);
    let revision = oracle.current_revision() - 5;
    compact(&oracle, revision, 1000);
    assert!(oracle.finish_compaction(Duration::from_secs(60)).unwrap());
    let expect = (oracle.hash().unwrap(), oracle.hash_kv(0).unwrap());
    let expect_reads = answers(&oracle, revision, 40);

    for background in [false, true] {
        let path = dir.path().join(format!("db-{background}"));
        {
            let m = manual(&path, 10);
            many_revisions(&m);
            compact(&m, revision, 1000);
            let mut removed = 0;
            for _ in 0..5 {
                match m.compaction_step().unwrap() {
                    CompactionStep::Progress { removed: r, .. } => removed += r,
                    other => panic!("compaction over too soon: {other:?}"),
                }
            }
            assert!(removed > 0);
            // The durable state: the Compact and five removal batches, nothing more.
            m.sync().unwrap();
        }
        let m = if background {
            Mvcc::open(&path).unwrap()
        } else {
            manual(&path, 10)
        };
        assert_eq!(m.compact_revision(), revision);
        assert!(m.finished_compact_revision() < revision);
        assert_eq!(answers(&m, revision, 40), expect_reads);
        assert!(m.finish_compaction(Duration::from_secs(60)).unwrap());
        assert_eq!(m.finished_compact_revision(), revision);
        assert_eq!((m.hash().unwrap(), m.hash_kv(0).unwrap()), expect);
        assert_eq!(answers(&m, revision, 40), expect_reads);
        assert_eq!(m.indexed_keys(), oracle.indexed_keys());
    }
}

/// A backend swapped in while a compaction runs: the old compaction is abandoned and the one
/// the new backend holds is finished.
#[test]
fn replacing_the_backend_abandons_its_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let m = manual(&dir.path().join("db"), 10);
    many_revisions(&m);
    let revision = m.current_revision() - 5;
    compact(&m, revision, 1000);
    m.compaction_step().unwrap();
    // A snapshot taken mid-compaction carries the compaction cut short.
    let snap = dir.path().join("snap");
    m.write_snapshot(&snap).unwrap();
    let other = manual(&dir.path().join("other"), 10);
    other.replace_with(&snap).unwrap();
    assert_eq!(other.compact_revision(), revision);
    assert!(other.finish_compaction(Duration::from_secs(60)).unwrap());
    assert!(m.finish_compaction(Duration::from_secs(60)).unwrap());
    assert_eq!(other.hash().unwrap(), m.hash().unwrap());
    // Replaced mid-compaction by a store that never compacted: nothing is left to do.
    let fresh = dir.path().join("fresh");
    {
        let f = manual(&fresh, 10);
        many_revisions(&f);
    }
    let mut b = m.begin_apply(&no_leases);
    b.put(&PutRequest {
        key: b"k0".to_vec(),
        value: b"x".to_vec(),
        ..Default::default()
    })
    .unwrap();
    b.commit(2000).unwrap();
    compact(&m, m.current_revision(), 2001);
    m.compaction_step().unwrap();
    m.replace_with(&fresh).unwrap();
    assert_eq!(m.compact_revision(), -1);
    assert_eq!(m.compaction_step().unwrap(), CompactionStep::Idle);
}

/// Readers and batches run while the background compactor removes a few revisions at a
/// time: every read at or above the compaction revision is whole and consistent.
#[test]
fn readers_and_writers_race_the_background_compactor() {
    let dir = tempfile::tempdir().unwrap();
    let options = MvccOptions {
        compaction_batch_limit: 7,
        compaction_sleep_interval: Duration::ZERO,
        ..MvccOptions::default()
    };
    let m = Arc::new(Mvcc::open_with(&dir.path().join("db"), &options).unwrap());
    const KEYS: u64 = 50;
    let write_batch = |batch: u64| {
        let mut b = m.begin_apply(&no_leases);
        for k in 0..KEYS {
            b.put(&PutRequest {
                key: format!("k{k:02}").into_bytes(),
                value: batch.to_string().into_bytes(),
                ..Default::default()
            })
            .unwrap();
        }
        if batch % 5 == 4 {
            let revision = b.revision() - KEYS as i64;
            b.compact(&CompactionRequest {
                revision,
                physical: false,
            })
            .unwrap();
        }
        b.commit(batch + 1).unwrap();
    };
    write_batch(0);
    write_batch(1);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (m, stop) = (m.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let cur = m.current_revision();
                    // A revision at the end of a batch: every key holds that batch's value.
                    let batch_end = cur - (cur - 1) % KEYS as i64 - t * KEYS as i64;
                    match range_at(&m, batch_end.max(1)) {
                        Ok(r) => {
                            assert_eq!(r.kvs.len() as u64, KEYS, "torn read");
                            assert!(
                                r.kvs.windows(2).all(|w| w[0].value == w[1].value),
                                "torn read at {batch_end}"
                            );
                        }
                        Err(MvccError::Compacted) => {}
                        Err(e) => panic!("reader failed: {e}"),
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for batch in 2..200u64 {
        write_batch(batch);
    }
    stop.store(true, Ordering::Relaxed);
    let total: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(total > 0);
    assert!(m.finish_compaction(Duration::from_secs(60)).unwrap());
    assert_eq!(m.finished_compact_revision(), m.compact_revision());
    assert_eq!(
        range_at(&m, m.compact_revision()).unwrap().kvs.len() as u64,
        KEYS
    );
    assert_eq!(m.indexed_keys() as u64, KEYS);
}
