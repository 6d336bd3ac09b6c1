//! The Watch axis: fan-out of committed events to watchers, etcd's watch contract without
//! etcd's slow-consumer stalls.
//!
//! - [`core`]: the sans-I/O [`WatchCore`] (watchers, synced groups, unsynced catch-up, per-stream
//!   bounded queues, progress bookkeeping); see its docs for the design.
//! - [`group`] / [`range`]: synced watchers indexed by key and range.
//! - [`event`]: [`SharedEvent`](event::SharedEvent), an event shared by its watchers and
//!   encoded once.
//! - [`fragment`]: etcd's `sendFragments`.
//! - [`resync`]: the background task that catches unsynced watchers up from the backend;
//!   [`selection`]: one read shared by the watchers it serves.
//! - this module: [`WatchHub`], the shared shell around the core (one lock, stream wake-ups,
//!   metrics), and [`WatchStreamHandle`], one gRPC stream's view of it.
//!
//! The state machine hands every committed batch to [`WatchHub::notify`] on the apply path; it
//! only takes the core's lock for in-memory work and never waits for a consumer.

pub mod core;
pub mod event;
pub mod fragment;
pub mod group;
pub mod range;
pub mod resync;
pub mod selection;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use keel_mvcc::Mvcc;
use keel_proto::etcdserverpb::WatchCreateRequest;
use keel_proto::mvccpb::Event;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::metrics::Metrics;
pub use core::{Outgoing, Stats, WatchCore};

/// The core and the wake-ups of its streams, under one lock.
struct Inner {
    core: WatchCore,
    wakers: HashMap<u64, Arc<Notify>>,
}

impl Inner {
    /// Wakes the senders of streams with new responses; tells whether a resync is wanted.
    fn wake(&mut self) -> bool {
        for stream in self.core.take_woken() {
            if let Some(w) = self.wakers.get(&stream) {
                w.notify_one();
            }
        }
        self.core.take_resync_wanted()
    }
}

/// Every watcher of this member, fed by committed events.
pub struct WatchHub {
    mvcc: Arc<Mvcc>,
    metrics: Arc<Metrics>,
    inner: Mutex<Inner>,
    resync_wake: Arc<Notify>,
    resync_started: AtomicBool,
    /// Whether any watcher asked for `prev_kv` (kept by every change to the core).
    wants_prev: AtomicBool,
    /// Closed when the hub is dropped: declared after `mvcc`, so by then the hub's handle on
    /// the backend is gone (see [`WatchHub::dropped`]).
    alive: tokio::sync::watch::Sender<()>,
}

impl WatchHub {
    /// A hub reading history from `mvcc`.
    pub fn new(mvcc: Arc<Mvcc>, metrics: Arc<Metrics>) -> WatchHub {
        WatchHub::with_capacity(mvcc, metrics, core::DEFAULT_QUEUE_CAPACITY)
    }

    /// A hub whose streams queue at most `capacity` event responses each.
    pub fn with_capacity(mvcc: Arc<Mvcc>, metrics: Arc<Metrics>, capacity: usize) -> WatchHub {
        let revision = mvcc.current_revision();
        WatchHub {
            mvcc,
            metrics,
            inner: Mutex::new(Inner {
                core: WatchCore::new(revision, capacity),
                wakers: HashMap::new(),
            }),
            resync_wake: Arc::new(Notify::new()),
            resync_started: AtomicBool::new(false),
            wants_prev: AtomicBool::new(false),
            alive: tokio::sync::watch::Sender::new(()),
        }
    }

    /// Resolves once this hub has been dropped, and with it its handle on the backend; holds
    /// no reference to the hub.
    pub fn dropped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut alive = self.alive.subscribe();
        async move {
            // Nothing is ever sent: `changed` fails once the sender, in the hub, is dropped.
            while alive.changed().await.is_ok() {}
        }
    }

    /// Takes the events of one committed batch (ascending revisions; `revision` is the store
    /// revision after the batch). Never blocks on a consumer and does no I/O.
    pub fn notify(&self, events: Vec<Event>, revision: i64) {
        self.with_core(|core| core.notify(events, revision));
    }

    /// Whether any watcher asked for `prev_kv`, so committed put events must carry the values
    /// they replaced (without it they may leave them out; see [`WatchCore`]).
    pub fn wants_prev_kv(&self) -> bool {
        self.wants_prev.load(Ordering::Relaxed)
    }

    /// The store was replaced by a snapshot at `revision`: every watcher catches up from it.
    pub fn restore(&self, revision: i64) {
        self.with_core(|core| core.restore(revision));
    }

    /// Starts the background resync task once (the first stream calls it; needs a tokio
    /// runtime).
    pub fn ensure_resync_task(self: &Arc<Self>) {
        if !self.resync_started.swap(true, Ordering::AcqRel) {
            tokio::spawn(resync::run(Arc::downgrade(self), self.resync_wake.clone()));
        }
    }

    /// The current counts of the watch metrics.
    pub fn stats(&self) -> Stats {
        self.inner.lock().core.stats()
    }

    /// Opens a stream.
    pub fn open_stream(self: &Arc<Self>) -> WatchStreamHandle {
        let waker = Arc::new(Notify::new());
        let id = {
            let mut inner = self.inner.lock();
            let id = inner.core.open_stream();
            inner.wakers.insert(id, waker.clone());
            self.publish(&inner.core);
            id
        };
        WatchStreamHandle {
            hub: self.clone(),
            id,
            waker,
            room: Notify::new(),
        }
    }

    /// Runs `f` on the core, then wakes streams, the resync task and refreshes the metrics.
    fn with_core<T>(&self, f: impl FnOnce(&mut WatchCore) -> T) -> T {
        let (out, resync) = {
            let mut inner = self.inner.lock();
            let out = f(&mut inner.core);
            let resync = inner.wake();
            self.publish(&inner.core);
            (out, resync)
        };
        if resync {
            self.resync_wake.notify_one();
        }
        out
    }

    fn publish(&self, core: &WatchCore) {
        let s = core.stats();
        self.wants_prev
            .store(s.prev_kv_watchers > 0, Ordering::Relaxed);
        self.metrics.watch_streams.set(s.streams as i64);
        self.metrics.watchers.set(s.watchers as i64);
        self.metrics.slow_watchers.set(s.unsynced as i64);
        self.metrics.pending_events.set(s.pending_events as i64);
    }
}

/// One watch stream's handle on the hub; closing it (dropping) removes its watchers.
pub struct WatchStreamHandle {
    hub: Arc<WatchHub>,
    id: u64,
    waker: Arc<Notify>,
    /// Signalled when a response leaves the queue (for [`WatchStreamHandle::wait_for_room`]).
    room: Notify,
}

impl WatchStreamHandle {
    /// Handles a create request (the reply is queued).
    pub fn create(&self, req: &WatchCreateRequest) {
        let compact_rev = self.hub.mvcc.compact_revision();
        self.hub
            .with_core(|core| core.create(self.id, req, compact_rev));
    }

    /// Handles a cancel request.
    pub fn cancel(&self, watch_id: i64) {
        self.hub.with_core(|core| core.cancel(self.id, watch_id));
    }

    /// Handles a progress request.
    pub fn request_progress(&self) {
        self.hub.with_core(|core| core.request_progress(self.id));
    }

    /// The periodic progress notification.
    pub fn progress_tick(&self) {
        self.hub.with_core(|core| core.progress_tick(self.id));
    }

    /// The next queued response, if any.
    pub fn pop(&self) -> Option<Outgoing> {
        let out = self.hub.with_core(|core| core.pop(self.id));
        if out.is_some() {
            self.room.notify_one();
        }
        out
    }

    /// Waits until the stream may take its next request: its control responses are below
    /// etcd's `ctrlStreamBufLen` (see [`WatchCore::accepts_requests`]).
    pub async fn wait_for_room(&self) {
        while !self.hub.inner.lock().core.accepts_requests(self.id) {
            self.room.notified().await;
        }
    }

    /// Wakes [`wait`](Self::wait) (used when the call ends).
    pub fn wake(&self) {
        self.waker.notify_one();
    }

    /// Waits until a response may be queued (returns at once if one was queued since the last
    /// wait).
    pub async fn wait(&self) {
        self.waker.notified().await;
    }
}

impl Drop for WatchStreamHandle {
    fn drop(&mut self) {
        let mut inner = self.hub.inner.lock();
        inner.core.close_stream(self.id);
        inner.wakers.remove(&self.id);
        self.hub.publish(&inner.core);
    }
}
