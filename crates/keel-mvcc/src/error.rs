//! The errors of the MVCC store.

/// Everything that can go wrong in the MVCC store.
///
/// The gRPC layer maps these onto etcd's codes and messages (`Compacted` is
/// `mvcc: required revision has been compacted`, `FutureRevision` is
/// `mvcc: required revision is a future revision`, `KeyNotFound` is `key not found`,
/// `LeaseNotFound` is `requested lease not found`).
#[derive(Debug, thiserror::Error)]
pub enum MvccError {
    /// The requested revision has been compacted.
    #[error("mvcc: required revision has been compacted")]
    Compacted,
    /// The requested revision is newer than the store's current revision.
    #[error("mvcc: required revision is a future revision")]
    FutureRevision,
    /// `ignore_value` / `ignore_lease` was given for a key that does not exist.
    #[error("key not found")]
    KeyNotFound,
    /// A put named a lease that does not exist.
    #[error("requested lease not found")]
    LeaseNotFound(i64),
    /// The redb backend failed.
    #[error("mvcc backend: {0}")]
    Backend(#[from] Box<redb::Error>),
    /// [`Mvcc::read_txn`](crate::Mvcc::read_txn) was given a txn with writes.
    #[error("mvcc: a txn with writes must be applied in a batch")]
    TxnWrites,
    /// The backend holds bytes that cannot be decoded.
    #[error("mvcc backend corrupt: {0}")]
    Corrupt(String),
    /// A file-system operation failed.
    #[error("mvcc i/o: {0}")]
    Io(#[from] std::io::Error),
}

macro_rules! backend_error {
    ($($t:ty),* $(,)?) => {$(
        impl From<$t> for MvccError {
            fn from(e: $t) -> Self {
                MvccError::Backend(Box::new(redb::Error::from(e)))
            }
        }
    )*};
}

backend_error!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::CompactionError,
    redb::SetDurabilityError,
);

impl From<prost::DecodeError> for MvccError {
    fn from(e: prost::DecodeError) -> Self {
        MvccError::Corrupt(e.to_string())
    }
}
