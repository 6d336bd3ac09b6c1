//! A page-level consistency check, in the spirit of bbolt's `Tx.Check` (which
//! `etcdutl snapshot status` runs before it trusts a snapshot).
//!
//! The check walks every bucket from the root bucket down and reports, without stopping:
//! - a page referenced at or past the high-water mark, or past the end of the file, its
//!   overflow pages included;
//! - a page reached twice (from two parents, or in a cycle: the walk never enters a page
//!   twice), or both reached and listed as free, or listed free twice;
//! - a page of the wrong type where a branch or leaf belongs, a header naming another page,
//!   an element whose key or value lies outside its page, an empty key;
//! - keys that do not strictly ascend within a page and across the pages of a bucket, and
//!   keys of a page outside the range its branch element gives it (from its key to the next
//!   one's, as bbolt 1.3.7's check bounds them);
//! - a root-bucket entry that is not a bucket, a bucket value too short for its header, and a
//!   bucket inside a bucket (etcd's schema has none, so the walk never goes below one level);
//! - when the file stores its freelist, a page below the high-water mark that is neither
//!   reached nor free (when it does not, such pages are the free ones, as bbolt reads them);
//! - an invalid meta page (the file still opens through the other one).

use std::collections::HashSet;
use std::path::Path;

use crate::error::Error;
use crate::page::{
    BUCKET_LEAF_FLAG, FREELIST_COUNT_IN_FIRST_ID, FREELIST_PAGE, META_PAGE, PAGE_HEADER_SIZE,
    page_type, show, u64_at,
};
use crate::read::{Db, MAX_DEPTH, Page, Root};

/// How many problems a check reports before it stops looking.
const MAX_PROBLEMS: usize = 1000;

/// Opens the file at `path` and checks it page by page (see [`Db::check`]).
pub fn check(path: impl AsRef<Path>) -> Result<Vec<String>, Error> {
    Db::open(path)?.check()
}

impl Db {
    /// Checks the whole file: every problem found, as a sentence naming the page; empty when
    /// the file is sound. Fails only when the file cannot be read at all.
    pub fn check(&self) -> Result<Vec<String>, Error> {
        let mut c = Checker {
            db: self,
            reachable: HashSet::from([0, 1]),
            freed: HashSet::new(),
            problems: Vec::new(),
        };
        c.metas()?;
        c.freelist()?;
        c.bucket(Root::Page(self.meta().root), true, 0)?;
        c.unreachable();
        if c.problems.len() >= MAX_PROBLEMS {
            c.problems.truncate(MAX_PROBLEMS);
            c.problems
                .push(format!("stopped after {MAX_PROBLEMS} problems"));
        }
        Ok(c.problems)
    }
}

struct Checker<'db> {
    db: &'db Db,
    reachable: HashSet<u64>,
    freed: HashSet<u64>,
    problems: Vec<String>,
}

impl Checker<'_> {
    fn problem(&mut self, message: impl Into<String>) {
        self.problems.push(message.into());
    }

    /// Reads page `id`: `None` after noting why it cannot be read, an error only for I/O.
    fn read(&mut self, id: u64) -> Result<Option<Page>, Error> {
        match self.db.read_page(id) {
            Ok(page) => Ok(Some(page)),
            Err(Error::Io(e)) if e.kind() != std::io::ErrorKind::UnexpectedEof => Err(Error::Io(e)),
            Err(e) => {
                self.problem(e.to_string());
                Ok(None)
            }
        }
    }

    /// Marks the span of `page` reachable, noting pages reached before or listed free.
    fn mark(&mut self, page: &Page) {
        for id in page.id..=page.id + u64::from(page.header.overflow) {
            if !self.reachable.insert(id) {
                self.problem(format!("page {id}: multiple references"));
            }
            if self.freed.contains(&id) {
                self.problem(format!("page {id}: reachable freed"));
            }
        }
    }

    fn metas(&mut self) -> Result<(), Error> {
        for i in 0..2 {
            if let Some(e) = self.db.meta_error(i) {
                self.problem(format!("meta page {i}: {e}"));
                continue;
            }
            if let Some(page) = self.read(i as u64)?
                && page.header.flags & META_PAGE == 0
            {
                let kind = page_type(page.header.flags);
                self.problem(format!(
                    "meta page {i}: its header says it is a {kind} page"
                ));
            }
        }
        let (pages, ps, len) = (
            self.db.page_count(),
            self.db.page_size() as u64,
            self.db.file_len(),
        );
        if pages.saturating_mul(ps) > len {
            self.problem(format!(
                "the file ends at byte {len}, before its high-water mark of {pages} pages"
            ));
        }
        Ok(())
    }

    /// Reads the freelist, if the file stores one: its ids must be distinct data pages.
    fn freelist(&mut self) -> Result<(), Error> {
        let Some(id) = self.db.freelist_page() else {
            return Ok(());
        };
        let Some(page) = self.read(id)? else {
            return Ok(());
        };
        if page.header.flags & FREELIST_PAGE == 0 {
            let kind = page_type(page.header.flags);
            self.problem(format!("page {id}: the freelist is a {kind} page"));
            return Ok(());
        }
        self.mark(&page);
        let (mut first, mut count) = (0u64, u64::from(page.header.count));
        if page.header.count == FREELIST_COUNT_IN_FIRST_ID {
            first = 1;
            count = u64_at(&page.bytes, PAGE_HEADER_SIZE);
        }
        let end = first
            .saturating_add(count)
            .saturating_mul(8)
            .saturating_add(PAGE_HEADER_SIZE as u64);
        if end > page.bytes.len() as u64 {
            self.problem(format!(
                "page {id}: the freelist's {count} ids overflow the page"
            ));
            return Ok(());
        }
        for i in first..first + count {
            let free = u64_at(&page.bytes, PAGE_HEADER_SIZE + i as usize * 8);
            if free < 2 || free >= self.db.page_count() {
                self.problem(format!("page {free}: listed free but out of bounds"));
            } else if !self.freed.insert(free) {
                self.problem(format!("page {free}: already freed"));
            }
        }
        Ok(())
    }

    /// Checks one bucket's tree; `root_bucket` says whether its entries must be buckets.
    fn bucket(&mut self, root: Root, root_bucket: bool, depth: usize) -> Result<(), Error> {
        let mut prev = None;
        let all = Bounds::default();
        match root {
            Root::Inline(page) => self.elements(&page, all, &mut prev, root_bucket, depth),
            Root::Page(id) => self.visit(id, all, &mut prev, root_bucket, depth),
        }
    }

    /// Checks page `id`, whose keys must lie within `bounds` (its branch element's key and
    /// the next one's), and the pages below it.
    fn visit(
        &mut self,
        id: u64,
        bounds: Bounds<'_>,
        prev: &mut Option<Vec<u8>>,
        root_bucket: bool,
        depth: usize,
    ) -> Result<(), Error> {
        if self.problems.len() >= MAX_PROBLEMS {
            return Ok(());
        }
        if depth > MAX_DEPTH {
            self.problem(format!("page {id}: deeper than {MAX_DEPTH} levels"));
            return Ok(());
        }
        if self.reachable.contains(&id) {
            self.problem(format!("page {id}: multiple references"));
            return Ok(());
        }
        let Some(page) = self.read(id)? else {
            return Ok(());
        };
        self.mark(&page);
        if !page.is_branch() && !page.is_leaf() {
            let kind = page_type(page.header.flags);
            self.problem(format!("page {id}: invalid type: {kind}"));
            return Ok(());
        }
        self.elements(&page, bounds, prev, root_bucket, depth)
    }

    /// Checks the elements of `page` (and, for a branch, its children): keys within
    /// `bounds`, ascending across the bucket (`prev`, the last key seen); a root-bucket
    /// entry must be a bucket, and no other entry may be one (etcd's schema nests none).
    fn elements(
        &mut self,
        page: &Page,
        bounds: Bounds<'_>,
        prev: &mut Option<Vec<u8>>,
        root_bucket: bool,
        depth: usize,
    ) -> Result<(), Error> {
        let id = page.id;
        let mut elements = Vec::with_capacity(usize::from(page.header.count));
        for i in 0..usize::from(page.header.count) {
            match page.element(i) {
                Ok(e) => elements.push(e),
                Err(e) => {
                    self.problem(e.to_string());
                    return Ok(());
                }
            }
        }
        for (i, e) in elements.iter().enumerate() {
            if self.problems.len() >= MAX_PROBLEMS {
                return Ok(());
            }
            let key = show(e.key);
            if e.key.is_empty() {
                self.problem(format!("page {id}: element {i} has an empty key"));
            }
            if let Some(bound) = bounds.outside(e.key) {
                self.problem(format!(
                    "page {id}: key {key} lies outside the branch above it ({bound})"
                ));
            }
            if page.is_branch() {
                if i > 0 && elements[i - 1].key >= e.key {
                    self.problem(format!("page {id}: branch key {key} is out of order"));
                }
                let child = Bounds {
                    low: Some(e.key),
                    high: elements.get(i + 1).map(|next| next.key).or(bounds.high),
                };
                self.visit(e.child, child, prev, root_bucket, depth + 1)?;
                continue;
            }
            if let Some(p) = prev.as_deref()
                && p >= e.key
            {
                let p = show(p);
                self.problem(format!("page {id}: key {key} does not sort after key {p}"));
            }
            *prev = Some(e.key.to_vec());
            let is_bucket = e.flags & BUCKET_LEAF_FLAG != 0;
            match (root_bucket, is_bucket) {
                (true, false) => self.problem(format!(
                    "page {id}: root bucket entry {key} is not a bucket"
                )),
                (true, true) => match Root::parse(e.value, id) {
                    Ok(root) => self.bucket(root, false, depth + 1)?,
                    Err(err) => self.problem(format!("bucket {key}: {err}")),
                },
                (false, true) => self.problem(format!(
                    "page {id}: entry {key} is a bucket inside a bucket, which etcd's schema has none of"
                )),
                (false, false) => {}
            }
        }
        Ok(())
    }

    /// With a stored freelist, every page below the high-water mark (and inside the file)
    /// must be reached or free.
    fn unreachable(&mut self) {
        if self.db.freelist_page().is_none() {
            return;
        }
        let in_file = self.db.file_len() / self.db.page_size() as u64;
        for id in 0..self.db.page_count().min(in_file) {
            if self.problems.len() >= MAX_PROBLEMS {
                return;
            }
            if !self.reachable.contains(&id) && !self.freed.contains(&id) {
                self.problem(format!("page {id}: unreachable unfreed"));
            }
        }
    }
}

/// The keys a page reached from a branch may hold: from its branch key (inclusive) to the
/// next branch key (exclusive), as bbolt's own check bounds them.
#[derive(Clone, Copy, Default)]
struct Bounds<'a> {
    low: Option<&'a [u8]>,
    high: Option<&'a [u8]>,
}

impl Bounds<'_> {
    /// The bound `key` breaks, if any.
    fn outside(&self, key: &[u8]) -> Option<String> {
        if let Some(low) = self.low.filter(|low| key < *low) {
            return Some(format!("at least {}", show(low)));
        }
        if let Some(high) = self.high.filter(|high| key >= *high) {
            return Some(format!("below {}", show(high)));
        }
        None
    }
}
