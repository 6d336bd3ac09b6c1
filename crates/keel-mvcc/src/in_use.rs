//! The backend's bytes in use (etcd's `dbSizeInUse`, `etcd_mvcc_db_total_size_in_use_in_bytes`),
//! known without a walk on any request path.
//!
//! bbolt keeps its free-page count at every commit, so etcd reads the figure for free. redb
//! only gives it by walking every page of every tree (`WriteTransaction::stats`, which also
//! holds the writer): on a 2 GB backend that is seconds of one core and seconds without a
//! single write, once per `Status` call or `/metrics` scrape. Here the pages are counted from
//! a read transaction (writers go on) on the compactor thread (at open without one): when it
//! starts, when a compaction pass finishes, and when idle, paced so that idle counts take at
//! most 1 % of a core ([`next_count_after`]); a backend small enough to be counted within a
//! millisecond is counted again on every read of the figure. A defragmentation or a snapshot install writes
//! a compact file, reported whole until the next count. Between two counts the figure grows
//! with the file: a grown file holds at least the new pages. It is the bytes of the tables'
//! pages (what they store, their B-tree metadata and the unused room in their pages); pages
//! freed by a transaction still readable are not in it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redb::{Database, ReadableDatabase, ReadableTableMetadata};

use crate::error::MvccError;

/// The least time between two counts of an idle store.
const MIN_COUNT_INTERVAL: Duration = Duration::from_secs(60);

/// Counting takes at most one part in this many of a core.
const COUNT_SHARE: u32 = 100;

/// A count that took less than this is done again on every read of the figure: a small
/// backend's figure is exact, as etcd's is.
const CHEAP_COUNT: Duration = Duration::from_millis(1);

/// The last count of the bytes in use.
pub(crate) struct InUse {
    /// Bytes in use at the last count (`u64::MAX`: not counted yet).
    bytes: AtomicU64,
    /// The size of the file at the last count.
    size_at_count: AtomicU64,
    /// How long the last count took, in nanoseconds (`u64::MAX`: not counted yet).
    took_nanos: AtomicU64,
}

impl InUse {
    /// Not counted yet.
    pub(crate) fn new() -> InUse {
        InUse {
            bytes: AtomicU64::new(u64::MAX),
            size_at_count: AtomicU64::new(0),
            took_nanos: AtomicU64::new(u64::MAX),
        }
    }

    /// Whether the last count was cheap enough to be done again on a read ([`CHEAP_COUNT`]).
    pub(crate) fn cheap(&self) -> bool {
        self.took_nanos.load(Ordering::Relaxed) < CHEAP_COUNT.as_nanos() as u64
    }

    /// Counts the pages of `db`, whose file is `size` bytes long now; returns how long the
    /// count took. The figure is left as it was if the count fails.
    pub(crate) fn count(&self, db: &Database, size: u64) -> Duration {
        let started = Instant::now();
        let took = match table_bytes(db) {
            Ok(bytes) => {
                self.size_at_count.store(size, Ordering::Relaxed);
                self.bytes.store(bytes, Ordering::Relaxed);
                started.elapsed()
            }
            Err(_) => Duration::MAX,
        };
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.took_nanos.store(nanos, Ordering::Relaxed);
        took
    }

    /// Forgets the last count: the whole file is in use until the next one (after a
    /// defragmentation or a snapshot install, whose files are written compact).
    pub(crate) fn forget(&self) {
        self.bytes.store(u64::MAX, Ordering::Relaxed);
        self.took_nanos.store(u64::MAX, Ordering::Relaxed);
    }

    /// The bytes in use for a file of `size` bytes now: the last count plus what the file grew
    /// since, never more than the file (the whole file before the first count).
    pub(crate) fn bytes(&self, size: u64) -> u64 {
        let counted = self.bytes.load(Ordering::Relaxed);
        if counted == u64::MAX {
            return size;
        }
        let grown = size.saturating_sub(self.size_at_count.load(Ordering::Relaxed));
        counted.saturating_add(grown).min(size)
    }
}

/// When the next count of an idle store is due after a count that took `took`: no sooner than
/// [`MIN_COUNT_INTERVAL`], and late enough that counting takes one [`COUNT_SHARE`]th of a core.
pub(crate) fn next_count_after(took: Duration) -> Duration {
    MIN_COUNT_INTERVAL.max(took * COUNT_SHARE)
}

/// The bytes of the pages of every table of `db`, from a read transaction.
fn table_bytes(db: &Database) -> Result<u64, MvccError> {
    let read = db.begin_read()?;
    let mut bytes = 0u64;
    for handle in read.list_tables()? {
        let table = read.open_untyped_table(handle)?;
        let stats = table.stats()?;
        bytes = bytes
            .saturating_add(stats.stored_bytes())
            .saturating_add(stats.metadata_bytes())
            .saturating_add(stats.fragmented_bytes());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_the_first_count_the_whole_file_is_in_use() {
        assert_eq!(InUse::new().bytes(4096), 4096);
    }

    #[test]
    fn between_counts_the_figure_grows_with_the_file_and_never_past_it() {
        let in_use = InUse::new();
        in_use.bytes.store(1000, Ordering::Relaxed);
        in_use.size_at_count.store(8192, Ordering::Relaxed);
        assert_eq!(in_use.bytes(8192), 1000);
        assert_eq!(in_use.bytes(12288), 5096);
        // A file shrunk by a defragmentation not yet counted: at most the file.
        assert_eq!(in_use.bytes(512), 512);
    }

    #[test]
    fn the_figure_is_read_while_a_writer_holds_the_backend() {
        let dir = tempfile::tempdir().unwrap();
        let mvcc = crate::Mvcc::open(&dir.path().join("db")).unwrap();
        let db = mvcc.core.db.read().clone();
        let held = db.begin_write().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| tx.send(mvcc.db_size_in_use()).unwrap());
            // Reading redb's own stats would wait for the writer: forever, here.
            let in_use = rx.recv_timeout(Duration::from_secs(30));
            drop(held);
            let in_use = in_use.expect("answered while the writer held the backend");
            assert!(
                in_use <= mvcc.db_size(),
                "{in_use} in use of {}",
                mvcc.db_size()
            );
        });
    }

    #[test]
    fn counting_is_paced_to_a_hundredth_of_a_core() {
        assert_eq!(
            next_count_after(Duration::from_millis(10)),
            MIN_COUNT_INTERVAL
        );
        assert_eq!(
            next_count_after(Duration::from_secs(4)),
            Duration::from_secs(400)
        );
    }
}
