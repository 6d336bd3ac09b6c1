//! Overload, done right: past its capacity `keel up` sheds load with 429 and Retry-After and
//! nothing else (no 5xx, no end of the store watches its watch caches live on, no exit, no
//! acknowledged write lost), also when a share of the load is owners and their dependents
//! created and deleted for the garbage collector, which converges once the load stops; and
//! no number of client connections can take the descriptors its store needs to write.

mod gc_ops;

use std::net::TcpStream;
use std::process::{Command, Output};
use std::time::Duration;

use keel_testkit::configmap_writer::Api;
use keel_testkit::keel_bin;
use keel_testkit::kube::{Kube, Stack};
use serde_json::Value;

/// Runs `keel bench apiserver` against `kube` with `flags` and returns its JSON report.
fn bench(kube: &Kube, flags: &[&str]) -> Value {
    let out = bench_command(kube, flags).output().expect("run keel bench");
    report(kube, &out)
}

fn bench_command(kube: &Kube, flags: &[&str]) -> Command {
    let mut command = Command::new(keel_bin());
    command
        .args(["bench", "apiserver", "--json", "--kubeconfig"])
        .arg(&kube.kubeconfig)
        .args(flags);
    command
}

/// The JSON report of a finished run (a run with failed updates exits non-zero but still
/// reports).
fn report(kube: &Kube, out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    serde_json::from_str(line.unwrap_or("")).unwrap_or_else(|_| {
        panic!(
            "keel bench printed no report ({}):\n{stdout}\n{}\nserver log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            kube.log()
        )
    })
}

/// The sum of the samples of `name` in the server's `/metrics` whose labels contain `with`.
fn metric(kube: &Kube, name: &str, with: &str) -> f64 {
    let text = kube.kubectl_ok(&["get", "--raw", "/metrics"]);
    text.lines()
        .filter(|l| {
            l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']) && l.contains(with)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Checks a `keel bench apiserver` report: no answer but 200, 409 and 429, some update
/// acknowledged, every one delivered to every watcher once and in order; the 429s.
fn check_run(run: &Value) -> u64 {
    let errors = run["error_kinds"].as_object().cloned().unwrap_or_default();
    let shed: u64 = errors
        .iter()
        .filter(|(message, _)| message.contains("429"))
        .map(|(_, n)| n.as_u64().unwrap_or(0))
        .sum();
    let other: Vec<_> = errors
        .iter()
        .filter(|(message, _)| !message.contains("429"))
        .collect();
    assert!(
        other.is_empty(),
        "answers other than 200, 409 and 429: {other:?}\n{run}"
    );
    assert!(run["updates"].as_u64().unwrap_or(0) > 0, "{run}");
    // Every acknowledged update is in the store: each reached every watcher.
    for field in [
        "lost",
        "duplicates",
        "mismatched",
        "out_of_order",
        "restarts",
    ] {
        assert_eq!(run[field].as_u64(), Some(0), "{field}: {run}");
    }
    shed
}

/// Checks that `kube` still runs, answered no 5xx, and restarted no watch cache since it
/// counted `restarts_before` initializations.
fn check_server(kube: &mut Kube, restarts_before: f64) {
    assert!(kube.is_running(), "keel up exited:\n{}", kube.log());
    assert_eq!(
        metric(kube, "apiserver_request_total", "code=\"5"),
        0.0,
        "5xx answers counted in /metrics"
    );
    assert_eq!(
        metric(kube, "apiserver_watch_cache_initializations_total", ""),
        restarts_before,
        "a watch cache restarted: its store watch ended under load:\n{}",
        kube.log()
    );
}

/// `keel up` with low in-flight limits, so the limits and not the machine decide the
/// capacity, as on a real control plane sized for its load; and the update rate it serves
/// (renewers without a rate limit).
fn limited_keel_up() -> (Kube, f64) {
    let kube = Kube::start_with(
        Stack::Up,
        &[
            "--max-requests-inflight=8",
            "--max-mutating-requests-inflight=4",
        ],
    );
    let capacity = bench(
        &kube,
        &[
            "--clients",
            "8",
            "--rate",
            "0",
            "--watchers",
            "0",
            "--duration",
            "8s",
        ],
    );
    let capacity = capacity["update_rate"].as_f64().expect("update_rate");
    assert!(capacity > 0.0, "nothing was served at all:\n{}", kube.log());
    (kube, capacity)
}

#[test]
fn keel_up_at_twice_its_capacity_answers_only_200s_and_429s() {
    let (mut kube, capacity) = limited_keel_up();
    let restarts_before = metric(&kube, "apiserver_watch_cache_initializations_total", "");

    // Twice that for a minute, from many more clients than the limits admit, watched.
    let rate = ((capacity * 2.0).ceil() as u64).max(2).to_string();
    let run = bench(
        &kube,
        &[
            "--clients",
            "64",
            "--clients-per-conn",
            "16",
            "--rate",
            &rate,
            "--watchers",
            "4",
            "--duration",
            "60s",
            "--request-timeout",
            "60s",
            "--drain-timeout",
            "60s",
        ],
    );
    let shed = check_run(&run);
    assert!(shed > 0, "the load did not exceed the limits: {run}");
    check_server(&mut kube, restarts_before);
    let shed_counted = metric(&kube, "apiserver_request_total", "code=\"429\"");
    assert!(shed_counted >= shed as f64, "{shed_counted} < {shed}");
}

#[test]
fn at_twice_its_capacity_with_owners_deleted_the_collector_converges() {
    let (mut kube, capacity) = limited_keel_up();
    let restarts_before = metric(&kube, "apiserver_watch_cache_initializations_total", "");
    let api = Api::of(&kube, Duration::from_secs(10));

    // Twice the capacity for 30 s: three quarters of it lease renewals, a quarter owners and
    // their dependents created and deleted (a step is four writes), each from more clients
    // than the limits admit.
    const CLIENTS: usize = 16;
    const BENCH_CLIENTS: usize = 48;
    const DURATION: Duration = Duration::from_secs(30);
    let renewals = ((capacity * 1.5).ceil() as u64).max(2).to_string();
    let steps_per_s = (capacity * 0.5 / 4.0).max(0.5);
    let pace = Duration::from_secs_f64(CLIENTS as f64 / steps_per_s);
    let kubeconfig = kube.kubeconfig.clone();
    let watcher = api.clone();
    let owners = std::thread::spawn(move || {
        // Only once the bench has made its leases: its setup does not wait out 429s.
        gc_ops::eventually("the bench's leases", Duration::from_secs(60), || {
            let leases = watcher.run(
                &["get", "--raw", "/apis/coordination.k8s.io/v1/leases"],
                None,
            );
            let items = leases.map(|l| l["items"].as_array().cloned().unwrap_or_default());
            let ours = |l: &Value| {
                l["metadata"]["namespace"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("keel-bench-"))
            };
            items.is_ok_and(|items| items.iter().filter(|l| ours(l)).count() >= BENCH_CLIENTS)
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        rt.block_on(gc_ops::load::run(&kubeconfig, CLIENTS, pace, DURATION))
    });
    let run = bench(
        &kube,
        &[
            "--clients",
            &BENCH_CLIENTS.to_string(),
            "--clients-per-conn",
            "16",
            "--rate",
            &renewals,
            "--watchers",
            "4",
            "--duration",
            "30s",
            "--request-timeout",
            "60s",
            "--drain-timeout",
            "60s",
        ],
    );
    let tally = owners.join().expect("the owners' load");
    eprintln!(
        "overload: capacity {capacity:.0} updates/s; renewals {}, owners' load {:?}, {} owner deletes",
        run["updates"], tally.codes, tally.deletes
    );
    let shed = check_run(&run) + tally.codes.get(&429).copied().unwrap_or(0);
    assert!(
        tally.failures.is_empty(),
        "the owners' load: {} failures: {:?}",
        tally.failures.len(),
        &tally.failures[..tally.failures.len().min(20)]
    );
    assert!(
        tally.deletes > 0,
        "no owner delete was acknowledged: {tally:?}"
    );
    assert!(
        shed > 0,
        "the load did not exceed the limits: {run} {tally:?}"
    );
    check_server(&mut kube, restarts_before);

    // Once the load stops the collector finishes: no dependent of a deleted owner is left,
    // and no owner waits for its dependents.
    gc_ops::wait_collected(
        &kube,
        &[gc_ops::Kind::Deployment, gc_ops::Kind::ConfigMap],
        Duration::from_secs(60),
        "after the load",
    );
    let (_, owners) = gc_ops::list(&api, gc_ops::Kind::Deployment).expect("list Deployments");
    let left: Vec<&Value> = owners
        .iter()
        .filter(|d| {
            d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("gc-"))
        })
        .collect();
    // Every owner created was deleted (no failure, and nothing else writes them to cause a
    // 409): none is left.
    assert!(left.is_empty(), "owners left after the load: {left:?}");
    check_server(&mut kube, restarts_before);
}

#[test]
fn more_connections_than_the_bound_leave_the_store_writing() {
    // 400 descriptors: a quarter kept for the store's files, so 300 connections at most.
    let mut kube = Kube::start_up_with_open_files(400, &["--wal-segment-bytes=65536"]);
    assert_eq!(metric(&kube, "process_max_fds", ""), 400.0);
    assert_eq!(metric(&kube, "keel_process_max_connections", ""), 300.0);

    // A client that connected first keeps writing through its connection, while the WAL
    // rolls to new segments (64 KiB each), during a flood of connections past the bound.
    let writer = bench_command(
        &kube,
        &[
            "--clients",
            "4",
            "--rate",
            "40",
            "--watchers",
            "1",
            "--duration",
            "25s",
            "--request-timeout",
            "30s",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("start keel bench");
    std::thread::sleep(Duration::from_secs(4));
    let store = kube.store_url.trim_start_matches("http://").to_string();
    let store: std::net::SocketAddr = store.parse().expect("the store's address");
    let flood: Vec<TcpStream> = (0..450)
        .filter_map(|_| TcpStream::connect_timeout(&store, Duration::from_secs(2)).ok())
        .collect();
    assert!(flood.len() > 300, "only {} connections opened", flood.len());
    let out = writer.wait_with_output().expect("keel bench");
    let run = report(&kube, &out);
    assert!(kube.is_running(), "keel up exited:\n{}", kube.log());
    assert_eq!(run["failed_updates"].as_u64(), Some(0), "{run}");
    assert!(run["updates"].as_u64().unwrap_or(0) >= 100, "{run}");
    assert_eq!(run["lost"].as_u64(), Some(0), "{run}");
    let segments = std::fs::read_dir(kube.scratch.join("keel.data/store/member/wal"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(segments > 1, "the WAL never rolled to a new segment");
    assert!(
        !kube.log().contains("Too many open files"),
        "the process ran out of descriptors:\n{}",
        kube.log()
    );

    // Once the flood goes, new clients are accepted again.
    drop(flood);
    let ready = kube.kubectl_ok(&["get", "--raw", "/readyz"]);
    assert_eq!(ready.trim(), "ok");
}
