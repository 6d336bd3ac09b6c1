//! openraft's log storage on keel's WAL.
//!
//! Entries live in memory (from the last purge on) for reads and in the WAL for durability. All
//! WAL I/O happens on one dedicated thread fed by a channel: consecutive appends that queue up
//! while an fdatasync is running are written and synced together, so concurrent writes share one
//! fsync. An append is reported flushed to openraft (its `IOFlushed` callback) only after that
//! fsync, which is what makes a write acknowledged only once durable.
//!
//! The WAL's state record holds the vote, the last purged log id and the commit point (etcd's
//! HardState). The commit point is not synced on its own: like etcd, which writes the HardState
//! with the next Ready and syncs only for entries or a vote, it rides in the next batch the WAL
//! thread writes, or in a state-only batch after [`COMMIT_SYNC_DELAY`] of idleness. So the
//! durable commit point trails the real one by at most one batch, and never passes the durable
//! log (an entry is submitted before it can be committed, and jobs are written in order). On
//! open, a log that ends before the durable commit point has lost acknowledged entries (a
//! damaged or truncated WAL) and the member refuses to start.
//!
//! openraft numbers entries from 0 and the WAL from 1: WAL index = Raft index + 1.

use keel_process::faults::{self, Fault};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use keel_wal::{Batch, Wal, WalOptions};
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader};
use parking_lot::RwLock;
use tokio::sync::oneshot;

use super::KeelRaft;
use super::codec::{self, Entry, LogId, Vote};
use crate::metrics::Metrics;

/// The Raft log of this member: an in-memory view over the WAL.
#[derive(Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
}

/// How long the WAL thread waits, idle, before it writes a commit point that changed since
/// the last batch on its own.
pub const COMMIT_SYNC_DELAY: Duration = Duration::from_millis(100);

struct Shared {
    cache: Arc<RwLock<Cache>>,
    jobs: mpsc::Sender<Job>,
}

#[derive(Default)]
struct Cache {
    entries: BTreeMap<u64, Entry>,
    vote: Option<Vote>,
    purged: Option<LogId>,
    committed: Option<LogId>,
    /// The commit point state records carry: the last one a batch made durable (or recovered).
    committed_written: Option<LogId>,
}

impl Cache {
    /// The state record kept in the WAL: `vote_len: u8`, the vote, `purged_len: u8`, the last
    /// purged log id, then the durable commit point (each log id 0 or 16 bytes). Records written before
    /// the commit point was kept end after a bare purged log id (0 or 16 bytes, no length).
    fn state(&self) -> Vec<u8> {
        let vote = self
            .vote
            .as_ref()
            .map(codec::encode_vote)
            .unwrap_or_default();
        let purged = codec::encode_log_id(self.purged.as_ref());
        let mut out = Vec::with_capacity(2 + vote.len() + 32);
        out.push(vote.len() as u8);
        out.extend_from_slice(&vote);
        out.push(purged.len() as u8);
        out.extend_from_slice(&purged);
        out.extend_from_slice(&codec::encode_log_id(self.committed_written.as_ref()));
        out
    }

    fn restore_state(&mut self, state: &[u8]) -> io::Result<()> {
        let vote_len = *state.first().ok_or_else(|| invalid("empty WAL state"))? as usize;
        let vote = state
            .get(1..1 + vote_len)
            .ok_or_else(|| invalid("truncated WAL state"))?;
        self.vote = if vote.is_empty() {
            None
        } else {
            Some(codec::decode_vote(vote)?)
        };
        let rest = &state[1 + vote_len..];
        if matches!(rest.len(), 0 | 16) {
            self.purged = codec::decode_log_id(rest)?;
            return Ok(());
        }
        let purged_len = rest[0] as usize;
        let purged = rest
            .get(1..1 + purged_len)
            .ok_or_else(|| invalid("truncated WAL state"))?;
        self.purged = codec::decode_log_id(purged)?;
        self.committed = codec::decode_log_id(&rest[1 + purged_len..])?;
        self.committed_written = self.committed;
        Ok(())
    }

    /// The last log id in the log, the purge point if it holds no entries.
    fn last_log_id(&self) -> Option<LogId> {
        self.entries
            .values()
            .next_back()
            .map(|e| e.log_id())
            .or(self.purged)
    }

    /// The state record to add to a WAL batch after which the log ends at WAL index
    /// `wal_last`, if the commit point changed since the last one written and that batch makes
    /// it durable (a leader may commit an entry its own WAL thread has not written yet); it
    /// counts as written from here on.
    fn take_committed_state(&mut self, wal_last: u64) -> Option<Vec<u8>> {
        let durable = self.committed.is_none_or(|c| c.index < wal_last);
        if self.committed == self.committed_written || !durable {
            return None;
        }
        self.committed_written = self.committed;
        Some(self.state())
    }
}

/// Completion of one WAL job.
enum Done {
    Flushed(IOFlushed<KeelRaft>),
    Reply(oneshot::Sender<io::Result<()>>),
}

impl Done {
    fn complete(self, result: &Result<(), String>) {
        let result = result.clone().map_err(io::Error::other);
        match self {
            Done::Flushed(callback) => callback.io_completed(result),
            Done::Reply(tx) => {
                let _ = tx.send(result);
            }
        }
    }
}

enum Job {
    Write { batch: Batch, done: Done },
    Purge { upto: u64, done: Done },
}

impl LogStore {
    /// Opens the WAL in `dir` (segments of `segment_bytes`) and loads the surviving log into
    /// memory.
    pub fn open(dir: &Path, segment_bytes: u64, metrics: Arc<Metrics>) -> io::Result<LogStore> {
        let opts = WalOptions {
            segment_bytes,
            ..WalOptions::default()
        };
        let (wal, recovered) = Wal::open(dir, opts).map_err(io::Error::other)?;
        let mut cache = Cache::default();
        if let Some(state) = &recovered.state {
            cache.restore_state(state)?;
        }
        // Entries up to a purge point whose WAL purge record did not make it are gone.
        let purged = cache.purged.map_or(0, |p| p.index + 1);
        for (wal_index, bytes) in recovered.entries.iter().filter(|e| e.0 > purged) {
            let index = wal_index - 1;
            cache
                .entries
                .insert(index, codec::decode_entry(index, bytes)?);
        }
        let last = cache.last_log_id().map(|id| id.index);
        if let Some(committed) = cache.committed.filter(|c| Some(c.index) > last) {
            return Err(invalid(&format!(
                "wal in {}: the log ends at index {} but index {} was committed; acknowledged \
                 entries are missing (a damaged or truncated WAL), refusing to start",
                dir.display(),
                last.map_or_else(|| "(none)".to_string(), |i| i.to_string()),
                committed.index,
            )));
        }
        let cache = Arc::new(RwLock::new(cache));
        let (jobs, rx) = mpsc::channel();
        let wal_cache = cache.clone();
        std::thread::Builder::new()
            .name("keel-wal".into())
            .spawn(move || run_wal(wal, rx, &wal_cache, metrics))?;
        Ok(LogStore {
            shared: Arc::new(Shared { cache, jobs }),
        })
    }

    /// The index of the last entry in the log (0 when empty).
    pub fn last_index(&self) -> u64 {
        let cache = self.shared.cache.read();
        cache
            .entries
            .keys()
            .next_back()
            .copied()
            .or(cache.purged.map(|p| p.index))
            .unwrap_or(0)
    }

    fn submit(&self, job: Job) -> io::Result<()> {
        self.shared
            .jobs
            .send(job)
            .map_err(|_| io::Error::other("the WAL writer has stopped"))
    }

    async fn write_and_wait(&self, batch: Batch) -> io::Result<()> {
        let (tx, rx) = oneshot::channel();
        self.submit(Job::Write {
            batch,
            done: Done::Reply(tx),
        })?;
        rx.await
            .map_err(|_| io::Error::other("the WAL writer has stopped"))?
    }
}

/// The WAL thread: takes every job queued so far, writes runs of appends as one batch with one
/// fdatasync, then completes their callbacks. Idle for [`COMMIT_SYNC_DELAY`], it writes a
/// changed commit point on its own.
fn run_wal(mut wal: Wal, rx: mpsc::Receiver<Job>, cache: &RwLock<Cache>, metrics: Arc<Metrics>) {
    loop {
        let first = match rx.recv_timeout(COMMIT_SYNC_DELAY) {
            Ok(job) => job,
            Err(RecvTimeoutError::Timeout) => {
                let state = cache.write().take_committed_state(wal.last_index());
                if state.is_some() {
                    let batch = Batch {
                        state,
                        ..Batch::default()
                    };
                    flush(&mut wal, Some((batch, Vec::new())), cache, &metrics);
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let mut jobs = vec![first];
        jobs.extend(rx.try_iter());
        let mut pending: Option<(Batch, Vec<Done>)> = None;
        for job in jobs {
            match job {
                Job::Write { batch, done } => {
                    let mergeable = pending
                        .as_ref()
                        .is_some_and(|_| batch.truncate_from.is_none());
                    if mergeable {
                        let (merged, dones) = pending.as_mut().expect("checked");
                        merged.entries.extend(batch.entries);
                        if batch.state.is_some() {
                            merged.state = batch.state;
                        }
                        dones.push(done);
                    } else {
                        flush(&mut wal, pending.take(), cache, &metrics);
                        pending = Some((batch, vec![done]));
                    }
                }
                Job::Purge { upto, done } => {
                    flush(&mut wal, pending.take(), cache, &metrics);
                    let result = wal.purge(upto).map_err(|e| e.to_string());
                    done.complete(&result);
                }
            }
        }
        flush(&mut wal, pending, cache, &metrics);
    }
}

/// Writes one batch, with the commit point added if it changed, and completes its callbacks.
fn flush(
    wal: &mut Wal,
    pending: Option<(Batch, Vec<Done>)>,
    cache: &RwLock<Cache>,
    metrics: &Metrics,
) {
    let Some((mut batch, dones)) = pending else {
        return;
    };
    let wal_last = match (batch.entries.last(), batch.truncate_from) {
        (Some(&(index, _)), _) => index,
        (None, Some(from)) => wal.last_index().min(from.saturating_sub(1)),
        (None, None) => wal.last_index(),
    };
    if let Some(state) = cache.write().take_committed_state(wal_last) {
        batch.state = Some(state);
    }
    let result = match wal.append(&batch) {
        Ok(stats) => {
            let sync = stats.sync + faults::process().sleep(Fault::WalFsyncDelay);
            metrics.observe_wal_fsync(sync);
            Ok(())
        }
        Err(e) => {
            tracing::error!(error = %e, "WAL append failed");
            Err(e.to_string())
        }
    };
    for done in dones {
        done.complete(&result);
    }
}

impl RaftLogReader<KeelRaft> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> io::Result<Vec<Entry>> {
        Ok(self
            .shared
            .cache
            .read()
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }

    async fn read_vote(&mut self) -> io::Result<Option<Vote>> {
        Ok(self.shared.cache.read().vote)
    }
}

impl RaftLogStorage<KeelRaft> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> io::Result<LogState<KeelRaft>> {
        let cache = self.shared.cache.read();
        Ok(LogState {
            last_purged_log_id: cache.purged,
            last_log_id: cache.last_log_id(),
        })
    }

    /// Keeps the commit point for the next WAL batch (see the module docs): no sync of its own.
    async fn save_committed(&mut self, committed: Option<LogId>) -> io::Result<()> {
        self.shared.cache.write().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> io::Result<Option<LogId>> {
        Ok(self.shared.cache.read().committed)
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> io::Result<()> {
        let state = {
            let mut cache = self.shared.cache.write();
            cache.vote = Some(*vote);
            cache.state()
        };
        self.write_and_wait(Batch {
            state: Some(state),
            ..Batch::default()
        })
        .await
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<KeelRaft>) -> io::Result<()>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut encoded = Vec::new();
        {
            let mut cache = self.shared.cache.write();
            for entry in entries {
                let index = entry.log_id.index;
                encoded.push((index + 1, codec::encode_entry(&entry)));
                cache.entries.insert(index, entry);
            }
        }
        let batch = Batch {
            entries: encoded,
            ..Batch::default()
        };
        self.submit(Job::Write {
            batch,
            done: Done::Flushed(callback),
        })
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> io::Result<()> {
        let from = last_log_id.map_or(0, |id| id.index + 1);
        self.shared.cache.write().entries.split_off(&from);
        self.write_and_wait(Batch {
            truncate_from: Some(from + 1),
            ..Batch::default()
        })
        .await
    }

    async fn purge(&mut self, log_id: LogId) -> io::Result<()> {
        let state = {
            let mut cache = self.shared.cache.write();
            let keep = cache.entries.split_off(&(log_id.index + 1));
            cache.entries = keep;
            cache.purged = Some(log_id);
            cache.state()
        };
        // The purge point must be durable before segments go away.
        self.write_and_wait(Batch {
            state: Some(state),
            ..Batch::default()
        })
        .await?;
        let (tx, rx) = oneshot::channel();
        self.submit(Job::Purge {
            upto: log_id.index + 1,
            done: Done::Reply(tx),
        })?;
        rx.await
            .map_err(|_| io::Error::other("the WAL writer has stopped"))?
    }
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_reads_the_format_without_commit_point() {
        let mut cache = Cache {
            purged: Some(codec::log_id(2, 7)),
            committed: Some(codec::log_id(3, 9)),
            ..Cache::default()
        };
        assert!(
            cache.take_committed_state(9).is_none(),
            "entry 9 not durable"
        );
        let state = cache.take_committed_state(10).expect("entry 9 durable");
        let mut back = Cache::default();
        back.restore_state(&state).expect("restore");
        assert_eq!(
            (back.purged, back.committed),
            (cache.purged, cache.committed)
        );
        assert!(back.take_committed_state(10).is_none(), "already written");

        // Vote length 0, then a bare purged log id: no commit point.
        let mut old = vec![0];
        old.extend_from_slice(&codec::encode_log_id(cache.purged.as_ref()));
        let mut back = Cache::default();
        back.restore_state(&old).expect("restore");
        assert_eq!((back.purged, back.committed), (cache.purged, None));
    }
}
