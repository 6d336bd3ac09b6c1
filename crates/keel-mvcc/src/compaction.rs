//! Incremental compaction, as etcd's `scheduleCompaction` does it.
//!
//! Applying a Compact is O(1): the batch moves the compact revision, and its commit records it
//! as `compact_rev` (etcd's `scheduledCompactRev`). The revisions it makes unreadable are
//! removed afterwards by [`Mvcc::compaction_step`], run by the store's compactor thread (or by
//! the caller when [`MvccOptions::background_compaction`] is off), in two phases like etcd's:
//!
//! 1. The key index is compacted, [`INDEX_CHUNK_KEYS`] keys per hold of the index write lock
//!    (etcd's `treeIndex.Compact` takes the lock per key). No I/O.
//! 2. The backend is scanned in revision order up to the compaction revision,
//!    `compaction_batch_limit` entries per step (etcd's `compactionBatchLimit`); an entry whose
//!    revision the compacted index no longer holds is removed, in one redb write transaction
//!    per step. The step that reaches the end also writes `finished_compact_rev` (etcd's
//!    `finishedCompactRev`). Removing in revision order keeps each transaction on few B-tree
//!    pages.
//!
//! The thread pauses `compaction_sleep_interval` (etcd's `compactionSleepInterval`) after each
//! step that removed something, so batches and reads run between two removals; no lock is held
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
//! compaction; nor are they in the range the backend scan covers. Nothing else removes a
//! revision at or below the compaction revision from the index while the scan runs (passes run
//! one after the other), so "no longer in the index" means exactly "dropped by this pass". A step holds the backend handle's read lock from the walk to the commit, so
//! [`Mvcc::replace_with`] and [`Mvcc::defragment`] wait for a step to end; the compaction under
//! way lives in the published state, which `replace_with` swaps, so it is abandoned with the
//! backend it belongs to.
//!
//! # Crashes
//!
//! Removal transactions commit without fsync, like batches, in the same redb commit order. A
//! crash rolls back to a durable prefix, which holds the compaction's `compact_rev` before any
//! of its removals. Removals go in revision order, so a key keeps a suffix of its history and
//! the index rebuilt from it at open is right. Opening a backend whose `compact_rev` is above
//! `finished_compact_rev` (or replaying the Compact from the WAL) starts the compaction again
//! from the start of the index and of the backend.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use keel_proto::mvccpb::KeyValue;
use parking_lot::{Condvar, Mutex};
use prost::Message;
use redb::{Durability, ReadableDatabase};

use crate::backend::{KEY, META, META_FINISHED_COMPACT_REV};
use crate::error::MvccError;
use crate::in_use::next_count_after;
use crate::revision::{Rev, RevKey, is_tombstone_key};
use crate::store::{Core, Mvcc, MvccOptions, State};

/// Keys compacted per hold of the index write lock.
pub const INDEX_CHUNK_KEYS: usize = 64;

/// Keys a step of the index walk visits at most, as a multiple of the batch limit.
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

/// A compaction under way: where the index walk and the backend scan are.
#[derive(Debug)]
pub(crate) struct CompactionPass {
    target: i64,
    /// The last key compacted (`None`: the walk has not started).
    after: Option<Box<[u8]>>,
    /// Whether the walk reached the end of the index.
    walked: bool,
    /// The first backend revision the scan has yet to look at.
    scan_from: Rev,
}

/// The compactor's settings and its wake-up signal.
pub(crate) struct CompactionControl {
    batch_limit: usize,
    sleep_interval: Duration,
    signal: Mutex<Signal>,
    changed: Condvar,
}

/// Why the compactor thread woke up.
enum Wake {
    /// A compaction may have been scheduled.
    Work,
    /// The bytes in use are due to be counted again.
    Due,
    /// The store is closing.
    Stopped,
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

    /// Waits until there may be work or `deadline` passes.
    fn wait_for_work(&self, deadline: Instant) -> Wake {
        let mut s = self.signal.lock();
        while !s.work && !s.stopped {
            if self.changed.wait_until(&mut s, deadline).timed_out() {
                return match s.stopped {
                    true => Wake::Stopped,
                    false => Wake::Due,
                };
            }
        }
        s.work = false;
        match s.stopped {
            true => Wake::Stopped,
            false => Wake::Work,
        }
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
/// Also counts the bytes in use (see [`crate::in_use`]) when it starts and, paced, while idle.
fn run(core: &Core) {
    let control = &core.compaction;
    let count = || Instant::now() + next_count_after(core.count_in_use(&core.db.read()));
    let mut next_count = count();
    loop {
        match control.wait_for_work(next_count) {
            Wake::Stopped => return,
            Wake::Due => {
                next_count = count();
                continue;
            }
            Wake::Work => {}
        }
        loop {
            let pause = match core.step() {
                Ok(CompactionStep::Idle) => break,
                Ok(
                    CompactionStep::Progress { removed, .. }
                    | CompactionStep::Finished { removed, .. },
                ) => (removed > 0).then_some(control.sleep_interval),
                // A failed removal leaves the scan where it was: try again later.
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
        // Phase 1: the index, a chunk of keys per hold of the lock.
        let mut visited = 0;
        let (target, scan_from) = loop {
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
                    scan_from: Rev::default(),
                });
            }
            let pass = pass.as_mut().expect("set above");
            if pass.walked {
                break (pass.target, pass.scan_from);
            }
            if visited >= limit.saturating_mul(WALK_PER_STEP) {
                return Ok(CompactionStep::Progress {
                    revision: pass.target,
                    removed: 0,
                });
            }
            pass.after = index.compact_chunk(pass.target, pass.after.as_deref(), INDEX_CHUNK_KEYS);
            pass.walked = pass.after.is_none();
            visited += INDEX_CHUNK_KEYS;
        };
        // Phase 2: the next `limit` backend entries up to the target, in revision order.
        let mut scanned = Vec::with_capacity(limit.min(4096));
        {
            let table = db.begin_read()?.open_table(KEY)?;
            let start = scan_from.to_key(false);
            let end = Rev::new(target.saturating_add(1), 0).to_key(false);
            for entry in table
                .range::<&[u8]>(start.as_bytes()..end.as_bytes())?
                .take(limit)
            {
                let (k, v) = entry?;
                let k = k.value();
                let rev = Rev::from_key(k)
                    .ok_or_else(|| MvccError::Corrupt(format!("bad revision key {k:?}")))?;
                scanned.push((rev, is_tombstone_key(k), key_of(v.value())?));
            }
        }
        let done = scanned.len() < limit;
        let next = scanned
            .last()
            .map_or(scan_from, |(rev, _, _)| Rev::new(rev.main, rev.sub + 1));
        let garbage: Vec<RevKey> = {
            let s = self.state.read();
            scanned
                .iter()
                .filter(|(rev, _, key)| !s.index.contains(key, *rev))
                .map(|(rev, tomb, _)| rev.to_key(*tomb))
                .collect()
        };
        if !garbage.is_empty() || done {
            let mut w = db.begin_write()?;
            w.set_durability(Durability::None)?;
            {
                let mut keys = w.open_table(KEY)?;
                for key in &garbage {
                    keys.remove(key.as_bytes())?;
                }
                if done {
                    let mut meta = w.open_table(META)?;
                    meta.insert(META_FINISHED_COMPACT_REV, target.to_be_bytes().as_slice())?;
                }
            }
            w.commit()?;
        }
        let removed = garbage.len();
        if done {
            // Counted before the compaction is reported finished, so that whoever waits for
            // it (a physical Compact) sees the bytes it freed.
            self.count_in_use(&db);
        }
        let mut s = self.state.write();
        if !done {
            if let Some(pass) = s.pass.as_mut() {
                pass.scan_from = next;
            }
            return Ok(CompactionStep::Progress {
                revision: target,
                removed,
            });
        }
        s.finished_compact_rev = target;
        s.pass = None;
        drop(s);
        drop(db);
        self.compaction.finished();
        Ok(CompactionStep::Finished {
            revision: target,
            removed,
        })
    }
}

/// The key of a backend value (a protobuf `mvccpb.KeyValue`, whose field 1 comes first as
/// prost writes it), without decoding the rest.
fn key_of(value: &[u8]) -> Result<Vec<u8>, MvccError> {
    if let Some((&0x0a, rest)) = value.split_first() {
        let mut len = 0usize;
        for (i, &b) in rest.iter().enumerate().take(10) {
            len |= usize::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                let body = &rest[i + 1..];
                if let Some(key) = body.get(..len) {
                    return Ok(key.to_vec());
                }
                break;
            }
        }
    }
    Ok(KeyValue::decode(value)?.key)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_of_reads_field_one_or_decodes() {
        for key in [b"a".to_vec(), vec![7u8; 300], vec![0x80; 20_000]] {
            let kv = KeyValue {
                key: key.clone(),
                value: b"v".to_vec(),
                mod_revision: 5,
                ..Default::default()
            };
            assert_eq!(key_of(&kv.encode_to_vec()).unwrap(), key);
        }
        // An empty key is not encoded at all: the value starts with another field.
        let kv = KeyValue {
            create_revision: 3,
            ..Default::default()
        };
        assert_eq!(key_of(&kv.encode_to_vec()).unwrap(), Vec::<u8>::new());
        assert!(key_of(&[0x0a, 0x05, b'x']).is_err());
    }
}
