//! [`WatchCore`]: every watcher of the member, as a plain synchronous state machine.
//!
//! Inputs are the client requests of each stream (create, cancel, progress), the committed
//! batches ([`WatchCore::notify`]), the progress ticks and the backend reads of a resync round;
//! outputs are the responses queued per stream, popped by the stream's sender. No I/O, no
//! clock, no async: the shell in [`super`] and `api::watch` drives it.
//!
//! # Synced and unsynced watchers (etcd's watchable store, without its blocking)
//!
//! A *synced* watcher has been given every event up to the core's revision: [`notify`]
//! delivers new events to it directly. An *unsynced* watcher still needs events from
//! `next_rev` on, read from the backend by a resync round ([`plan_resync`] picks watchers and
//! the span to read, the shell reads it without holding the core, [`finish_resync`] delivers).
//!
//! Each stream has one FIFO queue of responses, bounded at `capacity` event responses. Control
//! responses (created, canceled, compacted, progress answers) are never refused; instead the
//! shell stops reading the client's requests while [`CTRL_QUEUE_CAPACITY`] of them wait
//! ([`WatchCore::accepts_requests`]), as etcd's `recvLoop` blocks on its full `ctrlStream`, so a
//! client that sends without reading is held back by HTTP/2 flow control instead of growing
//! the queue. When `notify` finds a watcher's stream full, it does not wait
//! and does not keep the events: the watcher becomes unsynced at the first revision it did not
//! get, and catches up from the backend once its stream has room again. So the apply path never
//! waits for a consumer, a slow stream costs one small record per watcher, and no event is lost
//! or sent twice: a watcher is fed by exactly one of `notify` (synced) or resync (unsynced).
//!
//! # Progress
//!
//! A progress request is answered (watch id -1, header revision = the core's revision) only
//! when every watcher of the stream is synced and the revision is at least the one just before
//! its start revision; otherwise it
//! waits and is answered as soon as that holds. Since a synced watcher's events up to the core's
//! revision are all ahead of the answer in the same queue, the answer never claims a revision
//! whose events the client has not been sent.
//!
//! [`notify`]: WatchCore::notify
//! [`plan_resync`]: WatchCore::plan_resync
//! [`finish_resync`]: WatchCore::finish_resync

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;

use keel_proto::encoded::PreEncoded;
use keel_proto::etcdserverpb::{
    ResponseHeader, WatchCreateRequest, WatchResponse, watch_create_request::FilterType,
};
use keel_proto::mvccpb::Event;

use super::event::{EventRun, SharedEvent};
use super::fragment::fragments;
use super::group::{WatcherGroups, WatcherRef};
use super::range::{EmptyRange, WatchRange};
use super::selection::Selection;

/// etcd's per-stream buffer of event responses (`chanBufLen`).
pub const DEFAULT_QUEUE_CAPACITY: usize = 128;

/// etcd's `ctrlStreamBufLen`: control responses a stream may queue before its requests are no
/// longer read.
pub const CTRL_QUEUE_CAPACITY: usize = 16;

/// etcd's `watchBatchMaxRevs`: the most revisions one catch-up response carries.
pub const MAX_REVISIONS_PER_RESPONSE: usize = 1000;

/// The watch id of responses that speak for every watcher of a stream.
pub const ALL_WATCHERS: i64 = -1;

/// etcd's cancel reason for a duplicate client-chosen watch id.
const DUPLICATE_ID: &str = "mvcc: duplicate watch ID provided on the WatchStream";
/// etcd's cancel reason for a negative start revision.
const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";

/// A response waiting to be sent: its events are shared with every other watcher that gets
/// them, and encoded once.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The response without its events; the header carries only the revision (the shell
    /// fills the member fields).
    pub response: WatchResponse,
    /// The events.
    pub events: EventRun,
    /// Whether the watcher asked for `prev_kv`.
    pub prev_kv: bool,
    /// Whether it may be split into fragments (the watcher asked for `fragment`).
    pub fragment: bool,
    /// Whether it answers a client request (counted against [`CTRL_QUEUE_CAPACITY`]).
    reply: bool,
}

impl Outgoing {
    /// A response without events.
    fn control(response: WatchResponse, reply: bool) -> Outgoing {
        Outgoing {
            response,
            events: EventRun::default(),
            prev_kv: false,
            fragment: false,
            reply,
        }
    }

    /// The whole response as the client decodes it (with the header as queued).
    pub fn to_response(&self) -> WatchResponse {
        WatchResponse {
            events: self.events.iter().map(|e| e.shaped(self.prev_kv)).collect(),
            ..self.response.clone()
        }
    }

    /// The response encoded with `header`; split into fragments below `max_bytes` when the
    /// watcher allows it and it is that large.
    pub fn encode(mut self, header: ResponseHeader, max_bytes: usize) -> Vec<PreEncoded> {
        self.response.header = Some(header);
        let max = if self.fragment { max_bytes } else { usize::MAX };
        fragments(&self.response, &self.events, self.prev_kv, max)
    }
}

/// Counts for the watch metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Open streams.
    pub streams: usize,
    /// Watchers.
    pub watchers: usize,
    /// Watchers that asked for `prev_kv`.
    pub prev_kv_watchers: usize,
    /// Unsynced (catching up) watchers.
    pub unsynced: usize,
    /// Events in stream queues.
    pub pending_events: usize,
    /// Responses of any kind in stream queues.
    pub queued: usize,
    /// Streams whose client requests wait until their client reads: [`CTRL_QUEUE_CAPACITY`]
    /// control responses are queued (see [`WatchCore::accepts_requests`]).
    pub held_back: usize,
}

#[derive(Debug)]
struct Watcher {
    /// Distinguishes this watcher from a later one reusing its id.
    uid: u64,
    range: WatchRange,
    /// The requested start revision (0: from now on).
    start_rev: i64,
    /// Unsynced: the first revision not yet delivered. Synced: the lowest revision it accepts
    /// (above the core's revision only for a future start revision).
    next_rev: i64,
    no_put: bool,
    no_delete: bool,
    prev_kv: bool,
    fragment: bool,
    progress_notify: bool,
    synced: bool,
    /// No event was sent since the last progress tick (etcd's `progress[id]`).
    quiet: bool,
}

impl Watcher {
    /// Whether a progress notification at `revision` is true for this watcher: it is synced,
    /// and `revision` is not below the revision just before its start (a watcher resumed at
    /// `revision + 1` is caught up; one further in the future is not, so that no notification
    /// claims a revision it will never deliver, etcd-io/etcd#20221).
    fn caught_up(&self, revision: i64) -> bool {
        self.synced && revision >= self.start_rev - 1
    }

    /// Whether the watcher receives `event` (its keys, not filtered out), whatever its
    /// revision.
    fn accepts(&self, event: &SharedEvent) -> bool {
        let put = event.is_put();
        self.range.contains(event.key()) && !(put && self.no_put || !put && self.no_delete)
    }

    /// A response of this watcher carrying `events`, with `revision` in its header.
    fn response(&self, id: i64, events: EventRun, revision: i64) -> Outgoing {
        Outgoing {
            response: WatchResponse {
                header: header(revision),
                watch_id: id,
                ..Default::default()
            },
            events,
            prev_kv: self.prev_kv,
            fragment: self.fragment,
            reply: false,
        }
    }
}

#[derive(Debug, Default)]
struct Stream {
    watchers: BTreeMap<i64, Watcher>,
    next_id: i64,
    queue: VecDeque<Outgoing>,
    /// Control responses in `queue`.
    replies: usize,
    unsynced: usize,
}

/// What one resync round reads: the span of revisions and the watchers it is for.
#[derive(Debug, Clone, PartialEq)]
pub struct ResyncPlan {
    /// The first revision to read.
    pub from: i64,
    /// The last revision to read (the core's revision when planned).
    pub to: i64,
    /// The distinct ranges of the chosen watchers (a key is wanted if one holds it).
    pub ranges: Vec<WatchRange>,
    /// Whether a chosen watcher wants `prev_kv`.
    pub prev_kv: bool,
    members: Vec<(WatcherRef, u64)>,
}

impl ResyncPlan {
    /// Whether the read should return events of `key`.
    pub fn wants(&self, key: &[u8]) -> bool {
        self.ranges.iter().any(|r| r.contains(key))
    }
}

/// What a resync read produced.
#[derive(Debug)]
pub enum ResyncRead {
    /// The events of `plan.from..next` on the plan's ranges.
    Events {
        /// The events, in revision order.
        events: Vec<SharedEvent>,
        /// The first revision not read.
        next: i64,
    },
    /// `plan.from` was compacted before the read; the store's compaction revision.
    Compacted(i64),
}

/// Every watcher of the member (see the module docs).
#[derive(Debug)]
pub struct WatchCore {
    revision: i64,
    capacity: usize,
    streams: HashMap<u64, Stream>,
    next_stream: u64,
    next_uid: u64,
    synced: WatcherGroups,
    unsynced: BTreeSet<WatcherRef>,
    resync_cursor: Option<WatcherRef>,
    progress_waiting: BTreeSet<u64>,
    woken: BTreeSet<u64>,
    resync_wanted: bool,
    watchers: usize,
    /// Watchers that asked for `prev_kv`.
    prev_kv_watchers: usize,
    pending_events: usize,
}

impl WatchCore {
    /// A core whose store is at `revision`, with `capacity` event responses per stream queue.
    pub fn new(revision: i64, capacity: usize) -> WatchCore {
        WatchCore {
            revision,
            capacity: capacity.max(1),
            streams: HashMap::new(),
            next_stream: 1,
            next_uid: 1,
            synced: WatcherGroups::default(),
            unsynced: BTreeSet::new(),
            resync_cursor: None,
            progress_waiting: BTreeSet::new(),
            woken: BTreeSet::new(),
            resync_wanted: false,
            watchers: 0,
            prev_kv_watchers: 0,
            pending_events: 0,
        }
    }

    /// The last revision handed to [`notify`](WatchCore::notify).
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// The counts behind the watch metrics.
    pub fn stats(&self) -> Stats {
        Stats {
            streams: self.streams.len(),
            watchers: self.watchers,
            prev_kv_watchers: self.prev_kv_watchers,
            unsynced: self.unsynced.len(),
            pending_events: self.pending_events,
            queued: self.streams.values().map(|s| s.queue.len()).sum(),
            held_back: self
                .streams
                .values()
                .filter(|s| s.replies >= CTRL_QUEUE_CAPACITY)
                .count(),
        }
    }

    /// Opens a stream; returns its id.
    pub fn open_stream(&mut self) -> u64 {
        let id = self.next_stream;
        self.next_stream += 1;
        self.streams.insert(id, Stream::default());
        id
    }

    /// Closes a stream and drops its watchers and queued responses.
    pub fn close_stream(&mut self, stream: u64) {
        let Some(s) = self.streams.remove(&stream) else {
            return;
        };
        for (id, w) in &s.watchers {
            self.forget(WatcherRef { stream, id: *id }, w);
        }
        self.pending_events -= s.queue.iter().map(event_count).sum::<usize>();
        self.progress_waiting.remove(&stream);
        self.woken.remove(&stream);
    }

    /// Streams with new responses since the last call.
    pub fn take_woken(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.woken).into_iter().collect()
    }

    /// Whether a resync round may have work since the last call.
    pub fn take_resync_wanted(&mut self) -> bool {
        std::mem::take(&mut self.resync_wanted)
    }

    /// Whether the stream's next request may be handled: fewer than [`CTRL_QUEUE_CAPACITY`]
    /// control responses wait in its queue (etcd's `recvLoop` blocks on a full `ctrlStream`).
    pub fn accepts_requests(&self, stream: u64) -> bool {
        self.streams
            .get(&stream)
            .is_none_or(|s| s.replies < CTRL_QUEUE_CAPACITY)
    }

    /// Takes the next response of a stream.
    pub fn pop(&mut self, stream: u64) -> Option<Outgoing> {
        let s = self.streams.get_mut(&stream)?;
        let out = s.queue.pop_front()?;
        s.replies -= usize::from(out.reply);
        self.pending_events -= event_count(&out);
        if s.unsynced > 0 && s.queue.len() < self.capacity {
            self.resync_wanted = true;
        }
        Some(out)
    }

    /// Handles a create request (etcd's `recvLoop` and `watchStream.Watch`); the reply is
    /// queued. `compact_rev` is the store's compaction revision.
    pub fn create(&mut self, stream: u64, req: &WatchCreateRequest, compact_rev: i64) {
        let revision = self.revision;
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        let refuse = |reason: &str| WatchResponse {
            header: header(revision),
            watch_id: ALL_WATCHERS,
            created: true,
            canceled: true,
            cancel_reason: reason.to_owned(),
            ..Default::default()
        };
        if req.start_revision < 0 {
            self.push_control(stream, refuse(COMPACTED));
            return;
        }
        let key = if req.key.is_empty() {
            vec![0]
        } else {
            req.key.clone()
        };
        let range = match WatchRange::new(key, req.range_end.clone()) {
            Ok(range) => range,
            Err(e @ EmptyRange) => {
                self.push_control(stream, refuse(&e.to_string()));
                return;
            }
        };
        let id = if req.watch_id == 0 {
            while s.watchers.contains_key(&s.next_id) {
                s.next_id += 1;
            }
            s.next_id += 1;
            s.next_id - 1
        } else if s.watchers.contains_key(&req.watch_id) {
            self.push_control(stream, refuse(DUPLICATE_ID));
            return;
        } else {
            req.watch_id
        };
        let start = req.start_revision;
        let synced = start == 0 || start > revision;
        let filters = |f: FilterType| req.filters.contains(&(f as i32));
        let w = Watcher {
            uid: self.next_uid,
            range,
            start_rev: start,
            next_rev: if synced {
                start.max(revision + 1)
            } else {
                start
            },
            no_put: filters(FilterType::Noput),
            no_delete: filters(FilterType::Nodelete),
            prev_kv: req.prev_kv,
            fragment: req.fragment,
            progress_notify: req.progress_notify,
            synced,
            quiet: true,
        };
        self.next_uid += 1;
        let r = WatcherRef { stream, id };
        if synced {
            self.synced.add(&w.range, r);
        } else {
            self.unsynced.insert(r);
            s.unsynced += 1;
            self.resync_wanted = true;
        }
        self.prev_kv_watchers += usize::from(w.prev_kv);
        s.watchers.insert(id, w);
        self.watchers += 1;
        self.push_control(
            stream,
            WatchResponse {
                header: header(revision),
                watch_id: id,
                created: true,
                ..Default::default()
            },
        );
        if !synced && start < compact_rev {
            self.compacted(r, compact_rev);
        }
    }

    /// Handles a cancel request: the watcher is removed and `canceled` queued; an unknown id
    /// is ignored, as etcd does.
    pub fn cancel(&mut self, stream: u64, id: i64) {
        let Some(w) = self
            .streams
            .get_mut(&stream)
            .and_then(|s| s.watchers.remove(&id))
        else {
            return;
        };
        self.forget(WatcherRef { stream, id }, &w);
        self.push_control(
            stream,
            WatchResponse {
                header: header(self.revision),
                watch_id: id,
                canceled: true,
                ..Default::default()
            },
        );
        self.answer_progress_requests();
    }

    /// Handles a progress request: answered now if every watcher of the stream is caught up,
    /// else as soon as they are. A stream without watchers gets no answer (as in etcd).
    pub fn request_progress(&mut self, stream: u64) {
        if !self.streams.contains_key(&stream) {
            return;
        }
        self.progress_waiting.insert(stream);
        self.answer_progress_requests();
    }

    /// The periodic progress notification of a stream (etcd's progress ticker): each
    /// `progress_notify` watcher that got no event since the last tick and is caught up gets
    /// an empty response at the core's revision.
    pub fn progress_tick(&mut self, stream: u64) {
        let revision = self.revision;
        let capacity = self.capacity;
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        let mut due = Vec::new();
        for (id, w) in s.watchers.iter_mut() {
            if !w.progress_notify {
                continue;
            }
            if w.quiet && w.caught_up(revision) {
                due.push(*id);
            }
            w.quiet = true;
        }
        for id in due {
            if s.queue.len() >= capacity {
                break;
            }
            s.queue.push_back(Outgoing::control(
                WatchResponse {
                    header: header(revision),
                    watch_id: id,
                    ..Default::default()
                },
                false,
            ));
            self.woken.insert(stream);
        }
    }

    /// Takes the events of one committed batch (ascending revisions) and the store revision
    /// after it. Never waits: a watcher whose stream is full becomes unsynced.
    pub fn notify(&mut self, events: Vec<Event>, revision: i64) {
        let base = self.revision + 1;
        if !events.is_empty() && !self.synced.is_empty() {
            let events: Vec<SharedEvent> = events.into_iter().map(SharedEvent::new).collect();
            // One flat list of (watcher, event) pairs, grouped by watcher with a stable sort:
            // one allocation per batch however many watchers match, events kept in order.
            let mut matched: Vec<(WatcherRef, usize)> = Vec::new();
            for (i, e) in events.iter().enumerate() {
                self.synced
                    .for_each_match(e.key(), |r| matched.push((r, i)));
            }
            matched.sort_by_key(|(r, _)| *r);
            let mut idx = Vec::new();
            for group in matched.chunk_by(|a, b| a.0 == b.0) {
                idx.clear();
                idx.extend(group.iter().map(|(_, i)| *i));
                self.deliver_live(group[0].0, &events, &idx, base, revision);
            }
        }
        self.revision = self.revision.max(revision);
        self.answer_progress_requests();
    }

    /// The store was replaced by a snapshot at `revision` (a follower far behind its leader):
    /// every synced watcher catches up from the new backend, from the revision after the last
    /// one it was handed (or is cancelled with the compaction revision if that is gone).
    pub fn restore(&mut self, revision: i64) {
        let next = self.revision + 1;
        for (&stream, s) in self.streams.iter_mut() {
            for (&id, w) in s.watchers.iter_mut().filter(|(_, w)| w.synced) {
                let r = WatcherRef { stream, id };
                self.synced.remove(&w.range, r);
                w.synced = false;
                w.next_rev = w.next_rev.max(next);
                s.unsynced += 1;
                self.unsynced.insert(r);
            }
        }
        self.revision = self.revision.max(revision);
        self.resync_wanted = true;
    }

    fn deliver_live(
        &mut self,
        r: WatcherRef,
        events: &[SharedEvent],
        idx: &[usize],
        base: i64,
        revision: i64,
    ) {
        let capacity = self.capacity;
        let Some(s) = self.streams.get_mut(&r.stream) else {
            return;
        };
        let Some(w) = s.watchers.get_mut(&r.id) else {
            return;
        };
        let floor = w.next_rev.max(base);
        let evs: Vec<SharedEvent> = idx
            .iter()
            .map(|&i| &events[i])
            .filter(|e| e.revision() >= floor && w.accepts(e))
            .cloned()
            .collect();
        if evs.is_empty() {
            return;
        }
        let lacking = w.prev_kv && evs.iter().any(SharedEvent::lacks_prev);
        if s.queue.len() < capacity && !lacking {
            w.quiet = false;
            self.pending_events += evs.len();
            s.queue.push_back(w.response(r.id, evs.into(), revision));
            self.woken.insert(r.stream);
        } else {
            // The stream cannot keep up, or the events lack the `prev_kv` the watcher wants
            // (applied before it asked): catch up from the backend later, keeping nothing.
            self.synced.remove(&w.range, r);
            w.synced = false;
            w.next_rev = floor;
            s.unsynced += 1;
            self.unsynced.insert(r);
            self.resync_wanted = true;
        }
    }

    /// Picks up to `max_watchers` unsynced watchers whose streams have room, and the span of
    /// revisions to read for them. Watchers below `compact_rev` are answered with
    /// `compact_revision` and removed; watchers with nothing to read become synced.
    pub fn plan_resync(&mut self, max_watchers: usize, compact_rev: i64) -> Option<ResyncPlan> {
        let cursor = self.resync_cursor;
        // Round-robin from the watcher after the last one served.
        let order = match cursor {
            Some(c) => self.unsynced.range((Bound::Excluded(c), Bound::Unbounded)),
            None => self.unsynced.range::<WatcherRef, _>(..),
        }
        .chain(cursor.into_iter().flat_map(|c| self.unsynced.range(..=c)));
        let mut members = Vec::new();
        let (mut compacted, mut caught_up) = (Vec::new(), Vec::new());
        let mut ranges = BTreeSet::new();
        let mut prev_kv = false;
        let mut from = i64::MAX;
        for &r in order {
            if members.len() >= max_watchers {
                break;
            }
            let Some(s) = self.streams.get(&r.stream) else {
                continue;
            };
            if s.queue.len() >= self.capacity {
                continue;
            }
            let Some(w) = s.watchers.get(&r.id) else {
                continue;
            };
            if w.next_rev < compact_rev {
                compacted.push(r);
            } else if w.next_rev > self.revision {
                caught_up.push(r);
            } else {
                from = from.min(w.next_rev);
                prev_kv |= w.prev_kv;
                if !ranges.contains(&w.range) {
                    ranges.insert(w.range.clone());
                }
                members.push((r, w.uid));
            }
        }
        for r in compacted {
            self.compacted(r, compact_rev);
        }
        for r in caught_up {
            self.make_synced(r);
        }
        if let Some(&(last, _)) = members.last() {
            self.resync_cursor = Some(last);
        }
        self.answer_progress_requests();
        if members.is_empty() {
            return None;
        }
        Some(ResyncPlan {
            from,
            to: self.revision,
            ranges: ranges.into_iter().collect(),
            prev_kv,
            members,
        })
    }

    /// Delivers what a resync round read. Returns whether any watcher moved forward.
    pub fn finish_resync(&mut self, plan: ResyncPlan, read: ResyncRead) -> bool {
        let mut progressed = false;
        match read {
            ResyncRead::Compacted(compact_rev) => {
                for (r, uid) in plan.members {
                    if self
                        .unsynced_watcher(r, uid)
                        .is_some_and(|w| w.next_rev < compact_rev)
                    {
                        self.compacted(r, compact_rev);
                        progressed = true;
                    }
                }
            }
            ResyncRead::Events { events, next } => {
                // Watchers with the same keys and filters share one selection of the read.
                let mut selections: HashMap<(usize, bool, bool), Selection> = HashMap::new();
                for (r, uid) in plan.members {
                    let Some(w) = self.unsynced_watcher(r, uid) else {
                        continue;
                    };
                    let Ok(range) = plan.ranges.binary_search(&w.range) else {
                        continue;
                    };
                    let selection = selections
                        .entry((range, w.no_put, w.no_delete))
                        .or_insert_with(|| {
                            Selection::new(events.iter().filter(|e| w.accepts(e)).cloned())
                        });
                    progressed |= self.deliver_history(r, selection, next);
                }
            }
        }
        self.answer_progress_requests();
        progressed
    }

    /// Queues a catch-up watcher's events of `selection` (its share of the read of revisions
    /// up to `next - 1`), at most [`MAX_REVISIONS_PER_RESPONSE`] revisions per response, as far
    /// as its stream has room. Returns whether the watcher moved forward.
    fn deliver_history(&mut self, r: WatcherRef, selection: &Selection, next: i64) -> bool {
        let capacity = self.capacity;
        let revision = self.revision;
        let Some(s) = self.streams.get_mut(&r.stream) else {
            return false;
        };
        let Some(w) = s.watchers.get_mut(&r.id) else {
            return false;
        };
        let floor = w.next_rev;
        if floor >= next {
            return false;
        }
        let mut reached = next;
        for (run, after) in selection.runs(floor, next, MAX_REVISIONS_PER_RESPONSE) {
            if s.queue.len() >= capacity {
                reached = run[0].revision();
                break;
            }
            self.pending_events += run.len();
            s.queue.push_back(w.response(r.id, run, after - 1));
            self.woken.insert(r.stream);
            w.quiet = false;
        }
        if reached <= floor {
            return false;
        }
        w.next_rev = reached;
        if reached > revision {
            self.make_synced(r);
        }
        true
    }

    fn unsynced_watcher(&self, r: WatcherRef, uid: u64) -> Option<&Watcher> {
        let w = self.streams.get(&r.stream)?.watchers.get(&r.id)?;
        (w.uid == uid && !w.synced).then_some(w)
    }

    fn make_synced(&mut self, r: WatcherRef) {
        let Some(s) = self.streams.get_mut(&r.stream) else {
            return;
        };
        let Some(w) = s.watchers.get_mut(&r.id) else {
            return;
        };
        if w.synced {
            return;
        }
        w.synced = true;
        s.unsynced -= 1;
        self.unsynced.remove(&r);
        self.synced.add(&w.range, r);
    }

    /// Ends a watcher whose next revision was compacted (etcd: `compact_revision` set,
    /// `canceled`, header revision 0).
    fn compacted(&mut self, r: WatcherRef, compact_rev: i64) {
        let Some(w) = self
            .streams
            .get_mut(&r.stream)
            .and_then(|s| s.watchers.remove(&r.id))
        else {
            return;
        };
        self.forget(r, &w);
        self.push_control(
            r.stream,
            WatchResponse {
                header: header(0),
                watch_id: r.id,
                canceled: true,
                compact_revision: compact_rev,
                ..Default::default()
            },
        );
    }

    /// Drops a removed watcher from the groups and counts.
    fn forget(&mut self, r: WatcherRef, w: &Watcher) {
        if w.synced {
            self.synced.remove(&w.range, r);
        } else {
            self.unsynced.remove(&r);
            if let Some(s) = self.streams.get_mut(&r.stream) {
                s.unsynced -= 1;
            }
        }
        self.watchers -= 1;
        self.prev_kv_watchers -= usize::from(w.prev_kv);
    }

    fn push_control(&mut self, stream: u64, response: WatchResponse) {
        if let Some(s) = self.streams.get_mut(&stream) {
            s.queue.push_back(Outgoing::control(response, true));
            s.replies += 1;
            self.woken.insert(stream);
        }
    }

    /// Answers every waiting progress request whose stream is caught up.
    fn answer_progress_requests(&mut self) {
        if self.progress_waiting.is_empty() {
            return;
        }
        let revision = self.revision;
        let mut answered = Vec::new();
        for &stream in &self.progress_waiting {
            let Some(s) = self.streams.get(&stream) else {
                answered.push((stream, false));
                continue;
            };
            if s.watchers.is_empty() {
                answered.push((stream, false));
            } else if s.watchers.values().all(|w| w.caught_up(revision)) {
                answered.push((stream, true));
            }
        }
        for (stream, send) in answered {
            self.progress_waiting.remove(&stream);
            if send {
                self.push_control(
                    stream,
                    WatchResponse {
                        header: header(revision),
                        watch_id: ALL_WATCHERS,
                        ..Default::default()
                    },
                );
            }
        }
    }
}

fn header(revision: i64) -> Option<ResponseHeader> {
    Some(ResponseHeader {
        revision,
        ..Default::default()
    })
}

fn event_count(o: &Outgoing) -> usize {
    o.events.len()
}
