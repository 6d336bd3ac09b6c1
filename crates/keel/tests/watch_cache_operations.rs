//! What an operator does to the apiserver's watch cache, with the real kubectl and `keel`.
//!
//! - `cached_reads_match_the_store_across_kill_9`: under `keel up`, writers create 50
//!   ConfigMaps and 5 Leases and replace some again and again with a PUT on the
//!   resourceVersion they last got (as `kubectl replace` does, and a kubelet renews its
//!   Lease); keel up is killed with SIGKILL mid-write and restarted on its data folder. Then,
//!   per kind, the lists with resourceVersion unset (a consistent read from the cache), "0"
//!   (the cache, once it has reached that revision) and NotOlderThan it hold exactly the
//!   objects of the Exact list at it (from the store), JSON for JSON; every acknowledged
//!   write is there with its resourceVersion (or replaced by a later write whose answer the
//!   kill lost); no resourceVersion went backwards; and a PUT from a resourceVersion taken
//!   before the kill is refused 409 Conflict (an update starts from the cached object: a
//!   stale start costs a failed Txn, never a silent overwrite), one from the current taken.
//! - `streaming_list_across_a_store_restart`: `keel apiserver` on a `keel store` of its own
//!   holds 300 ConfigMaps while a writer adds more; two clients open streaming lists
//!   (`sendInitialEvents=true`) one after another while the store is killed with SIGKILL and
//!   restarted four times. Each stream either sends every object acknowledged before it
//!   started (and nothing never written) as ADDED, then the bookmark annotated
//!   `k8s.io/initial-events-end: "true"` at a resourceVersion not older than any of them, or
//!   ends without that bookmark: never a bookmark after a partial set. With the store back a
//!   streaming list sends exactly what a consistent list holds; the apiserver never exited.
//! - `a_stalled_watcher_is_ended_and_nothing_else_is_hurt`: under `keel up`, one ConfigMap
//!   watcher's kubectl is frozen with SIGSTOP (its connection open, unread) beside one that
//!   reads, and 480 ConfigMaps of 100 KiB (48 MiB: more than the watch cache's 32 MiB buffer
//!   plus what the frozen connection absorbs) are created. Every create is acknowledged; the
//!   reading watcher sees each in resourceVersion order and is not ended; the frozen one is
//!   ended and counted in `apiserver_terminated_watchers_total` while still frozen, as
//!   kube-apiserver's cacher closes a watcher it cannot hand events to within its budget;
//!   running again, it reads a gapless prefix of the creates and its stream ends.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_testkit::configmap_writer::{Api, CONFIGMAPS, rv_of};
use keel_testkit::kube::{Kube, Stack};
use keel_testkit::{Flavor, Rng, SeedReport, Server, wait};
use serde_json::{Value, json};

/// How long one kubectl request may take (kubectl's `--request-timeout`).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest wait for anything that must happen.
const LIMIT: Duration = Duration::from_secs(60);

/// The items of a list answer as name -> object.
fn by_name(list: &Value) -> BTreeMap<String, Value> {
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let name = |o: &Value| o["metadata"]["name"].as_str().unwrap_or("").to_string();
    items.into_iter().map(|o| (name(&o), o)).collect()
}

/// An object's (or an event's object's) resourceVersion and name.
fn rv_name(object: &Value) -> (i64, String) {
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    (rv_of(object), name.to_string())
}

/// A GET of `path` through kubectl, as JSON.
fn get(api: &Api, path: &str) -> Result<Value, String> {
    api.run(&["get", "--raw", path], None)
}

// ---- cached_reads_match_the_store_across_kill_9 ----

/// The kinds the first test writes, in the namespace `ops`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    ConfigMap,
    Lease,
}

impl Kind {
    fn collection(self) -> &'static str {
        match self {
            Kind::ConfigMap => "/api/v1/namespaces/ops/configmaps",
            Kind::Lease => "/apis/coordination.k8s.io/v1/namespaces/ops/leases",
        }
    }

    /// The object `name` holding `value` (a ConfigMap's `data.v`, a Lease's renewTime), on
    /// resourceVersion `rv` for a PUT.
    fn body(self, name: &str, value: &str, rv: Option<i64>) -> Value {
        let mut body = match self {
            Kind::ConfigMap => json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name}, "data": {"v": value}}),
            Kind::Lease => json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": value}}),
        };
        if let Some(rv) = rv {
            body["metadata"]["resourceVersion"] = json!(rv.to_string());
        }
        body
    }

    fn value(self, object: &Value) -> &str {
        let value = match self {
            Kind::ConfigMap => &object["data"]["v"],
            Kind::Lease => &object["spec"]["renewTime"],
        };
        value.as_str().unwrap_or("")
    }

    /// A value unique to write `n` of writer `w`.
    fn value_for(self, w: usize, n: usize) -> String {
        match self {
            Kind::ConfigMap => format!("w{w}-{n}"),
            Kind::Lease => format!("2025-01-01T{w:02}:{:02}:{:02}.{n:06}Z", n / 60 % 60, n % 60),
        }
    }
}

/// One write and what came of it.
#[derive(Clone, Debug)]
struct Write {
    kind: Kind,
    name: String,
    value: String,
    /// The resourceVersion answered; None when the write failed or its answer was lost.
    acked: Option<i64>,
}

/// Creates (`rv` None) or replaces on `rv` the object `name` with `value`: the
/// resourceVersion answered.
fn put(api: &Api, kind: Kind, name: &str, value: &str, rv: Option<i64>) -> Result<i64, String> {
    let body = kind.body(name, value, rv);
    let (verb, path) = match rv {
        None => ("create", kind.collection().to_string()),
        Some(_) => ("replace", format!("{}/{name}", kind.collection())),
    };
    let answer = api.run(&[verb, "--raw", &path, "-f", "-"], Some(&body))?;
    assert_eq!(kind.value(&answer), value, "the answer to a write");
    Ok(rv_of(&answer))
}

/// Whether writers stop, and how many writes they had acknowledged.
type Run = (AtomicBool, AtomicUsize);

/// A writer: creates each of `objects`, then replaces the first `hot` of them over and over
/// on the resourceVersion it last got, until `stop` or its first failure.
fn writer(api: Api, w: usize, objects: &[(Kind, String)], hot: usize, run: &Run) -> Vec<Write> {
    let (stop, acks) = run;
    let mut writes = Vec::new();
    let mut rvs: Vec<Option<i64>> = vec![None; objects.len()];
    for n in 0.. {
        if stop.load(SeqCst) {
            break;
        }
        let i = if n < objects.len() { n } else { n % hot };
        let (kind, name) = (objects[i].0, objects[i].1.clone());
        let value = kind.value_for(w, n);
        let acked = put(&api, kind, &name, &value, rvs[i]).ok();
        #[rustfmt::skip]
        writes.push(Write { kind, name, value, acked });
        let Some(rv) = acked else { break };
        rvs[i] = Some(rv);
        acks.fetch_add(1, SeqCst);
    }
    writes
}

/// Checks that the cache's lists of `kind` (consistent, "0", NotOlderThan) match the store's
/// Exact list at the consistent list's resourceVersion, object by object, and that each
/// acknowledged write is there; returns that resourceVersion and the objects.
fn check_reads(
    api: &Api,
    kind: Kind,
    writes: &[Write],
    context: &str,
) -> (i64, BTreeMap<String, Value>) {
    let list = |query: &str| {
        let path = format!("{}?{query}", kind.collection());
        get(api, &path).unwrap_or_else(|e| panic!("{context}: {path}: {e}"))
    };
    let consistent = list("");
    let at = rv_of(&consistent);
    let store = list(&format!("resourceVersionMatch=Exact&resourceVersion={at}"));
    assert_eq!(rv_of(&store), at, "{context}: the Exact list");
    let zero = wait::until(&format!("{context}: the cache at {at}"), LIMIT, || {
        let zero = list("resourceVersion=0");
        let reached = rv_of(&zero);
        (reached >= at)
            .then_some(zero)
            .ok_or(format!("at {reached}"))
    });
    let not_older = list(&format!(
        "resourceVersionMatch=NotOlderThan&resourceVersion={at}"
    ));
    let want = by_name(&store);
    let reads = [
        ("unset", consistent),
        ("0", zero),
        ("NotOlderThan", not_older),
    ];
    for (read, got) in reads {
        let got = by_name(&got);
        let names: BTreeSet<&String> = got.keys().chain(want.keys()).collect();
        let differ: Vec<String> = names
            .into_iter()
            .filter(|n| got.get(*n) != want.get(*n))
            .map(|n| format!("  {n}: {:?}\n    store: {:?}", got.get(n), want.get(n)))
            .collect();
        let differ = differ.join("\n");
        assert!(
            differ.is_empty(),
            "{context}: the {kind:?} list with resourceVersion {read} differs from the store's at {at}:\n{differ}"
        );
    }
    let mut by_object: BTreeMap<&str, Vec<&Write>> = BTreeMap::new();
    for w in writes.iter().filter(|w| w.kind == kind) {
        by_object.entry(&w.name).or_default().push(w);
    }
    for (name, tries) in by_object {
        let Some(last) = tries.iter().rposition(|w| w.acked.is_some()) else {
            continue;
        };
        let (acked, rv) = (tries[last], tries[last].acked.unwrap());
        let stored = want
            .get(name)
            .unwrap_or_else(|| panic!("{context}: {name} is gone; acknowledged: {acked:?}"));
        let (value, stored_rv) = (kind.value(stored), rv_of(stored));
        let later = tries[last + 1..].iter().any(|w| w.value == value);
        assert!(
            (value == acked.value && stored_rv == rv) || (later && stored_rv > rv),
            "{context}: {name} holds {value} at {stored_rv}; acknowledged: {acked:?}, tried after it: {:?}",
            &tries[last + 1..]
        );
    }
    (at, want)
}

#[test]
fn cached_reads_match_the_store_across_kill_9() {
    let guard = SeedReport::new("cached_reads_match_the_store_across_kill_9");
    let mut rng = Rng::new(guard.seed);
    let mut kube = Kube::start(Stack::Up);
    let api = Api::of(&kube, REQUEST_TIMEOUT);
    kube.kubectl_ok(&["create", "namespace", "ops"]);
    let run: Arc<Run> = Arc::default();
    // Two ConfigMap writers of 25 each (the first 8 replaced over and over), one Lease
    // writer renewing all 5.
    let objects =
        |kind, prefix: &str, n| (0..n).map(|i| (kind, format!("{prefix}-{i:02}"))).collect();
    let sets: [(Vec<(Kind, String)>, usize); 3] = [
        (objects(Kind::ConfigMap, "cm-0", 25), 8),
        (objects(Kind::ConfigMap, "cm-1", 25), 8),
        (objects(Kind::Lease, "lease", 5), 5),
    ];
    let writers: Vec<_> = sets
        .into_iter()
        .enumerate()
        .map(|(w, (objects, hot))| {
            let (api, run) = (api.clone(), run.clone());
            std::thread::spawn(move || writer(api, w, &objects, hot, &run))
        })
        .collect();
    // All created, then some replaced a few times each.
    let before_kill = 55 + 45 + rng.below(40) as usize;
    wait::until(&format!("{before_kill} acknowledged writes"), LIMIT, || {
        let n = run.1.load(SeqCst);
        assert!(
            !writers.iter().any(|w| w.is_finished()),
            "a writer stopped after {n} acknowledged writes"
        );
        (n >= before_kill).then_some(()).ok_or(format!("{n}"))
    });
    kube.kill();
    run.0.store(true, SeqCst);
    let writes: Vec<Write> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        .collect();
    kube.kill_and_restart();

    let max_acked = writes.iter().filter_map(|w| w.acked).max().unwrap();
    let context = format!("after kill -9 (KEEL_TEST_SEED={})", guard.seed);
    for kind in [Kind::ConfigMap, Kind::Lease] {
        let (at, stored) = check_reads(&api, kind, &writes, &context);
        assert!(
            at >= max_acked,
            "{context}: the {kind:?} list at {at}, below {max_acked} acknowledged before the kill"
        );
        // A PUT from a resourceVersion taken before the kill (an object's create, since
        // replaced) is refused and changes nothing; one from the current one is taken.
        let replaced = |w: &&Write| w.kind == kind && w.acked < Some(rv_of(&stored[&w.name]));
        let Some(w) = writes.iter().filter(|w| w.acked.is_some()).find(replaced) else {
            panic!("{context}: no {kind:?} replaced after an acknowledged write");
        };
        let (name, first, path) = (
            &w.name,
            w.acked.unwrap(),
            format!("{}/{}", kind.collection(), w.name),
        );
        let stale = put(&api, kind, name, &kind.value_for(9, 1), Some(first));
        let conflict = stale.as_ref().is_err_and(|e| e.contains("(Conflict)"));
        assert!(
            conflict,
            "{context}: a PUT of {name} from {first}, before the kill: {stale:?}"
        );
        let mut now = get(&api, &path).unwrap_or_else(|e| panic!("{context}: {path}: {e}"));
        // A list's items say neither apiVersion nor kind.
        now.as_object_mut()
            .unwrap()
            .retain(|k, _| k != "apiVersion" && k != "kind");
        assert_eq!(now, stored[name], "{context}: {name} after a refused PUT");
        let rv = put(&api, kind, name, &kind.value_for(9, 2), Some(rv_of(&now)));
        assert!(
            rv.as_ref().is_ok_and(|rv| *rv > at),
            "{context}: a PUT of {name} from now: {rv:?}"
        );
    }
    std::mem::forget(guard);
}

// ---- streaming_list_across_a_store_restart ----

/// Where the second test's objects live, all labelled `set=wl`.
const WL: &str = "/api/v1/namespaces/wl/configmaps";
/// The ConfigMaps there at the start.
const BASE: usize = 300;
/// Store kills and restarts.
const STORE_RESTARTS: usize = 4;

/// What was written in the second test: objects acknowledged (name -> resourceVersion), and
/// every name tried.
#[derive(Default)]
struct Known {
    acked: BTreeMap<String, i64>,
    tried: BTreeSet<String>,
}

/// A complete streaming list: its initial objects (name -> resourceVersion) and the
/// resourceVersion of the bookmark that ends them. None: it ended or failed before that.
type Streamed = Option<(BTreeMap<String, i64>, i64)>;

/// Checks a streaming list's events as `kubectl get --raw` printed them: `before` were
/// acknowledged before it started, `known` is what was written by the time it ended.
fn check_stream(
    out: &[u8],
    before: &BTreeMap<String, i64>,
    known: &Known,
) -> Result<Streamed, String> {
    let text = String::from_utf8_lossy(out);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut initial = BTreeMap::new();
    for (i, line) in lines.iter().enumerate() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            // Only a stream cut mid-line may end with a partial line.
            let last = i + 1 == lines.len();
            return last.then_some(None).ok_or(format!("not JSON: {line}"));
        };
        let object = &event["object"];
        let end = object["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true";
        match event["type"].as_str() {
            Some("ADDED") => {
                let (rv, name) = rv_name(object);
                if initial.insert(name.clone(), rv).is_some() {
                    return Err(format!("{name} sent twice"));
                }
            }
            Some("BOOKMARK") if end => {
                let at = rv_of(object);
                // Every object acknowledged before the stream, as acknowledged; nothing never
                // written, or newer than the bookmark.
                let missing = before.iter().filter(|(n, rv)| initial.get(*n) != Some(*rv));
                let missing = missing.map(|(n, rv)| format!("{n} at {rv}: {:?}", initial.get(n)));
                let extra = initial
                    .iter()
                    .filter(|(n, rv)| !known.tried.contains(*n) || **rv > at);
                let wrong: Vec<_> = missing
                    .chain(extra.map(|(n, rv)| format!("{n} at {rv}")))
                    .collect();
                if !wrong.is_empty() {
                    let (n, shown) = (initial.len(), &wrong[..wrong.len().min(10)]);
                    return Err(format!(
                        "the initial events ended at {at} after {n} objects: {shown:?}"
                    ));
                }
                return Ok(Some((initial, at)));
            }
            Some("ERROR") => return Ok(None),
            _ => return Err(format!("before the end of the initial events: {line}")),
        }
    }
    Ok(None)
}

/// Opens one streaming list of the `set=wl` ConfigMaps (which ends 2 s after its start) and
/// checks it (see [`check_stream`]).
fn stream_once(api: &Api, known: &Mutex<Known>) -> Result<Streamed, String> {
    let path = format!(
        "{WL}?watch=1&labelSelector=set%3Dwl&timeoutSeconds=2&sendInitialEvents=true\
         &resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    );
    let before = known.lock().unwrap().acked.clone();
    let mut kubectl = api.command(&["--request-timeout=60s", "get", "--raw", &path]);
    let out = kubectl.stdin(Stdio::null()).output().expect("run kubectl");
    check_stream(&out.stdout, &before, &known.lock().unwrap())
}

#[test]
fn streaming_list_across_a_store_restart() {
    let guard = SeedReport::new("streaming_list_across_a_store_restart");
    let context = format!("KEEL_TEST_SEED={}", guard.seed);
    let mut rng = Rng::new(guard.seed);
    let mut store = Server::start(Flavor::Keel);
    let mut kube = Kube::start_on(&store.client_url);
    let api = Api::of(&kube, REQUEST_TIMEOUT);
    kube.kubectl_ok(&["create", "namespace", "wl"]);
    let items: Vec<Value> = (0..BASE)
        .map(|i| json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("base-{i:03}"), "namespace": "wl", "labels": {"set": "wl"}}}))
        .collect();
    let file = kube.scratch.join("base.json");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(&file, list.to_string()).unwrap();
    kube.kubectl_ok(&["create", "-f", file.to_str().unwrap()]);
    let known = Arc::new(Mutex::new(Known::default()));
    let labelled = format!("{WL}?labelSelector=set%3Dwl");
    for (name, object) in by_name(&get(&api, &labelled).unwrap()) {
        let mut known = known.lock().unwrap();
        known.tried.insert(name.clone());
        known.acked.insert(name, rv_of(&object));
    }
    assert_eq!(known.lock().unwrap().acked.len(), BASE, "created");

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (api, known, stop) = (api.clone(), known.clone(), stop.clone());
        std::thread::spawn(move || {
            for name in (0..).map(|n| format!("extra-{n:05}")) {
                if stop.load(SeqCst) {
                    break;
                }
                known.lock().unwrap().tried.insert(name.clone());
                let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "labels": {"set": "wl"}}});
                match api.run(&["create", "--raw", WL, "-f", "-"], Some(&body)) {
                    Ok(created) => drop(known.lock().unwrap().acked.insert(name, rv_of(&created))),
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        })
    };
    // Streams that ended before their bookmark, and complete ones.
    let counts: Arc<[AtomicUsize; 2]> = Arc::default();
    let streams: Vec<_> = (0..2)
        .map(|_| {
            let (api, known, stop, counts) =
                (api.clone(), known.clone(), stop.clone(), counts.clone());
            std::thread::spawn(move || {
                while !stop.load(SeqCst) {
                    let streamed = stream_once(&api, &known)
                        .unwrap_or_else(|e| panic!("a streaming list: {e}"));
                    counts[usize::from(streamed.is_some())].fetch_add(1, SeqCst);
                }
            })
        })
        .collect();
    // Between kills, at least one stream completes.
    for restart in 0..=STORE_RESTARTS {
        let done = counts[1].load(SeqCst);
        wait::until(
            &format!("{context}: a streaming list to complete (restart {restart})"),
            LIMIT,
            || {
                let stopped = streams.iter().any(|t| t.is_finished()) || writer.is_finished();
                assert!(!stopped, "{context}: a stream or the writer stopped");
                let now = counts[1].load(SeqCst);
                (now > done).then_some(()).ok_or(format!("{now} complete"))
            },
        );
        if restart == STORE_RESTARTS {
            break;
        }
        std::thread::sleep(Duration::from_millis(rng.below(1500)));
        store.kill();
        std::thread::sleep(Duration::from_millis(200 + rng.below(1800)));
        store.restart();
    }
    stop.store(true, SeqCst);
    for t in streams.into_iter().chain([writer]) {
        t.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
    }
    let acked = known.lock().unwrap().acked.clone();
    eprintln!(
        "{context}: {} streaming lists complete, {} ended before their bookmark; {} objects",
        counts[1].load(SeqCst),
        counts[0].load(SeqCst),
        acked.len()
    );

    // The store is back: a streaming list sends exactly what a consistent list holds.
    let listed = get(&api, &labelled).unwrap();
    let want: BTreeMap<String, i64> = by_name(&listed)
        .values()
        .map(rv_name)
        .map(|(rv, n)| (n, rv))
        .collect();
    let lost: Vec<_> = acked
        .iter()
        .filter(|(n, rv)| want.get(*n) != Some(rv))
        .collect();
    assert!(
        lost.is_empty(),
        "{context}: acknowledged creates not listed: {lost:?}"
    );
    match stream_once(&api, &known) {
        Ok(Some((objects, at))) => {
            assert_eq!(
                objects, want,
                "{context}: the streaming list after the restarts"
            );
            assert!(
                at >= rv_of(&listed),
                "{context}: its end at {at}, before the list"
            );
        }
        other => panic!("{context}: the streaming list after the restarts: {other:?}"),
    }
    assert!(
        kube.is_running(),
        "{context}: keel apiserver exited:\n{}",
        kube.log()
    );
    std::mem::forget(guard);
}

// ---- a_stalled_watcher_is_ended_and_nothing_else_is_hurt ----

/// ConfigMaps of [`BIG`] bytes created while one watcher is frozen.
const BIG_WRITES: usize = 480;
/// The size of each one's value.
const BIG: usize = 100 << 10;
/// Writers creating them.
const BIG_WRITERS: usize = 4;
/// The counter of watchers ended for falling behind, and the label of the kind watched.
const TERMINATED: [&str; 2] = [
    "apiserver_terminated_watchers_total",
    r#"resource="configmaps""#,
];

#[test]
fn a_stalled_watcher_is_ended_and_nothing_else_is_hurt() {
    let mut kube = Kube::start(Stack::Up);
    let api = Api::of(&kube, REQUEST_TIMEOUT);
    let start = rv_of(&get(&api, CONFIGMAPS).unwrap());
    // Not the kube-root-ca.crt keel up's controller may write meanwhile.
    let ours = "fieldSelector=metadata.name%21%3Dkube-root-ca.crt";
    let path = format!("{CONFIGMAPS}?watch=1&resourceVersion={start}&{ours}");
    let stalled = kube.watch(&path);
    let mut reading = kube.watch(&path);
    let marker = api.write("marker", "m", None).unwrap();
    for (who, watcher) in [("stalled", &stalled), ("reading", &reading)] {
        let event = watcher.next(LIMIT).unwrap_or_default();
        assert_eq!(
            rv_name(&event["object"]),
            (marker, "marker".into()),
            "{who}: {event}"
        );
    }
    // Frozen: its kubectl keeps the connection open and reads nothing more.
    stalled.signal("-STOP");
    let [counter, label] = TERMINATED;
    let terminated_before = kube.metric_sum(counter, label);

    let value = "x".repeat(BIG);
    let writers: Vec<_> = (0..BIG_WRITERS)
        .map(|w| {
            let (api, value) = (api.clone(), value.clone());
            std::thread::spawn(move || {
                let names = (0..BIG_WRITES / BIG_WRITERS).map(|i| format!("big-{w}-{i:03}"));
                names
                    .map(|name| (api.write(&name, &value, None), name))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut acked = BTreeMap::new();
    for w in writers {
        for (rv, name) in w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
            acked.insert(
                rv.unwrap_or_else(|e| panic!("a create of {name}: {e}")),
                name,
            );
        }
    }
    let want: Vec<(i64, String)> = acked.into_iter().collect();

    // The reading watcher sees every create, in resourceVersion order, and is not ended.
    let mut seen = Vec::new();
    while seen.len() < want.len() {
        let Some(event) = reading.next(LIMIT) else {
            let ended = reading.exited();
            panic!(
                "the reading watcher saw {} of {} creates, then nothing (ended: {ended})",
                seen.len(),
                want.len()
            );
        };
        assert_eq!(event["type"], "ADDED", "{}", event["object"]["metadata"]);
        seen.push(rv_name(&event["object"]));
    }
    assert!(
        seen == want,
        "the reading watcher's events are not the creates"
    );
    assert!(!reading.exited(), "the reading watcher was ended");

    // The frozen watcher, behind by more than the buffer holds, is ended and counted while
    // still frozen.
    let counted = |limit: Duration| {
        let deadline = Instant::now() + limit;
        loop {
            let now = kube.metric_sum(counter, label);
            if now > terminated_before || Instant::now() > deadline {
                return now;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let while_frozen = counted(LIMIT);
    let registered = kube.metric_sum("apiserver_registered_watchers", r#"kind="ConfigMap""#);
    // Running again, it reads what its connection held, a prefix of the creates with no gap,
    // and its stream ends.
    stalled.signal("-CONT");
    let mut resumed = Vec::new();
    while let Some(event) = stalled.next(LIMIT) {
        resumed.push(rv_name(&event["object"]));
    }
    let after_resume = counted(Duration::ZERO);
    assert!(
        while_frozen > terminated_before,
        "the frozen watcher, {} creates ({} MiB) behind, was not ended while frozen: {counter}{{{label}}} stayed \
         at {terminated_before} for {LIMIT:?} with {registered} ConfigMap watchers registered (it and the \
         reading one); once its kubectl ran again it read {} more events and the \
         counter was {after_resume}",
        want.len(),
        (want.len() * BIG) >> 20,
        resumed.len()
    );
    assert!(
        resumed.len() < want.len() && resumed[..] == want[..resumed.len()],
        "the ended watcher's events are not a prefix of the creates: {} events",
        resumed.len()
    );
    assert!(kube.is_running(), "keel up exited:\n{}", kube.log());
    let rv = api
        .write("after", "a", None)
        .expect("a create after the frozen watcher");
    assert!(
        rv > want.last().unwrap().0,
        "a create after the others at {rv}"
    );
}
