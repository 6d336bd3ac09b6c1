//! The watch cache, as kube-apiserver's `Cacher`: one store watch per resource, whose events
//! are decoded once into a buffer ([`ring`]) that every client watch of the resource reads
//! from, instead of one store watch per client watch with every event decoded per watcher.
//!
//! The shell here moves events from the store into the buffer: it starts at the store's
//! current revision, watches everything under the resource's prefix from there, and pushes
//! each response's events in one step, then wakes the watchers once. When the store's watch
//! ends (the store restarted, lost its leader, the connection broke) it watches again from the
//! last revision it reflected, so the buffer sees every revision once and in order. When that
//! revision has been compacted the buffer's history is broken: it starts a new generation at
//! the current revision, and every watcher of the old one ends (its client watches again from
//! the last resourceVersion it saw, as it does when kube-apiserver's cacher terminates it).
//!
//! A [`CacheWatch`] is a cursor into the buffer. A watch the buffer cannot serve (the cache
//! has not started yet, or the watch starts before the oldest event it still holds) is left
//! to the caller, which watches the store directly: a resourceVersion still in the store's
//! history is served rather than answered 410 as kube-apiserver's cache would. A watcher
//! that falls behind by more than the buffer holds ends, like a watcher kube-apiserver closes
//! for not keeping up. The buffer does not know what the store compacted: the caller checks
//! that a start is still in the store's history before it serves it from here.
//!
//! Locking: the buffer is behind one mutex, held only to push a response's events or to
//! clone a batch of `Arc`s out of it, never across an await. Watchers are woken through a
//! `tokio::sync::watch` channel that the shell bumps after each push; a watcher marks the
//! channel seen *before* it looks into the buffer, so a push after its look always wakes it.

pub mod bookmarks;
pub mod ring;

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::{oneshot, watch};

pub use ring::{Behind, Cached, Limits};
use ring::{Cursor, ReadLimit, Ring};

use super::{Etcd3, Event, StorageError};
use crate::metrics::CacheMetrics;

/// How much each resource's buffer holds: 8,192 events, and at most 32 MiB of stored values
/// (an event weighs its value and the value before it; decoded and encoded, it takes a few
/// times that in memory).
pub const LIMITS: Limits = Limits {
    events: 8192,
    bytes: 32 << 20,
};

/// The most a watcher takes out of the buffer at once, so that what a slow watcher holds on
/// to stays small.
const BATCH: ReadLimit = ReadLimit {
    events: 1024,
    bytes: 256 << 10,
};

/// The longest wait before watching the store again after a failure.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// What the shell and the watchers share.
struct Shared<T> {
    /// None until the first store watch is established.
    ring: Mutex<Option<Ring<T>>>,
    /// Bumped after every push and reset.
    news: watch::Sender<u64>,
    metrics: CacheMetrics,
}

impl<T> Shared<T> {
    fn ring(&self) -> MutexGuard<'_, Option<Ring<T>>> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn notify(&self) {
        self.news.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// The watch cache of one resource; its shell stops when this is dropped.
pub struct Cacher<T> {
    shared: Arc<Shared<T>>,
    _stop: oneshot::Sender<()>,
}

impl<T: Send + Sync + 'static> Cacher<T> {
    /// Starts caching the events of every object under `prefix` in `storage`, each made into
    /// a `T` by `decode` (once, whoever watches), counted in `metrics`. Must be called within
    /// a Tokio runtime.
    pub fn start(
        storage: Etcd3,
        prefix: String,
        limits: Limits,
        metrics: CacheMetrics,
        decode: impl Fn(Event) -> T + Send + Sync + 'static,
    ) -> Cacher<T> {
        let (news, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            ring: Mutex::new(None),
            news,
            metrics,
        });
        let (stop, stopped) = oneshot::channel();
        let shell = Shell {
            shared: Arc::downgrade(&shared),
            storage,
            prefix,
            limits,
            decode,
        };
        tokio::spawn(shell.run(stopped));
        Cacher {
            shared,
            _stop: stop,
        }
    }

    /// A watch of the objects under `prefix` (within the cached one) changed after revision
    /// `after`; None when the buffer cannot serve it (see the module docs).
    pub fn watch(&self, prefix: &str, after: i64) -> Option<CacheWatch<T>> {
        let mut news = self.shared.news.subscribe();
        news.mark_unchanged();
        let cursor = self.shared.ring().as_ref()?.cursor(after)?;
        Some(CacheWatch {
            shared: self.shared.clone(),
            news,
            cursor,
            prefix: prefix.to_string(),
            read: Vec::new(),
            progress: after,
        })
    }
}

/// One client's watch served from the cache.
pub struct CacheWatch<T> {
    shared: Arc<Shared<T>>,
    news: watch::Receiver<u64>,
    cursor: Cursor,
    prefix: String,
    /// Scratch space for a batch before it is filtered by prefix.
    read: Vec<Arc<Cached<T>>>,
    /// The revision up to which the cursor has read (see [`bookmarks`]).
    progress: i64,
}

impl<T> CacheWatch<T> {
    /// Waits for the next events under the watch's prefix and appends them to `out` (at
    /// least one, at most a batch); [`Behind`] when the watcher can no longer be served.
    pub async fn next_batch(&mut self, out: &mut Vec<Arc<Cached<T>>>) -> Result<(), Behind> {
        loop {
            self.news.borrow_and_update();
            {
                let ring = self.shared.ring();
                let ring = ring.as_ref().ok_or(Behind::Reset)?;
                while ring.has_news(&self.cursor) {
                    if let Err(behind) = ring.read(&mut self.cursor, &mut self.read, BATCH) {
                        if behind == Behind::Overrun {
                            self.shared.metrics.terminated_watchers.inc();
                        }
                        return Err(behind);
                    }
                    if let Some(last) = self.read.last() {
                        self.progress = last.revision;
                    }
                    let before = out.len();
                    out.extend(
                        self.read
                            .drain(..)
                            .filter(|e| e.key.starts_with(&self.prefix)),
                    );
                    if out.len() > before {
                        return Ok(());
                    }
                }
            }
            // The sender lives as long as this watcher's share; a stopped shell empties the
            // buffer and wakes everyone instead (see `Shell::run`).
            self.news.changed().await.map_err(|_| Behind::Reset)?;
        }
    }
}

/// The task that keeps a buffer in step with the store.
struct Shell<T, D> {
    shared: Weak<Shared<T>>,
    storage: Etcd3,
    prefix: String,
    limits: Limits,
    decode: D,
}

impl<T, D: Fn(Event) -> T> Shell<T, D> {
    /// Runs until the cache is dropped. However it ends (dropped, or a panic), the buffer is
    /// emptied: its watchers end and new watches go to the store instead of waiting on a
    /// buffer nobody fills.
    async fn run(self, mut stopped: oneshot::Receiver<()>) {
        let _empty = EmptyOnExit(self.shared.clone());
        tokio::select! {
            _ = &mut stopped => {}
            _ = self.follow() => {}
        }
    }

    /// Follows the store's events for as long as the cache exists.
    async fn follow(&self) {
        // The revision the buffer reflects, while its history is unbroken.
        let mut reflected: Option<i64> = None;
        let mut failures = 0u32;
        let mut events = Vec::new();
        loop {
            if failures > 0 {
                let backoff = Duration::from_millis(50 << failures.min(6));
                tokio::time::sleep(backoff.min(MAX_BACKOFF)).await;
            }
            failures += 1;
            let after = match reflected {
                Some(revision) => revision,
                None => match self.storage.get(&self.prefix, "").await {
                    Ok((_, revision)) => revision,
                    Err(e) => {
                        tracing::warn!(prefix = %self.prefix, error = %e, "watch cache: reading the store's revision");
                        continue;
                    }
                },
            };
            let mut watch = match self.storage.watch_after(&self.prefix, true, after).await {
                Ok(watch) => watch,
                Err(StorageError::Expired { .. }) => {
                    tracing::warn!(prefix = %self.prefix, revision = after, "watch cache: the store compacted past the cache; starting over");
                    reflected = None;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(prefix = %self.prefix, error = %e, "watch cache: watching the store");
                    continue;
                }
            };
            if reflected.is_none() {
                let Some(shared) = self.shared.upgrade() else {
                    return;
                };
                let mut ring = shared.ring();
                match ring.as_mut() {
                    Some(ring) => ring.reset(after),
                    None => *ring = Some(Ring::new(self.limits, after)),
                }
                drop(ring);
                shared.notify();
                shared.metrics.initializations.inc();
                shared.metrics.resource_version.set(after);
                reflected = Some(after);
            }
            loop {
                events.clear();
                match watch.next_batch(&mut events).await {
                    Some(Ok(())) => {
                        failures = 0;
                        let Some(shared) = self.shared.upgrade() else {
                            return;
                        };
                        let received = events.len() as u64;
                        let decoded: Vec<_> = events
                            .drain(..)
                            .map(|event| {
                                let (object, prev) = match &event {
                                    Event::Added(o) | Event::Deleted(o) => (o, 0),
                                    Event::Modified(o, prev) => (o, prev.len()),
                                };
                                let weight = object.value.len() + prev;
                                let (revision, key) = (object.mod_revision, object.key.clone());
                                (revision, key, weight, (self.decode)(event))
                            })
                            .collect();
                        {
                            let mut guard = shared.ring();
                            let Some(ring) = guard.as_mut() else { return };
                            for (revision, key, weight, value) in decoded {
                                reflected = Some(revision);
                                ring.push(revision, key, value, weight);
                            }
                            // Counted under the ring's lock, so a watcher that
                            // has seen an event finds it counted.
                            shared.metrics.received.inc_by(received);
                            shared
                                .metrics
                                .resource_version
                                .set(reflected.unwrap_or(after));
                        }
                        shared.notify();
                        shared.metrics.dispatched.inc_by(received);
                    }
                    Some(Err(StorageError::Expired { .. })) => {
                        tracing::warn!(prefix = %self.prefix, revision = ?reflected, "watch cache: the store compacted past the cache; starting over");
                        reflected = None;
                        break;
                    }
                    Some(Err(e)) => {
                        tracing::warn!(prefix = %self.prefix, error = %e, "watch cache: the store's watch ended");
                        break;
                    }
                    None => break,
                }
            }
        }
    }
}

/// Empties a buffer when its shell ends.
struct EmptyOnExit<T>(Weak<Shared<T>>);

impl<T> Drop for EmptyOnExit<T> {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            *shared.ring() = None;
            shared.notify();
        }
    }
}
