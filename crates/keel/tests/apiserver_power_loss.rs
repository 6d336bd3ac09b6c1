//! Power cuts under `keel up`: every write the Kubernetes API acknowledged survives a power
//! cut, not only a `kill -9`, with the resourceVersion it was acknowledged with.
//!
//! `kill -9` leaves the page cache intact, so `apiserver_restart` cannot tell a missing fsync
//! from a correct one. Here keel up's data folder (WAL, backend, certificates, token and
//! kubeconfig) lives on a `keel_lazyfs` mount, which drops everything not made durable when
//! the power is cut. Each round, two writers create ConfigMaps and replace each on the
//! resourceVersion it was created with, through the real kubectl, recording every 2xx answer
//! with its resourceVersion and reading each acknowledged write back (recording the list
//! resourceVersions answered). At a point the seeded PRNG picks (after a random number of
//! acknowledged writes and a random delay) the power is cut, keel up killed, the filesystem
//! remounted with its durable state alone and keel up restarted on it; a quarter of the
//! rounds cut the power again while that restart is under way (the store replaying its WAL,
//! the apiserver starting) and restart it once more. It must come back ready (`/readyz` ok,
//! through the kubeconfig it finds or writes again), and:
//!
//! - every object holds its last acknowledged write, value and resourceVersion, unless a
//!   later write whose answer was lost to the cut replaced it (then above it), for the
//!   writes of every round so far;
//! - the store's revision (the list's resourceVersion, and Status on keel up's client URL)
//!   is not below any resourceVersion acknowledged or read before the cut: it never goes
//!   backwards;
//! - a new write is acknowledged above it.
//!
//! `KEEL_APISERVER_POWER_CUTS` sets the number of cuts (10 by default); the seed is printed
//! and replayable with `KEEL_TEST_SEED`. Needs FUSE (root and `/dev/fuse`, as CI has);
//! elsewhere it is skipped, saying so, and in CI a skip is a failure.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::StatusRequest;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_testkit::Rng;
use keel_testkit::client_loops::{ClientLoops, Step};
use keel_testkit::configmap_writer::{Api, Stored};
use keel_testkit::disk::power_test;
use keel_testkit::kube::Kube;
use tonic::transport::Channel;

/// How long a kubectl request may take (kubectl's `--request-timeout`).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Concurrent writers per round.
const WRITERS: usize = 2;
/// The most acknowledged writes a round waits for before its cut (at least one).
const MAX_ACKS_BEFORE_CUT: u64 = 16;
/// The longest extra delay before a cut, in milliseconds.
const MAX_DELAY_MS: u64 = 400;
/// The longest delay before a cut while keel up restarts, in milliseconds.
const MAX_RECOVERY_MS: u64 = 1500;
/// The longest wait for writes to be acknowledged.
const LIMIT: Duration = Duration::from_secs(30);

/// One write through the API and what came of it.
#[derive(Clone, Debug)]
struct Write {
    name: String,
    /// `data.v`, unique to this write.
    value: String,
    /// The resourceVersion of a 2xx answer; None if the write failed or its answer was lost,
    /// so it may or may not have happened.
    acked: Option<i64>,
}

/// What a writer of one round did.
#[derive(Debug, Default)]
struct Done {
    /// The writer's number in its round.
    writer: usize,
    writes: Vec<Write>,
    /// The highest list resourceVersion a read answered.
    read: i64,
}

/// One step of writer `done.writer` in `round`: creates object `r<round>-w<writer>-<n>` and
/// replaces it once its create is acknowledged, reading every acknowledged write back.
fn write_and_read(api: &Api, round: usize, done: &mut Done, n: usize) -> Step {
    let name = format!("r{round:02}-w{}-{n:04}", done.writer);
    let mut step = Step::default();
    let mut update = None;
    for kind in ["c", "u"] {
        let value = format!("{name}-{kind}");
        let acked = api.write(&name, &value, update).ok();
        done.writes.push(Write {
            name: name.clone(),
            value: value.clone(),
            acked,
        });
        let Some(rv) = acked else {
            step.failed += 1;
            break;
        };
        step.acked += 1;
        update = Some(rv);
        if let Ok((list_rv, item)) = api.read(&name) {
            assert!(list_rv >= rv, "a read after {value} at {rv}: {list_rv}");
            assert_eq!(
                item,
                Some((value, rv)),
                "a read after the write was acknowledged"
            );
            done.read = done.read.max(list_rv);
        }
    }
    step
}

/// The writers of `round`, in threads of their own, until stopped.
fn start_writers(api: &Api, round: usize) -> ClientLoops<Done> {
    let states = (0..WRITERS)
        .map(|writer| Done {
            writer,
            ..Done::default()
        })
        .collect();
    let api = api.clone();
    ClientLoops::start(states, move |done, n| write_and_read(&api, round, done, n))
}

/// Checks that every object written holds its last acknowledged write with that
/// resourceVersion, or a later write whose answer was lost, above it.
fn check_stored(stored: &Stored, writes: &[Write], context: &str) {
    let mut by_name: BTreeMap<&str, Vec<&Write>> = BTreeMap::new();
    for w in writes {
        by_name.entry(&w.name).or_default().push(w);
    }
    for (name, tries) in &by_name {
        let got = stored.get(*name);
        let Some(i) = tries.iter().rposition(|w| w.acked.is_some()) else {
            assert!(
                got.is_none_or(|(v, _)| tries.iter().any(|w| w.value == *v)),
                "{context}: {name} holds {got:?}, never written ({tries:?})"
            );
            continue;
        };
        let (acked, rv) = (tries[i], tries[i].acked.unwrap());
        let Some((value, stored_rv)) = got else {
            panic!("{context}: {name} is gone; acknowledged: {acked:?}");
        };
        let later = tries[i + 1..].iter().any(|w| w.value == *value);
        assert!(
            (*value == acked.value && *stored_rv == rv) || (later && *stored_rv > rv),
            "{context}: {name} holds {value} at resourceVersion {stored_rv}; acknowledged: \
             {acked:?}, tried after it: {:?}",
            &tries[i + 1..]
        );
    }
}

/// The revision Status answers on the store's client URL.
fn store_revision(rt: &tokio::runtime::Runtime, url: &str) -> i64 {
    rt.block_on(async {
        let channel = Channel::from_shared(url.to_string())
            .expect("a valid URL")
            .connect()
            .await
            .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
        MaintenanceClient::new(channel)
            .status(StatusRequest {})
            .await
            .unwrap_or_else(|e| panic!("Status on {url}: {e}"))
            .into_inner()
            .header
            .expect("a Status header")
            .revision
    })
}

#[test]
fn acknowledged_api_writes_survive_power_cuts_of_keel_up() {
    let test = "apiserver_power_loss";
    let Some((mut disk, cuts, guard)) = power_test(test, "KEEL_APISERVER_POWER_CUTS", 10) else {
        return;
    };
    let seed = guard.seed;
    let mut rng = Rng::new(seed);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let started = Instant::now();
    let mut kube = Kube::start_up_in(&disk.mnt.join("keel.data"));
    let api = Api::of(&kube, REQUEST_TIMEOUT);
    let mut all: Vec<Write> = Vec::new();
    // The highest resourceVersion acknowledged or read so far.
    let mut highest = 0;
    let mut lost_answers = 0;
    let mut recovery_cuts = 0;
    for round in 0..cuts {
        let context = format!("cut {round} (KEEL_TEST_SEED={seed})");
        let writers = start_writers(&api, round);
        writers.wait_acks(1 + rng.below(MAX_ACKS_BEFORE_CUT) as usize, LIMIT, &context);
        std::thread::sleep(Duration::from_millis(rng.below(MAX_DELAY_MS)));
        disk.cut();
        kube.kill();
        for done in writers.finish() {
            let acked = done.writes.iter().filter_map(|w| w.acked);
            highest = highest.max(done.read).max(acked.max().unwrap_or(0));
            lost_answers += done.writes.iter().filter(|w| w.acked.is_none()).count();
            all.extend(done.writes);
        }
        disk.remount();
        if rng.chance(1, 4) {
            // Cut again while keel up recovers from the first cut.
            recovery_cuts += 1;
            kube.respawn();
            std::thread::sleep(Duration::from_millis(rng.below(MAX_RECOVERY_MS)));
            disk.cut();
            kube.kill();
            disk.remount();
        }
        kube.kill_and_restart();

        let (list_rv, stored) = api
            .list()
            .unwrap_or_else(|e| panic!("{context}: list after the restart: {e}"));
        let revision = store_revision(&rt, &kube.store_url);
        assert!(
            list_rv >= highest && revision >= highest,
            "{context}: after the restart the list is at resourceVersion {list_rv} and the \
             store at revision {revision}, below {highest}, acknowledged or read before the cut"
        );
        check_stored(&stored, &all, &context);
        let name = format!("after-{round:02}");
        let rv = api
            .write(&name, &name, None)
            .unwrap_or_else(|e| panic!("{context}: a write after the restart: {e}"));
        assert!(
            rv > list_rv,
            "{context}: a write after the restart at {rv}, not above {list_rv}"
        );
        all.push(Write {
            name: name.clone(),
            value: name,
            acked: Some(rv),
        });
        highest = rv;
        eprintln!(
            "{test}: cut {round}: {} acknowledged writes kept, revision {revision}",
            all.iter().filter(|w| w.acked.is_some()).count()
        );
    }
    eprintln!(
        "{test}: {cuts} cuts (+{recovery_cuts} while keel up restarted) in {:.1?}: {} writes \
         acknowledged and kept, {lost_answers} answers lost to a cut, revision {highest}",
        started.elapsed(),
        all.iter().filter(|w| w.acked.is_some()).count()
    );
    kube.kill();
    std::mem::forget(guard);
}
