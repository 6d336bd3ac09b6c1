//! The new API groups and the garbage collector through a leader election: `keel apiserver
//! --controllers=namespace,garbagecollector` on a follower of a three-member `keel store`
//! cluster, driven with the real kubectl.
//!
//! Before the fault: the widgets CRD, a Deployment owning a ReplicaSet (owning two pods) and
//! a Widget, as the deployment and replicaset controllers would write them (keel runs
//! neither), all with `blockOwnerDeletion`. Watches of the widgets and the pods run all along,
//! each resumed from its last resourceVersion whenever it ends, and a writer creates and
//! replaces Widgets through the apiserver, tolerating failures. Then the store's leader is
//! killed with SIGKILL; once the survivors elect a new one:
//!
//! - Widget writes are acknowledged again;
//! - the Deployment, deleted with `propagationPolicy: Foreground`, waits with
//!   `foregroundDeletion` until the collector has deleted its ReplicaSet, that one's pods and
//!   its Widget, and then goes itself; nothing of it is left;
//! - every acknowledged Widget write is stored and was delivered to the widgets' watch with
//!   its resourceVersion, and neither watch delivered a resourceVersion at or below one it
//!   had delivered before, across the election; neither was told 410 (nothing compacts while
//!   the test runs, see `apiserver_follower`).

mod gc_ops;

use std::time::{Duration, Instant};

use gc_ops::{Kind, Owner, Write};
use keel_testkit::client_loops::{ClientLoops, Step};
use keel_testkit::configmap_writer::Api;
use keel_testkit::kube::Kube;
use keel_testkit::kv::agreed_leader;
use keel_testkit::rv_watch::{RvWatch, Watched};
use keel_testkit::{Cluster, Flavor};

/// How long a kubectl request may take (kubectl's `--request-timeout`).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest wait for anything that must happen: a leader, writes resuming, the collector,
/// a watch catching up.
const LIMIT: Duration = Duration::from_secs(30);

/// Creates `kind`/`name` owned by `owners` through `api`, which must succeed: its owner
/// handle.
fn owned(api: &Api, kind: Kind, name: &str, owners: &[Owner]) -> Owner {
    let answer = gc_ops::create(api, kind, &kind.manifest(name, name, owners))
        .unwrap_or_else(|e| panic!("create {kind:?} {name}: {e}"));
    Owner::of(kind, &answer)
}

/// What the Widget writer did: its writes, and the highest resourceVersion acknowledged.
#[derive(Default)]
struct Widgets {
    writes: Vec<Write>,
    last: i64,
}

/// A writer of Widgets in a thread: each a create, then a replace on the resourceVersion
/// answered; failures are recorded, not fatal, and acknowledged resourceVersions must rise.
fn start_widget_writer(api: &Api) -> ClientLoops<Widgets> {
    let api = api.clone();
    ClientLoops::start(vec![Widgets::default()], move |widgets, n| {
        let name = format!("w-{n:04}");
        let create = Write::make(&api, Kind::Widget, &name, &format!("{name}-c"), None);
        let mut done = vec![create.clone()];
        if let Some(rv) = create.acked {
            let value = format!("{name}-u");
            done.push(Write::make(&api, Kind::Widget, &name, &value, Some(rv)));
        }
        let mut step = Step::default();
        for w in &done {
            if let Some(rv) = w.acked {
                let last = widgets.last;
                assert!(rv > last, "{w:?} acknowledged after a write at {last}");
                widgets.last = rv;
                step.acked += 1;
            } else {
                step.failed += 1;
            }
        }
        widgets.writes.extend(done);
        step
    })
}

#[test]
fn a_foreground_delete_and_custom_resources_through_a_leader_election() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut cluster = Cluster::start(Flavor::Keel, 3, &[]);
    let leader = rt.block_on(agreed_leader(&cluster, &[0, 1, 2], LIMIT));
    let follower = (leader + 1) % 3;
    let kube = Kube::start_on_with(
        &cluster.members[follower].client_url,
        &["--controllers=namespace,garbagecollector"],
    );
    let api = Api::of(&kube, REQUEST_TIMEOUT);
    gc_ops::create_widgets_crd(&api);

    let deployment = owned(&api, Kind::Deployment, "web", &[]);
    let rs = owned(
        &api,
        Kind::ReplicaSet,
        "web-1",
        std::slice::from_ref(&deployment),
    );
    for pod in ["web-1-a", "web-1-b"] {
        owned(&api, Kind::Pod, pod, std::slice::from_ref(&rs));
    }
    owned(
        &api,
        Kind::Widget,
        "web-widget",
        std::slice::from_ref(&deployment),
    );
    let (since, _) = gc_ops::list(&api, Kind::Widget).expect("list widgets");
    let widgets = RvWatch::start(&api, &Kind::Widget.path(), since, gc_ops::value_of);
    let pods = RvWatch::start(&api, &Kind::Pod.path(), since, gc_ops::value_of);

    let writer = start_widget_writer(&api);
    writer.wait_acks(6, LIMIT, "before the kill");
    let at_kill = writer.acks();
    cluster.members[leader].kill();
    let killed = Instant::now();
    let survivors: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let new_leader = rt.block_on(agreed_leader(&cluster, &survivors, LIMIT));
    let elected = killed.elapsed();
    let at_election = writer.acks();
    writer.wait_acks(at_election + 1, LIMIT, "after the election");

    // The foreground delete, tried again while it fails (a request may still meet the
    // election's aftermath).
    let deadline = Instant::now() + LIMIT;
    let answer = loop {
        match gc_ops::delete(&api, Kind::Deployment, "web", "Foreground") {
            Ok(answer) => break answer,
            Err(e) if e.contains("NotFound") || e.contains("not found") => {
                panic!("the Deployment is gone before its delete: {e}")
            }
            Err(e) => assert!(Instant::now() < deadline, "delete the Deployment: {e}"),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // The answer is the owner as it waits for its dependents (or a Success Status, if the
    // collector was done before the answer was written).
    if answer["kind"] == "Deployment" {
        assert!(
            answer["metadata"]["deletionTimestamp"].is_string(),
            "{answer}"
        );
        let finalizers = answer["metadata"]["finalizers"].to_string();
        assert!(finalizers.contains("foregroundDeletion"), "{answer}");
    }
    gc_ops::eventually(
        "the Deployment, its ReplicaSet, pods and Widget are gone",
        LIMIT,
        || {
            let left: Vec<String> = [
                (Kind::Deployment, "web"),
                (Kind::ReplicaSet, "web-1"),
                (Kind::Pod, "web-1-a"),
                (Kind::Pod, "web-1-b"),
                (Kind::Widget, "web-widget"),
            ]
            .iter()
            .filter(|(kind, name)| {
                let path = format!("{}/{name}", kind.path());
                !api.run(&["get", "--raw", &path], None)
                    .is_err_and(|e| e.contains("NotFound") || e.contains("not found"))
            })
            .map(|(kind, name)| format!("{kind:?} {name}"))
            .collect();
            left.is_empty()
        },
    );
    gc_ops::wait_collected(&kube, &gc_ops::KINDS, LIMIT, "after the foreground delete");

    // Widget writes keep working after all that.
    writer.wait_acks(writer.acks() + 4, LIMIT, "after the foreground delete");
    let writes = writer.finish().pop().expect("the one writer").writes;
    let acked = writes.iter().filter(|w| w.acked.is_some()).count();
    eprintln!(
        "apiserver_follower_gc: m{leader} (leader) killed after {at_kill} Widget writes; m{new_leader} \
         elected {elected:?} later; {acked} acknowledged, {} failed or timed out; the \
         apiserver is on m{follower}",
        writes.len() - acked
    );
    gc_ops::check_kept(&api, &writes, "after the election");
    let last = writes.iter().filter_map(|w| w.acked).max().unwrap_or(0);
    widgets.wait_past(last, LIMIT, "the widgets' watch");
    let widgets = widgets.stop();
    gc_ops::check_watch(&widgets, &writes, "the widgets' watch across the election");
    let deleted = |w: &Watched, name: &str| {
        w.events
            .iter()
            .any(|e| e.kind == "DELETED" && e.name == name)
    };
    pods.wait_until("the pods' watch delivers both deletes", LIMIT, |w| {
        deleted(w, "web-1-a") && deleted(w, "web-1-b")
    });
    let pods = pods.stop();
    gc_ops::check_watch(&pods, &[], "the pods' watch across the election");
    let (now, _) = gc_ops::list(&api, Kind::Widget).expect("list widgets");
    assert!(
        now >= last,
        "the widgets list at {now}, below the acknowledged {last}"
    );
}
