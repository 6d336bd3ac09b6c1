//! What can go wrong exporting, restoring or rewriting an etcd-format snapshot. Where
//! etcdutl 3.5 (or 3.6, for `--bump-revision`) refuses the same thing, the message is its.

use std::path::PathBuf;

use crate::config::ConfigError;

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

/// Why a snapshot could not be restored or rewritten; nothing was left behind.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// `bump_revision` and `mark_compacted` disagree (one without the other).
    #[error("--mark-compacted required if --revision-bump > 0")]
    BumpWithoutMark,
    /// The bump leaves no room for revisions after it.
    #[error("--bump-revision {0} is too large: at most 4611686018427387904 (2^62)")]
    BumpTooLarge(u64),
    /// The member or cluster options do not fit together.
    #[error(transparent)]
    Cluster(#[from] ConfigError),
    /// The target data directory exists and is not empty (or cannot be listed).
    #[error("data-dir {0:?} not empty or could not be read")]
    NotEmpty(PathBuf),
    /// The file does not end in a sha256 and `skip_hash_check` is off.
    #[error("snapshot missing hash but --skip-hash-check=false")]
    MissingHash,
    /// The trailing sha256 is not the database's (printed as Go prints byte slices).
    #[error("expected sha256 {expected}, got {got}")]
    HashMismatch {
        /// The sha256 the file ends in.
        expected: String,
        /// The sha256 of the database.
        got: String,
    },
    /// The database is not a sound bbolt file.
    #[error("{path}: {source}")]
    Bbolt {
        /// The snapshot file.
        path: PathBuf,
        /// What is wrong.
        source: keel_bbolt::Error,
    },
    /// The database is a bbolt file but not one in etcd's schema (the reason names the
    /// bucket and entry).
    #[error("{path}: not an etcd snapshot: {reason}")]
    Schema {
        /// The snapshot file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The snapshot has authentication enabled, which keel store cannot enforce yet: serving
    /// its keys without it would open them to everyone.
    #[error(
        "the snapshot has authentication enabled, which keel store cannot enforce yet; disable it (etcdctl auth disable) and save the snapshot again"
    )]
    AuthEnabled,
    /// Writing the new backend failed.
    #[error("writing the backend: {0}")]
    Backend(#[from] keel_mvcc::MvccError),
    /// The target is a mount point, which the finished folder cannot be moved onto.
    #[error("{0} is a mount point, which cannot be replaced: use a new folder inside it")]
    MountPoint(PathBuf),
    /// A file-system operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

impl RestoreError {
    /// An i/o error on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> RestoreError {
        let path = path.into();
        move |source| RestoreError::Io { path, source }
    }
}

impl From<keel_wal::staging::StagingError> for RestoreError {
    fn from(e: keel_wal::staging::StagingError) -> Self {
        use keel_wal::staging::StagingError;
        match e {
            StagingError::NotEmpty(path) => RestoreError::NotEmpty(path),
            StagingError::MountPoint(path) => RestoreError::MountPoint(path),
            StagingError::Io { path, source } => RestoreError::Io { path, source },
        }
    }
}
