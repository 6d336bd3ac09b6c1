//! Files written by `Writer` read back identically through `Db` and pass `check`.

use std::collections::BTreeMap;
use std::path::Path;

use keel_bbolt::{Db, Error, Writer, check};
use proptest::prelude::*;

/// Bucket name to the bucket's pairs.
type Model = BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, Vec<u8>>>;

fn write(path: &Path, model: &Model) -> keel_bbolt::Written {
    let mut w = Writer::create(path).unwrap();
    for (name, pairs) in model {
        w.begin_bucket(name).unwrap();
        for (k, v) in pairs {
            w.put(k, v).unwrap();
        }
    }
    w.finish().unwrap()
}

fn read(path: &Path) -> Model {
    let db = Db::open(path).unwrap();
    let mut model = Model::new();
    for name in db.buckets().unwrap() {
        let pairs = db.entries(&name).unwrap().map(Result::unwrap).collect();
        model.insert(name, pairs);
    }
    model
}

/// Writes `model`, reads it back and checks the file.
fn round_trip(model: &Model) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let written = write(&path, model);
    assert_eq!(written.buckets, model.len() as u64);
    let keys: usize = model.values().map(BTreeMap::len).sum();
    assert_eq!(written.keys, keys as u64);
    assert_eq!(written.file_size, std::fs::metadata(&path).unwrap().len());
    assert_eq!(written.file_size, written.pages * 4096);
    assert_eq!(check(&path).unwrap(), Vec::<String>::new());
    assert_eq!(&read(&path), model);
}

/// `len` bytes derived from `seed`, cheaper to generate than arbitrary bytes.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Values from empty to a little over three pages, mostly small.
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => (0usize..100, any::<u64>()),
        2 => (0usize..4200, any::<u64>()),
        1 => (4000usize..3 * 4096 + 100, any::<u64>()),
    ]
    .prop_map(|(n, s)| bytes(n, s))
}

fn bucket(
    keys: std::ops::Range<usize>,
    key_len: usize,
) -> impl Strategy<Value = BTreeMap<Vec<u8>, Vec<u8>>> {
    prop::collection::btree_map(
        prop::collection::vec(any::<u8>(), 1..key_len),
        value(),
        keys,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Several buckets, empty ones included, with values of every size.
    #[test]
    fn buckets_of_every_size_round_trip(
        model in prop::collection::btree_map(prop::collection::vec(any::<u8>(), 1..12), bucket(0..300, 40), 0..6)
    ) {
        round_trip(&model);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Thousands of keys, some long, so branch pages stack several levels deep.
    #[test]
    fn deep_trees_round_trip(
        pairs in prop::collection::btree_map(
            (0usize..400, any::<u64>()).prop_map(|(n, s)| { let mut k = bytes(n, s); k.insert(0, b'k'); k }),
            (0usize..40, any::<u64>()).prop_map(|(n, s)| bytes(n, s)),
            2000..5000,
        )
    ) {
        let model = Model::from([(b"a".to_vec(), BTreeMap::new()), (b"key".to_vec(), pairs)]);
        round_trip(&model);
    }
}

#[test]
fn empty_database_round_trips() {
    round_trip(&Model::new());
}

#[test]
fn an_empty_bucket_and_a_bucket_of_empty_values_round_trip() {
    let empty_values = (0..500u32)
        .map(|i| (i.to_be_bytes().to_vec(), Vec::new()))
        .collect();
    let model = Model::from([
        (b"alarm".to_vec(), BTreeMap::new()),
        (b"key".to_vec(), empty_values),
        (
            b"meta".to_vec(),
            BTreeMap::from([(b"k".to_vec(), b"v".to_vec())]),
        ),
    ]);
    round_trip(&model);
}

#[test]
fn values_of_many_pages_round_trip() {
    let pairs = [
        0usize,
        1,
        4000,
        4096,
        4097,
        100 * 1024,
        3 * 4096 + 7,
        1 << 20,
    ]
    .iter()
    .enumerate()
    .map(|(i, &n)| (vec![b'a' + i as u8], bytes(n, i as u64)))
    .collect();
    round_trip(&Model::from([(b"big".to_vec(), pairs)]));
}

#[test]
fn many_buckets_fill_a_branched_root_bucket() {
    let model = (0..300u32)
        .map(|i| {
            let name = format!("bucket-{i:05}-{}", "x".repeat(60)).into_bytes();
            let pairs = (0..i % 7)
                .map(|j| (vec![j as u8 + 1], bytes(j as usize * 300, j.into())))
                .collect();
            (name, pairs)
        })
        .collect();
    round_trip(&model);
}

#[test]
fn trailing_bytes_after_the_last_page_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let model = Model::from([(
        b"key".to_vec(),
        BTreeMap::from([(b"a".to_vec(), b"1".to_vec())]),
    )]);
    write(&path, &model);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut file, &[7u8; 32]).unwrap();
    assert_eq!(check(&path).unwrap(), Vec::<String>::new());
    assert_eq!(read(&path), model);
}

#[test]
fn the_writer_refuses_what_bbolt_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::create(dir.path().join("db")).unwrap();
    assert!(matches!(w.put(b"k", b"v"), Err(Error::NoBucket)));
    assert!(matches!(
        w.begin_bucket(b""),
        Err(Error::BucketOrder { .. })
    ));
    w.begin_bucket(b"b").unwrap();
    assert!(matches!(w.put(b"", b"v"), Err(Error::KeyOrder { .. })));
    w.put(b"k2", b"v").unwrap();
    assert!(matches!(w.put(b"k2", b"v"), Err(Error::KeyOrder { .. })));
    assert!(matches!(w.put(b"k1", b"v"), Err(Error::KeyOrder { .. })));
    assert!(matches!(
        w.put(&[1; 32769], b"v"),
        Err(Error::KeyTooLarge { len: 32769 })
    ));
    assert!(matches!(
        w.begin_bucket(b"a"),
        Err(Error::BucketOrder { .. })
    ));
    assert!(matches!(
        w.begin_bucket(b"b"),
        Err(Error::BucketOrder { .. })
    ));
    w.begin_bucket(b"c").unwrap();
    let written = w.finish().unwrap();
    assert_eq!((written.buckets, written.keys), (2, 1));
}

#[test]
fn a_missing_bucket_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    write(&path, &Model::new());
    let db = Db::open(&path).unwrap();
    let err = db.entries(b"key").unwrap_err();
    assert_eq!(err.to_string(), "no bucket named key");
}
