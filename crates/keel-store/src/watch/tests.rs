//! Unit tests of the watch core, without tokio or a backend: the history a resync round would
//! read is served from the test's own log of committed events.

use keel_proto::etcdserverpb::{WatchCreateRequest, WatchResponse, watch_create_request};
use keel_proto::mvccpb::event::EventType;
use keel_proto::mvccpb::{Event, KeyValue};

use super::core::{
    ALL_WATCHERS, CTRL_QUEUE_CAPACITY, MAX_REVISIONS_PER_RESPONSE, ResyncRead, WatchCore,
};
use super::event::SharedEvent;

/// The committed history of a test, as the backend would return it.
#[derive(Default)]
struct Log {
    events: Vec<Event>,
    revision: i64,
    created: std::collections::HashMap<Vec<u8>, (i64, i64, Vec<u8>)>,
}

impl Log {
    fn new() -> Log {
        Log {
            revision: 1,
            ..Default::default()
        }
    }

    /// One revision with a put per key; returns its events.
    fn put(&mut self, keys: &[&str]) -> Vec<Event> {
        self.revision += 1;
        let rev = self.revision;
        let mut out = Vec::new();
        for key in keys {
            let key = key.as_bytes().to_vec();
            let prev = self.created.get(&key).map(|(c, v, value)| KeyValue {
                key: key.clone(),
                create_revision: *c,
                mod_revision: rev - 1,
                version: *v,
                value: value.clone(),
                lease: 0,
            });
            let (create, version) = prev
                .as_ref()
                .map_or((rev, 1), |p| (p.create_revision, p.version + 1));
            let value = format!("v{rev}").into_bytes();
            self.created
                .insert(key.clone(), (create, version, value.clone()));
            out.push(Event {
                r#type: EventType::Put as i32,
                kv: Some(KeyValue {
                    key,
                    create_revision: create,
                    mod_revision: rev,
                    version,
                    value,
                    lease: 0,
                }),
                prev_kv: prev,
            });
        }
        self.events.extend(out.iter().cloned());
        out
    }

    /// One revision deleting a key that exists.
    fn delete(&mut self, key: &str) -> Vec<Event> {
        self.revision += 1;
        let rev = self.revision;
        let key = key.as_bytes().to_vec();
        let (c, v, value) = self.created.remove(&key).expect("key exists");
        let e = Event {
            r#type: EventType::Delete as i32,
            kv: Some(KeyValue {
                key: key.clone(),
                mod_revision: rev,
                ..Default::default()
            }),
            prev_kv: Some(KeyValue {
                key,
                create_revision: c,
                mod_revision: rev - 1,
                version: v,
                value,
                lease: 0,
            }),
        };
        self.events.push(e.clone());
        vec![e]
    }

    /// Runs resync rounds until nothing moves, reading at most `max_revisions` per round.
    fn resync(&self, core: &mut WatchCore, max_revisions: i64) {
        while let Some(plan) = core.plan_resync(512, 0) {
            let next = (plan.from + max_revisions).min(plan.to + 1);
            let events = self
                .events
                .iter()
                .filter(|e| {
                    let kv = e.kv.as_ref().unwrap();
                    kv.mod_revision >= plan.from && kv.mod_revision < next && plan.wants(&kv.key)
                })
                .cloned()
                .map(SharedEvent::new)
                .collect();
            if !core.finish_resync(plan, ResyncRead::Events { events, next }) {
                break;
            }
        }
    }
}

fn create(key: &str, end: &str, start: i64) -> WatchCreateRequest {
    WatchCreateRequest {
        key: key.as_bytes().to_vec(),
        range_end: end.as_bytes().to_vec(),
        start_revision: start,
        ..Default::default()
    }
}

fn drain(core: &mut WatchCore, stream: u64) -> Vec<WatchResponse> {
    std::iter::from_fn(|| core.pop(stream))
        .map(|o| o.to_response())
        .collect()
}

fn revs(resps: &[WatchResponse], id: i64) -> Vec<i64> {
    resps
        .iter()
        .filter(|r| r.watch_id == id)
        .flat_map(|r| r.events.iter().map(|e| e.kv.as_ref().unwrap().mod_revision))
        .collect()
}

#[test]
fn live_events_follow_created_in_request_order() {
    let mut log = Log::new();
    let mut core = WatchCore::new(1, 128);
    let s = core.open_stream();
    core.create(s, &create("a", "b", 0), -1);
    core.create(s, &create("", "\0", 0), -1);
    core.create(
        s,
        &WatchCreateRequest {
            watch_id: 7,
            ..create("a1", "", 0)
        },
        -1,
    );
    let ev = log.put(&["a1", "c"]);
    core.notify(ev, log.revision);
    let out = drain(&mut core, s);
    let created: Vec<(i64, bool)> = out.iter().map(|r| (r.watch_id, r.created)).collect();
    assert_eq!(&created[..3], &[(0, true), (1, true), (7, true)]);
    assert!(out[..3].iter().all(|r| r.header.unwrap().revision == 1));
    assert_eq!(revs(&out, 0), vec![2]);
    assert_eq!(revs(&out, 1), vec![2, 2]);
    assert_eq!(revs(&out, 7), vec![2]);
    assert!(out[3..].iter().all(|r| r.header.unwrap().revision == 2));
}

#[test]
fn refused_creates_are_created_and_canceled_with_etcd_reasons() {
    let mut core = WatchCore::new(5, 128);
    let s = core.open_stream();
    core.create(
        s,
        &WatchCreateRequest {
            watch_id: 3,
            ..create("a", "", 0)
        },
        -1,
    );
    core.create(
        s,
        &WatchCreateRequest {
            watch_id: 3,
            ..create("b", "", 0)
        },
        -1,
    );
    core.create(s, &create("b", "a", 0), -1);
    core.create(s, &create("a", "", -1), -1);
    let out = drain(&mut core, s);
    let refused: Vec<(i64, bool, bool, &str)> = out[1..]
        .iter()
        .map(|r| (r.watch_id, r.created, r.canceled, r.cancel_reason.as_str()))
        .collect();
    assert_eq!(
        refused,
        vec![
            (
                ALL_WATCHERS,
                true,
                true,
                "mvcc: duplicate watch ID provided on the WatchStream"
            ),
            (ALL_WATCHERS, true, true, "mvcc: watcher range is empty"),
            (
                ALL_WATCHERS,
                true,
                true,
                "etcdserver: mvcc: required revision has been compacted"
            ),
        ]
    );
    // Auto ids skip ids the client chose.
    core.create(s, &create("a", "", 0), -1);
    core.create(s, &create("a", "", 0), -1);
    core.create(s, &create("a", "", 0), -1);
    core.create(s, &create("a", "", 0), -1);
    let ids: Vec<i64> = drain(&mut core, s).iter().map(|r| r.watch_id).collect();
    assert_eq!(ids, vec![0, 1, 2, 4]);
}

#[test]
fn filters_and_prev_kv_shape_events() {
    let mut log = Log::new();
    let mut core = WatchCore::new(1, 128);
    let s = core.open_stream();
    let noput = watch_create_request::FilterType::Noput as i32;
    let nodelete = watch_create_request::FilterType::Nodelete as i32;
    core.create(
        s,
        &WatchCreateRequest {
            prev_kv: true,
            ..create("k", "", 0)
        },
        -1,
    );
    core.create(
        s,
        &WatchCreateRequest {
            filters: vec![noput],
            ..create("k", "", 0)
        },
        -1,
    );
    core.create(
        s,
        &WatchCreateRequest {
            filters: vec![nodelete],
            ..create("k", "", 0)
        },
        -1,
    );
    let ev = log.put(&["k"]);
    core.notify(ev, log.revision);
    let ev = log.put(&["k"]);
    core.notify(ev, log.revision);
    let ev = log.delete("k");
    core.notify(ev, log.revision);
    let out: Vec<_> = drain(&mut core, s)
        .into_iter()
        .filter(|r| !r.created)
        .collect();
    assert_eq!(revs(&out, 0), vec![2, 3, 4]);
    assert_eq!(revs(&out, 1), vec![4]);
    assert_eq!(revs(&out, 2), vec![2, 3]);
    let prevs: Vec<bool> = out
        .iter()
        .filter(|r| r.watch_id == 0)
        .map(|r| r.events[0].prev_kv.is_some())
        .collect();
    assert_eq!(
        prevs,
        vec![false, true, true],
        "prev_kv on updates and deletes"
    );
    assert!(
        out.iter()
            .filter(|r| r.watch_id != 0)
            .all(|r| r.events[0].prev_kv.is_none())
    );
}

#[test]
fn history_is_replayed_then_live_without_gap_or_duplicate() {
    let mut log = Log::new();
    let mut core = WatchCore::new(1, 128);
    for _ in 0..5 {
        let ev = log.put(&["h"]);
        core.notify(ev, log.revision);
    }
    let s = core.open_stream();
    core.create(s, &create("h", "", 3), -1);
    assert_eq!(core.stats().unsynced, 1);
    let ev = log.put(&["h"]); // 7, while unsynced
    core.notify(ev, log.revision);
    log.resync(&mut core, 2);
    assert_eq!(core.stats().unsynced, 0);
    let ev = log.put(&["h"]); // 8, live
    core.notify(ev, log.revision);
    assert_eq!(revs(&drain(&mut core, s), 0), vec![3, 4, 5, 6, 7, 8]);
}

#[test]
fn catch_up_is_sent_in_responses_of_at_most_a_thousand_revisions() {
    let mut log = Log::new();
    let mut core = WatchCore::new(1, 2);
    for _ in 0..2500 {
        let ev = log.put(&["k", "l"]);
        core.notify(ev, log.revision);
    }
    let s = core.open_stream();
    core.create(s, &create("k", "m", 2), -1);
    // The queue holds the created reply and one response: the watcher stays unsynced.
    log.resync(&mut core, 5000);
    assert_eq!(core.stats().unsynced, 1);
    let mut got = Vec::new();
    for _ in 0..10 {
        for r in drain(&mut core, s).into_iter().filter(|r| !r.created) {
            let first = r.events[0].kv.as_ref().unwrap().mod_revision;
            let last = r.events.last().unwrap().kv.as_ref().unwrap().mod_revision;
            assert!(last - first < MAX_REVISIONS_PER_RESPONSE as i64);
            assert_eq!(
                r.header.unwrap().revision,
                last,
                "the header is the last revision sent"
            );
            assert_eq!(r.events.len() % 2, 0, "a revision is never split");
            got.extend(r.events.iter().map(|e| e.kv.as_ref().unwrap().mod_revision));
        }
        log.resync(&mut core, 5000);
    }
    assert_eq!(core.stats().unsynced, 0);
    let want: Vec<i64> = (2..=2501).flat_map(|r| [r, r]).collect();
    assert_eq!(got, want);
}

#[test]
fn compacted_start_is_answered_with_compact_revision() {
    let mut core = WatchCore::new(10, 128);
    let s = core.open_stream();
    core.create(s, &create("a", "", 3), 5);
    let out = drain(&mut core, s);
    assert!(out[0].created && !out[0].canceled);
    assert_eq!(out[1].watch_id, 0);
    assert!(out[1].canceled);
    assert_eq!(out[1].compact_revision, 5);
    assert_eq!(out[1].header.unwrap().revision, 0);
    assert_eq!(core.stats().watchers, 0);
    // Starting exactly at the compaction revision is allowed.
    core.create(s, &create("a", "", 5), 5);
    assert_eq!(core.stats().watchers, 1);
}

#[test]
fn slow_stream_falls_back_to_catch_up_without_delaying_others() {
    let mut log = Log::new();
    let mut core = WatchCore::new(1, 2);
    let slow = core.open_stream();
    let fast = core.open_stream();
    core.create(slow, &create("p", "q", 0), -1);
    core.create(fast, &create("p", "q", 0), -1);
    drain(&mut core, slow);
    let mut fast_out = drain(&mut core, fast);
    for _ in 0..10 {
        let ev = log.put(&["p1", "p2"]);
        core.notify(ev, log.revision);
        fast_out.extend(drain(&mut core, fast));
    }
    assert_eq!(core.stats().unsynced, 1, "the slow watcher is catching up");
    assert!(core.stats().pending_events <= 4, "its queue stays bounded");
    assert_eq!(revs(&fast_out, 0).len(), 20);
    // The slow consumer reads; catch-up delivers the rest in order, exactly once.
    let mut slow_out = Vec::new();
    for _ in 0..20 {
        slow_out.extend(drain(&mut core, slow));
        log.resync(&mut core, 3);
    }
    slow_out.extend(drain(&mut core, slow));
    assert_eq!(core.stats().unsynced, 0);
    let want: Vec<i64> = (2..=11).flat_map(|r| [r, r]).collect();
    assert_eq!(revs(&slow_out, 0), want);
}

#[test]
fn progress_request_waits_until_every_watcher_is_caught_up() {
    let mut log = Log::new();
    let mut core = WatchCore::new(1, 128);
    for _ in 0..3 {
        let ev = log.put(&["x"]);
        core.notify(ev, log.revision);
    }
    let s = core.open_stream();
    core.request_progress(s);
    assert!(drain(&mut core, s).is_empty(), "no watchers: no answer");
    core.create(s, &create("x", "", 0), -1);
    core.create(s, &create("x", "", 2), -1);
    core.request_progress(s);
    let out = drain(&mut core, s);
    assert!(out.iter().all(|r| r.watch_id != ALL_WATCHERS));
    log.resync(&mut core, 100);
    let out = drain(&mut core, s);
    let last = out.last().unwrap();
    assert_eq!(last.watch_id, ALL_WATCHERS);
    assert_eq!(last.header.unwrap().revision, 4);
    assert!(last.events.is_empty() && !last.created && !last.canceled);
    assert_eq!(revs(&out, 1), vec![2, 3, 4]);
    core.request_progress(s);
    let out = drain(&mut core, s);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].watch_id, ALL_WATCHERS);
}

#[test]
fn future_start_revision_waits_and_holds_progress() {
    let mut log = Log::new();
    let mut core = WatchCore::new(1, 128);
    let s = core.open_stream();
    core.create(s, &create("f", "", 4), -1);
    core.request_progress(s);
    for _ in 0..4 {
        let ev = log.put(&["f"]);
        core.notify(ev, log.revision);
    }
    let out = drain(&mut core, s);
    assert_eq!(revs(&out, 0), vec![4, 5]);
    let progress: Vec<i64> = out
        .iter()
        .filter(|r| r.watch_id == ALL_WATCHERS)
        .map(|r| r.header.unwrap().revision)
        .collect();
    assert_eq!(
        progress,
        vec![3],
        "answered once the revision before the start revision is reached"
    );
    // A watcher resumed at the next revision is caught up; one further ahead is not.
    core.create(s, &create("g", "", 6), -1);
    core.request_progress(s);
    let out = drain(&mut core, s);
    assert_eq!(out.last().unwrap().watch_id, ALL_WATCHERS);
    core.create(s, &create("g", "", 8), -1);
    core.request_progress(s);
    assert!(
        drain(&mut core, s)
            .iter()
            .all(|r| r.watch_id != ALL_WATCHERS)
    );
    let ev = log.put(&["x"]);
    core.notify(ev, log.revision);
    assert!(drain(&mut core, s).is_empty(), "revision 6 is two below 8");
    let ev = log.put(&["x"]);
    core.notify(ev, log.revision);
    let out = drain(&mut core, s);
    assert_eq!(out.last().unwrap().watch_id, ALL_WATCHERS);
    assert_eq!(out.last().unwrap().header.unwrap().revision, 7);
}

#[test]
fn periodic_progress_only_for_quiet_synced_watchers() {
    let mut log = Log::new();
    let mut core = WatchCore::new(1, 128);
    let s = core.open_stream();
    let notify = |key: &str| WatchCreateRequest {
        progress_notify: true,
        ..create(key, "", 0)
    };
    core.create(s, &notify("busy"), -1);
    core.create(s, &notify("idle"), -1);
    core.create(s, &create("plain", "", 0), -1);
    drain(&mut core, s);
    let ev = log.put(&["busy"]);
    core.notify(ev, log.revision);
    drain(&mut core, s);
    core.progress_tick(s);
    let out = drain(&mut core, s);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].watch_id, 1);
    assert_eq!(out[0].header.unwrap().revision, 2);
    core.progress_tick(s);
    let ids: Vec<i64> = drain(&mut core, s).iter().map(|r| r.watch_id).collect();
    assert_eq!(ids, vec![0, 1]);
}

#[test]
fn cancel_and_close_release_watchers() {
    let mut core = WatchCore::new(1, 128);
    let s = core.open_stream();
    core.create(s, &create("a", "", 0), -1);
    core.create(s, &create("b", "", 0), -1);
    core.cancel(s, 0);
    core.cancel(s, 42);
    let out = drain(&mut core, s);
    assert_eq!(out.len(), 3);
    assert!(out[2].canceled && out[2].watch_id == 0);
    assert_eq!(core.stats().watchers, 1);
    core.close_stream(s);
    assert_eq!(core.stats().watchers, 0);
    assert_eq!(core.stats().streams, 0);
}

#[test]
fn requests_wait_while_the_control_queue_is_full() {
    let mut core = WatchCore::new(1, 128);
    let s = core.open_stream();
    for _ in 0..CTRL_QUEUE_CAPACITY {
        assert!(core.accepts_requests(s));
        core.create(s, &create("a", "", 0), -1);
    }
    assert!(!core.accepts_requests(s), "etcd's ctrlStream is full");
    assert_eq!(core.stats().held_back, 1);
    // Events do not count against the control buffer, and the queue drains in order.
    let mut log = Log::new();
    core.notify(log.put(&["a"]), log.revision);
    assert!(!core.accepts_requests(s));
    assert!(core.pop(s).unwrap().response.created);
    assert!(core.accepts_requests(s));
    assert_eq!(core.stats().held_back, 0);
    assert_eq!(core.stats().queued, 2 * CTRL_QUEUE_CAPACITY - 1);
}

/// Per (stream, watch id): the (revision, key) of every event received.
type Received = std::collections::HashMap<(u64, i64), Vec<(i64, Vec<u8>)>>;

/// A tiny deterministic generator for the model test.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn random_histories_are_delivered_ordered_unique_and_complete() {
    for seed in 1..300u64 {
        let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut log = Log::new();
        let mut core = WatchCore::new(1, 1 + rng.next(4) as usize);
        let streams: Vec<u64> = (0..3).map(|_| core.open_stream()).collect();
        let keys = ["a", "b", "c", "d"];
        // (stream, watch id) -> (range, start revision)
        let mut watchers = Vec::new();
        let mut received = Received::default();
        let mut next_id = [0i64; 3];
        for _ in 0..300 {
            match rng.next(10) {
                0 => {
                    let si = rng.next(3) as usize;
                    let start = if rng.next(2) == 0 {
                        0
                    } else {
                        1 + rng.next(log.revision as u64 + 3) as i64
                    };
                    let (k, end) =
                        [("a", ""), ("a", "c"), ("b", "\0"), ("d", "")][rng.next(4) as usize];
                    core.create(streams[si], &create(k, end, start), -1);
                    let from = if start == 0 {
                        core.revision() + 1
                    } else {
                        start
                    };
                    watchers.push(((streams[si], next_id[si]), (k, end, from)));
                    next_id[si] += 1;
                }
                1..=5 => {
                    let n = 1 + rng.next(2) as usize;
                    let mut ks: Vec<&str> = (0..n).map(|_| keys[rng.next(4) as usize]).collect();
                    ks.dedup();
                    let ev = log.put(&ks);
                    core.notify(ev, log.revision);
                }
                6 => {
                    let k = keys[rng.next(4) as usize];
                    if log.created.contains_key(k.as_bytes()) {
                        let ev = log.delete(k);
                        core.notify(ev, log.revision);
                    }
                }
                7 => log.resync(&mut core, 1 + rng.next(3) as i64),
                _ => {
                    let s = streams[rng.next(3) as usize];
                    for _ in 0..rng.next(4) {
                        let Some(o) = core.pop(s) else { break };
                        for e in o.to_response().events {
                            let kv = e.kv.unwrap();
                            received
                                .entry((s, o.response.watch_id))
                                .or_default()
                                .push((kv.mod_revision, kv.key));
                        }
                    }
                }
            }
        }
        // Let everything drain.
        for _ in 0..1000 {
            log.resync(&mut core, 1000);
            let mut any = false;
            for &s in &streams {
                while let Some(o) = core.pop(s) {
                    any = true;
                    for e in o.to_response().events {
                        let kv = e.kv.unwrap();
                        received
                            .entry((s, o.response.watch_id))
                            .or_default()
                            .push((kv.mod_revision, kv.key));
                    }
                }
            }
            if !any && core.stats().unsynced == 0 {
                break;
            }
        }
        assert_eq!(core.stats().unsynced, 0, "seed {seed}");
        for ((s, id), (k, end, from)) in watchers {
            let range =
                super::range::WatchRange::new(k.as_bytes().to_vec(), end.as_bytes().to_vec())
                    .unwrap();
            let want: Vec<(i64, Vec<u8>)> = log
                .events
                .iter()
                .map(|e| e.kv.as_ref().unwrap())
                .filter(|kv| kv.mod_revision >= from && range.contains(&kv.key))
                .map(|kv| (kv.mod_revision, kv.key.clone()))
                .collect();
            let got = received.remove(&(s, id)).unwrap_or_default();
            assert_eq!(got, want, "seed {seed}: watcher {id} on stream {s}");
        }
    }
}

#[test]
fn a_restored_snapshot_makes_watchers_catch_up_from_the_backend() {
    let mut log = Log::new();
    let mut core = WatchCore::new(1, 128);
    let s = core.open_stream();
    core.create(s, &create("a", "b", 0), -1);
    let ev = log.put(&["a"]);
    core.notify(ev, log.revision);
    // Revisions 3..=5 arrive only inside a snapshot, never through notify.
    log.put(&["a"]);
    log.put(&["b"]);
    log.put(&["a"]);
    core.restore(log.revision);
    assert_eq!(core.stats().unsynced, 1);
    log.resync(&mut core, 100);
    let resps = drain(&mut core, s);
    let id = resps[0].watch_id;
    assert_eq!(revs(&resps, id), vec![2, 3, 5]);
    assert_eq!(
        core.stats().unsynced,
        0,
        "caught up watchers are synced again"
    );
    let ev = log.put(&["a"]);
    core.notify(ev, log.revision);
    assert_eq!(revs(&drain(&mut core, s), id), vec![6]);
}

#[test]
fn a_prev_kv_watcher_catches_up_when_live_events_left_out_the_old_value() {
    let mut log = Log::new();
    let mut core = WatchCore::new(1, 128);
    let s = core.open_stream();
    core.create(
        s,
        &WatchCreateRequest {
            prev_kv: true,
            ..create("a", "b", 0)
        },
        -1,
    );
    assert_eq!(core.stats().prev_kv_watchers, 1);
    let ev = log.put(&["a"]);
    core.notify(ev, log.revision);
    // Applied before the store knew a watcher wanted prev_kv: the old value is not there.
    let mut ev = log.put(&["a"]);
    ev[0].prev_kv = None;
    core.notify(ev, log.revision);
    assert_eq!(core.stats().unsynced, 1, "the watcher catches up instead");
    log.resync(&mut core, 100);
    let resps = drain(&mut core, s);
    let events: Vec<_> = resps.iter().flat_map(|r| r.events.iter()).collect();
    assert_eq!(events.len(), 2);
    assert_eq!(
        events[1].prev_kv.as_ref().map(|p| p.mod_revision),
        Some(2),
        "with the value it replaced, from the backend"
    );
    let id = resps[0].watch_id;
    core.cancel(s, id);
    assert_eq!(core.stats().prev_kv_watchers, 0);
}
