//! Property test: random batches, purges and reopens against a simple in-memory model.

use keel_wal::{Batch, Recovered, Wal, WalError, WalOptions};
use proptest::prelude::*;

/// The log as a plain vector, with the documented rules.
#[derive(Debug, Default)]
struct Model {
    entries: Vec<(u64, Vec<u8>)>,
    purged: u64,
    state: Option<Vec<u8>>,
}

impl Model {
    fn last_index(&self) -> u64 {
        self.entries.last().map_or(self.purged, |e| e.0)
    }

    /// Applies `batch`, or returns the (expected, got) gap and changes nothing.
    fn append(&mut self, batch: &Batch) -> Result<(), (u64, u64)> {
        let mut entries = self.entries.clone();
        if let Some(from) = batch.truncate_from {
            entries.retain(|e| e.0 < from);
        }
        for (i, data) in &batch.entries {
            let expected = entries.last().map_or(self.purged + 1, |e| e.0 + 1);
            let ok = if entries.is_empty() {
                *i >= expected
            } else {
                *i == expected
            };
            if !ok {
                return Err((expected, *i));
            }
            entries.push((*i, data.clone()));
        }
        self.entries = entries;
        if batch.state.is_some() {
            self.state.clone_from(&batch.state);
        }
        Ok(())
    }

    fn purge(&mut self, upto: u64) {
        self.purged = self.purged.max(upto);
        self.entries.retain(|e| e.0 > upto);
    }

    fn recovered(&self) -> Recovered {
        Recovered {
            state: self.state.clone(),
            purged: self.purged,
            entries: self.entries.clone(),
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Truncate `back` below last index + 2, append `count` entries starting `skew` away from
    /// the next index, optionally set a state.
    Append {
        truncate: Option<u64>,
        count: u64,
        skew: i8,
        size: usize,
        state: Option<u8>,
    },
    /// Purge up to `back` below last index + 3.
    Purge {
        back: u64,
    },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let append = (
        proptest::option::weighted(0.25, 0..6u64),
        0..5u64,
        prop_oneof![8 => Just(0i8), 1 => Just(-1i8), 1 => Just(1i8), 1 => Just(3i8)],
        0..48usize,
        proptest::option::weighted(0.3, any::<u8>()),
    )
        .prop_map(|(truncate, count, skew, size, state)| Op::Append {
            truncate,
            count,
            skew,
            size,
            state,
        });
    prop_oneof![
        10 => append,
        2 => (0..8u64).prop_map(|back| Op::Purge { back }),
        1 => Just(Op::Reopen),
    ]
}

const SEGMENT_BYTES: u64 = 200;

fn open(dir: &std::path::Path) -> (Wal, Recovered) {
    Wal::open(
        dir,
        WalOptions {
            segment_bytes: SEGMENT_BYTES,
            zero_fill: true,
        },
    )
    .expect("open")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn wal_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (mut wal, rec) = open(tmp.path());
        let mut model = Model::default();
        prop_assert_eq!(rec, model.recovered());
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                Op::Append { truncate, count, skew, size, state } => {
                    let truncate_from = truncate.map(|back| (model.last_index() + 2).saturating_sub(back));
                    let mut next = match truncate_from {
                        Some(from) if from <= model.last_index() => from.max(model.purged + 1),
                        _ => model.last_index() + 1,
                    };
                    next = next.saturating_add_signed(i64::from(skew)).max(1);
                    let batch = Batch {
                        truncate_from,
                        entries: (next..next + count)
                            .map(|i| (i, vec![(i as u8) ^ (n as u8); size]))
                            .collect(),
                        state: state.map(|s| vec![s; usize::from(s % 40)]),
                    };
                    match (model.append(&batch), wal.append(&batch)) {
                        (Ok(()), Ok(_)) => {}
                        (Err((expected, got)), Err(WalError::Gap { expected: e, got: g })) => {
                            prop_assert_eq!((expected, got), (e, g));
                        }
                        (m, w) => prop_assert!(false, "model {:?} vs wal {:?} for {:?}", m, w, batch),
                    }
                }
                Op::Purge { back } => {
                    let upto = (model.last_index() + 3).saturating_sub(back);
                    model.purge(upto);
                    wal.purge(upto).expect("purge");
                }
                Op::Reopen => {
                    drop(wal);
                    let (w, rec) = open(tmp.path());
                    wal = w;
                    prop_assert_eq!(rec, model.recovered());
                }
            }
            prop_assert_eq!(wal.last_index(), model.last_index());
        }
        drop(wal);
        let (_, rec) = open(tmp.path());
        prop_assert_eq!(rec, model.recovered());
    }
}
