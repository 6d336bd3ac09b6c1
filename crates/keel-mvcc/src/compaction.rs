//! Incremental compaction, as etcd's `scheduleCompaction` does it.
//!
//! Applying a Compact is O(1): the batch moves the compact revision, and its commit records it
//! as `compact_rev` (etcd's `scheduledCompactRev`). The revisions it makes unreadable are
//! removed afterwards by [`Mvcc::compaction_step`], run by the store's compactor thread (or by
//! the caller when [`MvccOptions::background_compaction`] is off). A step:
//!
//! 1. walks the key index from where the last step stopped, [`INDEX_CHUNK_KEYS`] keys per hold
//!    of the index write lock (etcd takes the lock per key), compacting each key and collecting
//!    the backend revisions it drops, until it holds `compaction_batch_limit` of them (etcd's
//!    `compactionBatchLimit`) or reached the end of the index;
//! 2. removes at most `compaction_batch_limit` of them from the backend in one redb write
//!    transaction; the one that removes the last also writes `finished_compact_rev` (etcd's
//!    `finishedCompactRev`).
//!
//! The thread pauses `compaction_sleep_interval` (etcd's `compactionSleepInterval`) after each
//! step that removed something, so batches and reads run between two steps; no lock is held
//! during the pause.
//!
//! # Why reads stay correct while a compaction runs
//!
//! A read at revision `r >= compact_rev` resolves, per key, the newest revision `<= r`. A
//! revision that compaction at `c <= r` removes has a newer revision of the same key `<= c`
//! (a later put or the tombstone that ended its generation), so no such read resolves it,
//! whether that key's index entry was compacted yet or not: the index answers the same for
//! every read at or above `c` before and after compacting a key. Removals commit only after the
//! compact revision was published (the compactor starts from `scheduled_compact_rev`, set after
//! the Compact's batch committed), so a read that resolved an older revision did so under the
//! index lock before that publication and took its redb snapshot then, before any removal.
//! HashKV skips revisions below the compact revision that are outside the keep set, so the
//! entries not yet removed do not change it (as in etcd).
//!
//! A batch may add revisions to the index (or take back its own) between two chunks: those
//! revisions are above the published store revision, hence above the compaction's, and need no
//! compaction. A step holds the backend handle's read lock from the walk to the commit, so
//! [`Mvcc::replace_with`] and [`Mvcc::defragment`] wait for a step to end; the compaction under
//! way lives in the published state, which `replace_with` swaps, so it is abandoned with the
//! backend it belongs to.
//!
//! # Crashes
//!
//! Removal transactions commit without fsync, like batches, in the same redb commit order. A
//! crash rolls back to a durable prefix, which holds the compaction's `compact_rev` before any
//! of its removals. A key's dropped revisions are removed oldest first, so a key keeps a suffix
//! of its history and the index rebuilt from it at open is right. Opening a backend whose
//! `compact_rev` is above `finished_compact_rev` (or replaying the Compact from the WAL) starts
//! the compaction again from the start of the index.

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redb::Durability;

use crate::backend::{KEY, META, META_FINISHED_COMPACT_REV};
use crate::error::MvccError;
use crate::revision::RevKey;
use crate::store::{Core, Mvcc, MvccOptions, State};

/// Keys compacted per hold of the index write lock.
pub const INDEX_CHUNK_KEYS: usize = 64;

/// Keys a step walks at most, as a multiple of the batch limit, when they drop nothing.
const WALK_PER_STEP: usize = 16;

/// Pause before retrying a step that failed.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// What one [`Mvcc::compaction_step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionStep {
    /// Every scheduled compaction is finished: nothing was done.
    Idle,
    /// Part of the compaction at `revision` was carried out.
    Progress {
        /// The compaction revision.
        revision: i64,
        /// Backend revisions removed by this step.
        removed: usize,
    },
    /// The compaction at `revision` finished with this step.
    Finished {
        /// The compaction revision.
        revision: i64,
        /// Backend revisions removed by this step.
        removed: usize,
    },
}

/// A compaction under way: where the index walk is, and what it dropped that the backend
/// still holds.
#[derive(Debug)]
pub(crate) struct CompactionPass {
    target: i64,
    /// The last key compacted (`None`: the walk has not started).
    after: Option<Box<[u8]>>,
    /// Whether the walk reached the end of the index.
    walked: bool,
    /// Backend revisions the index dropped and the backend still holds, oldest first per key.
    pending: VecDeque<RevKey>,
}

/// The compactor's settings and its wake-up signal.
pub(crate) struct CompactionControl {
    batch_limit: usize,
    sleep_interval: Duration,
    signal: Mutex<Signal>,
    changed: Condvar,
}

#[derive(Default)]
struct Signal {
    /// A compaction may have been scheduled since the compactor last looked.
    work: bool,
    stopped: bool,
    /// Bumped whenever a compaction finishes or the backend is replaced.
    generation: u64,
}

impl CompactionControl {
    pub(crate) fn new(options: &MvccOptions) -> CompactionControl {
        CompactionControl {
            batch_limit: options.compaction_batch_limit.max(1),
            sleep_interval: options.compaction_sleep_interval,
            // A backend may hold a compaction that was cut short.
            signal: Mutex::new(Signal {
                work: true,
                ..Signal::default()
            }),
            changed: Condvar::new(),
        }
    }

    /// Tells the compactor that a compaction may be waiting (and wakes waiters).
    pub(crate) fn wake(&self) {
        let mut s = self.signal.lock();
        s.work = true;
        s.generation = s.generation.wrapping_add(1);
        self.changed.notify_all();
    }

    /// Stops the compactor thread.
    pub(crate) fn stop(&self) {
        self.signal.lock().stopped = true;
        self.changed.notify_all();
    }

    fn finished(&self) {
        let mut s = self.signal.lock();
        s.generation = s.generation.wrapping_add(1);
        self.changed.notify_all();
    }

    /// Waits until there may be work; `false` once stopped.
    fn wait_for_work(&self) -> bool {
        let mut s = self.signal.lock();
        while !s.work && !s.stopped {
            self.changed.wait(&mut s);
        }
        s.work = false;
        !s.stopped
    }

    /// Sleeps `pause` (not cut short by wake-ups); `false` once stopped.
    fn pause(&self, pause: Duration) -> bool {
        let deadline = Instant::now() + pause;
        let mut s = self.signal.lock();
        while !s.stopped && !self.changed.wait_until(&mut s, deadline).timed_out() {}
        !s.stopped
    }
}

/// Starts the compactor thread of `core`.
pub(crate) fn spawn(core: Arc<Core>) -> Result<JoinHandle<()>, MvccError> {
    let thread = std::thread::Builder::new()
        .name("keel-mvcc-compactor".into())
        .spawn(move || run(&core))?;
    Ok(thread)
}

/// The compactor thread: steps through every scheduled compaction, pausing between removals.
fn run(core: &Core) {
    let control = &core.compaction;
    while control.wait_for_work() {
        loop {
            let pause = match core.step() {
                Ok(CompactionStep::Idle) => break,
                Ok(
                    CompactionStep::Progress { removed, .. }
                    | CompactionStep::Finished { removed, .. },
                ) => (removed > 0).then_some(control.sleep_interval),
                // A failed removal keeps its revisions pending: try again later.
                Err(_) => Some(RETRY_AFTER),
            };
            let go_on = match pause {
                Some(pause) => control.pause(pause),
                None => !control.signal.lock().stopped,
            };
            if !go_on {
                return;
            }
        }
    }
}

impl Core {
    /// One step of the scheduled compaction (see the module docs).
    pub(crate) fn step(&self) -> Result<CompactionStep, MvccError> {
        let limit = self.compaction.batch_limit;
        let db = self.db.read();
        let mut walked = 0;
        let (target, batch, done) = loop {
            let mut guard = self.state.write();
            let State {
                index,
                pass,
                scheduled_compact_rev,
                finished_compact_rev,
                ..
            } = &mut *guard;
            if pass.is_none() {
                if *scheduled_compact_rev <= *finished_compact_rev {
                    return Ok(CompactionStep::Idle);
                }
                *pass = Some(CompactionPass {
                    target: *scheduled_compact_rev,
                    after: None,
                    walked: false,
                    pending: VecDeque::new(),
                });
            }
            let pass = pass.as_mut().expect("set above");
            if pass.walked
                || pass.pending.len() >= limit
                || walked >= limit.saturating_mul(WALK_PER_STEP)
            {
                let n = pass.pending.len().min(limit);
                let batch: Vec<RevKey> = pass.pending.drain(..n).collect();
                break (pass.target, batch, pass.walked && pass.pending.is_empty());
            }
            let mut garbage = Vec::new();
            pass.after = index.compact_chunk(
                pass.target,
                pass.after.as_deref(),
                INDEX_CHUNK_KEYS,
                &mut garbage,
            );
            pass.walked = pass.after.is_none();
            pass.pending
                .extend(garbage.into_iter().map(|(rev, tomb)| rev.to_key(tomb)));
            walked += INDEX_CHUNK_KEYS;
        };
        if batch.is_empty() && !done {
            return Ok(CompactionStep::Progress {
                revision: target,
                removed: 0,
            });
        }
        let removed = batch.len();
        let committed = (|| -> Result<(), MvccError> {
            let mut w = db.begin_write()?;
            w.set_durability(Durability::None)?;
            {
                let mut keys = w.open_table(KEY)?;
                for key in &batch {
                    keys.remove(key.as_bytes())?;
                }
                if done {
                    let mut meta = w.open_table(META)?;
                    meta.insert(META_FINISHED_COMPACT_REV, target.to_be_bytes().as_slice())?;
                }
            }
            w.commit()?;
            Ok(())
        })();
        let mut s = self.state.write();
        if let Err(e) = committed {
            // Still the same backend (its handle's lock is held): the removals stay pending.
            if let Some(pass) = s.pass.as_mut() {
                for key in batch.into_iter().rev() {
                    pass.pending.push_front(key);
                }
            }
            return Err(e);
        }
        if !done {
            return Ok(CompactionStep::Progress {
                revision: target,
                removed,
            });
        }
        s.finished_compact_rev = target;
        s.pass = None;
        drop(s);
        drop(db);
        self.refresh_size();
        self.compaction.finished();
        Ok(CompactionStep::Finished {
            revision: target,
            removed,
        })
    }
}

impl Mvcc {
    /// Carries out one step of the scheduled compaction (see the module docs); what the
    /// background compactor runs, for a store opened without it.
    pub fn compaction_step(&self) -> Result<CompactionStep, MvccError> {
        self.core.step()
    }

    /// The revision of the newest compaction whose removals are all committed (-1 if none).
    pub fn finished_compact_revision(&self) -> i64 {
        self.core.state.read().finished_compact_rev
    }

    /// Waits up to `timeout` until every compaction applied so far has finished; `true` if
    /// they have. Without the background compactor, carries them out itself, without pauses.
    pub fn finish_compaction(&self, timeout: Duration) -> Result<bool, MvccError> {
        let done = |s: &State| s.finished_compact_rev >= s.scheduled_compact_rev;
        let deadline = Instant::now() + timeout;
        if self.background_compaction() {
            let control = &self.core.compaction;
            loop {
                let generation = control.signal.lock().generation;
                if done(&self.core.state.read()) {
                    return Ok(true);
                }
                let mut s = control.signal.lock();
                if s.generation == generation
                    && control.changed.wait_until(&mut s, deadline).timed_out()
                {
                    return Ok(done(&self.core.state.read()));
                }
            }
        }
        while Instant::now() < deadline {
            if self.core.step()? == CompactionStep::Idle {
                return Ok(true);
            }
        }
        Ok(done(&self.core.state.read()))
    }
}
