//! Reads, writes and checks bbolt database files, byte for byte in the format of bbolt v1.3
//! (the version etcd 3.5 links): the exchange format for etcd snapshots. keel streams its own
//! data out as an etcd-format file that `etcdutl snapshot status` and `restore` accept, and
//! reads snapshots saved from a real etcd to restore them.
//!
//! # The format
//!
//! A file is an array of fixed-size pages (the page size is in the meta; etcd on Linux uses
//! 4096, and so does [`Writer`]). Page 0 and page 1 are meta pages; each names the root
//! bucket's page, the freelist page, the high-water mark (pages in use) and the id of the
//! transaction that wrote it, sealed by an FNV-1a 64 checksum. A reader takes the valid meta
//! with the higher txid, so a torn meta write falls back to the previous one.
//!
//! Every bucket is a B+tree: leaf pages hold the sorted key/value pairs, branch pages hold
//! the first key and page id of each child. A page whose contents outgrow one page spans more
//! (its `overflow` count), which is how large values are stored. The root bucket maps each
//! bucket's name to a 16-byte bucket header (its root page id and a sequence); a bucket small
//! enough (its page at most a quarter page) is stored *inline* instead: root id 0 and its
//! single leaf page right after the header, inside the root bucket's value. The byte layout
//! of each structure is in `page.rs`.
//!
//! The freelist page lists pages freed by earlier transactions. etcd does not store it
//! (bbolt's `NoFreelistSync`): its files and snapshots carry freelist id `u64::MAX`, and
//! bbolt then treats every page below the high-water mark that no bucket reaches as free.
//! [`Writer`] frees nothing, so it stores an empty freelist page.
//!
//! # What this crate offers
//!
//! - [`Writer`]: builds a file in one streaming pass from buckets and pairs given in order.
//! - [`Db`]: opens a file, lists its buckets and iterates a bucket's pairs in order.
//! - [`check()`]: a page-level consistency check returning every problem it finds.
//!
//! Nested buckets are not written, and reading one is an error: etcd's schema has none.
//! The sha256 etcd appends to a snapshot is not this crate's business: strip it before
//! [`Db::open`] (a trailing 32 bytes past the last page are ignored anyway) and append it
//! after [`Writer::finish`].

mod check;
mod error;
mod page;
mod read;
mod write;

pub use check::check;
pub use error::{Error, MetaError};
pub use read::{Db, Entries};
pub use write::{Writer, Written};

/// The magic number every meta page starts with.
pub const MAGIC: u32 = 0xED0C_DAED;
/// The format version this crate reads and writes.
pub const VERSION: u32 = 2;
/// The page size [`Writer`] uses: etcd's on Linux.
pub const PAGE_SIZE: usize = 4096;
/// The smallest page size [`Db::open`] accepts.
pub const MIN_PAGE_SIZE: usize = 512;
/// The largest page size [`Db::open`] accepts.
pub const MAX_PAGE_SIZE: usize = 1 << 20;
/// The longest key (or bucket name) bbolt allows.
pub const MAX_KEY_SIZE: usize = 32768;
/// The longest value bbolt allows.
pub const MAX_VALUE_SIZE: usize = (1 << 31) - 2;

#[cfg(test)]
mod tests;
