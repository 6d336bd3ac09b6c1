//! openraft's log storage on keel's WAL.
//!
//! Entries live in memory (from the last purge on) for reads and in the WAL for durability. All
//! WAL I/O happens on one dedicated thread fed by a channel: consecutive appends that queue up
//! while an fdatasync is running are written and synced together, so concurrent writes share one
//! fsync. An append is reported flushed to openraft (its `IOFlushed` callback) only after that
//! fsync, which is what makes a write acknowledged only once durable.
//!
//! openraft numbers entries from 0 and the WAL from 1: WAL index = Raft index + 1.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;

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

struct Shared {
    cache: RwLock<Cache>,
    jobs: mpsc::Sender<Job>,
}

#[derive(Default)]
struct Cache {
    entries: BTreeMap<u64, Entry>,
    vote: Option<Vote>,
    purged: Option<LogId>,
}

impl Cache {
    /// The state record kept in the WAL: the vote and the last purged log id.
    fn state(&self) -> Vec<u8> {
        let vote = self
            .vote
            .as_ref()
            .map(codec::encode_vote)
            .unwrap_or_default();
        let mut out = Vec::with_capacity(1 + vote.len() + 16);
        out.push(vote.len() as u8);
        out.extend_from_slice(&vote);
        out.extend_from_slice(&codec::encode_log_id(self.purged.as_ref()));
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
        self.purged = codec::decode_log_id(&state[1 + vote_len..])?;
        Ok(())
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
        for (wal_index, bytes) in &recovered.entries {
            let index = wal_index - 1;
            cache
                .entries
                .insert(index, codec::decode_entry(index, bytes)?);
        }
        let (jobs, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("keel-wal".into())
            .spawn(move || run_wal(wal, rx, metrics))?;
        Ok(LogStore {
            shared: Arc::new(Shared {
                cache: RwLock::new(cache),
                jobs,
            }),
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
/// fdatasync, then completes their callbacks.
fn run_wal(mut wal: Wal, rx: mpsc::Receiver<Job>, metrics: Arc<Metrics>) {
    while let Ok(first) = rx.recv() {
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
                        flush(&mut wal, pending.take(), &metrics);
                        pending = Some((batch, vec![done]));
                    }
                }
                Job::Purge { upto, done } => {
                    flush(&mut wal, pending.take(), &metrics);
                    let result = wal.purge(upto).map_err(|e| e.to_string());
                    done.complete(&result);
                }
            }
        }
        flush(&mut wal, pending, &metrics);
    }
}

fn flush(wal: &mut Wal, pending: Option<(Batch, Vec<Done>)>, metrics: &Metrics) {
    let Some((batch, dones)) = pending else {
        return;
    };
    let result = match wal.append(&batch) {
        Ok(stats) => {
            metrics.wal_fsync.observe(stats.sync.as_secs_f64());
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
        let last = cache
            .entries
            .values()
            .next_back()
            .map(|e| e.log_id())
            .or(cache.purged);
        Ok(LogState {
            last_purged_log_id: cache.purged,
            last_log_id: last,
        })
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
