//! An etcd snapshot file opened for reading: its hash checked, its pages checked, its
//! buckets read, and the revisions it is served at.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use keel_bbolt::{Db, Entries};

use super::error::RestoreError;
use super::schema;
use super::sealed;

/// An etcd database file, checked.
pub(super) struct Source {
    path: PathBuf,
    db: Db,
}

/// The revision the etcd snapshot file `snapshot` is served at: its last `key` row's, or a
/// newer compaction's (as after a rewrite). Its trailing sha256 is not checked here.
pub fn revision(snapshot: &Path) -> Result<i64, RestoreError> {
    let source = Source::open(snapshot, true)?;
    let meta = source.bucket(schema::META)?;
    let found = SourceRevisions {
        last_row: source.for_each_row(|_, _, _| Ok(()))?,
        scheduled: source.compact_rev(&meta, schema::SCHEDULED_COMPACT_REV)?,
        finished: source.compact_rev(&meta, schema::FINISHED_COMPACT_REV)?,
    };
    Ok(found.latest())
}

/// The revisions a snapshot is served at, and a bump of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SourceRevisions {
    /// The main revision of the last `key` row (1 when there is none).
    pub last_row: i64,
    /// `meta`'s `scheduledCompactRev`.
    pub scheduled: Option<i64>,
    /// `meta`'s `finishedCompactRev`.
    pub finished: Option<i64>,
}

impl SourceRevisions {
    /// The revision the snapshot is served at: its last row's, or a newer compaction's.
    pub fn latest(&self) -> i64 {
        [Some(self.last_row), self.scheduled, self.finished]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(1)
            .max(1)
    }

    /// The compaction the snapshot records (-1 for none).
    pub fn compact(&self) -> i64 {
        self.scheduled.max(self.finished).unwrap_or(-1)
    }
}

/// Refuses a bump without a compaction mark and a mark without a bump, as etcd 3.6 does.
pub(super) fn check_bump(bump_revision: u64, mark_compacted: bool) -> Result<(), RestoreError> {
    if bump_revision > MAX_BUMP {
        return Err(RestoreError::BumpTooLarge(bump_revision));
    }
    match (bump_revision > 0, mark_compacted) {
        (true, true) | (false, false) => Ok(()),
        _ => Err(RestoreError::BumpWithoutMark),
    }
}

/// The largest revision bump: 2^62, leaving room for as many revisions again before a
/// revision (an i64) could overflow.
pub const MAX_BUMP: u64 = 1 << 62;

impl Source {
    /// Opens the snapshot at `path` after checking its trailing sha256 (see
    /// [`sealed::verify`]) and every page of the database.
    pub fn open(path: &Path, skip_hash_check: bool) -> Result<Source, RestoreError> {
        sealed::verify(path, skip_hash_check)?;
        let bbolt = |source| RestoreError::Bbolt {
            path: path.to_path_buf(),
            source,
        };
        let db = Db::open(path).map_err(bbolt)?;
        let problems = db.check().map_err(bbolt)?;
        if let Some(first) = problems.first() {
            return Err(RestoreError::Schema {
                path: path.to_path_buf(),
                reason: format!(
                    "the database has {} damaged pages or entries; the first: {first}",
                    problems.len()
                ),
            });
        }
        Ok(Source {
            path: path.to_path_buf(),
            db,
        })
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// An error naming this file.
    pub fn schema_error(&self, reason: impl Into<String>) -> RestoreError {
        RestoreError::Schema {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }

    /// A bbolt error reading this file.
    pub fn bbolt_error(&self, source: keel_bbolt::Error) -> RestoreError {
        RestoreError::Bbolt {
            path: self.path.clone(),
            source,
        }
    }

    /// The entries of bucket `name` in order; none for a bucket the file lacks.
    pub fn entries(&self, name: &[u8]) -> Result<Option<Entries<'_>>, RestoreError> {
        match self.db.entries(name) {
            Ok(entries) => Ok(Some(entries)),
            Err(keel_bbolt::Error::NoSuchBucket(_)) => Ok(None),
            Err(e) => Err(self.bbolt_error(e)),
        }
    }

    /// The whole (small) bucket `name`, empty if the file lacks it.
    pub fn bucket(&self, name: &[u8]) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, RestoreError> {
        let mut out = BTreeMap::new();
        for entry in self.entries(name)?.into_iter().flatten() {
            let (k, v) = entry.map_err(|e| self.bbolt_error(e))?;
            out.insert(k, v);
        }
        Ok(out)
    }

    /// A compaction revision of `meta`, checked.
    pub fn compact_rev(
        &self,
        meta: &BTreeMap<Vec<u8>, Vec<u8>>,
        key: &[u8],
    ) -> Result<Option<i64>, RestoreError> {
        meta.get(key)
            .map(|v| {
                schema::read_compact_rev(v).ok_or_else(|| {
                    self.schema_error(format!(
                        "meta {} is not a revision",
                        String::from_utf8_lossy(key)
                    ))
                })
            })
            .transpose()
    }

    /// Calls `f` with every `key` row in order and its revision, checking each key's shape.
    /// Returns the main revision of the last row (1 when there is none).
    pub fn for_each_row(
        &self,
        mut f: impl FnMut(keel_mvcc::Rev, Vec<u8>, Vec<u8>) -> Result<(), RestoreError>,
    ) -> Result<i64, RestoreError> {
        let mut last = 1;
        for entry in self.entries(schema::KEY)?.into_iter().flatten() {
            let (k, v) = entry.map_err(|e| self.bbolt_error(e))?;
            let rev = schema::revision_of(&k).ok_or_else(|| {
                self.schema_error(format!("key bucket entry {k:02x?} is not a revision"))
            })?;
            last = rev.main;
            f(rev, k, v)?;
        }
        Ok(last)
    }
}
