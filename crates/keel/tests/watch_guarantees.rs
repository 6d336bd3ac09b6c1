//! Watch guarantees checker, modelled on etcd's robustness watch validation
//! (`tests/robustness/validate/watch.go`), run over seeded random histories.
//!
//! One writer drives a random history: puts (some with short-TTL leases), single-key and range
//! deletes, txns, lease grants and revokes, compactions, and kill -9 + restart of the store
//! between writes. Every write's response is recorded, and a model replays them by the revision
//! in the response header, so the checker knows the true history. Revisions the writer did not
//! cause are lease expiries: each is resolved by a Range at that revision, diffed against the
//! model, and must delete exactly all keys of one lease.
//!
//! Meanwhile several Watch streams each multiplex several watchers (whole key space, prefix,
//! single key, from-key, NOPUT / NODELETE filters, prev_kv, from revision 1 or from now, one
//! cancelled by the client midway) and send progress requests. One stream is read slowly, so the
//! server must buffer or resync it from the backend. A watcher whose stream breaks (the store
//! restarted) resumes from the revision after the last one it saw; a watcher cancelled with
//! `compact_revision` resumes from that revision. At the end every watcher must have caught up
//! with the final revision, and every session of every watcher is checked:
//!
//! - created: each create is acknowledged, in request order, before any of its events;
//! - filter: every event is in the watcher's key range and not filtered out;
//! - ordered and unique: revisions never go back, no (revision, key) twice;
//! - atomic: a revision's events are never split over responses (fragment was not asked for);
//! - bookmarkable: after a progress notification at R, no event at or below R arrives, and R is
//!   not below the last event;
//! - reliable: the events received equal, field by field, the history's matching events between
//!   the session's start and the last revision it saw; gaps only where the server cancelled the
//!   watcher with a `compact_revision` above the next wanted revision, no higher than the latest
//!   compaction;
//! - prev_kv and create detection: the kv of each event (create_revision == mod_revision exactly
//!   for creates, version, lease) and its prev_kv equal the model's; prev_kv may be missing only
//!   where the previous revision was compacted, and is never sent unless asked;
//! - client cancel: a cancelled watcher gets `canceled` and no event after it;
//! - resumable: after the run, watches opened from random revisions not compacted yield exactly
//!   the history's events, and one from a compacted revision is cancelled with
//!   `compact_revision` equal to the latest compaction.
//!
//! The seed is printed on failure; replay with `KEEL_TEST_SEED`.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::lease_client::LeaseClient;
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::response_op::Response;
use keel_proto::etcdserverpb::watch_client::WatchClient;
use keel_proto::etcdserverpb::watch_request::RequestUnion;
use keel_proto::etcdserverpb::{
    CompactionRequest, Compare, DeleteRangeRequest, LeaseGrantRequest, LeaseRevokeRequest,
    PutRequest, RangeRequest, RequestOp, TxnRequest, WatchCancelRequest, WatchCreateRequest,
    WatchProgressRequest, WatchRequest, WatchResponse,
};
use keel_proto::mvccpb::KeyValue;
use keel_proto::mvccpb::event::EventType;
use keel_testkit::{Flavor, Rng, SeedReport, Server, ServerOpts, target_flavor};
use tokio::sync::{mpsc, watch};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// Hard limit on the whole randomized run (writes plus catching up), so a hang fails clearly.
const RUN_DEADLINE: Duration = Duration::from_secs(120);
/// Upper bound on waiting for watchers to catch up with the final revision.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often each stream asks for progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);
/// The NOPUT and NODELETE filter values of `WatchCreateRequest.filters`.
const NOPUT: i32 = 0;
const NODELETE: i32 = 1;

// ---------------------------------------------------------------------------------------------
// The true history.

/// One change of one revision.
#[derive(Clone, Debug, PartialEq)]
struct Change {
    delete: bool,
    /// The kv as a watch event carries it (a delete: key and mod_revision only).
    kv: KeyValue,
    /// The key's kv before this revision, if it existed.
    prev: Option<KeyValue>,
}

/// The model of the store, built from write responses.
#[derive(Default)]
struct History {
    /// Live keys at `rev`.
    state: BTreeMap<Vec<u8>, KeyValue>,
    /// The last revision accounted for.
    rev: i64,
    /// Changes by revision, in the order etcd emits them.
    changes: BTreeMap<i64, Vec<Change>>,
    /// The highest compaction revision requested so far.
    compacted: i64,
    /// Revisions resolved as lease expiries, for the summary.
    expiries: usize,
}

impl History {
    fn put(&mut self, rev: i64, key: &[u8], value: &[u8], lease: i64) -> Change {
        let prev = self.state.get(key).cloned();
        let kv = KeyValue {
            key: key.to_vec(),
            create_revision: prev.as_ref().map_or(rev, |p| p.create_revision),
            mod_revision: rev,
            version: prev.as_ref().map_or(1, |p| p.version + 1),
            value: value.to_vec(),
            lease,
        };
        self.state.insert(key.to_vec(), kv.clone());
        Change {
            delete: false,
            kv,
            prev,
        }
    }

    fn delete(&mut self, rev: i64, key: &[u8]) -> Change {
        let prev = self.state.remove(key);
        assert!(prev.is_some(), "model: deleting absent key {}", show(key));
        Change {
            delete: true,
            kv: KeyValue {
                key: key.to_vec(),
                mod_revision: rev,
                ..Default::default()
            },
            prev,
        }
    }

    fn keys_in(&self, key: &[u8], end: &[u8]) -> Vec<Vec<u8>> {
        self.state
            .keys()
            .filter(|k| in_range(k, key, end))
            .cloned()
            .collect()
    }

    fn keys_of_lease(&self, lease: i64) -> Vec<Vec<u8>> {
        self.state
            .values()
            .filter(|kv| kv.lease == lease)
            .map(|kv| kv.key.clone())
            .collect()
    }

    fn record(&mut self, rev: i64, changes: Vec<Change>) {
        assert_eq!(
            rev,
            self.rev + 1,
            "model: revision {rev} recorded after {}",
            self.rev
        );
        assert!(!changes.is_empty(), "model: revision {rev} without changes");
        self.changes.insert(rev, changes);
        self.rev = rev;
    }
}

/// Whether `k` is in `[key, end)` with etcd's conventions (empty end: the key alone; `\0`:
/// from key on).
fn in_range(k: &[u8], key: &[u8], end: &[u8]) -> bool {
    if end.is_empty() {
        k == key
    } else if end == [0] {
        k >= key
    } else {
        k >= key && k < end
    }
}

fn show(b: &[u8]) -> String {
    b.escape_ascii().to_string()
}

// ---------------------------------------------------------------------------------------------
// The writer.

const KEYS_A: usize = 10;
const KEYS_B: usize = 8;
/// Keys only ever put with a lease (and not touched by deletes or txns), so that leases keep
/// their keys until they expire.
const KEYS_C: usize = 30;

fn random_key(rng: &mut Rng) -> Vec<u8> {
    if rng.chance(3, 5) {
        format!("a/{}", rng.below(KEYS_A as u64)).into_bytes()
    } else {
        format!("b/{}", rng.below(KEYS_B as u64)).into_bytes()
    }
}

fn random_value(rng: &mut Rng, n: usize) -> Vec<u8> {
    // Some large values so the slow stream's buffers fill up.
    let len = if rng.chance(1, 8) {
        rng.range_i64(2000, 6000) as usize
    } else {
        rng.range_i64(1, 24) as usize
    };
    let mut v = format!("v{n}-").into_bytes();
    v.resize(len.max(v.len()), b'a' + (n % 26) as u8);
    v
}

/// Drives the random history and keeps the model in step with it.
struct Writer {
    kv: KvClient<Channel>,
    lease: LeaseClient<Channel>,
    rng: Rng,
    history: Arc<std::sync::Mutex<History>>,
    /// Leases granted and maybe still alive.
    leases: Vec<i64>,
    n: usize,
}

fn is_lease_not_found(e: &tonic::Status) -> bool {
    e.code() == tonic::Code::NotFound && e.message().contains("lease not found")
}

impl Writer {
    async fn connect(server: &Server) -> (KvClient<Channel>, LeaseClient<Channel>) {
        let ch = server.channel().await;
        (KvClient::new(ch.clone()), LeaseClient::new(ch))
    }

    /// Accounts for every revision up to `rev` that the writer did not cause: each must be a
    /// lease expiry, read back with a Range at that revision.
    async fn sync_to(&mut self, rev: i64) {
        loop {
            let next = {
                let h = self.history.lock().unwrap();
                if h.rev >= rev {
                    return;
                }
                h.rev + 1
            };
            let resp = self
                .kv
                .range(RangeRequest {
                    key: vec![0],
                    range_end: vec![0],
                    revision: next,
                    ..Default::default()
                })
                .await
                .unwrap_or_else(|e| panic!("Range at revision {next} (a gap): {e}"))
                .into_inner();
            let at: BTreeMap<Vec<u8>, KeyValue> = resp
                .kvs
                .into_iter()
                .map(|kv| (kv.key.clone(), kv))
                .collect();
            let mut h = self.history.lock().unwrap();
            for (k, kv) in &at {
                assert_eq!(
                    h.state.get(k),
                    Some(kv),
                    "revision {next} was not made by the writer, so it must be a lease expiry \
                     (deletes only), but key {} differs from the model",
                    show(k)
                );
            }
            let gone: Vec<Vec<u8>> = h
                .state
                .keys()
                .filter(|k| !at.contains_key(*k))
                .cloned()
                .collect();
            assert!(
                !gone.is_empty(),
                "revision {next} was not made by the writer and changed nothing visible"
            );
            let lease = h.state[&gone[0]].lease;
            assert!(
                lease != 0,
                "revision {next} (not the writer's) deleted key {} which has no lease",
                show(&gone[0])
            );
            assert_eq!(
                gone,
                h.keys_of_lease(lease),
                "revision {next} must delete exactly all keys of lease {lease:x}"
            );
            let changes = gone.iter().map(|k| h.delete(next, k)).collect();
            h.record(next, changes);
            h.expiries += 1;
        }
    }

    fn live_lease(&mut self) -> i64 {
        if self.leases.is_empty() || self.rng.chance(3, 4) {
            0
        } else {
            *self.rng.pick(&self.leases)
        }
    }

    async fn put(&mut self, leased: bool) {
        let (key, lease) = if leased {
            let Some(&lease) = self.leases.last() else {
                return;
            };
            (
                format!("c/{}", self.rng.below(KEYS_C as u64)).into_bytes(),
                lease,
            )
        } else {
            let key = random_key(&mut self.rng);
            (key, self.live_lease())
        };
        let value = random_value(&mut self.rng, self.n);
        let r = self
            .kv
            .put(PutRequest {
                key: key.clone(),
                value: value.clone(),
                lease,
                ..Default::default()
            })
            .await;
        match r {
            Ok(r) => {
                let rev = r.into_inner().header.unwrap().revision;
                self.sync_to(rev - 1).await;
                let mut h = self.history.lock().unwrap();
                let c = h.put(rev, &key, &value, lease);
                h.record(rev, vec![c]);
            }
            Err(e) if lease != 0 && is_lease_not_found(&e) => {
                self.leases.retain(|l| *l != lease);
            }
            Err(e) => panic!("put {}: {e}", show(&key)),
        }
    }

    async fn delete(&mut self) {
        let key = random_key(&mut self.rng);
        let end = if self.rng.chance(1, 3) {
            let mut e = key.clone();
            let last = e.len() - 1;
            e[last] += self.rng.range_i64(1, 4) as u8;
            e
        } else {
            Vec::new()
        };
        let r = self
            .kv
            .delete_range(DeleteRangeRequest {
                key: key.clone(),
                range_end: end.clone(),
                prev_kv: self.rng.chance(1, 2),
            })
            .await
            .unwrap_or_else(|e| panic!("delete {}..{}: {e}", show(&key), show(&end)))
            .into_inner();
        let rev = r.header.unwrap().revision;
        if r.deleted == 0 {
            self.sync_to(rev).await;
            let h = self.history.lock().unwrap();
            assert!(
                h.keys_in(&key, &end).is_empty(),
                "delete {}..{} deleted nothing but the model has keys there",
                show(&key),
                show(&end)
            );
            return;
        }
        self.sync_to(rev - 1).await;
        let mut h = self.history.lock().unwrap();
        let keys = h.keys_in(&key, &end);
        assert_eq!(
            keys.len() as i64,
            r.deleted,
            "delete {}..{} at revision {rev}: deleted count vs the model's keys {:?}",
            show(&key),
            show(&end),
            keys.iter().map(|k| show(k)).collect::<Vec<_>>()
        );
        let changes = keys.iter().map(|k| h.delete(rev, k)).collect();
        h.record(rev, changes);
    }

    async fn txn(&mut self) {
        // A compare on one key, then up to 3 ops on distinct keys per branch.
        let ck = random_key(&mut self.rng);
        let cv = self.rng.range_i64(0, 3);
        let cmp = Compare {
            result: CompareResult::Equal as i32,
            target: CompareTarget::Version as i32,
            key: ck.clone(),
            range_end: Vec::new(),
            target_union: Some(TargetUnion::Version(cv)),
        };
        let mut branches = [Vec::new(), Vec::new()];
        for b in &mut branches {
            let mut used = HashSet::new();
            for _ in 0..self.rng.range_i64(0, 3) {
                let k = random_key(&mut self.rng);
                if !used.insert(k.clone()) {
                    continue;
                }
                if self.rng.chance(2, 3) {
                    let v = random_value(&mut self.rng, self.n);
                    b.push((k, Some(v)));
                } else {
                    b.push((k, None));
                }
            }
        }
        let ops = |b: &Vec<(Vec<u8>, Option<Vec<u8>>)>| -> Vec<RequestOp> {
            b.iter()
                .map(|(k, v)| RequestOp {
                    request: Some(match v {
                        Some(v) => Request::RequestPut(PutRequest {
                            key: k.clone(),
                            value: v.clone(),
                            ..Default::default()
                        }),
                        None => Request::RequestDeleteRange(DeleteRangeRequest {
                            key: k.clone(),
                            ..Default::default()
                        }),
                    }),
                })
                .collect()
        };
        let r = self
            .kv
            .txn(TxnRequest {
                compare: vec![cmp],
                success: ops(&branches[0]),
                failure: ops(&branches[1]),
            })
            .await
            .unwrap_or_else(|e| panic!("txn: {e}"))
            .into_inner();
        let rev = r.header.unwrap().revision;
        let branch = &branches[if r.succeeded { 0 } else { 1 }];
        let mut deleted = Vec::new();
        for resp in &r.responses {
            if let Some(Response::ResponseDeleteRange(d)) = &resp.response {
                deleted.push(d.deleted);
            }
        }
        let mutates = branch.iter().any(|(_, v)| v.is_some()) || deleted.iter().any(|d| *d > 0);
        self.sync_to(if mutates { rev - 1 } else { rev }).await;
        let mut h = self.history.lock().unwrap();
        let version = h.state.get(&ck).map_or(0, |kv| kv.version);
        assert_eq!(
            r.succeeded,
            version == cv,
            "txn at revision {rev}: compare version({}) == {cv} answered {} but the model's \
             version is {version}",
            show(&ck),
            r.succeeded
        );
        let mut changes = Vec::new();
        let mut dels = deleted.iter();
        for (k, v) in branch {
            match v {
                Some(v) => changes.push(h.put(rev, k, v, 0)),
                None => {
                    let d = *dels.next().unwrap();
                    let exists = h.state.contains_key(k);
                    assert_eq!(
                        d,
                        exists as i64,
                        "txn at revision {rev}: delete {} answered deleted={d}",
                        show(k)
                    );
                    if exists {
                        changes.push(h.delete(rev, k));
                    }
                }
            }
        }
        if mutates {
            h.record(rev, changes);
        }
    }

    async fn grant(&mut self) {
        let r = self
            .lease
            .lease_grant(LeaseGrantRequest {
                ttl: self.rng.range_i64(2, 3),
                id: 0,
            })
            .await
            .unwrap_or_else(|e| panic!("LeaseGrant: {e}"))
            .into_inner();
        assert!(r.error.is_empty(), "LeaseGrant error: {}", r.error);
        self.leases.push(r.id);
        if self.leases.len() > 6 {
            self.leases.remove(0);
        }
    }

    async fn revoke(&mut self, id: i64) {
        let attached = self.history.lock().unwrap().keys_of_lease(id);
        match self.lease.lease_revoke(LeaseRevokeRequest { id }).await {
            Ok(r) => {
                let rev = r.into_inner().header.unwrap().revision;
                if attached.is_empty() {
                    self.sync_to(rev).await;
                } else {
                    self.sync_to(rev - 1).await;
                    let mut h = self.history.lock().unwrap();
                    assert_eq!(
                        attached,
                        h.keys_of_lease(id),
                        "lease {id:x}: attached keys changed by an expiry before its revoke"
                    );
                    let changes = attached.iter().map(|k| h.delete(rev, k)).collect();
                    h.record(rev, changes);
                }
            }
            Err(e) if is_lease_not_found(&e) => {}
            Err(e) => panic!("LeaseRevoke {id:x}: {e}"),
        }
        self.leases.retain(|l| *l != id);
    }

    async fn current_rev(&mut self) -> i64 {
        self.kv
            .range(RangeRequest {
                key: b"a/".to_vec(),
                limit: 1,
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("Range for the current revision: {e}"))
            .into_inner()
            .header
            .unwrap()
            .revision
    }

    async fn compact(&mut self) {
        let cur = self.current_rev().await;
        self.sync_to(cur).await;
        let done = self.history.lock().unwrap().compacted;
        if cur <= done + 1 {
            return;
        }
        // Mostly recent revisions, so slow watchers may fall behind the compaction.
        let rev = cur - self.rng.below(((cur - done) as u64).min(40)) as i64;
        self.kv
            .compact(CompactionRequest {
                revision: rev,
                physical: self.rng.chance(1, 2),
            })
            .await
            .unwrap_or_else(|e| panic!("compact at {rev} (current {cur}): {e}"));
        self.history.lock().unwrap().compacted = rev;
    }
}

// ---------------------------------------------------------------------------------------------
// Watchers.

/// What a watcher asks for.
#[derive(Clone, Debug)]
struct Spec {
    name: &'static str,
    key: Vec<u8>,
    end: Vec<u8>,
    /// Requested start revision of the first session: 0 = from now.
    start: i64,
    prev_kv: bool,
    filters: Vec<i32>,
    /// Cancel this watcher from the client after this many event responses.
    cancel_after: Option<usize>,
}

impl Spec {
    fn matches(&self, c: &Change) -> bool {
        in_range(&c.kv.key, &self.key, &self.end)
            && !(c.delete && self.filters.contains(&NODELETE))
            && (c.delete || !self.filters.contains(&NOPUT))
    }
}

/// One response as the checker needs it.
#[derive(Clone, Debug)]
struct Resp {
    events: Vec<(bool, KeyValue, Option<KeyValue>)>,
    progress: Option<i64>,
    fragment: bool,
}

/// One watch (one create) of a watcher, until it broke, was cancelled, or the run ended.
#[derive(Clone, Debug, Default)]
struct Session {
    /// The requested start revision (0 = now).
    start: i64,
    responses: Vec<Resp>,
    /// compact_revision of the response that ended it, if any.
    compacted: Option<i64>,
    /// Whether the client cancelled it and the server confirmed.
    cancelled: bool,
    /// How the session ended, for messages.
    end: String,
}

struct Watcher {
    spec: Spec,
    sessions: Vec<Session>,
    /// The next revision this watcher needs (0: from now, nothing seen yet).
    next: i64,
    /// Cancelled by the client; not resumed.
    done: bool,
    event_responses: usize,
}

impl Watcher {
    fn new(spec: Spec) -> Watcher {
        Watcher {
            next: spec.start,
            spec,
            sessions: Vec::new(),
            done: false,
            event_responses: 0,
        }
    }

    fn create(&self) -> WatchCreateRequest {
        WatchCreateRequest {
            key: self.spec.key.clone(),
            range_end: self.spec.end.clone(),
            start_revision: self.next,
            prev_kv: self.spec.prev_kv,
            filters: self.spec.filters.clone(),
            progress_notify: true,
            ..Default::default()
        }
    }
}

/// Shared run state the stream tasks look at.
#[derive(Clone, Debug)]
struct RunState {
    url: String,
    /// The final revision once the writer is done (all watchers must get past it).
    final_rev: Option<i64>,
    /// Whether the answer to a progress request (watch id -1) is a bookmark. etcd 3.5.1 answers
    /// at once with its current revision even when watchers on the stream are behind
    /// (etcd-io/etcd#15220, fixed in 3.5.8), so against it only the periodic per-watcher
    /// notifications count.
    trust_progress_requests: bool,
}

fn describe(ws: &[Watcher]) -> String {
    ws.iter()
        .map(|w| {
            format!(
                "{} [{}..{} from {}{}{}] (next revision {}, {} sessions{})",
                w.spec.name,
                show(&w.spec.key),
                show(&w.spec.end),
                w.spec.start,
                if w.spec.prev_kv { " prev_kv" } else { "" },
                if w.spec.filters.is_empty() {
                    String::new()
                } else {
                    format!(" filters {:?}", w.spec.filters)
                },
                w.next,
                w.sessions.len(),
                if w.done { ", cancelled" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

async fn connect(url: &str) -> Option<Channel> {
    Channel::from_shared(url.to_string())
        .unwrap()
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await
        .ok()
}

/// Runs one Watch stream carrying `specs` until every watcher passed the final revision,
/// reconnecting (and resuming each watcher) whenever the stream breaks. `slow` delays the
/// reading of each response while writes go on.
async fn run_stream(
    name: &'static str,
    specs: Vec<Spec>,
    slow: Option<Duration>,
    mut state: watch::Receiver<RunState>,
) -> Vec<Watcher> {
    let mut ws: Vec<Watcher> = specs.into_iter().map(Watcher::new).collect();
    let started = Instant::now();
    let mut catch_up_since: Option<Instant> = None;
    'reconnect: loop {
        let st = state.borrow().clone();
        if let Some(f) = st.final_rev
            && ws.iter().all(|w| w.done || (w.next > f))
        {
            return ws;
        }
        assert!(
            started.elapsed() < RUN_DEADLINE,
            "stream {name}: not done within {RUN_DEADLINE:?}: {}",
            describe(&ws)
        );
        let Some(ch) = connect(&st.url).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let (tx, rx) = mpsc::channel(64);
        let mut pending: VecDeque<usize> = VecDeque::new();
        for (i, w) in ws.iter_mut().enumerate() {
            if w.done {
                continue;
            }
            tx.send(WatchRequest {
                request_union: Some(RequestUnion::CreateRequest(w.create())),
            })
            .await
            .unwrap();
            pending.push_back(i);
            w.sessions.push(Session {
                start: w.next,
                end: "still open".into(),
                ..Default::default()
            });
        }
        let mut ids: HashMap<i64, usize> = HashMap::new();
        let mut stream = match WatchClient::new(ch).watch(ReceiverStream::new(rx)).await {
            Ok(s) => s.into_inner(),
            Err(e) => {
                for &i in &pending {
                    ws[i].sessions.last_mut().unwrap().end = format!("Watch RPC failed: {e}");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let mut tick = tokio::time::interval(PROGRESS_EVERY);
        loop {
            let final_rev = state.borrow().final_rev;
            if let Some(f) = final_rev {
                if ws.iter().all(|w| w.done || w.next > f) {
                    for w in ws.iter_mut().filter(|w| !w.done) {
                        w.sessions.last_mut().unwrap().end = "run finished".into();
                    }
                    return ws;
                }
                let since = *catch_up_since.get_or_insert_with(Instant::now);
                assert!(
                    since.elapsed() < CATCH_UP_TIMEOUT,
                    "stream {name}: watchers did not catch up with the final revision {f} within \
                     {CATCH_UP_TIMEOUT:?} (progress requests are sent every {PROGRESS_EVERY:?}): {}",
                    describe(&ws)
                );
            }
            let msg = tokio::select! {
                m = stream.next() => m,
                _ = tick.tick() => {
                    let _ = tx.send(WatchRequest {
                        request_union: Some(RequestUnion::ProgressRequest(WatchProgressRequest {})),
                    }).await;
                    continue;
                }
                _ = state.changed() => continue,
            };
            let r = match msg {
                Some(Ok(r)) => r,
                other => {
                    let why = match other {
                        Some(Err(e)) => format!("stream error: {e}"),
                        _ => "stream ended".to_string(),
                    };
                    for w in ws.iter_mut().filter(|w| !w.done) {
                        let s = w.sessions.last_mut().unwrap();
                        if s.end == "still open" {
                            s.end = why.clone();
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue 'reconnect;
                }
            };
            let trust = state.borrow().trust_progress_requests;
            for a in handle(name, &mut ws, &mut pending, &mut ids, trust, r) {
                let req = match a {
                    Action::Cancel(id) => {
                        RequestUnion::CancelRequest(WatchCancelRequest { watch_id: id })
                    }
                    Action::Resume(i) => {
                        let w = &mut ws[i];
                        w.sessions.push(Session {
                            start: w.next,
                            end: "still open".into(),
                            ..Default::default()
                        });
                        pending.push_back(i);
                        RequestUnion::CreateRequest(w.create())
                    }
                };
                let _ = tx
                    .send(WatchRequest {
                        request_union: Some(req),
                    })
                    .await;
            }
            let slow_now = slow.filter(|_| state.borrow().final_rev.is_none());
            if let Some(d) = slow_now {
                tokio::time::sleep(d).await;
            }
        }
    }
}

/// What the stream must send after a response.
enum Action {
    /// Cancel this watch id (the watcher reached its cancel point).
    Cancel(i64),
    /// Re-create this watcher (cancelled with compact_revision) from its next revision.
    Resume(usize),
}

/// Records one response; returns what to send in reply.
fn handle(
    name: &str,
    ws: &mut [Watcher],
    pending: &mut VecDeque<usize>,
    ids: &mut HashMap<i64, usize>,
    trust: bool,
    r: WatchResponse,
) -> Vec<Action> {
    let rev = r.header.as_ref().map_or(0, |h| h.revision);
    if r.watch_id == -1 && !trust {
        return Vec::new();
    }
    if r.created {
        let i = pending.pop_front().unwrap_or_else(|| {
            panic!("stream {name}: `created` response with no create pending: {r:?}")
        });
        assert!(
            !ids.contains_key(&r.watch_id),
            "stream {name}: watch id {} created twice on one stream",
            r.watch_id
        );
        ids.insert(r.watch_id, i);
        assert!(
            r.events.is_empty(),
            "stream {name}: `created` response carries events: {r:?}"
        );
    }
    let is_progress =
        r.events.is_empty() && !r.created && !r.canceled && r.compact_revision == 0 && rev != 0;
    let targets: Vec<usize> = if r.watch_id == -1 {
        assert!(
            is_progress,
            "stream {name}: watch id -1 on a response that is not a progress notification: {r:?}"
        );
        ids.values().copied().collect()
    } else {
        match ids.get(&r.watch_id) {
            Some(&i) => vec![i],
            None => panic!(
                "stream {name}: response for unknown watch id {} (known: {ids:?}): {r:?}",
                r.watch_id
            ),
        }
    };
    let mut actions = Vec::new();
    for i in targets {
        let w = &mut ws[i];
        if w.done && r.watch_id != -1 {
            panic!(
                "stream {name}: watcher {} got a response after its cancel was confirmed: {r:?}",
                w.spec.name
            );
        }
        if w.done {
            continue;
        }
        let s = w.sessions.last_mut().unwrap();
        if is_progress {
            s.responses.push(Resp {
                events: Vec::new(),
                progress: Some(rev),
                fragment: r.fragment,
            });
            w.next = w.next.max(rev + 1);
        }
        if !r.events.is_empty() {
            let events: Vec<_> = r
                .events
                .iter()
                .map(|e| {
                    (
                        e.r#type == EventType::Delete as i32,
                        e.kv.clone().unwrap_or_default(),
                        e.prev_kv.clone(),
                    )
                })
                .collect();
            let last = events.last().unwrap().1.mod_revision;
            s.responses.push(Resp {
                events,
                progress: None,
                fragment: r.fragment,
            });
            w.next = w.next.max(last + 1);
            w.event_responses += 1;
            if w.spec.cancel_after == Some(w.event_responses) {
                actions.push(Action::Cancel(r.watch_id));
            }
        }
        if r.compact_revision != 0 {
            s.compacted = Some(r.compact_revision);
            s.end = format!("cancelled with compact_revision {}", r.compact_revision);
            w.next = r.compact_revision;
            ids.remove(&r.watch_id);
            actions.push(Action::Resume(i));
        } else if r.canceled {
            ids.remove(&r.watch_id);
            assert!(
                w.spec.cancel_after.is_some_and(|n| w.event_responses >= n),
                "stream {name}: watcher {} cancelled by the server without compact_revision: {r:?}",
                w.spec.name
            );
            let s = w.sessions.last_mut().unwrap();
            s.cancelled = true;
            s.end = "cancelled by the client".into();
            w.done = true;
        }
    }
    actions
}

// ---------------------------------------------------------------------------------------------
// The checker.

fn ev_line(delete: bool, kv: &KeyValue, prev: &Option<KeyValue>) -> String {
    let short = |kv: &KeyValue| {
        let v = show(&kv.value);
        let v = if v.len() > 16 {
            format!("{}..({} B)", &v[..12], v.len())
        } else {
            v
        };
        format!(
            "{}={v} create={} mod={} ver={} lease={:x}",
            show(&kv.key),
            kv.create_revision,
            kv.mod_revision,
            kv.version,
            kv.lease
        )
    };
    format!(
        "{} {}{}",
        if delete { "DELETE" } else { "PUT" },
        short(kv),
        prev.as_ref()
            .map(|p| format!(" prev[{}]", short(p)))
            .unwrap_or_default()
    )
}

struct Violations(Vec<String>);

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for v in self.0.iter().take(20) {
            writeln!(f, "- {v}")?;
        }
        if self.0.len() > 20 {
            writeln!(f, "... and {} more", self.0.len() - 20)?;
        }
        Ok(())
    }
}

/// Checks every session of `w` against the history; appends violations to `out`.
fn check_watcher(w: &Watcher, h: &History, out: &mut Vec<String>) {
    let spec = &w.spec;
    let name = spec.name;
    let mut chain_next: Option<i64> = None;
    for (si, s) in w.sessions.iter().enumerate() {
        let who = format!("{name} session {si} (start {}, ended: {})", s.start, s.end);
        if let Some(n) = chain_next
            && s.start != n
            && s.start != 0
        {
            out.push(format!("{who}: resumed at {} but {n} was next", s.start));
        }
        // Per-response checks: filter, ordered, unique, atomic, bookmarkable.
        let mut last_ev = 0i64;
        let mut last_progress = 0i64;
        let mut seen = HashSet::new();
        let mut got = Vec::new();
        let mut prev_resp_last: Option<(i64, bool)> = None;
        let mut first: Option<i64> = None;
        for (ri, r) in s.responses.iter().enumerate() {
            if r.fragment {
                out.push(format!("{who}: response {ri} is a fragment, not asked for"));
            }
            if let Some(p) = r.progress {
                if p < last_ev {
                    out.push(format!(
                        "{who}: bookmarkable: progress at {p} after an event at {last_ev}"
                    ));
                }
                if p < last_progress {
                    out.push(format!(
                        "{who}: bookmarkable: progress at {p} after progress at {last_progress}"
                    ));
                }
                last_progress = last_progress.max(p);
                first.get_or_insert(p + 1);
                continue;
            }
            let first_rev = r.events[0].1.mod_revision;
            if let Some((prev_last, prev_frag)) = prev_resp_last
                && prev_last == first_rev
                && !prev_frag
            {
                out.push(format!(
                    "{who}: atomic: revision {first_rev} split over responses {} and {ri}",
                    ri - 1
                ));
            }
            prev_resp_last = Some((r.events.last().unwrap().1.mod_revision, r.fragment));
            first.get_or_insert(first_rev);
            for (delete, kv, prev) in &r.events {
                let rev = kv.mod_revision;
                let line = ev_line(*delete, kv, prev);
                if rev < last_ev {
                    out.push(format!(
                        "{who}: ordered: revision {rev} after {last_ev}: {line}"
                    ));
                }
                if rev <= last_progress {
                    out.push(format!(
                        "{who}: bookmarkable: event at {rev} after progress at {last_progress}: {line}"
                    ));
                }
                if !seen.insert((rev, kv.key.clone())) {
                    out.push(format!("{who}: unique: delivered twice: {line}"));
                }
                let c = Change {
                    delete: *delete,
                    kv: kv.clone(),
                    prev: None,
                };
                if !spec.matches(&c) {
                    out.push(format!("{who}: filter: event outside the watch: {line}"));
                }
                last_ev = last_ev.max(rev);
                got.push((*delete, kv.clone(), prev.clone()));
            }
        }
        // Reliable, prev_kv, create detection: compare with the history over the window.
        let lo = if s.start > 0 {
            s.start
        } else {
            first.unwrap_or(i64::MAX)
        };
        let hi = last_ev.max(last_progress);
        let mut want = Vec::new();
        if lo <= hi {
            for (_, cs) in h.changes.range(lo..=hi) {
                for c in cs.iter().filter(|c| spec.matches(c)) {
                    want.push(c.clone());
                }
            }
        }
        let mut gi = 0;
        for c in &want {
            let Some((delete, kv, prev)) = got.get(gi) else {
                out.push(format!(
                    "{who}: reliable: missing event {} (received up to revision {hi})",
                    ev_line(c.delete, &c.kv, &c.prev)
                ));
                break;
            };
            gi += 1;
            let exp_prev = if spec.prev_kv { c.prev.clone() } else { None };
            let prev_ok = *prev == exp_prev
                || (prev.is_none() && exp_prev.is_some() && c.kv.mod_revision - 1 < h.compacted);
            if *delete != c.delete || *kv != c.kv || !prev_ok {
                out.push(format!(
                    "{who}: event differs from the history (reliable / prev_kv / create):\n    \
                     want {}\n    got  {}",
                    ev_line(c.delete, &c.kv, &exp_prev),
                    ev_line(*delete, kv, prev)
                ));
                break;
            }
        }
        if gi == want.len() && gi < got.len() {
            let (d, kv, p) = &got[gi];
            out.push(format!(
                "{who}: reliable: event not in the history: {}",
                ev_line(*d, kv, p)
            ));
        }
        // Compaction cancels: only when the next revision needed was compacted.
        let next_needed = if first.is_some() {
            Some(hi.max(s.start - 1) + 1)
        } else if s.start > 0 {
            Some(s.start)
        } else {
            None
        };
        if let Some(c) = s.compacted {
            if let Some(n) = next_needed.filter(|n| c <= *n) {
                out.push(format!(
                    "{who}: cancelled with compact_revision {c} although revision {n} (the next \
                     it needed) was not compacted"
                ));
            }
            if c > h.compacted {
                out.push(format!(
                    "{who}: compact_revision {c} is above the latest compaction {}",
                    h.compacted
                ));
            }
            chain_next = Some(c);
        } else {
            chain_next = next_needed;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The test.

fn specs() -> Vec<Vec<Spec>> {
    let spec = |name, key: &str, end: &str, start, prev_kv, filters: Vec<i32>| Spec {
        name,
        key: key.as_bytes().to_vec(),
        end: end.as_bytes().to_vec(),
        start,
        prev_kv,
        filters,
        cancel_after: None,
    };
    vec![
        // Stream 0: from the beginning, several shapes multiplexed.
        vec![
            spec("all+prev", "\0", "\0", 1, true, vec![]),
            spec("prefix a/", "a/", "a0", 1, false, vec![]),
            spec("key a/3 +prev", "a/3", "", 1, true, vec![]),
            spec("from-key b/4", "b/4", "\0", 1, true, vec![]),
            spec("noput b/", "b/", "b0", 1, true, vec![NOPUT]),
            spec("nodelete all", "\0", "\0", 1, false, vec![NODELETE]),
            Spec {
                cancel_after: Some(5),
                ..spec("cancelled a/", "a/", "a0", 1, true, vec![])
            },
        ],
        // Stream 1: from now.
        vec![
            spec("now all", "\0", "\0", 0, false, vec![]),
            spec("now b/ +prev", "b/", "b0", 0, true, vec![]),
        ],
        // Stream 2: read slowly.
        vec![
            spec("slow all+prev", "\0", "\0", 1, true, vec![]),
            spec("slow a/", "a/", "a0", 1, false, vec![]),
        ],
    ]
}

async fn random_history(seed: u64) {
    let flavor = target_flavor();
    // Periodic per-watcher progress notifications (progress_notify is set on every watch); keel
    // sends them at its own interval.
    let args = match flavor {
        Flavor::Etcd => vec!["--experimental-watch-progress-notify-interval=200ms".to_string()],
        Flavor::Keel => Vec::new(),
    };
    let mut server = Server::start_with(
        flavor,
        ServerOpts {
            args,
            ..Default::default()
        },
    );
    let trust_progress_requests = flavor == Flavor::Keel;
    let mut rng = Rng::new(seed);
    let history = Arc::new(std::sync::Mutex::new(History {
        rev: 1,
        ..Default::default()
    }));
    let (state_tx, state_rx) = watch::channel(RunState {
        url: server.client_url.clone(),
        final_rev: None,
        trust_progress_requests,
    });
    let mut tasks = Vec::new();
    for (i, s) in specs().into_iter().enumerate() {
        let name: &'static str = ["stream 0", "stream 1 (from now)", "stream 2 (slow)"][i];
        let slow = (i == 2).then_some(Duration::from_millis(25));
        tasks.push(tokio::spawn(run_stream(name, s, slow, state_rx.clone())));
    }
    let (kv, lease) = Writer::connect(&server).await;
    let mut w = Writer {
        kv,
        lease,
        rng: Rng::new(rng.next_u64()),
        history: history.clone(),
        leases: Vec::new(),
        n: 0,
    };
    const OPS: usize = 900;
    // Restarts in the first half only: etcd gives every lease its full TTL back on restart, so
    // the second half is where leases expire on both servers.
    let restarts: Vec<usize> = (0..3)
        .map(|_| rng.range_i64(50, OPS as i64 / 2) as usize)
        .collect();
    let started = Instant::now();
    for n in 0..OPS {
        w.n = n;
        assert!(
            started.elapsed() < RUN_DEADLINE,
            "writer: {n} of {OPS} operations after {RUN_DEADLINE:?}"
        );
        if restarts.contains(&n) {
            tokio::task::block_in_place(|| server.restart());
            let (kv, lease) = Writer::connect(&server).await;
            w.kv = kv;
            w.lease = lease;
        }
        match w.rng.below(100) {
            0..=39 => w.put(false).await,
            40..=44 => w.put(true).await,
            45..=59 => w.delete().await,
            60..=74 => w.txn().await,
            75..=83 => w.grant().await,
            84..=86 if !w.leases.is_empty() => {
                let id = *w.rng.pick(&w.leases);
                w.revoke(id).await
            }
            87..=89 => w.compact().await,
            // Let time pass so leases expire between writes.
            90..=93 => tokio::time::sleep(Duration::from_millis(150)).await,
            _ => w.put(false).await,
        }
    }
    // No more changes after this: revoke every lease that still has keys (an expiry is then
    // either done or finds its lease gone), then read the final revision.
    let with_keys: HashSet<i64> = history
        .lock()
        .unwrap()
        .state
        .values()
        .map(|kv| kv.lease)
        .filter(|l| *l != 0)
        .collect();
    for id in with_keys {
        w.revoke(id).await;
    }
    let final_rev = w.current_rev().await;
    w.sync_to(final_rev).await;
    let compacted = history.lock().unwrap().compacted;
    state_tx.send_modify(|s| s.final_rev = Some(final_rev));
    let mut watchers = Vec::new();
    for t in tasks {
        watchers.extend(t.await.expect("stream task"));
    }
    let h = std::mem::take(&mut *history.lock().unwrap());
    let mut violations = Vec::new();
    for wch in &watchers {
        check_watcher(wch, &h, &mut violations);
    }
    let events: usize = h.changes.values().map(|c| c.len()).sum();
    let compact_cancels = watchers
        .iter()
        .flat_map(|w| &w.sessions)
        .filter(|s| s.compacted.is_some())
        .count();
    eprintln!(
        "history: {} revisions, {events} changes, {} lease expiries, compacted at {compacted}; \
         {compact_cancels} watch sessions cancelled with compact_revision; watchers: {}",
        h.rev,
        h.expiries,
        describe(&watchers)
    );
    assert!(
        violations.is_empty(),
        "watch guarantees broken ({} violations):\n{}",
        violations.len(),
        Violations(violations)
    );
    assert!(
        h.expiries > 0,
        "no lease expired during the run; the history is too short"
    );

    // Resumable: fresh watches from random revisions give exactly the history's events.
    let specs: Vec<Spec> = specs()
        .into_iter()
        .flatten()
        .filter(|s| s.cancel_after.is_none())
        .collect();
    let mut resumed = Vec::new();
    for i in 0..6 {
        let mut spec = rng.pick(&specs).clone();
        spec.start = if i == 0 {
            final_rev + 1
        } else {
            rng.range_i64(compacted.max(1), final_rev)
        };
        spec.name = "resumed";
        resumed.push(spec);
    }
    let (tx2, rx2) = watch::channel(RunState {
        url: server.client_url.clone(),
        final_rev: Some(final_rev),
        trust_progress_requests,
    });
    let ws = run_stream("resumed", resumed, None, rx2).await;
    drop(tx2);
    let mut violations = Vec::new();
    for wch in &ws {
        assert_eq!(
            wch.sessions.len(),
            1,
            "resumed watch from {} needed several sessions: {:?}",
            wch.spec.start,
            wch.sessions
        );
        check_watcher(wch, &h, &mut violations);
    }
    assert!(
        violations.is_empty(),
        "resumable: watches re-opened after the run differ from the history:\n{}",
        Violations(violations)
    );
    if compacted > 1 {
        let spec = Spec {
            start: compacted - 1,
            name: "from a compacted revision",
            ..specs[0].clone()
        };
        let ch = server.channel().await;
        let (tx, rx) = mpsc::channel(4);
        tx.send(WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(Watcher::new(spec).create())),
        })
        .await
        .unwrap();
        let mut s = WatchClient::new(ch)
            .watch(ReceiverStream::new(rx))
            .await
            .expect("Watch RPC")
            .into_inner();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let r = tokio::time::timeout_at(deadline.into(), s.next())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "watch from compacted revision {}: no cancel within 15 s",
                        compacted - 1
                    )
                })
                .expect("stream ended")
                .expect("stream error");
            assert!(
                r.events.is_empty(),
                "watch from compacted revision {} got events: {r:?}",
                compacted - 1
            );
            if r.compact_revision != 0 {
                assert_eq!(
                    r.compact_revision,
                    compacted,
                    "watch from compacted revision {}: compact_revision",
                    compacted - 1
                );
                break;
            }
        }
    }
    drop(server);
}

/// Runs [`random_history`] with a printed seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_guarantees_over_random_histories() {
    let report = SeedReport::new("watch guarantees");
    let seed = report.seed;
    random_history(seed).await;
}
