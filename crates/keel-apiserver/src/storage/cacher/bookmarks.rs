//! Watch bookmarks from the cache, as kube-apiserver's cacher sends them to a watch with
//! `allowWatchBookmarks=true`: a `BOOKMARK` event tells a client that it has seen every
//! change up to a resourceVersion, so that it resumes from there after the watch ends
//! instead of from the last object that changed (which the store may have compacted since).
//!
//! When: about once a [`FREQUENCY`], and [`BEFORE_DEADLINE`] before the watch's deadline so
//! that its last resourceVersion is as fresh as can be when it times out
//! (`cacheWatcher.nextBookmarkTime`); [`next_bookmark`] is that rule, sans I/O.
//!
//! What: the revision up to which the watcher has read the buffer ([`CacheWatch::progress`]),
//! whether or not the events it read were for it: every change up to there has been handed
//! to the watcher, so a bookmark queued after those changes is true. A bookmark goes out
//! only when that revision is past the watch's start, as kube-apiserver's `cacheWatcher`
//! sends only events newer than its start.

use std::time::Duration;

use tokio::time::Instant;

use super::CacheWatch;

/// How often a watch gets a bookmark (kube-apiserver's `defaultBookmarkFrequency`).
pub const FREQUENCY: Duration = Duration::from_secs(60);

/// How long before its deadline a watch gets its last bookmark.
pub const BEFORE_DEADLINE: Duration = Duration::from_secs(2);

/// When a watch ending at `deadline` gets its next bookmark, asked at `now`: a
/// [`FREQUENCY`] from now, or [`BEFORE_DEADLINE`] before the deadline if that is sooner;
/// None once that time has passed (the watch is about to end).
pub fn next_bookmark(now: Instant, deadline: Instant) -> Option<Instant> {
    let heartbeat = now + FREQUENCY;
    let last = deadline.checked_sub(BEFORE_DEADLINE)?;
    let at = heartbeat.min(last);
    (at >= now).then_some(at)
}

impl<T> CacheWatch<T> {
    /// The revision up to which this watcher has read the buffer (at least its start).
    pub fn progress(&self) -> i64 {
        self.progress
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookmarks_come_every_minute_and_two_seconds_before_the_deadline() {
        let now = Instant::now();
        let hour = now + Duration::from_secs(3600);
        assert_eq!(next_bookmark(now, hour), Some(now + FREQUENCY));
        let soon = now + Duration::from_secs(30);
        assert_eq!(next_bookmark(now, soon), Some(soon - BEFORE_DEADLINE));
        // Within the last two seconds: no more bookmarks.
        let ending = now + Duration::from_secs(1);
        assert_eq!(next_bookmark(now, ending), None);
        assert_eq!(next_bookmark(now, now + BEFORE_DEADLINE), Some(now));
    }
}
