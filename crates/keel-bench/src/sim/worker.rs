//! A worker: the simulated kubelets of one share of the fleet, on one connection.
//!
//! Node `i` belongs to worker `i % workers`. The worker owns its nodes' state (UID, the lease
//! last written, the last heartbeat) and their [`Schedule`]; it alone touches them, so there
//! is no lock. It keeps at most `streams` requests' worth of duties in flight on its
//! connection (HTTP/2 streams; on HTTP/1.1 one connection each), each duty one future in a
//! `FuturesUnordered` polled by the worker's single task. Registrations use at most half the
//! slots and heartbeats the rest, so on a server too slow for both neither starves: nodes
//! registered first keep their leases fresh while the rest register.
//!
//! Duties: a registration is the kubelet's node POST (on 409 the existing node, if it is a
//! simulated one, is adopted) and its lease controller's first sync; a renewal drives a
//! [`Renewal`]; a status post is the kubelet's `tryUpdateNodeStatus`: GET the node (the first
//! try from the watch cache, `resourceVersion=0`), PATCH its status, up to five tries. A node
//! chosen to fail stops at its first duty due after the fail time.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use http::{Method, StatusCode};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use super::objects::{self, SIM_LABEL};
use super::renewal::{Class, Renewal, Request, Step};
use super::request::{JSON, STRATEGIC_MERGE_PATCH, call};
use super::schedule::{Duty, Jitter, Schedule};
use super::shared::{Phase, Shared, lock};
use crate::https::Conn;
use crate::microtime;

/// Tries of one status post (the kubelet's `nodeStatusUpdateRetry`).
const STATUS_TRIES: u32 = 5;

/// Registration's first sleep after a failure is twice this (the kubelet's, doubling to 7 s).
const REGISTER_BACKOFF: Duration = Duration::from_millis(100);

/// Registration's longest sleep.
const REGISTER_MAX_BACKOFF: Duration = Duration::from_secs(7);

/// One node's state, owned by its worker.
#[derive(Default)]
struct Node {
    /// The Node's UID, once registered.
    uid: Option<Arc<str>>,
    /// The lease as last written (the server's answer).
    lease: Option<Bytes>,
    /// The last heartbeat written: lease renewTime or status heartbeat (µs).
    heartbeat: i64,
    /// A registration was sent (so the node may exist).
    launched: bool,
    /// Stopped on purpose (`--fail`).
    stopped: bool,
}

/// A duty handed to a future.
enum Job {
    Register,
    Renew { uid: Arc<str>, lease: Option<Bytes> },
    Status,
}

/// What a duty came to.
enum Outcome {
    /// Registered with this UID; the lease (if the first sync made one) and the heartbeat.
    Registered {
        uid: Arc<str>,
        lease: Option<Bytes>,
        heartbeat: i64,
    },
    /// A renewal: the lease to start from next, and the heartbeat written (None: failed).
    Renewed {
        lease: Option<Bytes>,
        heartbeat: Option<i64>,
    },
    /// A status post: the heartbeat written (None: failed).
    Status { heartbeat: Option<i64> },
    /// The run cannot go on (a node cannot be registered).
    Fatal(String),
}

/// A finished duty.
struct Done {
    conn: Conn,
    node: u32,
    duty: Option<Duty>,
    started: Instant,
    outcome: Outcome,
}

/// A worker (see the module comment).
pub struct Worker {
    index: u32,
    workers: u32,
    shared: Arc<Shared>,
    nodes: Vec<Node>,
    schedule: Schedule,
    pending: VecDeque<u32>,
    idle: Vec<Conn>,
    jitter: Jitter,
}

/// What a worker hands back when it stops: the nodes that may exist.
pub struct Finished {
    /// Global numbers of the nodes whose registration was sent.
    pub launched: Vec<u32>,
    /// Why the run must stop, if it must.
    pub fatal: Option<String>,
}

impl Worker {
    /// Worker `index` of `workers` for a fleet of `count`, with its connection slots.
    pub fn new(
        index: u32,
        workers: u32,
        count: u32,
        shared: Arc<Shared>,
        slots: Vec<Conn>,
    ) -> Self {
        let mine = (count.saturating_sub(index)).div_ceil(workers);
        Self {
            index,
            workers,
            shared,
            nodes: (0..mine).map(|_| Node::default()).collect(),
            schedule: Schedule::default(),
            pending: (0..mine).collect(),
            idle: slots,
            jitter: Jitter::new(uuid::Uuid::new_v4().as_u64_pair().0),
        }
    }

    fn global(&self, local: u32) -> u32 {
        local * self.workers + self.index
    }

    /// Runs until the phase is `Stop` (or a node cannot be registered).
    pub async fn run(mut self, mut phase: watch::Receiver<Phase>) -> Finished {
        let slots = self.idle.len();
        let register_limit = slots.div_ceil(2);
        let mut registering = 0usize;
        let mut in_flight = FuturesUnordered::new();
        let mut fatal = None;
        loop {
            let now = Instant::now();
            while let Some(conn) = self.idle.pop() {
                let job = if registering < register_limit
                    && let Some(node) = self.pending.pop_front()
                {
                    registering += 1;
                    self.nodes[node as usize].launched = true;
                    (node, None, Job::Register)
                } else if let Some((node, duty)) = self.schedule.pop_due(now) {
                    match self.due(node, duty, now) {
                        Some(job) => (node, Some(duty), job),
                        None => {
                            self.idle.push(conn);
                            continue;
                        }
                    }
                } else {
                    self.idle.push(conn);
                    break;
                };
                let (node, duty, job) = job;
                let name = self.shared.fleet.name(self.global(node));
                in_flight.push(perform(self.shared.clone(), conn, node, name, duty, job));
            }
            let next = if self.idle.is_empty() {
                None
            } else {
                self.schedule.next()
            };
            tokio::select! {
                biased;
                changed = phase.changed() => {
                    if changed.is_err() || *phase.borrow() == Phase::Stop {
                        break;
                    }
                }
                Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                    if done.duty.is_none() {
                        registering -= 1;
                    }
                    if let Err(message) = self.finished(done) {
                        fatal = Some(message);
                        break;
                    }
                }
                _ = tokio::time::sleep_until(next.unwrap_or(now)), if next.is_some() => {}
            }
        }
        let launched = (0..self.nodes.len() as u32)
            .filter(|&n| self.nodes[n as usize].launched)
            .map(|n| self.global(n))
            .collect();
        Finished { launched, fatal }
    }

    /// The job for `duty` of `node`, due now; None if the node stopped (or stops now).
    fn due(&mut self, node: u32, duty: Duty, now: Instant) -> Option<Job> {
        let global = self.global(node);
        let state = &mut self.nodes[node as usize];
        if state.stopped {
            return None;
        }
        if self.shared.failing_due(now) && lock(&self.shared.readiness).is_failing(global) {
            state.stopped = true;
            lock(&self.shared.readiness).stopped(global, state.heartbeat);
            return None;
        }
        let uid = state.uid.clone()?;
        Some(match duty {
            Duty::Renew => Job::Renew {
                uid,
                lease: state.lease.clone(),
            },
            Duty::Status => Job::Status,
        })
    }

    /// Takes a finished duty: updates the node, schedules its next duty.
    fn finished(&mut self, done: Done) -> Result<(), String> {
        let Done {
            conn,
            node,
            duty,
            started,
            outcome,
        } = done;
        self.idle.push(conn);
        let now = Instant::now();
        let renew = self.shared.renew_interval;
        let status = self.shared.status_interval;
        let state = &mut self.nodes[node as usize];
        let heartbeat = match outcome {
            Outcome::Registered {
                uid,
                lease,
                heartbeat,
            } => {
                state.uid = Some(uid);
                state.lease = lease;
                self.shared.registered.fetch_add(1, Ordering::Relaxed);
                let first_renewal = now + self.jitter.phase(renew);
                let first_status = now + self.jitter.phase(status);
                self.schedule.push(first_renewal, node, Duty::Renew);
                self.schedule.push(first_status, node, Duty::Status);
                Some(heartbeat)
            }
            Outcome::Renewed { lease, heartbeat } => {
                if lease.is_some() {
                    state.lease = lease;
                }
                match heartbeat {
                    Some(_) => self.shared.renewed(now - started),
                    None => self.shared.renewal_failed(),
                }
                heartbeat
            }
            Outcome::Status { heartbeat } => heartbeat,
            Outcome::Fatal(message) => {
                // Registration was refused: the node is not the simulator's to delete.
                state.launched = false;
                return Err(message);
            }
        };
        let state = &mut self.nodes[node as usize];
        if let Some(heartbeat) = heartbeat {
            state.heartbeat = state.heartbeat.max(heartbeat);
        }
        if state.stopped {
            let global = self.global(node);
            lock(&self.shared.readiness).stopped(global, self.nodes[node as usize].heartbeat);
            return Ok(());
        }
        match duty {
            Some(Duty::Renew) => {
                let at = now + self.jitter.period(renew);
                self.schedule.push(at, node, Duty::Renew);
            }
            Some(Duty::Status) => {
                let at = now + self.jitter.period(status);
                self.schedule.push(at, node, Duty::Status);
            }
            None => {}
        }
        Ok(())
    }
}

/// Carries out `job` for node `node` (named `name`) on `conn`.
async fn perform(
    shared: Arc<Shared>,
    mut conn: Conn,
    node: u32,
    name: String,
    duty: Option<Duty>,
    job: Job,
) -> Done {
    let started = Instant::now();
    let outcome = match job {
        Job::Register => register(&shared, &mut conn, &name).await,
        Job::Renew { uid, lease } => {
            let (lease, heartbeat) = renew(&shared, &mut conn, &name, &uid, lease).await;
            Outcome::Renewed { lease, heartbeat }
        }
        Job::Status => Outcome::Status {
            heartbeat: post_status(&shared, &mut conn, &name).await,
        },
    };
    Done {
        conn,
        node,
        duty,
        started,
        outcome,
    }
}

/// Now, in microseconds since the Unix epoch.
fn now_micros() -> i64 {
    microtime::micros(SystemTime::now())
}

/// The kubelet's registration of node `name` and its lease controller's first sync.
async fn register(shared: &Shared, conn: &mut Conn, name: &str) -> Outcome {
    let index = shared.fleet.index(name).unwrap_or_default();
    let mut backoff = REGISTER_BACKOFF;
    let (uid, node_heartbeat) = loop {
        let heartbeat = now_micros();
        let node = shared
            .fleet
            .node(index, &microtime::format_seconds(heartbeat));
        let body = Bytes::from(serde_json::to_vec(&node).expect("JSON values serialize"));
        let conflict = [StatusCode::CONFLICT];
        let posted = call(
            shared,
            conn,
            Method::POST,
            "/api/v1/nodes",
            Some((body, JSON)),
            &conflict,
        );
        match posted.await {
            Ok(a) if a.status.is_success() => match uid_of(&a.body) {
                Some(uid) => break (uid, heartbeat),
                None => {
                    return Outcome::Fatal(format!(
                        "POST node {name}: the answer has no metadata.uid"
                    ));
                }
            },
            Ok(a) if a.status == StatusCode::CONFLICT => match adopt(shared, conn, name).await {
                Ok(Some(uid)) => break (uid, 0),
                Ok(None) => {}
                Err(message) => return Outcome::Fatal(message),
            },
            Ok(a) if a.status.is_client_error() && a.status != StatusCode::TOO_MANY_REQUESTS => {
                return Outcome::Fatal(format!("cannot register node {name}: {}", a.error()));
            }
            _ => {}
        }
        backoff = (backoff * 2).min(REGISTER_MAX_BACKOFF);
        tokio::time::sleep(backoff).await;
    };
    let uid: Arc<str> = uid.into();
    let (lease, heartbeat) = renew(shared, conn, name, &uid, None).await;
    Outcome::Registered {
        uid,
        lease,
        heartbeat: heartbeat.unwrap_or(0).max(node_heartbeat),
    }
}

/// Node `name` already exists: its UID if it is a simulated node, None if it could not be
/// read (try again), an error if it is someone else's.
async fn adopt(shared: &Shared, conn: &mut Conn, name: &str) -> Result<Option<String>, String> {
    let path = format!("/api/v1/nodes/{name}");
    let Ok(answer) = call(shared, conn, Method::GET, &path, None, &[]).await else {
        return Ok(None);
    };
    if !answer.status.is_success() {
        return Ok(None);
    }
    let node: Value =
        serde_json::from_slice(&answer.body).map_err(|e| format!("GET node {name}: {e}"))?;
    let (label, value) = SIM_LABEL;
    if node.pointer("/metadata/labels").and_then(|l| l.get(label)) != Some(&Value::from(value)) {
        return Err(format!(
            "node {name} already exists and is not a simulated node (no label {label}={value}); \
             choose another --name-prefix"
        ));
    }
    Ok(node
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .map(str::to_string))
}

/// `metadata.uid` of an object answer.
fn uid_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Meta,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        uid: String,
    }
    serde_json::from_slice::<Object>(body)
        .ok()
        .map(|o| o.metadata.uid)
}

/// One lease renewal of node `name` from `lease` (see [`Renewal`]): the lease to start from
/// next and, if it succeeded, the renewTime written (µs).
async fn renew(
    shared: &Shared,
    conn: &mut Conn,
    name: &str,
    uid: &str,
    lease: Option<Bytes>,
) -> (Option<Bytes>, Option<i64>) {
    let collection = super::objects::Fleet::leases_path();
    let path = format!("{collection}/{name}");
    let (mut renewal, mut step) = Renewal::start(lease);
    let mut written = 0;
    loop {
        step = match step {
            Step::Send(request) => {
                let now = now_micros();
                let renew_time = microtime::format(now);
                let (method, target, body) = match &request {
                    Request::Get => (Method::GET, &path, None),
                    Request::Create => {
                        let lease = shared.fleet.lease(name, uid, &renew_time);
                        let body = serde_json::to_vec(&lease).expect("JSON values serialize");
                        (Method::POST, &collection, Some(Bytes::from(body)))
                    }
                    Request::Put(base) => {
                        match objects::renewed_lease(base, name, uid, &renew_time) {
                            Some(body) => (Method::PUT, &path, Some(body)),
                            None => {
                                shared.error(format!(
                                    "lease {name}: the lease read is not a JSON object"
                                ));
                                step = renewal.answered(0, Bytes::new());
                                continue;
                            }
                        }
                    }
                };
                let expected = [StatusCode::NOT_FOUND, StatusCode::CONFLICT];
                let answer = call(
                    shared,
                    conn,
                    method,
                    target,
                    body.map(|b| (b, JSON)),
                    &expected,
                )
                .await;
                let (status, body) = match answer {
                    Ok(a) => (a.status.as_u16(), a.body),
                    Err(_) => (0, Bytes::new()),
                };
                match Renewal::class(&request, status) {
                    Class::Ok if request != Request::Get => written = now,
                    Class::Ok => {}
                    Class::Conflict => {
                        shared.conflicts.fetch_add(1, Ordering::Relaxed);
                    }
                    Class::Error if status == 404 || status == 409 => {
                        // 404 to a PUT or 409 to a POST: expected by `call`, an error here.
                        shared.error(format!("{} lease: {status}", method_name(&request)));
                    }
                    Class::Error => {}
                }
                renewal.answered(status, body)
            }
            Step::Sleep(wait) => {
                tokio::time::sleep(wait).await;
                renewal.slept()
            }
            Step::Renewed => return (renewal.latest().cloned(), Some(written)),
            Step::Failed => return (renewal.latest().cloned(), None),
        };
    }
}

fn method_name(request: &Request) -> &'static str {
    match request {
        Request::Get => "GET",
        Request::Create => "POST",
        Request::Put(_) => "PUT",
    }
}

/// The kubelet's status post for node `name`: the heartbeat written (µs), None if every try
/// failed.
async fn post_status(shared: &Shared, conn: &mut Conn, name: &str) -> Option<i64> {
    for attempt in 0..STATUS_TRIES {
        let path = if attempt == 0 {
            format!("/api/v1/nodes/{name}?resourceVersion=0")
        } else {
            format!("/api/v1/nodes/{name}")
        };
        let Ok(answer) = call(shared, conn, Method::GET, &path, None, &[]).await else {
            continue;
        };
        if !answer.status.is_success() {
            continue;
        }
        let Ok(current) = serde_json::from_slice::<Value>(&answer.body) else {
            shared.error(format!("GET node {name}: the answer is not JSON"));
            continue;
        };
        let now = now_micros();
        let patch = objects::status_patch(&current, &microtime::format_seconds(now));
        let body = Bytes::from(serde_json::to_vec(&patch).expect("JSON values serialize"));
        let path = format!("/api/v1/nodes/{name}/status");
        let patched = call(
            shared,
            conn,
            Method::PATCH,
            &path,
            Some((body, STRATEGIC_MERGE_PATCH)),
            &[],
        )
        .await;
        if patched.is_ok_and(|a| a.status.is_success()) {
            shared.status_updates.fetch_add(1, Ordering::Relaxed);
            // metav1.Time keeps whole seconds: that is the heartbeat the controller sees.
            return Some(now - now.rem_euclid(1_000_000));
        }
    }
    None
}
