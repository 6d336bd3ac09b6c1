//! The watch cache, as kube-apiserver's `Cacher`: one store watch per resource, whose events
//! are decoded once into a buffer ([`ring`]) that every client watch of the resource reads
//! from, instead of one store watch per client watch with every event decoded per watcher,
//! and into the current state of every object ([`objects`]) that gets and lists read from.
//!
//! The shell (`shell.rs`) moves events from the store into the cache: it lists the resource,
//! watches everything under its prefix from the list's revision, and applies each response's
//! events in one step, then wakes the watchers once. When the store's watch
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
//! for not keeping up: it is counted (`apiserver_terminated_watchers_total`) once the buffer
//! has dropped an event it had not read, whether or not its client is still reading (the
//! shell looks at every watcher's place when it pushes events, at most every
//! [`OVERRUN_SWEEP`]), and its stream ends at its next read (a client that stopped reading
//! keeps its connection until it reads again or its watch times out, as with
//! kube-apiserver). The buffer does not know what the store compacted: the caller checks
//! that a start is still in the store's history before it serves it from here.
//!
//! # Freshness
//!
//! The cache is the state at a revision: the last event's, or a higher one when the store's
//! progress notification says every event up to it was sent. A read that needs a newer
//! revision ([`Cacher::wait_until_fresh`]) waits at most [`BLOCK_TIMEOUT`], kube-apiserver's
//! `blockTimeout`, then fails with "Too large resource version". While any read waits, the
//! shell asks the store for progress on its watch (etcd's `WatchProgressRequest`) at once and
//! then every [`PROGRESS_REQUEST_PERIOD`], so a read waits for the store's answer rather than
//! for a write to its resource. That is how a list without a resourceVersion is served from
//! the cache and still consistent: the store's current revision is read first, then the cache
//! is waited on until it reaches it (see [`super::interface`]).
//!
//! Locking: the buffer and the objects are behind one mutex, held only to apply a response's
//! events, to read a list's `Arc`s or to clone a batch of `Arc`s out of the buffer, never
//! across an await. Watchers are woken through a
//! `tokio::sync::watch` channel that the shell bumps after each push; a watcher marks the
//! channel seen *before* it looks into the buffer, so a push after its look always wakes it.
//!
//! What this apiserver writes is handed to the cache by its writer ([`handoff`], under a
//! mutex of its own), so that the cache does not decode the write's event again.

pub mod bookmarks;
pub mod handoff;
pub mod objects;
pub mod ring;
mod shell;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, oneshot, watch};

use handoff::{Handoff, Handover};
pub use objects::{Entry, Listed, Objects};
pub use ring::{Behind, Cached, Limits};
use ring::{Cursor, ReadLimit, Ring};
use shell::Shell;
pub use shell::supports_watch_progress;

use super::{Etcd3, Event, Existing, Object, StorageError};
use crate::metrics::CacheMetrics;

/// How much each resource's buffer holds: 8,192 events, and at most 32 MiB of stored values
/// (an event weighs its value and the value before it; decoded and encoded, it takes a few
/// times that in memory).
pub const LIMITS: Limits = Limits {
    events: 8192,
    bytes: 32 << 20,
};

/// The longest a read waits for the cache to reach the revision it needs (kube-apiserver's
/// `blockTimeout`).
pub const BLOCK_TIMEOUT: Duration = Duration::from_secs(3);

/// How often the shell asks the store for progress while a read waits (kube-apiserver's
/// `progressRequestPeriod`).
pub const PROGRESS_REQUEST_PERIOD: Duration = Duration::from_millis(100);

/// The most a watcher takes out of the buffer at once, so that what a slow watcher holds on
/// to stays small.
const BATCH: ReadLimit = ReadLimit {
    events: 1024,
    bytes: 256 << 10,
};

/// How often, at most, the shell looks for watchers the buffer has overrun (kube-apiserver
/// ends a watcher whose channel stays full for its dispatch budget, about 100 ms).
pub const OVERRUN_SWEEP: Duration = Duration::from_millis(250);

/// The longest wait before watching the store again after a failure.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The page size of the list a cache starts from.
const LIST_PAGE: i64 = 10_000;

/// What a cache makes of the store's values, once for all its readers.
pub trait Codec: Send + Sync + 'static {
    /// A decoded watch event.
    type Event: Send + Sync + 'static;
    /// A decoded object.
    type Object: Clone + Send + Sync + 'static;
    /// Decodes a store event.
    fn event(&self, event: Event) -> Self::Event;
    /// Decodes a stored object.
    fn object(&self, object: &Object) -> Self::Object;
    /// The object an ADDED or MODIFIED event leaves.
    fn object_of(&self, event: &Self::Event) -> Self::Object;
    /// Decodes an ADDED or MODIFIED store event whose object is known to be `object` (what
    /// [`Codec::object`] makes of it, handed over by its writer: see [`handoff`]), so that
    /// it need not be decoded again; by default it is.
    fn event_with(&self, event: Event, object: &Self::Object) -> Self::Event {
        let _ = object;
        self.event(event)
    }
    /// The fields the cache indexes (kube-apiserver's indexers).
    fn indexed_fields(&self) -> &'static [&'static str] {
        &[]
    }
    /// An object's value of an indexed field.
    fn field(&self, _object: &Self::Object, _field: &str) -> String {
        String::new()
    }
}

/// The buffer and the objects, moved together.
struct State<C: Codec> {
    ring: Ring<C::Event>,
    objects: Objects<C::Object>,
}

/// What the shell and the readers share.
struct Shared<C: Codec> {
    /// None until the first list and store watch are established.
    state: Mutex<Option<State<C>>>,
    /// What writers hand over (see [`handoff`]).
    handoff: Arc<Mutex<Handoff<C::Object>>>,
    /// Bumped after every push and reset.
    news: watch::Sender<u64>,
    /// The revision the objects are the state at (0: not ready).
    fresh: watch::Sender<i64>,
    /// Reads waiting for a newer revision; the shell asks for progress while there are any.
    waiting: AtomicUsize,
    /// Wakes the shell when a read starts waiting.
    wake: Notify,
    /// Whether the store answers progress requests as kube-apiserver requires (its Status
    /// version, checked at every start of the store watch).
    progress_supported: AtomicBool,
    /// Every live watcher's place, for the shell to find those the buffer overran.
    places: Mutex<Places>,
    metrics: CacheMetrics,
}

/// The watchers' places and when the shell last looked at them.
struct Places {
    live: Vec<Weak<Place>>,
    swept: Instant,
    /// How many places were left after the last pruning of gone watchers: a new watch
    /// prunes once there are twice as many, so a quiet resource's list stays bounded.
    pruned_len: usize,
}

/// Where one watcher is in the buffer, and whether it was ended for falling behind (counted
/// once, by whoever finds it first: the shell's sweep or the watcher's own read).
struct Place {
    cursor: Mutex<Cursor>,
    ended: AtomicBool,
}

impl Place {
    /// Marks the watcher ended for falling behind, counting it the first time.
    fn end(&self, metrics: &CacheMetrics) {
        if !self.ended.swap(true, Ordering::Relaxed) {
            metrics.terminated_watchers.inc();
        }
    }
}

impl<C: Codec> Shared<C> {
    fn state(&self) -> MutexGuard<'_, Option<State<C>>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the watchers `ring` has overrun (at most every [`OVERRUN_SWEEP`]), and forgets
    /// the watchers that are gone.
    fn sweep_overrun(&self, ring: &Ring<C::Event>) {
        let mut places = self.places.lock().unwrap_or_else(|e| e.into_inner());
        if places.swept.elapsed() < OVERRUN_SWEEP {
            return;
        }
        places.swept = Instant::now();
        places.live.retain(|place| {
            let Some(place) = place.upgrade() else {
                return false;
            };
            let cursor = *place.cursor.lock().unwrap_or_else(|e| e.into_inner());
            if ring.behind(&cursor) == Some(Behind::Overrun) {
                place.end(&self.metrics);
            }
            true
        });
    }

    /// Wakes the watchers and readers waiting for `revision`; the gauge is set first, so one
    /// that has seen an event finds it counted.
    fn notify(&self, revision: i64) {
        self.metrics.resource_version.set(revision);
        self.news.send_modify(|n| *n = n.wrapping_add(1));
        self.fresh.send_replace(revision);
    }
}

/// The watch cache of one resource; its shell stops when this is dropped.
pub struct Cacher<C: Codec> {
    shared: Arc<Shared<C>>,
    codec: Arc<C>,
    _stop: oneshot::Sender<()>,
}

impl<C: Codec> Cacher<C> {
    /// Starts caching every object under `prefix` in `storage` and their events, made into
    /// what `codec` makes of them (once, whoever reads them), counted in `metrics`. Must be
    /// called within a Tokio runtime.
    pub fn start(
        storage: Etcd3,
        prefix: String,
        limits: Limits,
        metrics: CacheMetrics,
        codec: Arc<C>,
    ) -> Cacher<C> {
        let (news, _) = watch::channel(0);
        let (fresh, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(None),
            handoff: Arc::new(Mutex::new(Handoff::new(handoff::LIMITS))),
            news,
            fresh,
            waiting: AtomicUsize::new(0),
            wake: Notify::new(),
            progress_supported: AtomicBool::new(false),
            places: Mutex::new(Places {
                live: Vec::new(),
                swept: Instant::now(),
                pruned_len: 0,
            }),
            metrics,
        });
        let (stop, stopped) = oneshot::channel();
        let shell = Shell {
            shared: Arc::downgrade(&shared),
            storage,
            prefix,
            limits,
            codec: codec.clone(),
        };
        tokio::spawn(shell.run(stopped));
        Cacher {
            shared,
            codec,
            _stop: stop,
        }
    }

    /// A watch of the objects under `prefix` (within the cached one) changed after revision
    /// `after`; None when the buffer cannot serve it (see the module docs).
    pub fn watch(&self, prefix: &str, after: i64) -> Option<CacheWatch<C::Event>> {
        let mut news = self.shared.news.subscribe();
        news.mark_unchanged();
        let cursor = self.shared.state().as_ref()?.ring.cursor(after)?;
        let place = Arc::new(Place {
            cursor: Mutex::new(cursor),
            ended: AtomicBool::new(false),
        });
        let mut places = self.shared.places.lock().unwrap_or_else(|e| e.into_inner());
        if places.live.len() >= 2 * places.pruned_len.max(32) {
            places.live.retain(|p| p.strong_count() > 0);
            places.pruned_len = places.live.len();
        }
        places.live.push(Arc::downgrade(&place));
        drop(places);
        Some(CacheWatch {
            shared: self.shared.clone(),
            news,
            place,
            prefix: prefix.to_string(),
            read: Vec::new(),
            progress: after,
        })
    }

    /// Whether the cache holds the objects (it has listed them and follows the store).
    pub fn ready(&self) -> bool {
        *self.shared.fresh.borrow() > 0
    }

    /// Whether the store answers progress requests well enough for consistent reads from the
    /// cache (kube-apiserver's `RequestWatchProgress` feature check: etcd ≥ 3.5.13 or ≥ 3.4.31).
    pub fn progress_supported(&self) -> bool {
        self.shared.progress_supported.load(Ordering::Relaxed)
    }

    /// A handover of this apiserver's writes of `key` to the cache (see [`handoff`]).
    pub fn handover(&self, key: &str) -> Handover<C::Object> {
        Handover::new(self.shared.handoff.clone(), key)
    }

    /// How many handed-over writes wait for their events.
    pub fn handed_over(&self) -> usize {
        handoff::lock(&self.shared.handoff).len()
    }

    /// The codec the cache decodes with.
    pub fn codec(&self) -> &Arc<C> {
        &self.codec
    }

    /// The metrics of this cache.
    pub fn metrics(&self) -> &CacheMetrics {
        &self.shared.metrics
    }

    /// Waits until the cache is the state at `revision` or later (at most [`BLOCK_TIMEOUT`]),
    /// timed in `apiserver_watch_cache_read_wait_seconds`; 504 "Too large resource version"
    /// when it is not by then (kube-apiserver's `waitUntilFreshAndBlock`).
    pub async fn wait_until_fresh(&self, revision: i64) -> Result<(), StorageError> {
        let mut fresh = self.shared.fresh.subscribe();
        if *fresh.borrow_and_update() >= revision {
            self.shared.metrics.read_wait.observe(0.0);
            return Ok(());
        }
        let started = Instant::now();
        let _waiting = Waiting::new(&self.shared);
        let reached = tokio::time::timeout(BLOCK_TIMEOUT, fresh.wait_for(|r| *r >= revision));
        let reached = matches!(reached.await, Ok(Ok(_)));
        self.shared
            .metrics
            .read_wait
            .observe(started.elapsed().as_secs_f64());
        if reached {
            return Ok(());
        }
        Err(StorageError::TooLargeResourceVersion {
            requested: revision,
            current: *self.shared.fresh.borrow(),
        })
    }

    /// The object at `key` once the cache is the state at `revision` or later, and the
    /// revision it was read at.
    pub async fn wait_until_fresh_and_get(
        &self,
        revision: i64,
        key: &str,
    ) -> Result<(Option<Arc<Entry<C::Object>>>, i64), StorageError> {
        self.wait_until_fresh(revision).await?;
        let state = self.shared.state();
        let state = state.as_ref().ok_or_else(not_ready)?;
        Ok((state.objects.get(key), state.objects.revision()))
    }

    /// The objects under `prefix` (see [`Objects::list`]) once the cache is the state at
    /// `revision` or later.
    pub async fn wait_until_fresh_and_list(
        &self,
        revision: i64,
        prefix: &str,
        recursive: bool,
        exact: &[(&str, &str)],
    ) -> Result<Listed<C::Object>, StorageError> {
        self.wait_until_fresh(revision).await?;
        let state = self.shared.state();
        let state = state.as_ref().ok_or_else(not_ready)?;
        Ok(state.objects.list(prefix, recursive, exact))
    }

    /// The object at `key` as the cache has it, as the start of an update or a delete (a
    /// guess: the store may have moved on), with what the cache made of it.
    pub fn existing(&self, key: &str) -> Option<(Existing, C::Object)> {
        let state = self.shared.state();
        let entry = state.as_ref()?.objects.get(key)?;
        let existing = Existing {
            object: entry.object.clone(),
            current: false,
        };
        Some((existing, entry.value.clone()))
    }
}

/// The error of a cache that stopped between a wait and a read.
fn not_ready() -> StorageError {
    StorageError::Internal("the watch cache is not ready".into())
}

/// One read waiting for freshness, counted while it lives.
struct Waiting<'a, C: Codec>(&'a Shared<C>);

impl<'a, C: Codec> Waiting<'a, C> {
    fn new(shared: &'a Shared<C>) -> Self {
        shared.waiting.fetch_add(1, Ordering::SeqCst);
        shared.wake.notify_one();
        Waiting(shared)
    }
}

impl<C: Codec> Drop for Waiting<'_, C> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One client's watch served from the cache.
pub struct CacheWatch<T> {
    shared: Arc<dyn Buffer<T>>,
    news: watch::Receiver<u64>,
    place: Arc<Place>,
    prefix: String,
    /// Scratch space for a batch before it is filtered by prefix.
    read: Vec<Arc<Cached<T>>>,
    /// The revision up to which the cursor has read (see [`bookmarks`]).
    progress: i64,
}

/// The buffer as a watcher reads it (whatever the cache's objects are).
trait Buffer<T>: Send + Sync {
    /// Moves the watcher at `place` past the next events into `out`; Ok(false) when there
    /// are none.
    fn read(&self, place: &Place, out: &mut Vec<Arc<Cached<T>>>) -> Result<bool, Behind>;
}

impl<C: Codec> Buffer<C::Event> for Shared<C> {
    fn read(&self, place: &Place, out: &mut Vec<Arc<Cached<C::Event>>>) -> Result<bool, Behind> {
        let state = self.state();
        let ring = &state.as_ref().ok_or(Behind::Reset)?.ring;
        let mut cursor = place.cursor.lock().unwrap_or_else(|e| e.into_inner());
        if !ring.has_news(&cursor) {
            return Ok(false);
        }
        if let Err(behind) = ring.read(&mut cursor, out, BATCH) {
            if behind == Behind::Overrun {
                place.end(&self.metrics);
            }
            return Err(behind);
        }
        Ok(true)
    }
}

impl<T> CacheWatch<T> {
    /// Waits for the next events under the watch's prefix and appends them to `out` (at
    /// least one, at most a batch); [`Behind`] when the watcher can no longer be served.
    pub async fn next_batch(&mut self, out: &mut Vec<Arc<Cached<T>>>) -> Result<(), Behind> {
        loop {
            self.news.borrow_and_update();
            while self.shared.read(&self.place, &mut self.read)? {
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
            // The sender lives as long as this watcher's share; a stopped shell empties the
            // cache and wakes everyone instead (see `Shell::run`).
            self.news.changed().await.map_err(|_| Behind::Reset)?;
        }
    }
}
