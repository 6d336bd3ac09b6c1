//! What can go wrong reading or writing a database file.

/// Why a meta page is not valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    /// The magic number is not bbolt's.
    #[error("magic {0:#010x} is not 0xed0cdaed")]
    Magic(u32),
    /// The format version is not 2.
    #[error("format version {0} is not 2")]
    Version(u32),
    /// The checksum does not match the meta's contents.
    #[error("checksum {stored:#018x} does not match the contents ({computed:#018x})")]
    Checksum {
        /// The checksum in the file.
        stored: u64,
        /// The checksum of the meta as read.
        computed: u64,
    },
    /// The page size is outside what this crate reads.
    #[error("page size {0} is outside 512..=1048576")]
    PageSize(u32),
    /// Meta page 1 records another page size than the one it was found at.
    #[error("page size {0} differs from the page size meta page 1 was found at")]
    OtherPageSize(u32),
    /// The file ends before the meta page.
    #[error("the file ends before this meta page")]
    Missing,
}

/// An error reading or writing a database file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file system failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The file is too short to hold the two meta pages.
    #[error("the file is {len} bytes, too small for a bbolt database")]
    TooSmall {
        /// The file's length.
        len: u64,
    },
    /// Neither meta page is valid.
    #[error("no valid meta page: meta 0: {meta0}; meta 1: {meta1}")]
    NoValidMeta {
        /// Why meta page 0 is invalid.
        meta0: MetaError,
        /// Why meta page 1 is invalid.
        meta1: MetaError,
    },
    /// A page id at or past the high-water mark was referenced.
    #[error("page {page} is out of bounds: the high-water mark is {high_water}")]
    OutOfRange {
        /// The page referenced (or the last page of its span).
        page: u64,
        /// The number of pages in use.
        high_water: u64,
    },
    /// A page extends past the end of the file.
    #[error("page {page} extends past the end of the file ({len} bytes)")]
    Truncated {
        /// The page.
        page: u64,
        /// The file's length.
        len: u64,
    },
    /// A page's contents break the format.
    #[error("page {page}: {reason}")]
    Corrupt {
        /// The page (0 for an inline bucket's page).
        page: u64,
        /// What is wrong.
        reason: String,
    },
    /// A page is reached a second time while walking one bucket: a cycle or a shared page.
    #[error("page {page} is referenced twice in one bucket")]
    Cycle {
        /// The page.
        page: u64,
    },
    /// The database has no bucket of that name.
    #[error("no bucket named {0}")]
    NoSuchBucket(String),
    /// A bucket holds another bucket, which the files this crate exchanges never do.
    #[error("bucket {bucket}: key {key} is a nested bucket, which this reader does not read")]
    NestedBucket {
        /// The outer bucket's name.
        bucket: String,
        /// The nested bucket's key.
        key: String,
    },
    /// Bucket names must be non-empty, at most 32768 bytes and strictly ascending.
    #[error("bucket {name} cannot follow bucket {prev}: names must be non-empty and ascend")]
    BucketOrder {
        /// The previous bucket (empty for none).
        prev: String,
        /// The bucket given.
        name: String,
    },
    /// Keys must be non-empty and strictly ascending within a bucket.
    #[error(
        "bucket {bucket}: key {key} cannot follow key {prev}: keys must be non-empty and ascend"
    )]
    KeyOrder {
        /// The bucket.
        bucket: String,
        /// The previous key (empty for none).
        prev: String,
        /// The key given.
        key: String,
    },
    /// A key or bucket name is longer than bbolt allows.
    #[error("a key of {len} bytes is longer than the maximum of 32768")]
    KeyTooLarge {
        /// The key's length.
        len: usize,
    },
    /// A value is longer than bbolt allows.
    #[error("a value of {len} bytes is longer than the maximum of 2147483646")]
    ValueTooLarge {
        /// The value's length.
        len: usize,
    },
    /// `put` was called before any `begin_bucket`.
    #[error("put before begin_bucket: keys belong to a bucket")]
    NoBucket,
}

impl Error {
    /// A [`Error::Corrupt`] for `page`.
    pub(crate) fn corrupt(page: u64, reason: impl Into<String>) -> Error {
        Error::Corrupt {
            page,
            reason: reason.into(),
        }
    }
}
