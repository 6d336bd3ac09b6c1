//! Catching unsynced watchers up from the backend (etcd's `syncWatchersLoop`).
//!
//! A round plans under the hub's lock (up to [`MAX_WATCHERS_PER_ROUND`] watchers whose streams
//! have room), reads the span from the backend without any watch lock held (so `notify` on the
//! apply path never waits for it), and delivers under the lock again. Rounds run back to back
//! while they make progress, and otherwise every [`RESYNC_INTERVAL`] or as soon as a watcher
//! falls behind or a full stream drains.

use std::sync::{Arc, Weak};
use std::time::Duration;

use keel_mvcc::{HistoryRequest, MvccError};
use tokio::sync::Notify;

use super::WatchHub;
use super::core::ResyncRead;
use super::event::SharedEvent;

/// etcd's `maxWatchersPerSync`.
pub const MAX_WATCHERS_PER_ROUND: usize = 512;
/// etcd's unsynced-watcher sync period.
pub const RESYNC_INTERVAL: Duration = Duration::from_millis(100);
/// Backend entries read per round (a round always ends at a revision boundary).
pub const MAX_ENTRIES_PER_ROUND: usize = 8192;

impl WatchHub {
    /// Runs one resync round; returns whether a watcher moved forward.
    pub fn resync_round(&self) -> bool {
        let compact_rev = self.mvcc.compact_revision();
        let Some(plan) =
            self.with_core(|core| core.plan_resync(MAX_WATCHERS_PER_ROUND, compact_rev))
        else {
            return false;
        };
        let wanted = |key: &[u8]| plan.wants(key);
        let read = self.mvcc.history(&HistoryRequest {
            from: plan.from,
            to: plan.to,
            max_entries: MAX_ENTRIES_PER_ROUND,
            prev_kv: plan.prev_kv,
            wanted: &wanted,
        });
        let read = match read {
            Ok(h) => ResyncRead::Events {
                events: h.events.into_iter().map(SharedEvent::new).collect(),
                next: h.next,
            },
            Err(MvccError::Compacted) => ResyncRead::Compacted(self.mvcc.compact_revision()),
            Err(e) => {
                tracing::error!(error = %e, "watch resync: reading history failed");
                return false;
            }
        };
        self.with_core(|core| core.finish_resync(plan, read))
    }
}

/// The resync task of a hub; ends when the hub is dropped.
pub async fn run(hub: Weak<WatchHub>, wake: Arc<Notify>) {
    loop {
        let Some(h) = hub.upgrade() else { return };
        let progressed = tokio::task::spawn_blocking(move || h.resync_round())
            .await
            .unwrap_or(false);
        if progressed {
            tokio::task::yield_now().await;
            continue;
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(RESYNC_INTERVAL) => {}
        }
    }
}
