//! The watch cache, as kube-apiserver's `Cacher`: one store watch per resource, whose events
//! are decoded once into a buffer ([`ring`]) that every client watch of the resource reads
//! from, instead of one store watch per client watch with every event decoded per watcher,
//! and into the current state of every object ([`objects`]) that gets and lists read from.
//!
//! The shell here moves events from the store into the cache: it lists the resource, watches
//! everything under its prefix from the list's revision, and applies each response's events
//! in one step, then wakes the watchers once. When the store's watch
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

pub mod bookmarks;
pub mod objects;
pub mod ring;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, oneshot, watch};

pub use objects::{Entry, Listed, Objects};
pub use ring::{Behind, Cached, Limits};
use ring::{Cursor, ReadLimit, Ring};

use super::watch::Received;
use super::{Etcd3, Event, Existing, ListOptions, Object, StorageError};
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
    metrics: CacheMetrics,
}

impl<C: Codec> Shared<C> {
    fn state(&self) -> MutexGuard<'_, Option<State<C>>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
            news,
            fresh,
            waiting: AtomicUsize::new(0),
            wake: Notify::new(),
            progress_supported: AtomicBool::new(false),
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
        Some(CacheWatch {
            shared: self.shared.clone(),
            news,
            cursor,
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
    cursor: Cursor,
    prefix: String,
    /// Scratch space for a batch before it is filtered by prefix.
    read: Vec<Arc<Cached<T>>>,
    /// The revision up to which the cursor has read (see [`bookmarks`]).
    progress: i64,
}

/// The buffer as a watcher reads it (whatever the cache's objects are).
trait Buffer<T>: Send + Sync {
    /// Moves `cursor` past the next events into `out`; Ok(false) when there are none.
    fn read(&self, cursor: &mut Cursor, out: &mut Vec<Arc<Cached<T>>>) -> Result<bool, Behind>;
}

impl<C: Codec> Buffer<C::Event> for Shared<C> {
    fn read(
        &self,
        cursor: &mut Cursor,
        out: &mut Vec<Arc<Cached<C::Event>>>,
    ) -> Result<bool, Behind> {
        let state = self.state();
        let ring = &state.as_ref().ok_or(Behind::Reset)?.ring;
        if !ring.has_news(cursor) {
            return Ok(false);
        }
        if let Err(behind) = ring.read(cursor, out, BATCH) {
            if behind == Behind::Overrun {
                self.metrics.terminated_watchers.inc();
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
            while self.shared.read(&mut self.cursor, &mut self.read)? {
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

/// The task that keeps a cache in step with the store.
struct Shell<C: Codec> {
    shared: Weak<Shared<C>>,
    storage: Etcd3,
    prefix: String,
    limits: Limits,
    codec: Arc<C>,
}

/// A store event as the cache applies it: the object as stored (None for a deletion), what
/// the codec made of the event and of the object, and the object's indexed fields.
struct Applied<C: Codec> {
    revision: i64,
    key: String,
    weight: usize,
    stored: Option<(Object, C::Object, Vec<String>)>,
    event: C::Event,
}

impl<C: Codec> Shell<C> {
    /// Runs until the cache is dropped. However it ends (dropped, or a panic), the cache is
    /// emptied: its watchers end and new reads go to the store instead of waiting on a cache
    /// nobody fills.
    async fn run(self, mut stopped: oneshot::Receiver<()>) {
        let _empty = EmptyOnExit(self.shared.clone());
        tokio::select! {
            _ = &mut stopped => {}
            _ = self.follow() => {}
        }
    }

    /// Lists the objects (page by page, every page at the first one's revision) and the
    /// revision they are the state at.
    async fn list(&self) -> Result<(Objects<C::Object>, i64), StorageError> {
        let mut token: Option<String> = None;
        let mut listed: Option<Objects<C::Object>> = None;
        loop {
            let options = ListOptions {
                limit: LIST_PAGE,
                continue_token: token.as_deref(),
                ..ListOptions::default()
            };
            let page = self.storage.list(&self.prefix, options).await?;
            let objects = listed
                .get_or_insert_with(|| Objects::new(self.codec.indexed_fields(), page.revision));
            for object in page.items {
                let value = self.codec.object(&object);
                let fields = self.fields(&value);
                objects.put(object, value, fields);
            }
            objects.advance(page.revision);
            token = page.continue_token;
            if token.is_none() {
                return Ok((listed.take().expect("listed above"), page.revision));
            }
        }
    }

    fn fields(&self, value: &C::Object) -> Vec<String> {
        let codec = &self.codec;
        codec
            .indexed_fields()
            .iter()
            .map(|f| codec.field(value, f))
            .collect()
    }

    /// Follows the store's events for as long as the cache exists.
    async fn follow(&self) {
        // The revision the cache reflects, while its history is unbroken.
        let mut reflected: Option<i64> = None;
        let mut failures = 0u32;
        let mut events = Vec::new();
        loop {
            if failures > 0 {
                let backoff = Duration::from_millis(50 << failures.min(6));
                tokio::time::sleep(backoff.min(MAX_BACKOFF)).await;
            }
            failures += 1;
            // A version the store does not tell is not a supported one (consistent reads
            // then go to the store), as kube-apiserver's feature check has it.
            let supported = match self.storage.version().await {
                Ok(version) => supports_watch_progress(&version),
                Err(e) => {
                    tracing::warn!(prefix = %self.prefix, error = %e, "watch cache: reading the store's version");
                    false
                }
            };
            let Some(shared) = self.shared.upgrade() else {
                return;
            };
            shared
                .progress_supported
                .store(supported, Ordering::Relaxed);
            drop(shared);
            let (listed, after) = match reflected {
                Some(revision) => (None, revision),
                None => match self.list().await {
                    Ok((objects, revision)) => (Some(objects), revision),
                    Err(e) => {
                        tracing::warn!(prefix = %self.prefix, error = %e, "watch cache: listing the store");
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
            if let Some(objects) = listed {
                let Some(shared) = self.shared.upgrade() else {
                    return;
                };
                let mut state = shared.state();
                match state.as_mut() {
                    Some(state) => {
                        state.ring.reset(after);
                        state.objects = objects;
                    }
                    None => {
                        *state = Some(State {
                            ring: Ring::new(self.limits, after),
                            objects,
                        })
                    }
                }
                drop(state);
                shared.notify(after);
                shared.metrics.initializations.inc();
                reflected = Some(after);
            }
            let progress = watch.progress_requester();
            let mut last_request = None;
            loop {
                events.clear();
                let received = tokio::select! {
                    received = watch.next_batch(&mut events) => received,
                    () = self.progress_due(&mut last_request) => {
                        progress.request();
                        continue;
                    }
                };
                let Some(shared) = self.shared.upgrade() else {
                    return;
                };
                match received {
                    Some(Ok(Received::Events)) => {
                        failures = 0;
                        let received = events.len() as u64;
                        let applied: Vec<_> = events.drain(..).map(|e| self.apply(e)).collect();
                        let mut guard = shared.state();
                        let Some(state) = guard.as_mut() else { return };
                        for a in applied {
                            reflected = Some(a.revision);
                            match a.stored {
                                Some((object, value, fields)) => {
                                    state.objects.put(object, value, fields)
                                }
                                None => state.objects.remove(&a.key, a.revision),
                            }
                            state.ring.push(a.revision, a.key, a.event, a.weight);
                        }
                        // Counted under the lock, so a watcher that has seen an event finds
                        // it counted.
                        shared.metrics.received.inc_by(received);
                        let revision = state.objects.revision();
                        drop(guard);
                        shared.metrics.dispatched.inc_by(received);
                        shared.notify(revision);
                    }
                    Some(Ok(Received::Progress(revision))) => {
                        failures = 0;
                        let mut guard = shared.state();
                        let Some(state) = guard.as_mut() else { return };
                        state.objects.advance(revision);
                        let revision = state.objects.revision();
                        drop(guard);
                        shared.notify(revision);
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

    /// One store event made into what the cache keeps (outside the lock).
    fn apply(&self, event: Event) -> Applied<C> {
        let (object, weight, deleted) = match &event {
            Event::Added(o) => (o.clone(), o.value.len(), false),
            Event::Modified(o, prev) => (o.clone(), o.value.len() + prev.len(), false),
            Event::Deleted(o) => (o.clone(), o.value.len(), true),
        };
        let event = self.codec.event(event);
        let (revision, key) = (object.mod_revision, object.key.clone());
        let stored = (!deleted).then(|| {
            let value = self.codec.object_of(&event);
            let fields = self.fields(&value);
            (object, value, fields)
        });
        Applied {
            revision,
            key,
            weight,
            stored,
            event,
        }
    }

    /// Resolves when the store should be asked for progress: at once when a read starts
    /// waiting, then every [`PROGRESS_REQUEST_PERIOD`] while any waits.
    async fn progress_due(&self, last: &mut Option<Instant>) {
        loop {
            let Some(shared) = self.shared.upgrade() else {
                return std::future::pending().await;
            };
            if shared.waiting.load(Ordering::SeqCst) == 0 {
                shared.wake.notified().await;
                continue;
            }
            drop(shared);
            let now = Instant::now();
            match *last {
                Some(at) if now < at + PROGRESS_REQUEST_PERIOD => {
                    tokio::time::sleep_until((at + PROGRESS_REQUEST_PERIOD).into()).await;
                }
                _ => {
                    *last = Some(now);
                    return;
                }
            }
        }
    }
}

/// Whether an etcd server of `version` answers progress requests as a consistent read
/// needs, by kube-apiserver's rule (`endpointSupportsRequestWatchProgress`): 3.4.31 and later
/// 3.4 releases, 3.5.13 and later, anything newer; an unreadable version does not.
pub fn supports_watch_progress(version: &str) -> bool {
    let mut parts = version.split(['.', '-', '+']);
    let mut number = || parts.next().and_then(|p| p.parse::<u64>().ok());
    let (Some(major), Some(minor), Some(patch)) = (number(), number(), number()) else {
        return false;
    };
    match (major, minor) {
        (3, 4) => patch >= 31,
        (3, 5) => patch >= 13,
        (3, m) => m > 5,
        (m, _) => m > 3,
    }
}

/// Empties a cache when its shell ends.
struct EmptyOnExit<C: Codec>(Weak<Shared<C>>);

impl<C: Codec> Drop for EmptyOnExit<C> {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            *shared.state() = None;
            shared.notify(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_supported_from_the_versions_kube_apiserver_requires() {
        for (version, supported) in [
            ("3.5.13", true),
            ("3.5.21", true),
            ("3.5.12", false),
            ("3.5.0", false),
            ("3.4.31", true),
            ("3.4.30", false),
            ("3.6.0", true),
            ("4.0.0", true),
            ("3.3.27", false),
            ("3.5.13-alpha.0", true),
            ("3.5", false),
            ("not a version", false),
        ] {
            assert_eq!(supports_watch_progress(version), supported, "{version}");
        }
    }
}
