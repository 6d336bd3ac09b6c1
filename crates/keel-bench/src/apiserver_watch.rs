//! The watchers of `keel bench apiserver`: each watches the namespace's leases from the
//! resourceVersion of the initial list and records, per resourceVersion, which lease's
//! MODIFIED event it saw, so that every acknowledged update can be checked afterwards.
//!
//! A watch response is a stream of JSON documents, one per line (`{"type":"MODIFIED",
//! "object":{...}}`). Only the event type, the lease's name and resourceVersion and its
//! `spec.renewTime` are read: the renewer stamps `renewTime` just before it sends the PUT, so
//! the delivery latency (PUT sent to event received, in wall-clock microseconds) is known the
//! moment the event arrives, whether or not the PUT's answer has. A watch that ends is opened
//! again from the last resourceVersion seen, as an informer does ([`kube_watch::follow`]);
//! one answered 410 Expired cannot be resumed and stops.
//!
//! Each watcher's record ([`Seen`]) is one byte per resourceVersion since the initial list:
//! 0 when no event was seen, else the lease's number mod 255 plus one, so a duplicate is caught
//! on arrival and an event carrying another lease's resourceVersion is caught (with
//! probability 254/255) when the acknowledged updates are checked. Watches deliver events in
//! resourceVersion order, so a watcher whose last resourceVersion is at or past the highest
//! acknowledged one has received everything it ever will: that is when the drain stops.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::anyhow;
use http::StatusCode;
use hyper::body::Incoming;
use serde::Deserialize;
use tokio::sync::watch;

use crate::apiserver::Phase;
use crate::https::Conn;
use crate::json_lines::LineBuffer;
use crate::kube_watch::{self, Event, OpenFailure};
use crate::microtime;
use crate::report::Stats;

/// The name of lease `i` is this prefix followed by `i`.
pub const LEASE_PREFIX: &str = "keel-bench-";

/// Largest span of resourceVersions a watcher records (one byte each).
const MAX_SPAN: u64 = 1 << 26;

/// What a watcher saw, one byte per resourceVersion from `base` on (see the module comment).
#[derive(Debug, Clone, Default)]
pub struct Seen {
    base: u64,
    slots: Vec<u8>,
}

/// What [`Seen::mark`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// First event with this resourceVersion.
    Fresh,
    /// An event with this resourceVersion was seen before.
    Duplicate,
    /// Before `base` or too far past it to record.
    OutOfRange,
}

impl Seen {
    /// An empty record starting at resourceVersion `base`.
    pub fn new(base: u64) -> Self {
        Self {
            base,
            slots: Vec::new(),
        }
    }

    /// The byte recorded for lease `lease`.
    pub fn tag(lease: u32) -> u8 {
        (lease % 255) as u8 + 1
    }

    /// Records that lease `lease` was seen at `rv`.
    pub fn mark(&mut self, rv: u64, lease: u32) -> Mark {
        let Some(offset) = rv.checked_sub(self.base).filter(|&o| o < MAX_SPAN) else {
            return Mark::OutOfRange;
        };
        let offset = offset as usize;
        if offset >= self.slots.len() {
            let len = (offset + 1).next_power_of_two().max(4096);
            self.slots.resize(len, 0);
        }
        if self.slots[offset] != 0 {
            return Mark::Duplicate;
        }
        self.slots[offset] = Self::tag(lease);
        Mark::Fresh
    }

    /// The byte recorded at `rv` (0: nothing seen).
    pub fn get(&self, rv: u64) -> u8 {
        rv.checked_sub(self.base)
            .and_then(|o| self.slots.get(usize::try_from(o).ok()?))
            .copied()
            .unwrap_or(0)
    }
}

/// What the watchers share with the coordinator, across threads.
pub struct WatchShared {
    /// Each watcher's last resourceVersion.
    pub last_rv: Vec<AtomicU64>,
    /// Watchers that stopped for good (410 Expired).
    pub gone: Vec<AtomicBool>,
    /// Events received over all watchers (for the progress bar).
    pub events: AtomicU64,
}

impl WatchShared {
    /// State for `watchers` watchers starting at `rv`.
    pub fn new(watchers: usize, rv: u64) -> Self {
        Self {
            last_rv: (0..watchers).map(|_| AtomicU64::new(rv)).collect(),
            gone: (0..watchers).map(|_| AtomicBool::new(false)).collect(),
            events: AtomicU64::new(0),
        }
    }

    /// Watchers still running whose last resourceVersion is below `rv`.
    pub fn behind(&self, rv: u64) -> usize {
        self.last_rv
            .iter()
            .zip(&self.gone)
            .filter(|(last, gone)| {
                !gone.load(Ordering::Acquire) && last.load(Ordering::Acquire) < rv
            })
            .count()
    }
}

/// What a watcher reads of a lease's spec.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec<'a> {
    #[serde(default, borrow)]
    renew_time: Option<Cow<'a, str>>,
}

/// What one watcher saw: the sans-I/O half of a watcher, fed the bytes of its watch.
#[derive(Debug)]
pub struct Record {
    /// Number of this watcher (0-based, over all threads).
    pub index: usize,
    /// The resourceVersion to resume from: the last seen.
    last: u64,
    /// The event line not complete yet.
    lines: LineBuffer,
    /// Which lease was seen at each resourceVersion.
    pub seen: Seen,
    /// Delivery latency of each first-seen MODIFIED event of a benchmark lease; watch errors.
    pub delivery: Stats,
    /// First-seen MODIFIED events of benchmark leases.
    pub fresh: u64,
    /// Events seen twice.
    pub duplicates: u64,
    /// Events with a lower resourceVersion than one seen before (or before the start).
    pub out_of_order: u64,
    /// Events that are not MODIFIED events of benchmark leases (bookmarks aside).
    pub other: u64,
    /// Watches opened again after one ended.
    pub restarts: u64,
}

impl Record {
    /// The record of watcher `index`, watching from `rv`.
    pub fn new(index: usize, rv: u64) -> Self {
        Self {
            index,
            last: rv,
            lines: LineBuffer::default(),
            seen: Seen::new(rv + 1),
            delivery: Stats::new(),
            fresh: 0,
            duplicates: 0,
            out_of_order: 0,
            other: 0,
            restarts: 0,
        }
    }

    /// Handles received bytes: every complete line is one event. Fails (with the message)
    /// when the watch expired.
    pub fn on_data(&mut self, data: &[u8], shared: &WatchShared) -> Result<(), String> {
        let now = microtime::micros(SystemTime::now());
        let mut lines = std::mem::take(&mut self.lines);
        let events = lines.feed(data, |line| self.on_event(line, now));
        self.lines = lines;
        shared.last_rv[self.index].store(self.last, Ordering::Release);
        shared.events.fetch_add(events?, Ordering::Relaxed);
        Ok(())
    }

    /// Forgets a partial line (its watch ended) and counts the restart.
    fn restarted(&mut self) {
        self.lines.clear();
        self.restarts += 1;
    }

    /// Handles one event line received at `now` (wall-clock microseconds).
    fn on_event(&mut self, line: &[u8], now: i64) -> Result<(), String> {
        let event: Event<Spec> = match serde_json::from_slice(line) {
            Ok(event) => event,
            Err(err) => {
                self.delivery
                    .record_error(format!("malformed watch event: {err}"));
                return Ok(());
            }
        };
        if let Some((code, message)) = event.error() {
            let message = format!("watch: {code}: {message}");
            if code == 410 {
                return Err(message);
            }
            self.delivery.record_error(message);
            return Ok(());
        }
        let rv = event.object.metadata.resource_version.parse::<u64>().ok();
        match event.kind.as_ref() {
            "MODIFIED" => {}
            "BOOKMARK" => {
                self.last = self.last.max(rv.unwrap_or(0));
                return Ok(());
            }
            _ => {
                self.other += 1;
                self.advance(rv);
                return Ok(());
            }
        }
        let Some(rv) = rv else {
            self.delivery.record_error(format!(
                "MODIFIED event with resourceVersion {:?}",
                event.object.metadata.resource_version
            ));
            return Ok(());
        };
        let lease = event
            .object
            .metadata
            .name
            .strip_prefix(LEASE_PREFIX)
            .and_then(|n| n.parse::<u32>().ok());
        let Some(lease) = lease else {
            self.other += 1;
            self.advance(Some(rv));
            return Ok(());
        };
        match self.seen.mark(rv, lease) {
            Mark::Fresh => {
                self.fresh += 1;
                let sent = event
                    .object
                    .spec
                    .renew_time
                    .as_deref()
                    .and_then(microtime::parse);
                match sent {
                    Some(sent) => self
                        .delivery
                        .record(Duration::from_micros(now.saturating_sub(sent).max(0) as u64)),
                    None => self
                        .delivery
                        .record_error("MODIFIED event without a valid spec.renewTime".into()),
                }
            }
            Mark::Duplicate => self.duplicates += 1,
            Mark::OutOfRange => self.out_of_order += 1,
        }
        self.advance(Some(rv));
        Ok(())
    }

    /// Moves the resume point to `rv`, counting an event that goes backwards.
    fn advance(&mut self, rv: Option<u64>) {
        let Some(rv) = rv else { return };
        if rv < self.last {
            self.out_of_order += 1;
        }
        self.last = self.last.max(rv);
    }
}

/// One watcher: its connection, its open watch and its [`Record`].
pub struct Watcher {
    conn: Conn,
    /// The leases' collection path.
    path: String,
    body: Incoming,
    record: Record,
}

impl Watcher {
    /// Opens watcher `index` on `path` from `rv` and waits for the response to start.
    pub async fn open(index: usize, mut conn: Conn, path: String, rv: u64) -> anyhow::Result<Self> {
        let body = kube_watch::open(&mut conn, &watch_path(&path, rv))
            .await
            .map_err(open_error)?;
        Ok(Self {
            conn,
            path,
            body,
            record: Record::new(index, rv),
        })
    }

    /// Receives events until the coordinator says stop, or the watch expires; then returns
    /// what was seen.
    pub async fn run(self, shared: Arc<WatchShared>, mut phase: watch::Receiver<Phase>) -> Record {
        let Watcher {
            mut conn,
            path,
            body,
            mut record,
        } = self;
        let stop = async move {
            let _ = phase.wait_for(|p| *p >= Phase::StopWatchers).await;
        };
        let mut leases = LeaseWatch {
            path: &path,
            record: &mut record,
            shared: &shared,
        };
        kube_watch::follow(&mut conn, &mut leases, Some(body), stop).await;
        record
    }
}

/// The watch request of the leases at `path` from `rv`.
fn watch_path(path: &str, rv: u64) -> String {
    format!("{path}?watch=1&resourceVersion={rv}")
}

/// A watch that could not be opened, as an error.
fn open_error(failure: OpenFailure) -> anyhow::Error {
    match failure {
        OpenFailure::Request(err) => err,
        OpenFailure::Refused(answer) => anyhow!("watch: {}", answer.error()),
    }
}

/// A watcher's [`Record`] as the [`kube_watch::Watch`] [`kube_watch::follow`] keeps open:
/// an expired resourceVersion stops it for good.
struct LeaseWatch<'a> {
    path: &'a str,
    record: &'a mut Record,
    shared: &'a WatchShared,
}

impl kube_watch::Watch for LeaseWatch<'_> {
    fn path(&self) -> String {
        watch_path(self.path, self.record.last)
    }

    fn on_data(&mut self, data: &[u8]) -> Result<(), String> {
        self.record.on_data(data, self.shared)
    }

    fn open_failed(&mut self, failure: OpenFailure) -> Result<(), String> {
        let gone = matches!(&failure, OpenFailure::Refused(a) if a.status == StatusCode::GONE);
        let message = open_error(failure).to_string();
        if gone {
            return Err(message);
        }
        self.record.delivery.record_error(message);
        Ok(())
    }

    fn stream_failed(&mut self, err: hyper::Error) {
        self.record
            .delivery
            .record_error(format!("watch stream failed: {err}"));
    }

    fn reopening(&mut self) {
        self.record.restarted();
    }

    async fn expired(&mut self, message: String, _conn: &mut Conn) -> bool {
        self.record.delivery.record_error(message);
        self.shared.gone[self.record.index].store(true, Ordering::Release);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_marks_and_tags() {
        let mut seen = Seen::new(100);
        assert_eq!(seen.mark(100, 7), Mark::Fresh);
        assert_eq!(seen.mark(100, 7), Mark::Duplicate);
        assert_eq!(seen.mark(99, 7), Mark::OutOfRange);
        assert_eq!(seen.mark(100 + MAX_SPAN, 7), Mark::OutOfRange);
        assert_eq!(seen.mark(10_000, 300), Mark::Fresh);
        assert_eq!(seen.get(100), Seen::tag(7));
        assert_eq!(seen.get(10_000), Seen::tag(300));
        assert_eq!(Seen::tag(300), 46);
        assert_eq!((seen.get(101), seen.get(5), seen.get(u64::MAX)), (0, 0, 0));
    }

    #[test]
    fn events_are_parsed_and_counted() {
        let shared = WatchShared::new(1, 0);
        let event = |name: &str, rv: u64, renew: i64| {
            format!(
                "{{\"type\":\"MODIFIED\",\"object\":{{\"kind\":\"Lease\",\"metadata\":{{\"name\":\"{name}\",\"namespace\":\"n\",\"resourceVersion\":\"{rv}\",\"managedFields\":[{{\"fieldsV1\":{{\"f:spec\":{{}}}}}}]}},\"spec\":{{\"holderIdentity\":\"x\",\"renewTime\":\"{}\"}}}}}}\n",
                microtime::format(renew)
            )
        };
        let now = microtime::micros(SystemTime::now());
        let mut w = Record::new(0, 0);
        // One event split over two frames, then two in one frame (one a duplicate), then an
        // event of another lease and one that goes backwards.
        let first = event("keel-bench-3", 5, now - 2_000);
        let (a, b) = first.split_at(40);
        w.on_data(a.as_bytes(), &shared).unwrap();
        assert_eq!(w.fresh, 0);
        w.on_data(b.as_bytes(), &shared).unwrap();
        let two = event("keel-bench-4", 6, now) + &event("keel-bench-4", 6, now);
        w.on_data(two.as_bytes(), &shared).unwrap();
        let more = event("other", 7, now) + &event("keel-bench-1", 4, now);
        w.on_data(more.as_bytes(), &shared).unwrap();
        assert_eq!(
            (w.fresh, w.duplicates, w.other, w.out_of_order),
            (3, 1, 1, 1)
        );
        assert_eq!(w.seen.get(5), Seen::tag(3));
        assert_eq!(shared.last_rv[0].load(Ordering::Relaxed), 7);
        assert_eq!(shared.events.load(Ordering::Relaxed), 5);
        assert!(w.delivery.slowest_secs() >= 0.002);
        let expired = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: 1 (5)\",\"reason\":\"Expired\",\"code\":410}}\n";
        let err = w.on_data(expired.as_bytes(), &shared).unwrap_err();
        assert_eq!(err, "watch: 410: too old resource version: 1 (5)");
        assert_eq!(shared.behind(7), 0);
        assert_eq!(shared.behind(8), 1);
    }
}
