//! An etcd snapshot rewritten into an etcd snapshot with its revisions bumped and
//! compaction marked (see the module docs for the form), for a restore with etcd's own
//! tools that must not serve old revisions again.

use std::path::{Path, PathBuf};

use keel_bbolt::Writer;

use super::error::RestoreError;
use super::schema;
use super::sealed;
use super::source::{Source, SourceRevisions, check_bump};

/// What [`rewrite`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rewritten {
    /// The revision etcd serves the new snapshot at.
    pub revision: i64,
    /// Its compaction revision (-1 when none).
    pub compact_revision: i64,
    /// Entries over all buckets (`etcdutl snapshot status`'s `totalKey`).
    pub total_keys: u64,
    /// The file's size, its sha256 included.
    pub file_size: u64,
}

/// Writes the etcd snapshot `input` to `output` (replacing any file there) with a fresh
/// trailing sha256 and, when `bump_revision > 0` (which needs `mark_compacted`, and the
/// reverse, as etcd 3.6 requires), its revision moved `bump_revision` past its latest and
/// compacted up to there. A trailing sha256 of `input` is checked; a file without one is
/// read as a bare database (one copied from a data directory). `output` appears complete
/// or not at all: it is written beside, fsynced and renamed into place.
pub fn rewrite(
    input: &Path,
    output: &Path,
    bump_revision: u64,
    mark_compacted: bool,
) -> Result<Rewritten, RestoreError> {
    check_bump(bump_revision, mark_compacted)?;
    let len = std::fs::metadata(input)
        .map_err(RestoreError::io(input))?
        .len();
    let source = Source::open(input, !sealed::has_checksum(len))?;
    let tmp = PathBuf::from(format!("{}.tmp-{}", output.display(), std::process::id()));
    let written = copy(&source, &tmp, bump_revision).and_then(|w| {
        sealed::seal(&tmp).map_err(RestoreError::io(&tmp))?;
        std::fs::rename(&tmp, output).map_err(RestoreError::io(output))?;
        if let Some(dir) = output.parent().filter(|p| !p.as_os_str().is_empty()) {
            keel_wal::dir::sync(dir).map_err(RestoreError::io(dir))?;
        }
        Ok(w)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Copies every bucket of `source` into a new database at `path`, bumping the revision in
/// `meta` by `bump_revision`.
fn copy(source: &Source, path: &Path, bump_revision: u64) -> Result<Rewritten, RestoreError> {
    let mut meta = source.bucket(schema::META)?;
    let mut found = SourceRevisions {
        last_row: 1,
        scheduled: source.compact_rev(&meta, schema::SCHEDULED_COMPACT_REV)?,
        finished: source.compact_rev(&meta, schema::FINISHED_COMPACT_REV)?,
    };
    let mut names = source.db().buckets().map_err(|e| source.bbolt_error(e))?;
    if !names.iter().any(|n| n == schema::META) {
        names.push(schema::META.to_vec());
        names.sort();
    }
    let write_error = |e| RestoreError::Bbolt {
        path: path.to_path_buf(),
        source: e,
    };
    let mut w = Writer::create(path).map_err(write_error)?;
    for name in &names {
        w.begin_bucket(name).map_err(write_error)?;
        if name == schema::KEY {
            found.last_row = source.for_each_row(|_, k, v| w.put(&k, &v).map_err(write_error))?;
            continue;
        }
        if name == schema::META {
            if bump_revision > 0 {
                let bumped = found.latest().saturating_add(bump_revision as i64);
                let rev = schema::compact_rev(bumped);
                meta.insert(schema::SCHEDULED_COMPACT_REV.to_vec(), rev.clone());
                meta.insert(schema::FINISHED_COMPACT_REV.to_vec(), rev);
                found.scheduled = Some(bumped);
                found.finished = Some(bumped);
            }
            for (k, v) in &meta {
                w.put(k, v).map_err(write_error)?;
            }
            continue;
        }
        for entry in source.entries(name)?.into_iter().flatten() {
            let (k, v) = entry.map_err(|e| source.bbolt_error(e))?;
            w.put(&k, &v).map_err(write_error)?;
        }
    }
    let written = w.finish().map_err(write_error)?;
    Ok(Rewritten {
        revision: found.latest(),
        compact_revision: found.compact(),
        total_keys: written.keys,
        file_size: written.file_size + sealed::HASH_LEN,
    })
}
