//! Damage tests: a file written by [`Writer`] is broken on purpose, byte by byte, and
//! [`Db::open`], the iterators and [`check`] must say what is wrong, without panicking or
//! looping.

use std::path::{Path, PathBuf};

use crate::page::{Meta, PAGE_HEADER_SIZE, PageHeader, u64_at};
use crate::read::Root;
use crate::{Db, Error, PAGE_SIZE, Writer, check};

/// A database with a small bucket, an empty one and a `key` bucket several levels deep.
fn sample(dir: &Path) -> PathBuf {
    let path = dir.join("db");
    let mut w = Writer::create(&path).unwrap();
    w.begin_bucket(b"alarm").unwrap();
    w.begin_bucket(b"key").unwrap();
    for i in 0..3000u32 {
        let key = format!("{i:08}{}", "k".repeat(400));
        w.put(key.as_bytes(), &i.to_le_bytes()).unwrap();
    }
    w.begin_bucket(b"meta").unwrap();
    w.put(b"consistent_index", &[0, 0, 0, 0, 0, 0, 0, 9])
        .unwrap();
    w.finish().unwrap();
    path
}

/// The root page of bucket `name`.
fn bucket_root(db: &Db, name: &[u8]) -> u64 {
    let root = db.read_page(db.meta().root).unwrap();
    for i in 0..usize::from(root.header.count) {
        let e = root.element(i).unwrap();
        if e.key == name {
            let Root::Page(id) = Root::parse(e.value, root.id).unwrap() else {
                panic!("bucket {name:?} is inline");
            };
            return id;
        }
    }
    panic!("no bucket {name:?}");
}

/// The pages on the leftmost path of bucket `key`, from its root down to a leaf.
fn leftmost_path(path: &Path) -> Vec<u64> {
    let db = Db::open(path).unwrap();
    let mut ids = vec![bucket_root(&db, b"key")];
    loop {
        let page = db.read_page(*ids.last().unwrap()).unwrap();
        if page.is_leaf() {
            return ids;
        }
        ids.push(page.element(0).unwrap().child);
    }
}

/// Rewrites the file at `path` with `edit`.
fn edit(path: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(path).unwrap();
    edit(&mut bytes);
    std::fs::write(path, bytes).unwrap();
}

/// The offset of element `i` of page `id`.
fn element_at(id: u64, i: usize) -> usize {
    id as usize * PAGE_SIZE + PAGE_HEADER_SIZE + i * 16
}

/// Every pair of bucket `key`, or the first error.
fn read_key_bucket(path: &Path) -> Result<usize, Error> {
    let db = Db::open(path)?;
    let mut n = 0;
    for pair in db.entries(b"key")? {
        pair?;
        n += 1;
    }
    Ok(n)
}

/// Asserts that `check` mentions `words` and that reading bucket `key` fails at `page`.
fn corrupt_at(path: &Path, words: &str, page: u64) {
    problems_mention(path, words);
    let err = read_key_bucket(path).unwrap_err();
    assert!(
        matches!(err, Error::Corrupt { page: p, .. } if p == page),
        "{err}"
    );
}

fn problems_mention(path: &Path, words: &str) -> Vec<String> {
    let problems = check(path).unwrap();
    assert!(
        problems.iter().any(|p| p.contains(words)),
        "no problem mentions `{words}`: {problems:?}"
    );
    problems
}

#[test]
fn the_sample_is_sound_and_several_levels_deep() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample(dir.path());
    assert_eq!(check(&path).unwrap(), Vec::<String>::new());
    assert_eq!(read_key_bucket(&path).unwrap(), 3000);
    assert!(
        leftmost_path(&path).len() >= 4,
        "{:?}",
        leftmost_path(&path)
    );
    let db = Db::open(&path).unwrap();
    assert_eq!(db.buckets().unwrap(), [&b"alarm"[..], b"key", b"meta"]);
    assert_eq!((db.txid(), db.page_size()), (2, PAGE_SIZE));
    assert!(db.freelist_page().is_some());
}

#[test]
fn a_damaged_meta_falls_back_to_the_other_and_two_fail() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample(dir.path());
    // Meta 0's flags field: its checksum no longer matches.
    edit(&path, |b| b[PAGE_HEADER_SIZE + 12] ^= 1);
    let db = Db::open(&path).unwrap();
    assert_eq!(db.txid(), 1, "meta 1 is used");
    assert_eq!(read_key_bucket(&path).unwrap(), 3000);
    let problems = check(&path).unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("meta page 0: checksum"),
        "{problems:?}"
    );

    edit(&path, |b| b[PAGE_SIZE + PAGE_HEADER_SIZE] ^= 1);
    let err = Db::open(&path).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::NoValidMeta {
                meta0: crate::MetaError::Checksum { .. },
                meta1: crate::MetaError::Magic(_)
            }
        ),
        "{err}"
    );
}

#[test]
fn a_child_out_of_range_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample(dir.path());
    let branch = leftmost_path(&path)[0];
    edit(&path, |b| {
        let at = element_at(branch, 0) + 8;
        b[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    });
    problems_mention(&path, "out of bounds");
    assert!(
        matches!(read_key_bucket(&path), Err(Error::OutOfRange { page, .. }) if page == 1 << 40)
    );
}

#[test]
fn a_cycle_ends_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample(dir.path());
    let ids = leftmost_path(&path);
    // The deepest branch points back at the root of the bucket.
    let (root, low) = (ids[0], ids[ids.len() - 2]);
    edit(&path, |b| {
        let at = element_at(low, 1) + 8;
        b[at..at + 8].copy_from_slice(&root.to_le_bytes());
    });
    problems_mention(&path, &format!("page {root}: multiple references"));
    assert!(matches!(read_key_bucket(&path), Err(Error::Cycle { page }) if page == root));
}

#[test]
fn keys_out_of_order_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample(dir.path());
    let leaf = *leftmost_path(&path).last().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let page = &bytes[leaf as usize * PAGE_SIZE..(leaf as usize + 1) * PAGE_SIZE];
    let key = |i: usize| {
        let e = crate::page::element(page, crate::page::LEAF_PAGE, i).unwrap();
        let start = e.key.as_ptr() as usize - page.as_ptr() as usize;
        start + leaf as usize * PAGE_SIZE..start + e.key.len() + leaf as usize * PAGE_SIZE
    };
    let (k1, k2) = (key(1), key(2));
    edit(&path, |b| {
        let first = b[k1.clone()].to_vec();
        b.copy_within(k2.clone(), k1.start);
        b[k2].copy_from_slice(&first);
    });
    corrupt_at(&path, "does not sort after", leaf);
}

#[test]
fn a_wrong_page_type_and_a_reached_free_page_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample(dir.path());
    let ids = leftmost_path(&path);
    let freelist = Db::open(&path).unwrap().freelist_page().unwrap();
    let (branch, leaf) = (ids[0], *ids.last().unwrap());
    edit(&path, |b| {
        // A branch points at the freelist page.
        let at = element_at(branch, 1) + 8;
        b[at..at + 8].copy_from_slice(&freelist.to_le_bytes());
        // The freelist lists the leftmost leaf as free.
        let f = freelist as usize * PAGE_SIZE;
        b[f + 10..f + 12].copy_from_slice(&1u16.to_le_bytes());
        b[f + 16..f + 24].copy_from_slice(&leaf.to_le_bytes());
    });
    let problems = problems_mention(&path, &format!("page {freelist}: multiple references"));
    assert!(
        problems.contains(&format!("page {leaf}: reachable freed")),
        "{problems:?}"
    );
    assert!(matches!(read_key_bucket(&path), Err(Error::Corrupt { page, .. }) if page == freelist));

    // The leaf now says it is a meta page.
    edit(&path, |b| b[leaf as usize * PAGE_SIZE + 8] = 0x04);
    corrupt_at(&path, &format!("page {leaf}: invalid type: meta"), leaf);
}

#[test]
fn an_element_past_its_page_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample(dir.path());
    let leaf = *leftmost_path(&path).last().unwrap();
    edit(&path, |b| {
        let at = element_at(leaf, 0) + 4;
        b[at..at + 4].copy_from_slice(&(PAGE_SIZE as u32).to_le_bytes());
    });
    corrupt_at(&path, "past the page", leaf);
}

#[test]
fn a_truncated_file_and_an_unreachable_page_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample(dir.path());
    let pages = Db::open(&path).unwrap().page_count();
    // One more page in the file and below the high-water mark, reached by nothing.
    edit(&path, |b| {
        b.extend_from_slice(&[0u8; PAGE_SIZE]);
        for i in 0..2 {
            let meta = Meta::decode(&b[i * PAGE_SIZE..]);
            let page = Meta {
                pgid: pages + 1,
                ..meta
            }
            .encode_page(i as u64, PAGE_SIZE);
            b[i * PAGE_SIZE..(i + 1) * PAGE_SIZE].copy_from_slice(&page);
        }
    });
    let problems = check(&path).unwrap();
    assert_eq!(problems, [format!("page {pages}: unreachable unfreed")]);

    // Cut the file in the middle of the key bucket.
    let leaf = *leftmost_path(&path).last().unwrap();
    edit(&path, |b| b.truncate((leaf as usize + 1) * PAGE_SIZE));
    problems_mention(&path, "before its high-water mark");
    problems_mention(&path, "extends past the end of the file");
    assert!(matches!(
        read_key_bucket(&path),
        Err(Error::Truncated { .. })
    ));

    edit(&path, |b| b.truncate(PAGE_SIZE + 100));
    assert!(matches!(Db::open(&path), Err(Error::TooSmall { .. })));
    edit(&path, |b| b.truncate(10));
    assert!(matches!(Db::open(&path), Err(Error::TooSmall { len: 10 })));
}

#[test]
fn page_headers_and_metas_encode_as_read() {
    let header = PageHeader {
        id: 7,
        flags: 2,
        count: 3,
        overflow: 4,
    };
    let mut b = [0u8; 16];
    header.encode(&mut b);
    assert_eq!(PageHeader::decode(&b), header);
    assert_eq!(u64_at(&b, 0), 7);
    // bbolt's init writes this meta for page 0 of a 4096-byte-page file; FNV-1a 64 of it.
    let meta = Meta {
        magic: crate::MAGIC,
        version: 2,
        page_size: 4096,
        flags: 0,
        root: 3,
        sequence: 0,
        freelist: 2,
        pgid: 4,
        txid: 0,
        checksum: 0,
    };
    let page = meta.encode_page(0, PAGE_SIZE);
    let read = Meta::decode(&page);
    assert_eq!(read.checksum, meta.sum64());
    assert_eq!(read.validate(), Ok(()));
}

#[test]
fn a_bucket_inside_a_bucket_is_found_and_not_entered() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample(dir.path());
    let leaf = *leftmost_path(&path).last().unwrap();
    // The leaf's first pair says it is a bucket (bbolt's bucketLeafFlag).
    edit(&path, |b| {
        let at = element_at(leaf, 0);
        b[at..at + 4].copy_from_slice(&1u32.to_le_bytes());
    });
    problems_mention(&path, "a bucket inside a bucket");
}
