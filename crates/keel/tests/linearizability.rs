//! Linearizability of a three-member cluster under concurrent clients, kill -9 and partitions.
//!
//! One 3-member cluster (50 ms heartbeat, 500 ms election timeout) serves `RUNS` runs (one of
//! each case by default, as CI runs it; `KEEL_LIN_RUNS=200` with nextest's `soak` profile is
//! the soak). Each run uses its own key prefix and
//! 2-4 keys, so there is contention: 4-6 concurrent clients, each talking to a random member
//! (and moving to another one after a failure), issue a random mix of put (unique values),
//! linearizable get, delete and compare-and-set txns for about 2.5 s. The runs go through five
//! cases in turn (`CASES`): no fault, and each fault below injected in the middle of the run
//! into the leader or into a follower:
//! - kill: the member is killed with SIGKILL and restarted (and waited for) before the run
//!   ends; it stays down 0.3-0.8 s, so a killed leader sometimes comes back before anyone else
//!   starts an election and sometimes after a new leader took over;
//! - partition (when the test runs as root: each member then lives in a network namespace of
//!   its own, see `keel_testkit::netns`; without them only kills are injected, saying so, and in
//!   CI that is a failure): the member is cut off from the other members for
//!   0.4-1.4 s while the clients still reach it, so a cut-off leader keeps being asked for
//!   reads and writes while the majority elects another one; then the cut is healed.
//!
//! Every RPC has a 2 s deadline: an operation that fails or times out has an unknown outcome
//! (it may or may not have taken effect), a failed read is dropped; the client then moves to
//! another member once that one serves a (not recorded) linearizable read.
//!
//! The recorded history is checked per key by the Wing & Gong / porcupine checker in
//! `keel_testkit::linearizable`; any violation fails the test with the key, the longest linearizable
//! prefix and the operations that could not be linearized after it, and the key's whole
//! history (with the member each operation went to) is written to
//! `$TMPDIR/keel-linearizability-<seed>/`.
//!
//! Runs against keel (default) or a real etcd 3.5 cluster (`KEEL_TEST_TARGET=etcd`), which
//! validates the test. The seed is printed; replay with `KEEL_TEST_SEED`. As a negative control,
//! `KEEL_LIN_SERIALIZABLE_READS=1` makes the gets serializable (served from the member's local
//! state without a read barrier) while still checking them as linearizable: stale reads on
//! followers then show up as violations and the test is expected to fail.
//!
//! The checker's own tests are in `checker` (hand-written histories known to be linearizable or
//! not) and `generated` (random histories of a linearizable system must pass).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::response_op::Response;
use keel_proto::etcdserverpb::{
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, StatusRequest,
    StatusResponse, TxnRequest,
};
use keel_testkit::linearizable::{self, Input, Operation, Output, Verdict, nanos_since};
use keel_testkit::netns::Net;
use keel_testkit::{Cluster, Rng, SeedReport, target_flavor};
use tonic::transport::Channel;

/// Runs by default, one of each case (`KEEL_LIN_RUNS` overrides).
const DEFAULT_RUNS: usize = CASES.len();
/// How long the clients issue operations in one run (longer if a restart takes longer).
const RUN_LENGTH: Duration = Duration::from_millis(2500);
/// Deadline of every client RPC; past it the outcome is unknown.
const RPC_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the cluster may take to be healthy again before a run.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(30);
/// Search budget per key; far above what the histories here need (the steps are printed).
const MAX_STEPS: u64 = 2_000_000;
/// Raft timing flags, accepted by keel and etcd alike.
const RAFT_FLAGS: [&str; 2] = ["--heartbeat-interval=50", "--election-timeout=500"];

/// A KV client on a lazily connected channel: a dead member makes requests fail, not `connect`.
fn kv_client(url: &str) -> KvClient<Channel> {
    let channel = Channel::from_shared(url.to_string())
        .expect("valid uri")
        .connect_timeout(Duration::from_secs(1))
        .connect_lazy();
    KvClient::new(channel)
}

/// `Status` of the member at `url`, or `None` if it does not answer within a second.
async fn status(url: &str) -> Option<StatusResponse> {
    let channel = Channel::from_shared(url.to_string())
        .expect("valid uri")
        .connect_timeout(Duration::from_secs(1))
        .connect_lazy();
    let mut m = MaintenanceClient::new(channel);
    tokio::time::timeout(Duration::from_secs(1), m.status(StatusRequest {}))
        .await
        .ok()?
        .ok()
        .map(|r| r.into_inner())
}

/// The index of the member every member names as leader, if they all agree on one.
async fn agreed_leader(urls: &[String], ids: &[u64]) -> Option<usize> {
    let mut leader = None;
    for url in urls {
        let l = status(url).await?.leader;
        if l == 0 || leader.is_some_and(|x| x != l) {
            return None;
        }
        leader = Some(l);
    }
    ids.iter().position(|id| Some(*id) == leader)
}

/// Waits until every member agrees on a leader and serves a linearizable read.
async fn wait_healthy(urls: &[String], ids: &[u64]) -> usize {
    let deadline = Instant::now() + HEALTH_TIMEOUT;
    loop {
        if let Some(leader) = agreed_leader(urls, ids).await {
            let mut all = true;
            for url in urls {
                let mut kv = kv_client(url);
                let read = kv.range(RangeRequest {
                    key: b"lin-health".to_vec(),
                    ..Default::default()
                });
                all &= matches!(tokio::time::timeout(RPC_TIMEOUT, read).await, Ok(Ok(_)));
            }
            if all {
                return leader;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the cluster is not healthy {HEALTH_TIMEOUT:?} after the last restart"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends `input` on `key`; the response as an [`Output`].
async fn execute(
    kv: &mut KvClient<Channel>,
    key: &str,
    input: &Input,
    serializable: bool,
) -> Result<Output, tonic::Status> {
    let key = key.as_bytes().to_vec();
    let value_of = |kvs: &[keel_proto::mvccpb::KeyValue]| {
        kvs.first()
            .map(|kv| String::from_utf8(kv.value.clone()).expect("utf-8 value"))
    };
    match input {
        Input::Put(v) => {
            kv.put(PutRequest {
                key,
                value: v.clone().into_bytes(),
                ..Default::default()
            })
            .await?;
            Ok(Output::Put)
        }
        Input::Get => {
            let r = kv
                .range(RangeRequest {
                    key,
                    serializable,
                    ..Default::default()
                })
                .await?
                .into_inner();
            Ok(Output::Get(value_of(&r.kvs)))
        }
        Input::Delete => {
            let r = kv
                .delete_range(DeleteRangeRequest {
                    key,
                    ..Default::default()
                })
                .await?
                .into_inner();
            Ok(Output::Delete(r.deleted as u64))
        }
        Input::Cas { expected, new } => {
            let compare = match expected {
                Some(v) => Compare {
                    key: key.clone(),
                    target: CompareTarget::Value as i32,
                    result: CompareResult::Equal as i32,
                    target_union: Some(TargetUnion::Value(v.clone().into_bytes())),
                    range_end: vec![],
                },
                None => Compare {
                    key: key.clone(),
                    target: CompareTarget::Version as i32,
                    result: CompareResult::Equal as i32,
                    target_union: Some(TargetUnion::Version(0)),
                    range_end: vec![],
                },
            };
            let r = kv
                .txn(TxnRequest {
                    compare: vec![compare],
                    success: vec![RequestOp {
                        request: Some(Request::RequestPut(PutRequest {
                            key: key.clone(),
                            value: new.clone().into_bytes(),
                            ..Default::default()
                        })),
                    }],
                    failure: vec![RequestOp {
                        request: Some(Request::RequestRange(RangeRequest {
                            key,
                            ..Default::default()
                        })),
                    }],
                })
                .await?
                .into_inner();
            if r.succeeded {
                return Ok(Output::Cas {
                    succeeded: true,
                    seen: None,
                });
            }
            match r.responses.first().and_then(|r| r.response.as_ref()) {
                Some(Response::ResponseRange(range)) => Ok(Output::Cas {
                    succeeded: false,
                    seen: value_of(&range.kvs),
                }),
                other => panic!("the else branch of a txn answered {other:?}"),
            }
        }
    }
}

/// One client of a run.
struct Client {
    id: usize,
    urls: Arc<Vec<String>>,
    keys: Arc<Vec<String>>,
    origin: Instant,
    stop: Arc<AtomicBool>,
    serializable: bool,
    rng: Rng,
}

/// What a client recorded.
struct ClientLog {
    /// Each operation with the index of the member it was sent to.
    ops: Vec<(Operation, usize)>,
    /// RPCs that failed or timed out (failed reads included, though they are not recorded).
    failures: usize,
    /// Health probes that failed after a failure (not part of the history).
    probes_failed: usize,
}

impl Client {
    /// Issues random operations until told to stop; every operation is recorded.
    async fn run(mut self) -> ClientLog {
        let mut member = self.rng.below(self.urls.len() as u64) as usize;
        let mut kv = kv_client(&self.urls[member]);
        let mut last_seen: HashMap<String, Option<String>> = HashMap::new();
        let mut log = ClientLog {
            ops: Vec::new(),
            failures: 0,
            probes_failed: 0,
        };
        let mut n = 0;
        while !self.stop.load(Ordering::Relaxed) {
            let key = self.rng.pick(&self.keys).clone();
            let fresh = format!("c{}-{n}", self.id);
            n += 1;
            let input = match self.rng.below(100) {
                0..35 => Input::Get,
                35..65 => Input::Put(fresh),
                65..75 => Input::Delete,
                _ => Input::Cas {
                    expected: if self.rng.chance(3, 4) {
                        last_seen.get(&key).cloned().flatten()
                    } else {
                        None
                    },
                    new: fresh,
                },
            };
            let call = nanos_since(self.origin);
            let result = tokio::time::timeout(
                RPC_TIMEOUT,
                execute(&mut kv, &key, &input, self.serializable),
            )
            .await;
            let ret = nanos_since(self.origin);
            match result {
                Ok(Ok(output)) => {
                    match (&input, &output) {
                        (Input::Get, Output::Get(v)) => {
                            last_seen.insert(key.clone(), v.clone());
                        }
                        (Input::Cas { .. }, Output::Cas { seen, .. }) => {
                            last_seen.insert(key.clone(), seen.clone());
                        }
                        (Input::Put(v), _) => {
                            last_seen.insert(key.clone(), Some(v.clone()));
                        }
                        _ => {}
                    }
                    log.ops.push((
                        Operation::completed(self.id, &key, call, ret, input, output),
                        member,
                    ));
                }
                _ => {
                    // Unknown outcome: record it (reads have no effect and are dropped by the
                    // checker anyway), then move to another member and wait until it serves a
                    // linearizable read (not recorded), as a real client's balancer would: each
                    // unknown outcome multiplies the checker's work, so a client stuck on an
                    // unavailable member must not pile them up.
                    log.failures += 1;
                    log.ops
                        .push((Operation::unknown(self.id, &key, call, input), member));
                    while !self.stop.load(Ordering::Relaxed) {
                        member = (member + 1 + self.rng.below(self.urls.len() as u64 - 1) as usize)
                            % self.urls.len();
                        kv = kv_client(&self.urls[member]);
                        tokio::time::sleep(Duration::from_millis(20 + self.rng.below(80))).await;
                        let probe = kv.range(RangeRequest {
                            key: b"lin-health".to_vec(),
                            ..Default::default()
                        });
                        if let Ok(Ok(_)) = tokio::time::timeout(RPC_TIMEOUT, probe).await {
                            break;
                        }
                        log.probes_failed += 1;
                    }
                }
            }
        }
        log
    }
}

/// Writes every operation on `key`, by invocation time and with the member it was sent to
/// (`sent_to[i]` for `ops[i]`), to a file for a failure report; returns its path.
fn dump_history(
    seed: u64,
    run: usize,
    key: &str,
    ops: &[Operation],
    sent_to: &[usize],
) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("keel-linearizability-{seed}"));
    std::fs::create_dir_all(&dir).expect("create the history dump dir");
    let path = dir.join(format!("run{run}-{}.txt", key.replace('/', "_")));
    let mut of_key: Vec<(&Operation, usize)> = ops
        .iter()
        .zip(sent_to)
        .filter(|(op, _)| op.key == key)
        .map(|(op, m)| (op, *m))
        .collect();
    of_key.sort_by_key(|(op, _)| (op.call, op.ret));
    let text: String = of_key
        .iter()
        .map(|(op, m)| format!("via m{m}: {op}\n"))
        .collect();
    std::fs::write(&path, text).expect("write the history dump");
    path
}

/// A fault injected into one member in the middle of a run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// SIGKILL, then a restart.
    Kill,
    /// Cut off from the other members (still reachable by the clients), then healed.
    Partition,
}

/// The cases the runs go through in turn: no fault, then each fault on the leader and on a
/// follower (`true`: the leader).
const CASES: [(Option<Fault>, bool); 5] = [
    (None, false),
    (Some(Fault::Kill), true),
    (Some(Fault::Partition), true),
    (Some(Fault::Kill), false),
    (Some(Fault::Partition), false),
];

/// Counters over all runs.
#[derive(Default)]
struct Totals {
    ops: usize,
    unknown: usize,
    kills: usize,
    leader_kills: usize,
    partitions: usize,
    leader_partitions: usize,
    cas_succeeded: usize,
    cas_failed: usize,
    reads_of_values: usize,
    max_steps: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_histories_under_kills_and_partitions_are_linearizable() {
    let started = Instant::now();
    let flavor = target_flavor();
    let runs: usize = std::env::var("KEEL_LIN_RUNS")
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("KEEL_LIN_RUNS must be a number, not `{s}`"))
        })
        .unwrap_or(DEFAULT_RUNS);
    let serializable = std::env::var("KEEL_LIN_SERIALIZABLE_READS").as_deref() == Ok("1");
    let report = SeedReport::new("linearizability");
    let seed = report.seed;
    let mut rng = Rng::new(seed);
    eprintln!(
        "linearizability: {} cluster, {runs} runs, seed {seed}{}",
        flavor.name(),
        if serializable {
            " (negative control: serializable reads, expected to fail)"
        } else {
            ""
        }
    );

    // Declared before the cluster, so the members stop before their namespaces go.
    let net = Net::create(3)
        .inspect_err(|e| {
            keel_testkit::skip(
                "linearizability's partitions",
                &format!("kills only, no partitions: {e}"),
            )
        })
        .ok();
    let mut cluster = match &net {
        Some(net) => Cluster::start_in(flavor, net, 3, &RAFT_FLAGS),
        None => Cluster::start(flavor, 3, &RAFT_FLAGS),
    };
    let urls: Arc<Vec<String>> = Arc::new(
        cluster
            .members
            .iter()
            .map(|m| m.client_url.clone())
            .collect(),
    );
    let mut ids = Vec::new();
    for m in &cluster.members {
        ids.push(m.ids().await.1);
    }

    let mut totals = Totals::default();
    let mut failures = Vec::new();
    for run in 0..runs {
        let leader = wait_healthy(&urls, &ids).await;
        let clients = rng.range_i64(4, 6) as usize;
        let keys: Arc<Vec<String>> = Arc::new(
            (0..rng.range_i64(2, 4))
                .map(|k| format!("lin/{run}/k{k}"))
                .collect(),
        );
        // The runs go through CASES in turn, so every fault kind meets the leader and a
        // follower in any 5 consecutive runs; what varies at random is when and how long.
        let (fault, on_leader) = CASES[run % CASES.len()];
        let fault = match fault {
            Some(Fault::Partition) if net.is_none() => Some(Fault::Kill),
            fault => fault,
        };
        let origin = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let tasks: Vec<_> = (0..clients)
            .map(|id| {
                tokio::spawn(
                    Client {
                        id,
                        urls: urls.clone(),
                        keys: keys.clone(),
                        origin,
                        stop: stop.clone(),
                        serializable,
                        rng: Rng::new(rng.next_u64()),
                    }
                    .run(),
                )
            })
            .collect();

        let mut kill_note = String::new();
        if let Some(fault) = fault {
            tokio::time::sleep(Duration::from_millis(400 + rng.below(600))).await;
            let current = agreed_leader(&urls, &ids).await.unwrap_or(leader);
            let victim = if on_leader {
                current
            } else {
                (current + 1 + rng.below(2) as usize) % 3
            };
            let was_leader = victim == current;
            let at = origin.elapsed();
            let what = match (fault, &net) {
                (Fault::Partition, Some(net)) => {
                    net.isolate(victim);
                    tokio::time::sleep(Duration::from_millis(400 + rng.below(1000))).await;
                    net.heal(victim);
                    totals.partitions += 1;
                    totals.leader_partitions += was_leader as usize;
                    "cut off"
                }
                _ => {
                    cluster.members[victim].kill();
                    tokio::time::sleep(Duration::from_millis(300 + rng.below(500))).await;
                    totals.kills += 1;
                    totals.leader_kills += was_leader as usize;
                    "killed"
                }
            };
            let down_for = origin.elapsed() - at;
            if fault == Fault::Kill {
                // `restart` blocks until the member logs that it is ready.
                tokio::task::block_in_place(|| cluster.members[victim].restart());
            }
            kill_note = format!(
                ", {what} m{victim}{} at {:.2}s for {:.2}s, back at {:.2}s",
                if was_leader { " (leader)" } else { "" },
                at.as_secs_f64(),
                down_for.as_secs_f64(),
                origin.elapsed().as_secs_f64()
            );
            // Let the clients run on the healed cluster for a while.
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        tokio::time::sleep_until((origin + RUN_LENGTH).into()).await;
        stop.store(true, Ordering::Relaxed);
        let mut ops = Vec::new();
        let mut sent_to = Vec::new();
        let (mut failed_rpcs, mut failed_probes) = (0, 0);
        for t in tasks {
            let log = t.await.expect("client task");
            for (op, member) in log.ops {
                ops.push(op);
                sent_to.push(member);
            }
            failed_rpcs += log.failures;
            failed_probes += log.probes_failed;
        }
        let length = origin.elapsed();

        let checking = Instant::now();
        let reports = linearizable::check(&ops, MAX_STEPS);
        let check_time = checking.elapsed();
        let checked: usize = reports.iter().map(|r| r.ops).sum();
        let unknown: usize = reports.iter().map(|r| r.unknown).sum();
        let steps = reports.iter().map(|r| r.steps).max().unwrap_or(0);
        let (cas_ok, cas_failed) = ops.iter().fold((0, 0), |(s, f), op| match op.output {
            Output::Cas {
                succeeded: true, ..
            } => (s + 1, f),
            Output::Cas {
                succeeded: false, ..
            } => (s, f + 1),
            _ => (s, f),
        });
        let reads_of_values = ops
            .iter()
            .filter(|op| matches!(op.output, Output::Get(Some(_))))
            .count();
        totals.ops += checked;
        totals.unknown += unknown;
        totals.cas_succeeded += cas_ok;
        totals.cas_failed += cas_failed;
        totals.reads_of_values += reads_of_values;
        totals.max_steps = totals.max_steps.max(steps);
        let bad: Vec<_> = reports.iter().filter(|r| !r.is_linearizable()).collect();
        eprintln!(
            "run {:>2}/{runs}: {clients} clients, {} keys, {:.2}s; {checked} ops checked, \
             {unknown} unknown, {failed_rpcs} failed RPCs ({failed_probes} failed probes), CAS {cas_ok} ok / {cas_failed} failed; \
             check {:.1}ms, max {steps} steps/key{kill_note}{}",
            run + 1,
            keys.len(),
            length.as_secs_f64(),
            check_time.as_secs_f64() * 1e3,
            if bad.is_empty() { "" } else { "  VIOLATION" }
        );
        for r in bad {
            let kind = match r.verdict {
                Verdict::Unknown(_) => "checker gave up",
                _ => "violation",
            };
            let dump = dump_history(seed, run + 1, &r.key, &ops, &sent_to);
            eprintln!(
                "run {} ({kind}{kill_note}):\n{r}  the key's whole history: {}\n",
                run + 1,
                dump.display()
            );
            failures.push(format!(
                "run {}, key {:?}: {kind}; history in {}",
                run + 1,
                r.key,
                dump.display()
            ));
        }
    }

    eprintln!(
        "linearizability: {} runs on {} in {:.1}s: {} ops checked, {} with unknown outcome, \
         {} kills ({} of the leader), {} partitions ({} of the leader), CAS {} succeeded / \
         {} failed, {} reads of a value, \
         at most {} search steps per key, {} failures; seed {seed}",
        runs,
        flavor.name(),
        started.elapsed().as_secs_f64(),
        totals.ops,
        totals.unknown,
        totals.kills,
        totals.leader_kills,
        totals.partitions,
        totals.leader_partitions,
        totals.cas_succeeded,
        totals.cas_failed,
        totals.reads_of_values,
        totals.max_steps,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} keys are not linearizable on {} (the reports are printed above; seed {seed}):\n{}",
        failures.len(),
        flavor.name(),
        failures.join("\n")
    );
    // The histories must not be trivial for the check to mean anything.
    assert!(
        totals.ops >= 50 * runs,
        "only {} ops in {runs} runs",
        totals.ops
    );
    if runs >= 5 {
        assert!(
            totals.cas_succeeded > 0 && totals.cas_failed > 0 && totals.reads_of_values > 0,
            "the histories lack contention: CAS {} ok / {} failed, {} reads of a value",
            totals.cas_succeeded,
            totals.cas_failed,
            totals.reads_of_values
        );
    }
}

/// Unit tests of the checker: histories known to be linearizable pass, known violations are
/// rejected. Times are small integers (nanoseconds).
mod checker {
    use keel_testkit::linearizable::{Input, KeyReport, Operation, Output, Verdict, check};

    const K: &str = "k";

    fn put(c: usize, call: u64, ret: u64, v: &str) -> Operation {
        Operation::completed(c, K, call, ret, Input::Put(v.into()), Output::Put)
    }

    fn get(c: usize, call: u64, ret: u64, v: Option<&str>) -> Operation {
        Operation::completed(c, K, call, ret, Input::Get, Output::Get(v.map(Into::into)))
    }

    fn del(c: usize, call: u64, ret: u64, deleted: u64) -> Operation {
        Operation::completed(c, K, call, ret, Input::Delete, Output::Delete(deleted))
    }

    /// `cas(expected -> new)`; `seen` is `None` for a success.
    #[allow(clippy::too_many_arguments)]
    fn cas(
        c: usize,
        call: u64,
        ret: u64,
        expected: Option<&str>,
        new: &str,
        succeeded: bool,
        seen: Option<&str>,
    ) -> Operation {
        Operation::completed(
            c,
            K,
            call,
            ret,
            Input::Cas {
                expected: expected.map(Into::into),
                new: new.into(),
            },
            Output::Cas {
                succeeded,
                seen: seen.map(Into::into),
            },
        )
    }

    /// `op` with its outcome forgotten.
    fn lost(op: Operation) -> Operation {
        Operation::unknown(op.client, &op.key, op.call, op.input)
    }

    fn reports(ops: &[Operation]) -> Vec<KeyReport> {
        let reports = check(ops, 100_000);
        for r in &reports {
            assert!(
                !matches!(r.verdict, Verdict::Unknown(_)),
                "budget ran out: {r}"
            );
        }
        reports
    }

    fn assert_linearizable(ops: &[Operation]) {
        for r in reports(ops) {
            assert!(r.is_linearizable(), "{r}");
        }
    }

    fn assert_violation(ops: &[Operation]) -> String {
        let reports = reports(ops);
        let bad: Vec<_> = reports.iter().filter(|r| !r.is_linearizable()).collect();
        assert!(!bad.is_empty(), "accepted a non-linearizable history");
        bad[0].to_string()
    }

    #[test]
    fn sequential_operations() {
        assert_linearizable(&[
            get(0, 0, 1, None),
            put(0, 2, 3, "a"),
            get(1, 4, 5, Some("a")),
            cas(0, 6, 7, Some("a"), "b", true, None),
            cas(1, 8, 9, Some("a"), "c", false, Some("b")),
            del(0, 10, 11, 1),
            del(1, 12, 13, 0),
            cas(0, 14, 15, Some("b"), "d", false, None),
            cas(0, 16, 17, None, "e", true, None),
            get(1, 18, 19, Some("e")),
        ]);
    }

    #[test]
    fn reads_overlapping_a_put_see_either_value() {
        assert_linearizable(&[put(0, 0, 10, "a"), get(1, 5, 15, None)]);
        assert_linearizable(&[put(0, 0, 10, "a"), get(1, 5, 15, Some("a"))]);
        // A read may see the new value while a later-starting overlapping one sees the old.
        assert_linearizable(&[
            put(0, 0, 1, "a"),
            put(0, 2, 20, "b"),
            get(1, 3, 10, Some("a")),
            get(2, 4, 12, Some("b")),
            get(1, 11, 13, Some("b")),
        ]);
        // Two concurrent puts, reads ordering them one way.
        assert_linearizable(&[
            put(0, 0, 10, "a"),
            put(1, 0, 10, "b"),
            get(2, 1, 9, Some("b")),
            get(3, 2, 11, Some("a")),
            get(2, 12, 13, Some("a")),
        ]);
    }

    #[test]
    fn cas_races() {
        // Two CAS from the same value: one wins, the other sees the winner's value.
        assert_linearizable(&[
            put(0, 0, 1, "a"),
            cas(1, 2, 10, Some("a"), "b", true, None),
            cas(2, 3, 9, Some("a"), "c", false, Some("b")),
            get(0, 11, 12, Some("b")),
        ]);
        // Create-if-absent races.
        assert_linearizable(&[
            cas(1, 0, 5, None, "x", false, Some("y")),
            cas(2, 1, 6, None, "y", true, None),
            get(0, 7, 8, Some("y")),
        ]);
        // A CAS overlapping a delete: it can fail on the absent key.
        assert_linearizable(&[
            put(0, 0, 1, "a"),
            del(1, 2, 10, 1),
            cas(2, 3, 9, Some("a"), "b", false, None),
            get(0, 11, 12, None),
        ]);
    }

    #[test]
    fn unknown_outcomes_may_or_may_not_take_effect() {
        // Took effect.
        assert_linearizable(&[
            put(0, 0, 1, "a"),
            lost(put(1, 2, 3, "b")),
            get(0, 5, 6, Some("b")),
            get(0, 7, 8, Some("b")),
        ]);
        // Did not (or only after everything else).
        assert_linearizable(&[
            put(0, 0, 1, "a"),
            lost(put(1, 2, 3, "b")),
            get(0, 5, 6, Some("a")),
            get(0, 100, 101, Some("a")),
        ]);
        // Took effect long after its client gave up.
        assert_linearizable(&[
            put(0, 0, 1, "a"),
            lost(put(1, 2, 3, "b")),
            get(0, 50, 51, Some("a")),
            put(0, 52, 53, "c"),
            get(0, 60, 61, Some("b")),
        ]);
        // Unknown CAS and delete, both ways; failed reads are dropped.
        assert_linearizable(&[
            put(0, 0, 1, "a"),
            lost(cas(1, 2, 3, Some("a"), "b", true, None)),
            lost(get(2, 2, 3, Some("zzz"))),
            get(0, 4, 5, Some("b")),
            lost(del(1, 6, 7, 0)),
            get(0, 8, 9, Some("b")),
            get(0, 10, 11, None),
        ]);
    }

    #[test]
    fn keys_are_checked_independently() {
        let mut other = put(1, 0, 1, "a");
        other.key = "other".into();
        let ops = [put(0, 0, 1, "x"), other, get(0, 2, 3, Some("x"))];
        let r = reports(&ops);
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|r| r.is_linearizable()));
    }

    #[test]
    fn rejects_a_stale_read_after_a_completed_put() {
        let msg = assert_violation(&[
            put(0, 0, 1, "a"),
            put(0, 2, 3, "b"),
            get(1, 4, 5, Some("a")),
        ]);
        assert!(msg.contains("NOT LINEARIZABLE"), "{msg}");
        assert!(msg.contains("c1 get() -> \"a\""), "{msg}");
        assert!(msg.contains("value after the prefix: \"b\""), "{msg}");
    }

    /// What a serializable read served by a lagging follower looks like when it is recorded as a
    /// linearizable one: client 0 writes through the leader, client 1 then reads the old value.
    #[test]
    fn rejects_a_stale_follower_read() {
        assert_violation(&[
            put(0, 0, 10, "c0-0"),
            get(1, 11, 12, Some("c0-0")),
            put(0, 20, 30, "c0-1"),
            get(2, 25, 35, Some("c0-1")),
            get(1, 40, 41, Some("c0-0")),
        ]);
    }

    #[test]
    fn rejects_a_read_of_a_value_before_its_put() {
        assert_violation(&[get(1, 0, 1, Some("a")), put(0, 2, 3, "a")]);
        // Even if the put's outcome is unknown.
        assert_violation(&[get(1, 0, 1, Some("a")), lost(put(0, 2, 3, "a"))]);
    }

    #[test]
    fn rejects_two_cas_succeeding_from_the_same_value() {
        assert_violation(&[
            put(0, 0, 1, "a"),
            cas(1, 2, 10, Some("a"), "b", true, None),
            cas(2, 3, 9, Some("a"), "c", true, None),
        ]);
        assert_violation(&[
            cas(1, 0, 10, None, "b", true, None),
            cas(2, 0, 10, None, "c", true, None),
        ]);
    }

    #[test]
    fn rejects_a_read_of_an_overwritten_value() {
        // The put of "a" overlaps nothing after "b" is acknowledged.
        assert_violation(&[
            put(0, 0, 10, "a"),
            put(1, 11, 12, "b"),
            get(2, 13, 14, Some("a")),
        ]);
        // A value, once replaced, does not come back (the unknown put cannot help twice).
        assert_violation(&[
            put(0, 0, 1, "a"),
            lost(put(1, 2, 3, "b")),
            get(0, 4, 5, Some("b")),
            get(0, 6, 7, Some("a")),
        ]);
    }

    #[test]
    fn rejects_a_lost_update() {
        // An acknowledged CAS disappears.
        assert_violation(&[
            put(0, 0, 1, "a"),
            cas(1, 2, 3, Some("a"), "b", true, None),
            get(2, 4, 5, Some("a")),
        ]);
        // An acknowledged put disappears without a delete.
        assert_violation(&[
            put(0, 0, 1, "a"),
            get(1, 2, 3, Some("a")),
            get(1, 4, 5, None),
        ]);
        // A CAS fails although the value matched.
        assert_violation(&[
            put(0, 0, 1, "a"),
            cas(1, 2, 3, Some("a"), "b", false, Some("a")),
        ]);
        // A delete of an absent key reports a deletion.
        assert_violation(&[del(0, 0, 1, 1)]);
    }

    #[test]
    fn a_small_budget_answers_unknown() {
        let ops: Vec<_> = (0..20)
            .map(|i| put(i, 0, 100, &format!("v{i}")))
            .chain([get(0, 101, 102, Some("v0"))])
            .collect();
        let r = check(&ops, 10);
        assert!(matches!(r[0].verdict, Verdict::Unknown(_)), "{}", r[0]);
        assert!(r[0].to_string().contains("UNKNOWN"));
    }

    /// A history shaped like the end-to-end ones (a few hundred ops, pairs of concurrent writes,
    /// overlapping reads, a few unknown outcomes) takes few search steps, and so does finding a
    /// violation at its very end.
    #[test]
    fn long_history_is_cheap() {
        let mut ops = Vec::new();
        let mut t = 0;
        for round in 0..60u64 {
            let (a, b) = (format!("a{round}"), format!("b{round}"));
            let winner = if round % 2 == 0 { &a } else { &b };
            ops.push(put(0, t, t + 10, &a));
            ops.push(put(1, t + 1, t + 9, &b));
            ops.push(get(2, t + 2, t + 12, Some(winner)));
            if round % 20 == 5 {
                ops.push(lost(put(3, t, t + 1, &format!("lost{round}"))));
            }
            let c = format!("c{round}");
            ops.push(cas(3, t + 11, t + 15, Some(winner), &c, true, None));
            ops.push(cas(4, t + 12, t + 16, Some(winner), "x", false, Some(&c)));
            ops.push(get(2, t + 16, t + 18, Some(&c)));
            t += 20;
        }
        let r = reports(&ops);
        assert!(r[0].is_linearizable(), "{}", r[0]);
        assert!(r[0].steps < 5_000, "{}", r[0]);
        ops.push(get(0, t + 1, t + 2, Some("a0")));
        let r = reports(&ops);
        assert!(!r[0].is_linearizable(), "{}", r[0]);
        assert!(r[0].steps < 50_000, "{}", r[0]);
    }
}

/// Randomly generated histories of a linearizable system (each operation takes effect at a
/// random point of its interval) pass the checker, with and without unknown outcomes.
mod generated {
    use keel_testkit::Rng;
    use keel_testkit::linearizable::{Input, Operation, Output, check};

    /// A linearizable history: `clients` clients issue `per_client` operations each on one key;
    /// about `unknown_pct` percent of them have an unknown outcome (writes among those take
    /// effect half of the time).
    pub fn history(
        seed: u64,
        clients: usize,
        per_client: usize,
        unknown_pct: u64,
    ) -> Vec<Operation> {
        let mut rng = Rng::new(seed);
        // (linearization point, op index, takes effect)
        let mut ops = Vec::new();
        let mut points = Vec::new();
        for c in 0..clients {
            let mut t = rng.below(1000);
            for n in 0..per_client {
                let call = t;
                let ret = call + 1 + rng.below(20_000);
                let point = call + rng.below(ret - call + 1);
                let v = format!("c{c}-{n}");
                let input = match rng.below(10) {
                    0..4 => Input::Get,
                    4..7 => Input::Put(v),
                    7 => Input::Delete,
                    _ => Input::Cas {
                        expected: if rng.chance(1, 4) {
                            None
                        } else {
                            Some(format!(
                                "c{}-{}",
                                rng.below(clients as u64),
                                n.saturating_sub(rng.below(3) as usize)
                            ))
                        },
                        new: v,
                    },
                };
                let unknown = rng.below(100) < unknown_pct;
                let effect = !unknown || rng.chance(1, 2);
                let mut op = Operation::completed(c, "k", call, ret, input, Output::Unknown);
                if unknown {
                    op.ret = keel_testkit::linearizable::NEVER;
                }
                points.push((point, ops.len(), effect));
                ops.push(op);
                t = ret + rng.below(5_000);
                if unknown {
                    t += 20_000;
                }
            }
        }
        points.sort();
        let mut state: Option<String> = None;
        for (_, i, effect) in points {
            let op = &mut ops[i];
            let out = match &op.input {
                Input::Put(v) => {
                    if effect {
                        state = Some(v.clone());
                    }
                    Output::Put
                }
                Input::Get => Output::Get(state.clone()),
                Input::Delete => {
                    let n = state.is_some() as u64;
                    if effect {
                        state = None;
                    }
                    Output::Delete(n)
                }
                Input::Cas { expected, new } => {
                    if *expected == state {
                        if effect {
                            state = Some(new.clone());
                        }
                        Output::Cas {
                            succeeded: true,
                            seen: None,
                        }
                    } else {
                        Output::Cas {
                            succeeded: false,
                            seen: state.clone(),
                        }
                    }
                }
            };
            if op.ret != keel_testkit::linearizable::NEVER {
                op.output = out;
            }
        }
        ops
    }

    #[test]
    fn generated_histories_are_linearizable() {
        for seed in 0..40 {
            let ops = history(seed, 5, 60, if seed % 2 == 0 { 0 } else { 5 });
            let r = check(&ops, 2_000_000);
            assert!(r[0].is_linearizable(), "seed {seed}: {}", r[0]);
        }
    }
}
