//! Writing a database file in one pass, bucket by bucket, key by key.
//!
//! Pages are appended in the order they fill: page 0 and 1 are left for the metas, then come
//! each bucket's leaf pages as its keys arrive, its branch pages (bottom-up, when the bucket
//! ends), then the root bucket's pages, then an empty freelist page. Nothing is freed, so the
//! freelist lists nothing and every page below the high-water mark is reachable. The metas
//! are written last, after the data is on disk, so a file cut short by a crash never has a
//! valid meta pointing at missing pages.
//!
//! Only one bucket's leaf-page boundaries (first key and page id of each) are held in memory,
//! plus the leaf page being filled.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::Error;
use crate::page::{
    BRANCH_PAGE, BUCKET_LEAF_FLAG, ELEMENT_SIZE, FREELIST_PAGE, LEAF_PAGE, Meta, NO_FREELIST,
    PAGE_HEADER_SIZE, PageBuilder, bucket_value, joins, show,
};
use crate::{MAGIC, MAX_KEY_SIZE, MAX_VALUE_SIZE, PAGE_SIZE, VERSION};

/// What [`Writer::finish`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// The number of buckets.
    pub buckets: u64,
    /// The number of key/value pairs over all buckets.
    pub keys: u64,
    /// The number of pages (the high-water mark).
    pub pages: u64,
    /// The file's size in bytes: pages times the page size.
    pub file_size: u64,
}

/// Writes a bbolt database file from buckets given in ascending name order, each with its
/// key/value pairs in ascending key order.
///
/// ```no_run
/// let mut w = keel_bbolt::Writer::create("db")?;
/// w.begin_bucket(b"key")?;
/// w.put(b"k1", b"v1")?;
/// w.begin_bucket(b"meta")?;
/// let written = w.finish()?;
/// assert_eq!(written.keys, 1);
/// # Ok::<(), keel_bbolt::Error>(())
/// ```
#[derive(Debug)]
pub struct Writer {
    sink: PageSink,
    /// The root bucket: bucket name to bucket value.
    root: TreeBuilder,
    /// The bucket being written.
    bucket: Option<OpenBucket>,
    /// The last bucket begun, for the order check.
    last_bucket: Vec<u8>,
    buckets: u64,
    keys: u64,
}

/// The bucket [`Writer::put`] adds to.
#[derive(Debug)]
struct OpenBucket {
    name: Vec<u8>,
    tree: TreeBuilder,
}

impl Writer {
    /// Creates (or truncates) the file at `path`, with pages of [`PAGE_SIZE`] bytes. The file
    /// is a database only once [`Writer::finish`] returns: until then its meta pages are zeros,
    /// which every reader refuses.
    pub fn create(path: impl AsRef<Path>) -> Result<Writer, Error> {
        let file = File::create(path)?;
        let mut sink = PageSink {
            out: BufWriter::with_capacity(1 << 20, file),
            next: 0,
            page_size: PAGE_SIZE,
        };
        // Room for the two metas, written by `finish`.
        sink.append(&vec![0u8; 2 * PAGE_SIZE])?;
        Ok(Writer {
            sink,
            root: TreeBuilder::new(),
            bucket: None,
            last_bucket: Vec::new(),
            buckets: 0,
            keys: 0,
        })
    }

    /// Ends the current bucket, if any, and begins the bucket `name`, which must be non-empty
    /// and sort after every bucket begun before.
    pub fn begin_bucket(&mut self, name: &[u8]) -> Result<(), Error> {
        if name.len() > MAX_KEY_SIZE {
            return Err(Error::KeyTooLarge { len: name.len() });
        }
        if name.is_empty() || (self.buckets > 0 && name <= self.last_bucket.as_slice()) {
            return Err(Error::BucketOrder {
                prev: show(&self.last_bucket),
                name: show(name),
            });
        }
        self.end_bucket()?;
        self.last_bucket = name.to_vec();
        self.buckets += 1;
        self.bucket = Some(OpenBucket {
            name: name.to_vec(),
            tree: TreeBuilder::new(),
        });
        Ok(())
    }

    /// Adds `key` with `value` to the current bucket. Keys must be non-empty and strictly
    /// ascending within the bucket; values may be empty or of any size up to bbolt's limit.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let bucket = self.bucket.as_mut().ok_or(Error::NoBucket)?;
        if key.len() > MAX_KEY_SIZE {
            return Err(Error::KeyTooLarge { len: key.len() });
        }
        if value.len() > MAX_VALUE_SIZE {
            return Err(Error::ValueTooLarge { len: value.len() });
        }
        if key.is_empty() || (bucket.tree.count > 0 && key <= bucket.tree.last_key.as_slice()) {
            return Err(Error::KeyOrder {
                bucket: show(&bucket.name),
                prev: show(&bucket.tree.last_key),
                key: show(key),
            });
        }
        bucket.tree.push(&mut self.sink, 0, key, value)?;
        self.keys += 1;
        Ok(())
    }

    /// Ends the current bucket, writes the root bucket, the freelist and both metas, and
    /// syncs the file.
    pub fn finish(mut self) -> Result<Written, Error> {
        self.end_bucket()?;
        let root = match self.root.finish(&mut self.sink, false)? {
            BucketRoot::Page(id) => id,
            BucketRoot::Inline(_) => unreachable!("the root bucket is never inline"),
        };
        let freelist = self.sink.next;
        self.sink
            .append(&PageBuilder::new(FREELIST_PAGE).encode(freelist, Some(PAGE_SIZE)))?;
        let pages = self.sink.next;
        let mut file = self.sink.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_data()?;
        let meta = Meta {
            magic: MAGIC,
            version: VERSION,
            page_size: PAGE_SIZE as u32,
            flags: 0,
            root,
            sequence: 0,
            freelist,
            pgid: pages,
            txid: 2,
            checksum: 0,
        };
        debug_assert_ne!(meta.freelist, NO_FREELIST);
        // bbolt writes a transaction's meta to page txid % 2: meta 0 is the newer.
        let mut metas = meta.encode_page(0, PAGE_SIZE);
        metas.extend(Meta { txid: 1, ..meta }.encode_page(1, PAGE_SIZE));
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&metas)?;
        file.sync_all()?;
        Ok(Written {
            buckets: self.buckets,
            keys: self.keys,
            pages,
            file_size: pages * PAGE_SIZE as u64,
        })
    }

    /// Ends the current bucket, if any: writes its last leaf and its branches, and adds it to
    /// the root bucket.
    fn end_bucket(&mut self) -> Result<(), Error> {
        let Some(bucket) = self.bucket.take() else {
            return Ok(());
        };
        let value = match bucket.tree.finish(&mut self.sink, true)? {
            BucketRoot::Page(id) => bucket_value(id, &[]),
            BucketRoot::Inline(page) => bucket_value(0, &page),
        };
        self.root
            .push(&mut self.sink, BUCKET_LEAF_FLAG, &bucket.name, &value)
    }
}

/// The file, written page after page.
#[derive(Debug)]
struct PageSink {
    out: BufWriter<File>,
    /// The id of the next page appended.
    next: u64,
    page_size: usize,
}

impl PageSink {
    /// Appends whole pages; `bytes` is a multiple of the page size.
    fn append(&mut self, bytes: &[u8]) -> Result<(), Error> {
        debug_assert_eq!(bytes.len() % self.page_size, 0);
        self.out.write_all(bytes)?;
        self.next += (bytes.len() / self.page_size) as u64;
        Ok(())
    }

    /// Writes `page` at the next id and returns that id.
    fn write(&mut self, page: &PageBuilder) -> Result<u64, Error> {
        let id = self.next;
        self.append(&page.encode(id, Some(self.page_size)))?;
        Ok(id)
    }
}

/// Where a finished bucket's tree is.
#[derive(Debug)]
enum BucketRoot {
    /// A root page in the file.
    Page(u64),
    /// A small bucket's single leaf page, stored in its parent after the bucket header.
    Inline(Vec<u8>),
}

/// One bucket's B+tree, built bottom-up from its sorted pairs.
#[derive(Debug)]
struct TreeBuilder {
    /// The leaf page being filled.
    leaf: PageBuilder,
    /// The first key and page id of every leaf page written.
    leaves: Vec<(Vec<u8>, u64)>,
    /// The last key pushed.
    last_key: Vec<u8>,
    /// How many pairs were pushed.
    count: u64,
}

impl TreeBuilder {
    fn new() -> TreeBuilder {
        TreeBuilder {
            leaf: PageBuilder::new(LEAF_PAGE),
            leaves: Vec::new(),
            last_key: Vec::new(),
            count: 0,
        }
    }

    /// Adds a pair (ordered by the caller), writing the current leaf first if it is full.
    fn push(
        &mut self,
        sink: &mut PageSink,
        flags: u32,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), Error> {
        let elem = ELEMENT_SIZE + key.len() + value.len();
        if !joins(self.leaf.size(), self.leaf.len(), elem, sink.page_size) {
            self.write_leaf(sink)?;
        }
        self.leaf.push_leaf(flags, key, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.count += 1;
        Ok(())
    }

    fn write_leaf(&mut self, sink: &mut PageSink) -> Result<(), Error> {
        let id = sink.write(&self.leaf)?;
        self.leaves.push((self.leaf.first_key().to_vec(), id));
        self.leaf.clear();
        Ok(())
    }

    /// Writes what is left and the branch levels above the leaves. A bucket that never filled
    /// a leaf and whose page would take at most a quarter page is returned inline when
    /// `inline` allows, as bbolt stores such buckets.
    fn finish(mut self, sink: &mut PageSink, inline: bool) -> Result<BucketRoot, Error> {
        if inline && self.leaves.is_empty() && self.leaf.size() <= sink.page_size / 4 {
            return Ok(BucketRoot::Inline(self.leaf.encode(0, None)));
        }
        if self.leaves.is_empty() || !self.leaf.is_empty() {
            self.write_leaf(sink)?;
        }
        let mut level = self.leaves;
        while level.len() > 1 {
            level = write_branches(sink, &level)?;
        }
        Ok(BucketRoot::Page(level[0].1))
    }
}

/// Writes the branch pages over `children` (first key and page id of each, in order) and
/// returns theirs.
fn write_branches(
    sink: &mut PageSink,
    children: &[(Vec<u8>, u64)],
) -> Result<Vec<(Vec<u8>, u64)>, Error> {
    // Group the children greedily, then even out a last group left with one child.
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    let (mut start, mut size) = (0, PAGE_HEADER_SIZE);
    for (i, (key, _)) in children.iter().enumerate() {
        let elem = ELEMENT_SIZE + key.len();
        if !joins(size, i - start, elem, sink.page_size) {
            groups.push(start..i);
            (start, size) = (i, PAGE_HEADER_SIZE);
        }
        size += elem;
    }
    groups.push(start..children.len());
    if let [.., prev, last] = groups.as_mut_slice()
        && last.len() == 1
        && prev.len() >= 3
    {
        let moved = ELEMENT_SIZE + children[prev.end - 1].0.len();
        if size + moved <= sink.page_size {
            prev.end -= 1;
            last.start -= 1;
        }
    }
    let mut page = PageBuilder::new(BRANCH_PAGE);
    let mut parents = Vec::with_capacity(groups.len());
    for group in groups {
        page.clear();
        for (key, child) in &children[group] {
            page.push_branch(key, *child);
        }
        let id = sink.write(&page)?;
        parents.push((page.first_key().to_vec(), id));
    }
    Ok(parents)
}
