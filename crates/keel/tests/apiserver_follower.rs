//! `keel apiserver` on a follower of a three-member `keel store` cluster, driven with the
//! real kubectl: what an operator gets when the `--etcd-servers` they name is not the leader,
//! and when a member dies under it.
//!
//! kube-apiserver reads with quorum reads and writes with Txns on any member it is given, so
//! a follower must answer both as the leader would: every read through it sees every write
//! acknowledged before the read started (through it or through another apiserver on the
//! leader), resourceVersions only grow, and its watch delivers every write. Then, under a
//! writer that creates and updates ConfigMaps through the apiserver and reads each
//! acknowledged write back through it:
//!
//! - the store's leader is killed with SIGKILL: once the survivors elect a new leader the
//!   apiserver takes writes again (some may fail or time out while there is none); every
//!   write answered 2xx is stored with the resourceVersion it was answered with, none goes
//!   backwards, and a watch opened before the kill, resumed from its last resourceVersion
//!   whenever it ends, delivers every acknowledged write's event;
//! - the follower the apiserver uses is killed with SIGKILL and restarted: `/readyz` goes
//!   not-ready while the apiserver itself keeps answering, and ready again after the
//!   restart; writes resume, and nothing acknowledged is lost.
//!
//! Every acknowledged write is finally checked three ways: the stored object (its value and
//! resourceVersion, unless a later write whose answer was lost replaced it), a watch replaying
//! the history from before the first write (each acknowledged write's event with its
//! resourceVersion and value), and the watch that ran all along.
//!
//! No watch may be told 410 Gone: nothing compacts the store while the test runs (the stores
//! run without auto-compaction, and the apiserver's compactor first compacts at its second
//! tick, ten minutes after it starts, to the revision it saw at the first), and keel's watch
//! cache serves a resourceVersion it no longer holds from the store's history rather than
//! answering 410. So a 410 fails the check instead of excusing the watch from it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use keel_testkit::client_loops::{ClientLoops, Step};
use keel_testkit::configmap_writer::{Api, CONFIGMAPS, value_of};
use keel_testkit::kube::Kube;
use keel_testkit::kv::agreed_leader;
use keel_testkit::rv_watch::{RvWatch, Watched};
use keel_testkit::{Cluster, Flavor};

/// How long a kubectl request may take (kubectl's `--request-timeout`).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest wait for anything that must happen: a leader, readiness, writes resuming, a
/// watch catching up.
const LIMIT: Duration = Duration::from_secs(30);
/// Writes acknowledged after a fault before the test stops writing.
const AFTER_FAULT: usize = 10;

/// One write through the API and what came of it.
#[derive(Clone, Debug)]
struct Write {
    name: String,
    /// `data.v`, unique to this write.
    value: String,
    /// A replace (PUT) rather than a create (POST).
    update: bool,
    /// The resourceVersion of a 2xx answer; None if the write failed or timed out, so it
    /// may or may not have happened.
    acked: Option<i64>,
}

/// One writer: for each new object a create, then, once that is acknowledged, a replace
/// on its resourceVersion; each acknowledged write is read back.
struct Writer {
    next: usize,
    writes: Vec<Write>,
    /// The highest resourceVersion acknowledged: each write starts after the last one was
    /// acknowledged, so each must be above it.
    last_acked: i64,
    /// The highest list resourceVersion read.
    last_read: i64,
    /// Reads that failed (the store was unavailable).
    failed_reads: usize,
}

impl Writer {
    fn new() -> Writer {
        Writer {
            next: 0,
            writes: Vec::new(),
            last_acked: 0,
            last_read: 0,
            failed_reads: 0,
        }
    }

    fn acks(&self) -> usize {
        self.writes.iter().filter(|w| w.acked.is_some()).count()
    }

    /// Creates and updates the next object through `via`, reading each acknowledged write
    /// back through `reader`. `strict`: every write and read must succeed.
    fn object(&mut self, via: &Api, reader: &Api, strict: bool) {
        let name = format!("cm-{:04}", self.next);
        self.next += 1;
        if let Some(rv) = self.attempt(via, reader, &name, None, strict) {
            self.attempt(via, reader, &name, Some(rv), strict);
        }
    }

    fn attempt(
        &mut self,
        via: &Api,
        reader: &Api,
        name: &str,
        update: Option<i64>,
        strict: bool,
    ) -> Option<i64> {
        let value = format!("{name}-{}", if update.is_some() { "u" } else { "c" });
        let result = via.write(name, &value, update);
        if strict && let Err(e) = &result {
            panic!("write {value}: {e}");
        }
        let acked = result.ok();
        self.writes.push(Write {
            name: name.to_string(),
            value: value.clone(),
            update: update.is_some(),
            acked,
        });
        let rv = acked?;
        assert!(
            rv > self.last_acked,
            "{value} was acknowledged at resourceVersion {rv}, after a write acknowledged at {}",
            self.last_acked
        );
        self.last_acked = rv;
        match reader.read(name) {
            Ok((list_rv, item)) => {
                assert!(
                    list_rv >= rv && list_rv >= self.last_read,
                    "a read after {value} (acknowledged at {rv}) answered resourceVersion \
                     {list_rv}; an earlier read answered {}",
                    self.last_read
                );
                self.last_read = list_rv;
                assert_eq!(
                    item,
                    Some((value.clone(), rv)),
                    "a read after {value} was acknowledged at {rv}"
                );
            }
            Err(e) if strict => panic!("read {name} after {value}: {e}"),
            Err(_) => self.failed_reads += 1,
        }
        acked
    }
}

/// A [`Writer`] in a thread of its own, writing and reading through one apiserver and
/// tolerating failures, until stopped (its writer is then the one state of
/// [`ClientLoops::finish`]).
fn start_load(writer: Writer, api: Api) -> ClientLoops<Writer> {
    ClientLoops::start(vec![writer], move |writer, _| {
        let (before, acked) = (writer.writes.len(), writer.acks());
        writer.object(&api, &api, false);
        let lost = writer.writes[before..].iter().filter(|w| w.acked.is_none());
        Step {
            acked: writer.acks() - acked,
            failed: lost.count(),
        }
    })
}

/// Stops `load` and answers its writer.
fn finish_load(load: ClientLoops<Writer>) -> Writer {
    load.finish().pop().expect("the load's one writer")
}

/// Checks `watched` against `writes`: never told 410 (see the module doc), events in
/// resourceVersion order, each event of ours one of the writes made (its resourceVersion the
/// acknowledged one, if it was), and every acknowledged write's event there.
fn check_watch(watched: &Watched, writes: &[Write], what: &str) {
    assert!(
        !watched.gone,
        "{what}: told 410 Gone after {} events ({} watches), though nothing compacts the \
         store during the test",
        watched.events.len(),
        watched.watches
    );
    assert!(
        writes.iter().any(|w| w.acked.is_some()),
        "{what}: no acknowledged write to check the watch against"
    );
    assert!(
        watched.backwards.is_empty(),
        "{what}: events out of order: {:?}",
        watched.backwards
    );
    let made: BTreeMap<(&str, &str), &Write> = writes
        .iter()
        .map(|w| ((w.name.as_str(), w.value.as_str()), w))
        .collect();
    for e in &watched.events {
        if !e.name.starts_with("cm-") {
            continue;
        }
        let write = made
            .get(&(e.name.as_str(), e.value.as_str()))
            .unwrap_or_else(|| panic!("{what}: an event of a write never made: {e:?}"));
        let kind = if write.update { "MODIFIED" } else { "ADDED" };
        assert_eq!(e.kind, kind, "{what}: {e:?}");
        if let Some(rv) = write.acked {
            assert_eq!(e.rv, rv, "{what}: the event of {write:?}");
        }
    }
    let seen: BTreeMap<(&str, &str), i64> = watched
        .events
        .iter()
        .map(|e| ((e.name.as_str(), e.value.as_str()), e.rv))
        .collect();
    let missing: Vec<&Write> = writes
        .iter()
        .filter(|w| w.acked.is_some() && !seen.contains_key(&(w.name.as_str(), w.value.as_str())))
        .collect();
    assert!(
        missing.is_empty(),
        "{what}: {} acknowledged writes have no event ({} watches, errors {:?}): {missing:?}",
        missing.len(),
        watched.watches,
        watched.errors
    );
}

/// Checks that every acknowledged write is in the store through `api`: each object holds
/// its last acknowledged write with that resourceVersion, or a later write whose answer was
/// lost, above it; the list is at or above the highest acknowledged resourceVersion. Then a
/// watch from `since` (before the first write) must replay every acknowledged write.
fn check_stored(api: &Api, writes: &[Write], since: i64, what: &str) {
    let deadline = Instant::now() + LIMIT;
    let (list_rv, stored) = loop {
        match api.list() {
            Ok(list) => break list,
            Err(e) => assert!(Instant::now() < deadline, "{what}: list: {e}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let max_acked = writes.iter().filter_map(|w| w.acked).max().unwrap_or(0);
    assert!(
        list_rv >= max_acked,
        "{what}: the list is at resourceVersion {list_rv}, below the acknowledged {max_acked}"
    );
    let mut by_name: BTreeMap<&str, Vec<&Write>> = BTreeMap::new();
    for w in writes {
        by_name.entry(&w.name).or_default().push(w);
    }
    for (name, tries) in &by_name {
        let got = stored.get(*name);
        let last_acked = tries.iter().rposition(|w| w.acked.is_some());
        let Some(i) = last_acked else {
            // Nothing acknowledged: absent, or one of the writes tried.
            assert!(
                got.is_none_or(|(v, _)| tries.iter().any(|w| w.value == *v)),
                "{what}: {name} holds {got:?}, never written ({tries:?})"
            );
            continue;
        };
        let acked = tries[i];
        let rv = acked.acked.unwrap();
        let Some((value, stored_rv)) = got else {
            panic!("{what}: {name} is gone; acknowledged: {acked:?}");
        };
        let later = tries[i + 1..].iter().any(|w| w.value == *value);
        assert!(
            (*value == acked.value && *stored_rv == rv) || (later && *stored_rv > rv),
            "{what}: {name} holds {value} at {stored_rv}; acknowledged: {acked:?}, \
             tried after it: {:?}",
            &tries[i + 1..]
        );
    }
    let history = RvWatch::start(api, CONFIGMAPS, since, value_of);
    history.wait_past(max_acked, LIMIT, what);
    let history = history.stop();
    assert!(
        !history.gone,
        "{what}: the history from {since} was compacted"
    );
    check_watch(
        &history,
        writes,
        &format!("{what}: the history from {since}"),
    );
}

/// The checks after a fault: every write of `writer` kept through `api` and replayed from
/// `since` ([`check_stored`]), then `watch`, opened before the fault, caught up with the last
/// acknowledged write and checked against the writes ([`check_watch`]).
fn check_kept(api: &Api, watch: RvWatch, writer: &Writer, since: i64, what: &str) {
    check_stored(api, &writer.writes, since, what);
    watch.wait_past(writer.last_acked, LIMIT, what);
    let watched = watch.stop();
    eprintln!(
        "apiserver_follower: the watch from before the kill: {} events in {} watches, errors \
         {:?}",
        watched.events.len(),
        watched.watches,
        watched.errors
    );
    check_watch(&watched, &writer.writes, "the watch opened before the kill");
}

/// A three-member `keel store` cluster and the member its members agree leads it, with a
/// runtime for the cluster helpers, which are async.
fn three_members() -> (tokio::runtime::Runtime, Cluster, usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let cluster = Cluster::start(Flavor::Keel, 3, &[]);
    let leader = rt.block_on(agreed_leader(&cluster, &[0, 1, 2], LIMIT));
    (rt, cluster, leader)
}

/// The list resourceVersion through `api` now.
fn current_rv(api: &Api) -> i64 {
    api.list().unwrap_or_else(|e| panic!("list: {e}")).0
}

#[test]
fn an_apiserver_on_a_follower_reads_linearizably_and_survives_a_leader_kill() {
    let (rt, mut cluster, leader) = three_members();
    let follower = (leader + 1) % 3;
    let on_follower = Kube::start_on(&cluster.members[follower].client_url);
    let on_leader = Kube::start_on(&cluster.members[leader].client_url);
    assert_eq!(
        rt.block_on(agreed_leader(&cluster, &[0, 1, 2], LIMIT)),
        leader,
        "the leader changed while the apiservers started"
    );
    let (api, other) = (
        Api::of(&on_follower, REQUEST_TIMEOUT),
        Api::of(&on_leader, REQUEST_TIMEOUT),
    );
    let since = current_rv(&api);
    let watch = RvWatch::start(&api, CONFIGMAPS, since, value_of);

    // Writes through either apiserver, each read back at once through the follower's.
    let mut writer = Writer::new();
    for i in 0..10 {
        let via = if i % 2 == 0 { &other } else { &api };
        writer.object(via, &api, true);
    }
    watch.wait_past(writer.last_acked, LIMIT, "before the kill");
    drop(on_leader);

    // The leader killed under a writer through the follower's apiserver.
    let load = start_load(writer, api.clone());
    load.wait_acks(load.acks() + 5, LIMIT, "before the kill");
    let at_kill = load.acks();
    cluster.members[leader].kill();
    let killed = Instant::now();
    let survivors: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let new_leader = rt.block_on(agreed_leader(&cluster, &survivors, LIMIT));
    let elected = killed.elapsed();
    let at_election = load.acks();
    load.wait_acks(at_election + 1, LIMIT, "after the new leader was elected");
    let resumed = killed.elapsed();
    load.wait_acks(
        at_election + AFTER_FAULT,
        LIMIT,
        "after the new leader was elected",
    );
    let writer = finish_load(load);
    let failed = writer.writes.iter().filter(|w| w.acked.is_none()).count();
    eprintln!(
        "apiserver_follower: m{leader} (leader) killed after {at_kill} acknowledged writes; \
         m{new_leader} elected {elected:?} later, the first write after that acknowledged \
         {resumed:?} after the kill; {} acknowledged, {failed} failed or timed out, {} reads \
         failed; the apiserver is on m{follower}",
        writer.acks(),
        writer.failed_reads,
    );

    check_kept(&api, watch, &writer, since, "after the leader kill");
}

#[test]
fn an_apiserver_whose_follower_is_killed_goes_unready_and_comes_back() {
    let (_rt, mut cluster, leader) = three_members();
    let follower = (leader + 1) % 3;
    let kube = Kube::start_on(&cluster.members[follower].client_url);
    let api = Api::of(&kube, REQUEST_TIMEOUT);
    let since = current_rv(&api);
    let watch = RvWatch::start(&api, CONFIGMAPS, since, value_of);
    let load = start_load(Writer::new(), api.clone());
    load.wait_acks(10, LIMIT, "before the kill");

    cluster.members[follower].kill();
    let killed = Instant::now();
    while api.ready() {
        assert!(
            killed.elapsed() < LIMIT,
            "/readyz still ok {LIMIT:?} after its store was killed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let unready = killed.elapsed();
    assert!(
        api.alive(),
        "the apiserver stopped answering when its store died:\n{}",
        kube.log()
    );
    // The writer meets the outage before the store comes back.
    let failed = load.failed();
    while load.failed() == failed {
        assert!(
            killed.elapsed() < LIMIT,
            "no write failed in {LIMIT:?} with the apiserver's only store down"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    cluster.members[follower].restart();
    let restarted = Instant::now();
    while !api.ready() {
        assert!(
            restarted.elapsed() < LIMIT,
            "/readyz not ok {LIMIT:?} after its store was restarted:\n{}",
            kube.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let ready = restarted.elapsed();
    let at_ready = load.acks();
    load.wait_acks(at_ready + AFTER_FAULT, LIMIT, "after the store came back");
    let writer = finish_load(load);
    eprintln!(
        "apiserver_follower: /readyz failed {unready:?} after m{follower} was killed and was \
         ok {ready:?} after its restart; {} writes acknowledged, {} failed or timed out",
        writer.acks(),
        writer.writes.iter().filter(|w| w.acked.is_none()).count()
    );

    check_kept(&api, watch, &writer, since, "after the follower's restart");
}
