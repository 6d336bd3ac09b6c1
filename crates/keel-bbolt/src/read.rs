//! Reading a database file: the metas, the bucket list and each bucket's pairs in order.
//!
//! Pages are read with positioned reads as the walk needs them, one bucket's path from its
//! root to the current leaf at a time, so a file of any size is read in little memory. Every
//! offset read from the file is checked against the page it is in, every page id against the
//! high-water mark and the file's length, and a walk remembers the pages it has visited, so
//! a damaged file gives an [`Error`], never a panic or an endless loop.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, MetaError};
use crate::page::{
    self, BRANCH_PAGE, BUCKET_HEADER_SIZE, BUCKET_LEAF_FLAG, LEAF_PAGE, META_SIZE, Meta,
    NO_FREELIST, PAGE_HEADER_SIZE, PageHeader, page_type, show, u64_at,
};

/// How deep a bucket's tree may be. A B+tree whose branches have at least two children each
/// would need more pages than a file can hold to get this deep, so deeper means damage.
pub(crate) const MAX_DEPTH: usize = 64;

/// An open database file, read through the newest valid meta page.
#[derive(Debug)]
pub struct Db {
    file: File,
    len: u64,
    page_size: usize,
    meta: Meta,
    /// Why each meta page is invalid, if it is.
    meta_errors: [Option<MetaError>; 2],
}

/// A page read from the file (or an inline bucket's page held in its parent's value).
#[derive(Clone, Debug)]
pub(crate) struct Page {
    /// The page id; 0 for an inline page.
    pub id: u64,
    /// The header.
    pub header: PageHeader,
    /// The whole span: header, elements, data and overflow pages.
    pub bytes: Vec<u8>,
}

impl Page {
    /// Element `i`, bounds-checked.
    pub fn element(&self, i: usize) -> Result<page::Element<'_>, Error> {
        page::element(&self.bytes, self.header.flags, i)
            .map_err(|reason| Error::corrupt(self.id, reason))
    }

    /// Whether this is a leaf page.
    pub fn is_leaf(&self) -> bool {
        self.header.flags & LEAF_PAGE != 0
    }

    /// Whether this is a branch page.
    pub fn is_branch(&self) -> bool {
        self.header.flags & BRANCH_PAGE != 0
    }
}

/// Where a bucket's tree starts.
#[derive(Clone, Debug)]
pub(crate) enum Root {
    /// At this page.
    Page(u64),
    /// In this inline page (a single leaf stored in the parent's value).
    Inline(Page),
}

impl Root {
    /// Parses a bucket's value in its parent: a bucket header, then an inline page if the
    /// header's root is 0. `page` is the parent's page, for messages.
    pub fn parse(value: &[u8], page: u64) -> Result<Root, Error> {
        if value.len() < BUCKET_HEADER_SIZE {
            return Err(Error::corrupt(
                page,
                format!(
                    "a bucket value of {} bytes is shorter than a bucket header",
                    value.len()
                ),
            ));
        }
        let root = u64_at(value, 0);
        if root != 0 {
            return Ok(Root::Page(root));
        }
        let bytes = value[BUCKET_HEADER_SIZE..].to_vec();
        if bytes.len() < PAGE_HEADER_SIZE {
            return Err(Error::corrupt(
                page,
                "an inline bucket is shorter than a page header",
            ));
        }
        let header = PageHeader::decode(&bytes);
        if header.flags & LEAF_PAGE == 0 {
            return Err(Error::corrupt(
                page,
                format!(
                    "an inline bucket's page is a {} page, not a leaf",
                    page_type(header.flags)
                ),
            ));
        }
        Ok(Root::Inline(Page {
            id: 0,
            header,
            bytes,
        }))
    }
}

impl Db {
    /// Opens the file at `path` and picks its meta: the valid one with the higher txid, as
    /// bbolt does. Fails if neither meta page is valid.
    pub fn open(path: impl AsRef<Path>) -> Result<Db, Error> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        let read_meta = |offset: u64| -> Result<Result<Meta, MetaError>, Error> {
            if offset + (PAGE_HEADER_SIZE + META_SIZE) as u64 > len {
                return Ok(Err(MetaError::Missing));
            }
            let mut buf = [0u8; PAGE_HEADER_SIZE + META_SIZE];
            file.read_exact_at(&mut buf, offset)?;
            let meta = Meta::decode(&buf);
            Ok(meta.validate().map(|()| meta))
        };
        // The page size comes from meta 0; if it is damaged, from a meta 1 found at an offset
        // that agrees with the page size it records.
        let meta0 = read_meta(0)?;
        let page_size = match &meta0 {
            Ok(m) => m.page_size as usize,
            Err(_) => {
                let mut found = crate::PAGE_SIZE;
                let mut size = crate::MIN_PAGE_SIZE;
                while size <= crate::MAX_PAGE_SIZE {
                    if matches!(read_meta(size as u64)?, Ok(m) if m.page_size as usize == size) {
                        found = size;
                        break;
                    }
                    size *= 2;
                }
                found
            }
        };
        if len < 2 * page_size as u64 {
            return Err(Error::TooSmall { len });
        }
        let meta1 = read_meta(page_size as u64)?.and_then(|m| {
            if m.page_size as usize == page_size {
                Ok(m)
            } else {
                Err(MetaError::OtherPageSize(m.page_size))
            }
        });
        let meta = match (&meta0, &meta1) {
            (Ok(a), Ok(b)) => {
                if b.txid > a.txid {
                    *b
                } else {
                    *a
                }
            }
            (Ok(m), Err(_)) | (Err(_), Ok(m)) => *m,
            (Err(e0), Err(e1)) => {
                return Err(Error::NoValidMeta {
                    meta0: e0.clone(),
                    meta1: e1.clone(),
                });
            }
        };
        if meta.root >= meta.pgid {
            return Err(Error::OutOfRange {
                page: meta.root,
                high_water: meta.pgid,
            });
        }
        if meta.freelist != NO_FREELIST && meta.freelist >= meta.pgid {
            return Err(Error::OutOfRange {
                page: meta.freelist,
                high_water: meta.pgid,
            });
        }
        Ok(Db {
            file,
            len,
            page_size,
            meta,
            meta_errors: [meta0.err(), meta1.err()],
        })
    }

    /// The page size the file was written with.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// The id of the transaction that wrote the meta in use.
    pub fn txid(&self) -> u64 {
        self.meta.txid
    }

    /// The high-water mark: how many pages the database uses, free ones included.
    pub fn page_count(&self) -> u64 {
        self.meta.pgid
    }

    /// The freelist's page, or `None` when the file does not store its freelist (etcd
    /// writes its files so; the free pages are then those no bucket reaches).
    pub fn freelist_page(&self) -> Option<u64> {
        (self.meta.freelist != NO_FREELIST).then_some(self.meta.freelist)
    }

    /// The meta in use.
    pub(crate) fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Why meta page `i` (0 or 1) is invalid, if it is.
    pub(crate) fn meta_error(&self, i: usize) -> Option<&MetaError> {
        self.meta_errors[i].as_ref()
    }

    /// The file's length in bytes.
    pub(crate) fn file_len(&self) -> u64 {
        self.len
    }

    /// Reads page `id` with its overflow pages, checking that the span lies below the
    /// high-water mark and inside the file and that the header names the page.
    pub(crate) fn read_page(&self, id: u64) -> Result<Page, Error> {
        let high_water = self.meta.pgid;
        if id >= high_water {
            return Err(Error::OutOfRange {
                page: id,
                high_water,
            });
        }
        let ps = self.page_size as u64;
        let truncated = || Error::Truncated {
            page: id,
            len: self.len,
        };
        let Some(offset) = id
            .checked_mul(ps)
            .filter(|o| o.saturating_add(ps) <= self.len)
        else {
            return Err(truncated());
        };
        let mut head = [0u8; PAGE_HEADER_SIZE];
        self.file.read_exact_at(&mut head, offset)?;
        let header = PageHeader::decode(&head);
        if header.id != id {
            return Err(Error::corrupt(
                id,
                format!("its header names page {}", header.id),
            ));
        }
        // Below the high-water mark (a u64 page count), so neither sum nor product overflows
        // once the span is checked against the file's length.
        let last = id.saturating_add(u64::from(header.overflow));
        if last >= high_water {
            return Err(Error::OutOfRange {
                page: last,
                high_water,
            });
        }
        let span = (u64::from(header.overflow) + 1).saturating_mul(ps);
        if offset.saturating_add(span) > self.len {
            return Err(truncated());
        }
        let mut bytes = vec![0u8; span as usize];
        self.file.read_exact_at(&mut bytes, offset)?;
        Ok(Page { id, header, bytes })
    }

    /// The names of the buckets, in order.
    pub fn buckets(&self) -> Result<Vec<Vec<u8>>, Error> {
        let mut names = Vec::new();
        let mut walk = Walk::new(self, Root::Page(self.meta.root));
        while let Some((name, _, _)) = walk.next_bucket()? {
            names.push(name);
        }
        Ok(names)
    }

    /// The pairs of the bucket `name`, in key order.
    pub fn entries(&self, name: &[u8]) -> Result<Entries<'_>, Error> {
        let mut walk = Walk::new(self, Root::Page(self.meta.root));
        while let Some((key, value, page)) = walk.next_bucket()? {
            if key == name {
                return Ok(Entries {
                    walk: Walk::new(self, Root::parse(&value, page)?),
                    bucket: key,
                });
            }
        }
        Err(Error::NoSuchBucket(show(name)))
    }
}

/// The pairs of one bucket in key order, as `(key, value)`; see [`Db::entries`]. After an
/// error it yields nothing more.
#[derive(Debug)]
pub struct Entries<'db> {
    walk: Walk<'db>,
    bucket: Vec<u8>,
}

impl Iterator for Entries<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.walk.next()?;
        Some(item.and_then(|(key, value, _)| {
            if self.walk.last_flags & BUCKET_LEAF_FLAG != 0 {
                self.walk.done = true;
                return Err(Error::NestedBucket {
                    bucket: show(&self.bucket),
                    key: show(&key),
                });
            }
            Ok((key, value))
        }))
    }
}

/// A leaf element as a [`Walk`] yields it: key, value and the id of its page.
type Element = (Vec<u8>, Vec<u8>, u64);

/// An in-order walk over one tree's leaf elements, yielding `(key, value, page id)`; the
/// root bucket's walk yields bucket names and bucket values. Keys must ascend strictly.
#[derive(Debug)]
struct Walk<'db> {
    db: &'db Db,
    /// The path from the root: each page and the index of its next element.
    stack: Vec<(Page, usize)>,
    /// The root, until the walk starts.
    root: Option<Root>,
    visited: HashSet<u64>,
    prev: Option<Vec<u8>>,
    /// The flags of the element last yielded.
    last_flags: u32,
    done: bool,
}

impl<'db> Walk<'db> {
    fn new(db: &'db Db, root: Root) -> Walk<'db> {
        Walk {
            db,
            stack: Vec::new(),
            root: Some(root),
            visited: HashSet::new(),
            prev: None,
            last_flags: 0,
            done: false,
        }
    }

    /// Reads `id` as a page of a tree: a branch or leaf reached for the first time.
    fn descend(&mut self, id: u64) -> Result<(), Error> {
        if !self.visited.insert(id) {
            return Err(Error::Cycle { page: id });
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(Error::corrupt(
                id,
                format!("the tree is deeper than {MAX_DEPTH} levels"),
            ));
        }
        let page = self.db.read_page(id)?;
        if !page.is_branch() && !page.is_leaf() {
            return Err(Error::corrupt(
                id,
                format!(
                    "a {} page where a branch or leaf belongs",
                    page_type(page.header.flags)
                ),
            ));
        }
        self.stack.push((page, 0));
        Ok(())
    }

    /// The next element of the root bucket, which must be a bucket.
    fn next_bucket(&mut self) -> Result<Option<Element>, Error> {
        let Some(item) = self.next().transpose()? else {
            return Ok(None);
        };
        if self.last_flags & BUCKET_LEAF_FLAG == 0 {
            return Err(Error::corrupt(
                item.2,
                format!("the root bucket's entry {} is not a bucket", show(&item.0)),
            ));
        }
        Ok(Some(item))
    }

    fn step(&mut self) -> Result<Option<Element>, Error> {
        match self.root.take() {
            Some(Root::Page(id)) => self.descend(id)?,
            Some(Root::Inline(page)) => self.stack.push((page, 0)),
            None => {}
        }
        loop {
            let Some((page, index)) = self.stack.last_mut() else {
                return Ok(None);
            };
            if *index >= usize::from(page.header.count) {
                self.stack.pop();
                continue;
            }
            let e = page.element(*index)?;
            *index += 1;
            if page.is_branch() {
                let child = e.child;
                self.descend(child)?;
                continue;
            }
            if self.prev.as_deref().is_some_and(|p| p >= e.key) || e.key.is_empty() {
                return Err(Error::corrupt(
                    page.id,
                    format!(
                        "key {} does not sort after the key before it ({})",
                        show(e.key),
                        show(self.prev.as_deref().unwrap_or_default())
                    ),
                ));
            }
            let (key, value, id) = (e.key.to_vec(), e.value.to_vec(), page.id);
            self.last_flags = e.flags;
            self.prev = Some(key.clone());
            return Ok(Some((key, value, id)));
        }
    }
}

impl Iterator for Walk<'_> {
    type Item = Result<Element, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
