//! The on-disk layout: page headers, leaf and branch elements, bucket headers and meta pages.
//!
//! Every integer is little-endian (bbolt writes its structs in the machine's byte order, and
//! every platform etcd ships for is little-endian). Offsets below are within a page.
//!
//! ```text
//! page header (16 bytes)    id u64 | flags u16 | count u16 | overflow u32
//! leaf element (16 bytes)   flags u32 | pos u32 | ksize u32 | vsize u32
//! branch element (16 bytes) pos u32 | ksize u32 | child page id u64
//! bucket header (16 bytes)  root page id u64 (0: inline) | sequence u64
//! meta (64 bytes, at 16)    magic u32 | version u32 | page size u32 | flags u32 |
//!                           root bucket header (16) | freelist page id u64 | high-water mark u64 |
//!                           txid u64 | checksum u64 (FNV-1a 64 of the 56 bytes before it)
//! ```
//!
//! The elements follow the header as an array of `count`; an element's key (and a leaf's value
//! right after it) lives `pos` bytes after the start of that element. A page whose contents
//! exceed one page size spans `overflow` more pages, contiguous after it.

use crate::error::MetaError;

/// The size of a page header.
pub(crate) const PAGE_HEADER_SIZE: usize = 16;
/// The size of a leaf or a branch element.
pub(crate) const ELEMENT_SIZE: usize = 16;
/// The size of a bucket header, the start of a bucket's value in its parent.
pub(crate) const BUCKET_HEADER_SIZE: usize = 16;
/// The size of the meta struct, from `magic` through `checksum`.
pub(crate) const META_SIZE: usize = 64;

/// Page flag: a branch page.
pub(crate) const BRANCH_PAGE: u16 = 0x01;
/// Page flag: a leaf page.
pub(crate) const LEAF_PAGE: u16 = 0x02;
/// Page flag: a meta page.
pub(crate) const META_PAGE: u16 = 0x04;
/// Page flag: a freelist page.
pub(crate) const FREELIST_PAGE: u16 = 0x10;
/// Leaf element flag: the value is a bucket (a bucket header, maybe an inline page).
pub(crate) const BUCKET_LEAF_FLAG: u32 = 0x01;
/// The freelist page id that says the freelist is not stored (rebuilt by scanning instead).
pub(crate) const NO_FREELIST: u64 = u64::MAX;
/// A freelist page whose `count` is this keeps the real count in its first id slot.
pub(crate) const FREELIST_COUNT_IN_FIRST_ID: u16 = 0xFFFF;

/// Reads a little-endian u16 at `at`; the caller has checked the bounds.
pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// Reads a little-endian u32 at `at`; the caller has checked the bounds.
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

/// Reads a little-endian u64 at `at`; the caller has checked the bounds.
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("eight bytes"))
}

/// Describes a page type by its flags, as bbolt names them.
pub(crate) fn page_type(flags: u16) -> String {
    match flags {
        f if f & BRANCH_PAGE != 0 => "branch".to_string(),
        f if f & LEAF_PAGE != 0 => "leaf".to_string(),
        f if f & META_PAGE != 0 => "meta".to_string(),
        f if f & FREELIST_PAGE != 0 => "freelist".to_string(),
        f => format!("unknown<{f:02x}>"),
    }
}

/// A key or bucket name for messages: printable ASCII as is, other bytes escaped.
pub(crate) fn show(key: &[u8]) -> String {
    key.escape_ascii().to_string()
}

/// A page header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageHeader {
    /// The page's id (its offset divided by the page size); 0 in an inline page.
    pub id: u64,
    /// The page type flags.
    pub flags: u16,
    /// The number of elements (or free page ids).
    pub count: u16,
    /// How many pages past the first this page spans.
    pub overflow: u32,
}

impl PageHeader {
    /// Decodes the header at the start of `b` (at least [`PAGE_HEADER_SIZE`] bytes).
    pub fn decode(b: &[u8]) -> PageHeader {
        PageHeader {
            id: u64_at(b, 0),
            flags: u16_at(b, 8),
            count: u16_at(b, 10),
            overflow: u32_at(b, 12),
        }
    }

    /// Encodes the header into the start of `b`.
    pub fn encode(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.id.to_le_bytes());
        b[8..10].copy_from_slice(&self.flags.to_le_bytes());
        b[10..12].copy_from_slice(&self.count.to_le_bytes());
        b[12..16].copy_from_slice(&self.overflow.to_le_bytes());
    }
}

/// One element of a leaf or branch page, borrowed from the page's bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Element<'a> {
    /// Leaf element flags ([`BUCKET_LEAF_FLAG`]); 0 on a branch.
    pub flags: u32,
    /// The key.
    pub key: &'a [u8],
    /// A leaf's value; empty on a branch.
    pub value: &'a [u8],
    /// A branch element's child page; 0 on a leaf.
    pub child: u64,
}

/// Element `i` of the page `page` (the whole span, header included), whose type `flags` says
/// whether it is a leaf or a branch. Errors say which bound the element breaks.
pub(crate) fn element(page: &[u8], flags: u16, i: usize) -> Result<Element<'_>, String> {
    let at = PAGE_HEADER_SIZE + i * ELEMENT_SIZE;
    if at + ELEMENT_SIZE > page.len() {
        return Err(format!(
            "element {i} header ends past the page ({} bytes)",
            page.len()
        ));
    }
    let leaf = flags & LEAF_PAGE != 0;
    let (pos, ksize, vsize) = if leaf {
        (
            u32_at(page, at + 4),
            u32_at(page, at + 8),
            u32_at(page, at + 12),
        )
    } else {
        (u32_at(page, at), u32_at(page, at + 4), 0)
    };
    let start = at as u64 + u64::from(pos);
    let key_end = start + u64::from(ksize);
    let end = key_end + u64::from(vsize);
    if end > page.len() as u64 {
        return Err(format!(
            "element {i} data ends at byte {end}, past the page ({} bytes)",
            page.len()
        ));
    }
    let (start, key_end, end) = (start as usize, key_end as usize, end as usize);
    Ok(Element {
        flags: if leaf { u32_at(page, at) } else { 0 },
        key: &page[start..key_end],
        value: &page[key_end..end],
        child: if leaf { 0 } else { u64_at(page, at + 8) },
    })
}

/// The elements a page is being built from: their headers and their keys and values.
#[derive(Debug)]
pub(crate) struct PageBuilder {
    /// The page type flags, [`LEAF_PAGE`] or [`BRANCH_PAGE`].
    flags: u16,
    /// Per element: flags, key size, value size, child page id.
    heads: Vec<(u32, u32, u32, u64)>,
    /// The keys and values, one after the other, in element order.
    data: Vec<u8>,
}

impl PageBuilder {
    /// An empty page of type `flags`.
    pub fn new(flags: u16) -> PageBuilder {
        PageBuilder {
            flags,
            heads: Vec::new(),
            data: Vec::new(),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.heads.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    /// The bytes the page needs: header, element array, keys and values (bbolt's `node.size`).
    pub fn size(&self) -> usize {
        PAGE_HEADER_SIZE + self.heads.len() * ELEMENT_SIZE + self.data.len()
    }

    /// The first element's key (empty if there is none).
    pub fn first_key(&self) -> &[u8] {
        match self.heads.first() {
            Some(&(_, ksize, _, _)) => &self.data[..ksize as usize],
            None => &[],
        }
    }

    /// Appends a leaf element.
    pub fn push_leaf(&mut self, flags: u32, key: &[u8], value: &[u8]) {
        self.heads
            .push((flags, key.len() as u32, value.len() as u32, 0));
        self.data.extend_from_slice(key);
        self.data.extend_from_slice(value);
    }

    /// Appends a branch element pointing at `child`.
    pub fn push_branch(&mut self, key: &[u8], child: u64) {
        self.heads.push((0, key.len() as u32, 0, child));
        self.data.extend_from_slice(key);
    }

    /// Removes every element, keeping the allocations.
    pub fn clear(&mut self) {
        self.heads.clear();
        self.data.clear();
    }

    /// Encodes the page with id `id`. With `page_size`, the result is padded to whole pages and
    /// `overflow` counts the extra ones; without, it is exactly [`PageBuilder::size`] bytes (an
    /// inline page).
    pub fn encode(&self, id: u64, page_size: Option<usize>) -> Vec<u8> {
        let size = self.size();
        let span = page_size.map_or(size, |ps| size.div_ceil(ps).max(1) * ps);
        let mut out = vec![0u8; span];
        PageHeader {
            id,
            flags: self.flags,
            count: self.heads.len() as u16,
            overflow: page_size.map_or(0, |ps| (span / ps - 1) as u32),
        }
        .encode(&mut out);
        let n = self.heads.len();
        let mut data_at = PAGE_HEADER_SIZE + n * ELEMENT_SIZE;
        out[data_at..size].copy_from_slice(&self.data);
        for (i, &(flags, ksize, vsize, child)) in self.heads.iter().enumerate() {
            let at = PAGE_HEADER_SIZE + i * ELEMENT_SIZE;
            let pos = (data_at - at) as u32;
            let e = &mut out[at..at + ELEMENT_SIZE];
            if self.flags == LEAF_PAGE {
                e[0..4].copy_from_slice(&flags.to_le_bytes());
                e[4..8].copy_from_slice(&pos.to_le_bytes());
                e[8..12].copy_from_slice(&ksize.to_le_bytes());
                e[12..16].copy_from_slice(&vsize.to_le_bytes());
            } else {
                e[0..4].copy_from_slice(&pos.to_le_bytes());
                e[4..8].copy_from_slice(&ksize.to_le_bytes());
                e[8..16].copy_from_slice(&child.to_le_bytes());
            }
            data_at += ksize as usize + vsize as usize;
        }
        out
    }
}

/// How many pages of `page_size` hold `bytes`.
fn pages(bytes: usize, page_size: usize) -> usize {
    bytes.div_ceil(page_size)
}

/// Whether an element of `elem` bytes (its header included) joins a page now `size` bytes with
/// `count` elements: always as the second element (so every branch level at least halves),
/// otherwise when one page holding both takes fewer pages than two apart, and never past
/// the 65,534 elements a page header can count.
pub(crate) fn joins(size: usize, count: usize, elem: usize, page_size: usize) -> bool {
    if count == 0 {
        return true;
    }
    if count >= usize::from(u16::MAX) - 1 {
        return false;
    }
    count < 2
        || pages(size + elem, page_size)
            < pages(size, page_size) + pages(PAGE_HEADER_SIZE + elem, page_size)
}

/// A meta page's contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    /// The magic number, [`crate::MAGIC`].
    pub magic: u32,
    /// The format version, [`crate::VERSION`].
    pub version: u32,
    /// The page size the file was written with.
    pub page_size: u32,
    /// Unused flags.
    pub flags: u32,
    /// The root bucket's root page.
    pub root: u64,
    /// The root bucket's sequence.
    pub sequence: u64,
    /// The freelist page, or [`NO_FREELIST`].
    pub freelist: u64,
    /// The high-water mark: the number of pages in use, free ones included.
    pub pgid: u64,
    /// The id of the transaction that wrote this meta.
    pub txid: u64,
    /// The stored checksum.
    pub checksum: u64,
}

impl Meta {
    /// Decodes the meta struct from the meta page `page` (at least 80 bytes).
    pub fn decode(page: &[u8]) -> Meta {
        let m = &page[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + META_SIZE];
        Meta {
            magic: u32_at(m, 0),
            version: u32_at(m, 4),
            page_size: u32_at(m, 8),
            flags: u32_at(m, 12),
            root: u64_at(m, 16),
            sequence: u64_at(m, 24),
            freelist: u64_at(m, 32),
            pgid: u64_at(m, 40),
            txid: u64_at(m, 48),
            checksum: u64_at(m, 56),
        }
    }

    /// The meta struct's bytes, with the checksum as stored.
    fn bytes(&self) -> [u8; META_SIZE] {
        let mut m = [0u8; META_SIZE];
        let fields32 = [self.magic, self.version, self.page_size, self.flags];
        for (i, v) in fields32.iter().enumerate() {
            m[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        let fields64 = [
            self.root,
            self.sequence,
            self.freelist,
            self.pgid,
            self.txid,
            self.checksum,
        ];
        for (i, v) in fields64.iter().enumerate() {
            m[16 + i * 8..24 + i * 8].copy_from_slice(&v.to_le_bytes());
        }
        m
    }

    /// The checksum of the meta: FNV-1a 64 over the bytes before the checksum field.
    pub fn sum64(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in &self.bytes()[..META_SIZE - 8] {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    }

    /// Checks magic, version and checksum as bbolt does (a zero checksum is not checked, as in
    /// bbolt v1.3), and that the page size is one this crate can read.
    pub fn validate(&self) -> Result<(), MetaError> {
        if self.magic != crate::MAGIC {
            return Err(MetaError::Magic(self.magic));
        }
        if self.version != crate::VERSION {
            return Err(MetaError::Version(self.version));
        }
        if self.checksum != 0 && self.checksum != self.sum64() {
            return Err(MetaError::Checksum {
                stored: self.checksum,
                computed: self.sum64(),
            });
        }
        if !(crate::MIN_PAGE_SIZE..=crate::MAX_PAGE_SIZE).contains(&(self.page_size as usize)) {
            return Err(MetaError::PageSize(self.page_size));
        }
        Ok(())
    }

    /// Encodes this meta, checksummed, as the meta page `id` of `page_size` bytes.
    pub fn encode_page(&self, id: u64, page_size: usize) -> Vec<u8> {
        let mut out = vec![0u8; page_size];
        PageHeader {
            id,
            flags: META_PAGE,
            count: 0,
            overflow: 0,
        }
        .encode(&mut out);
        let sealed = Meta {
            checksum: self.sum64(),
            ..*self
        };
        out[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + META_SIZE].copy_from_slice(&sealed.bytes());
        out
    }
}

/// A bucket header followed, for an inline bucket, by its page.
pub(crate) fn bucket_value(root: u64, inline_page: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(BUCKET_HEADER_SIZE + inline_page.len());
    v.extend_from_slice(&root.to_le_bytes());
    v.extend_from_slice(&0u64.to_le_bytes());
    v.extend_from_slice(inline_page);
    v
}
