//! What can go wrong exporting an etcd-format snapshot.

/// Why a snapshot could not be written from a store's backend.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The backend could not be read.
    #[error("reading the backend: {0}")]
    Backend(#[from] keel_mvcc::MvccError),
    /// The backend's records could not be decoded.
    #[error("reading the backend's records: {0}")]
    Records(#[source] std::io::Error),
    /// The snapshot file could not be written.
    #[error("writing the snapshot: {0}")]
    Bbolt(#[from] keel_bbolt::Error),
}
