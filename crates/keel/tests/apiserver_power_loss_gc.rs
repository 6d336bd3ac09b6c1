//! Power cuts under `keel up` (every controller on, the garbage collector among them) while
//! clients write the new API groups and delete owners with dependents: as
//! `apiserver_power_loss`, keel up's data folder lives on a `keel_lazyfs` mount that drops
//! everything not made durable when the power is cut.
//!
//! Once, before the first cut: the widgets CRD. Each round, four clients through the real
//! kubectl: one creates Deployments and replaces each on the resourceVersion it was created
//! with; one does the same with Widgets (custom resources) and RoleBindings in turn; two
//! build families (a Deployment owning a ReplicaSet, which owns a pod, and a Widget, all with
//! `blockOwnerDeletion`, as the controllers write them) and delete each family's Deployment,
//! one in the foreground, the other in the background. At a point the seeded PRNG picks the power
//! is cut, keel up killed, the filesystem remounted with its durable state alone and keel up
//! restarted on it. Then:
//!
//! - every write acknowledged, in any round so far, is stored with its value and
//!   resourceVersion, unless a later write whose answer was lost replaced it (then above it);
//! - the list's resourceVersion is not below any resourceVersion acknowledged or read before
//!   the cut, and a new write is acknowledged above it;
//! - the garbage collector finishes the deletes the cut interrupted: soon no object names an
//!   owner that is gone, none is held by `foregroundDeletion`, and no Deployment whose delete
//!   was acknowledged is left.
//!
//! `KEEL_APISERVER_GC_POWER_CUTS` sets the number of cuts (4 by default); the seed is printed
//! and replayable with `KEEL_TEST_SEED`. Needs FUSE, as `apiserver_power_loss`.

mod gc_ops;

use std::time::{Duration, Instant};

use gc_ops::{Kind, Owner, Write};
use keel_testkit::Rng;
use keel_testkit::client_loops::{ClientLoops, Step};
use keel_testkit::configmap_writer::Api;
use keel_testkit::disk::power_test;
use keel_testkit::kube::Kube;

/// How long a kubectl request may take (kubectl's `--request-timeout`).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most acknowledged writes a round waits for before its cut (at least one).
const MAX_ACKS_BEFORE_CUT: u64 = 24;
/// The longest extra delay before a cut, in milliseconds.
const MAX_DELAY_MS: u64 = 600;
/// The longest wait for writes, or for the collector to finish.
const LIMIT: Duration = Duration::from_secs(30);

/// A family's owner and what came of its delete.
#[derive(Debug)]
struct Family {
    owner: String,
    /// `Foreground` or `Background`.
    policy: &'static str,
    /// The delete was answered 2xx.
    deleted: bool,
}

/// What one client did in a round.
#[derive(Debug, Default)]
struct Done {
    /// The client's number in its round: what it does (see [`client_step`]).
    client: usize,
    writes: Vec<Write>,
    families: Vec<Family>,
}

/// Creates and then replaces `kind`/`name`, recording both writes in `done`: whether the
/// create was acknowledged.
fn create_and_replace(api: &Api, kind: Kind, name: &str, done: &mut Done) -> bool {
    let create = Write::make(api, kind, name, &format!("{name}-c"), None);
    let acked = create.acked;
    done.writes.push(create);
    if let Some(rv) = acked {
        let value = format!("{name}-u");
        done.writes
            .push(Write::make(api, kind, name, &value, Some(rv)));
    }
    acked.is_some()
}

/// Builds family `name` and deletes its owner with `policy`; None if a step failed first.
fn family(api: &Api, name: &str, policy: &'static str) -> Option<Family> {
    let make = |kind: Kind, name: &str, owners: &[Owner]| {
        let answer = gc_ops::create(api, kind, &kind.manifest(name, name, owners)).ok()?;
        Some(Owner::of(kind, &answer))
    };
    let deployment = make(Kind::Deployment, name, &[])?;
    let rs = make(
        Kind::ReplicaSet,
        &format!("{name}-rs"),
        std::slice::from_ref(&deployment),
    )?;
    make(Kind::Pod, &format!("{name}-pod"), &[rs])?;
    make(Kind::Widget, &format!("{name}-w"), &[deployment])?;
    let deleted = gc_ops::delete(api, Kind::Deployment, name, policy).is_ok();
    Some(Family {
        owner: name.to_string(),
        policy,
        deleted,
    })
}

/// Step `n` of client `done.client` in `round`: client 0 creates and replaces a Deployment,
/// client 1 a Widget or a RoleBinding in turn, clients 2 and 3 build a family and delete its
/// owner in the foreground or the background.
fn client_step(api: &Api, round: usize, done: &mut Done, n: usize) -> Step {
    let ok = match done.client {
        0 => {
            let name = format!("d-r{round:02}-{n:04}");
            create_and_replace(api, Kind::Deployment, &name, done)
        }
        1 => {
            let kind = [Kind::Widget, Kind::RoleBinding][n % 2];
            let name = format!("x-r{round:02}-{n:04}");
            create_and_replace(api, kind, &name, done)
        }
        client => {
            let name = format!("own{client}-r{round:02}-{n:04}");
            let policy = ["Foreground", "Background"][client % 2];
            let made = family(api, &name, policy);
            let ok = made.as_ref().is_some_and(|f| f.deleted);
            done.families.extend(made);
            ok
        }
    };
    Step {
        acked: usize::from(ok),
        failed: usize::from(!ok),
    }
}

/// The four clients of `round`, in threads of their own, until stopped.
fn start_clients(api: &Api, round: usize) -> ClientLoops<Done> {
    let states = (0..4)
        .map(|client| Done {
            client,
            ..Done::default()
        })
        .collect();
    let api = api.clone();
    ClientLoops::start(states, move |done, n| client_step(&api, round, done, n))
}

#[test]
fn power_cuts_under_new_kinds_and_interrupted_deletes() {
    let test = "apiserver_power_loss_gc";
    let Some((mut disk, cuts, guard)) = power_test(test, "KEEL_APISERVER_GC_POWER_CUTS", 4) else {
        return;
    };
    let seed = guard.seed;
    let mut rng = Rng::new(seed);
    let started = Instant::now();
    let mut kube = Kube::start_up_in(&disk.mnt.join("keel.data"));
    let api = Api::of(&kube, REQUEST_TIMEOUT);
    gc_ops::create_widgets_crd(&api);
    let mut all = Done::default();
    let mut highest = 0;
    for round in 0..cuts {
        let context = format!("cut {round} (KEEL_TEST_SEED={seed})");
        let clients = start_clients(&api, round);
        clients.wait_acks(1 + rng.below(MAX_ACKS_BEFORE_CUT) as usize, LIMIT, &context);
        std::thread::sleep(Duration::from_millis(rng.below(MAX_DELAY_MS)));
        disk.cut();
        kube.kill();
        for done in clients.finish() {
            let acked = done.writes.iter().filter_map(|w| w.acked);
            highest = highest.max(acked.max().unwrap_or(0));
            all.writes.extend(done.writes);
            all.families.extend(done.families);
        }
        disk.remount();
        kube.kill_and_restart();

        let (list_rv, _) = gc_ops::list(&api, Kind::Deployment)
            .unwrap_or_else(|e| panic!("{context}: list after the restart: {e}"));
        assert!(
            list_rv >= highest,
            "{context}: after the restart the list is at resourceVersion {list_rv}, below \
             {highest}, acknowledged before the cut"
        );
        gc_ops::check_kept(&api, &all.writes, &context);
        gc_ops::wait_collected(&kube, &gc_ops::KINDS, LIMIT, &context);
        let (_, deployments) = gc_ops::list(&api, Kind::Deployment).expect("list Deployments");
        for family in all.families.iter().filter(|f| f.deleted) {
            assert!(
                !deployments
                    .iter()
                    .any(|d| d["metadata"]["name"] == family.owner.as_str()),
                "{context}: {family:?} is still there"
            );
        }
        let name = format!("after-{round:02}");
        let after = Write::make(&api, Kind::Widget, &name, &name, None);
        let rv = after
            .acked
            .unwrap_or_else(|| panic!("{context}: a write after the restart failed"));
        assert!(
            rv > list_rv,
            "{context}: a write after the restart at {rv}, not above {list_rv}"
        );
        highest = rv;
        all.writes.push(after);
        eprintln!(
            "{test}: cut {round}: {} acknowledged writes kept, {} families, {} of their deletes \
             acknowledged ({} in the foreground), revision {rv}",
            all.writes.iter().filter(|w| w.acked.is_some()).count(),
            all.families.len(),
            all.families.iter().filter(|f| f.deleted).count(),
            all.families
                .iter()
                .filter(|f| f.deleted && f.policy == "Foreground")
                .count(),
        );
    }
    eprintln!("{test}: {cuts} cuts in {:.1?}", started.elapsed());
    kube.kill();
    std::mem::forget(guard);
}
