//! The Watch axis: fan-out of committed events to watchers.
//!
//! The state machine hands every committed batch of events to [`WatchHub::notify`], in
//! revision order; watch streams register watchers with the hub and receive their events.

use std::sync::Arc;

use keel_mvcc::Mvcc;
use keel_proto::mvccpb::Event;

use crate::metrics::Metrics;

/// Every watcher of this member, fed by committed events.
pub struct WatchHub {
    mvcc: Arc<Mvcc>,
    metrics: Arc<Metrics>,
}

impl WatchHub {
    /// A hub reading history from `mvcc`.
    pub fn new(mvcc: Arc<Mvcc>, metrics: Arc<Metrics>) -> WatchHub {
        WatchHub { mvcc, metrics }
    }

    /// Takes the events of one committed batch (ascending revisions; `revision` is the store
    /// revision after the batch).
    pub fn notify(&self, events: Vec<Event>, revision: i64) {
        let _ = (events, revision, &self.mvcc, &self.metrics);
    }
}
