//! The event writers of `keel sim nodes` (`--event-writers`): the noisiest writes of a
//! cluster, beside its heartbeats, to see what a burst of events does to lease renewals (and
//! what `keel up --events-store` saves them from).
//!
//! Each writer creates core/v1 Events about the simulated nodes ([`kubelet_event`]), one at
//! a time, from the start of the steady phase to its end, at the lowest CPU priority
//! ([`start`]) and on connections of their own (at most `--conns`, writer `w` on connection
//! `w % conns`), through the same client and the same retries as the nodes ([`call_counted`]: a 429 is waited out for its `Retry-After`). With
//! `--event-rate` the writers share that rate, writer `w` starting `w / writers` of an
//! interval late and sending each event an interval after the last one was due (at once when
//! it is late, never in a burst to catch up); without it each sends its next event as soon
//! as the last is answered (a closed loop: the most the server accepts from that many).
//!
//! What they count is kept apart from the nodes' figures ([`EventCounts`]): events created
//! and their latency (first send to the answer, `Retry-After` waits included) in the steady
//! phase, and the 429s and failures of their requests. An event still refused with 429 after
//! client-go's retries is an error: it was lost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{Method, StatusCode};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::NodesArgs;
use super::kubelet_event::{self, EVENTS_PATH, EventNames};
use super::request::{JSON, MAX_RETRIES, call_counted};
use super::shared::{Latency, Phase, Shared, Tally, lock};
use crate::https::{Conn, Endpoint};
use crate::microtime;

/// How long a writer waits after a request that got no answer (no connection), so that a
/// closed loop does not spin.
const PAUSE_AFTER_FAILURE: Duration = Duration::from_millis(100);

/// What the event writers count (see the module comment).
#[derive(Default)]
pub struct EventCounts {
    /// Writers (`--event-writers`).
    pub writers: u32,
    /// Events created in the steady phase.
    pub created: AtomicU64,
    /// Their POST latency.
    pub latency: Mutex<Latency>,
    /// The 429s and failures of the writers' requests.
    pub requests: Tally,
}

impl EventCounts {
    /// The counts of `writers` writers.
    pub fn new(writers: u32) -> Self {
        Self {
            writers,
            ..Self::default()
        }
    }
}

/// The running writers.
pub struct Writers {
    handles: Vec<JoinHandle<()>>,
}

impl Writers {
    /// Waits for every writer to stop (a writer's panic is resumed here).
    pub async fn join(self) {
        for writer in self.handles {
            if let Err(e) = writer.await
                && e.is_panic()
            {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
}

/// Opens the writers' connections and starts `--event-writers` writers; they wait for the
/// steady phase and stop with the run. They stand for clients on machines of their own, so
/// they run on a runtime of their own at the lowest CPU priority
/// ([`keel_process::background`]): the nodes' requests never queue behind a writer's task in
/// the simulator, and the writers take a core only when the server and the nodes leave it.
pub async fn start(
    shared: &Arc<Shared>,
    endpoint: &Arc<Endpoint>,
    args: &NodesArgs,
    phase: &watch::Receiver<Phase>,
) -> anyhow::Result<Writers> {
    if args.event_writers == 0 {
        return Ok(Writers {
            handles: Vec::new(),
        });
    }
    let spawned = keel_process::background::handle().spawn(spawn_writers(
        shared.clone(),
        endpoint.clone(),
        args.clone(),
        phase.clone(),
    ));
    Ok(Writers {
        handles: spawned.await??,
    })
}

/// [`start`] on the writers' runtime: connects and spawns each writer there.
async fn spawn_writers(
    shared: Arc<Shared>,
    endpoint: Arc<Endpoint>,
    args: NodesArgs,
    phase: watch::Receiver<Phase>,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let writers = args.event_writers;
    let conns = args.conns.min(writers as usize);
    let mut opened = Vec::with_capacity(conns);
    for _ in 0..conns {
        opened.push(endpoint.connect().await?);
    }
    // Each writer's interval between its events (None: a closed loop).
    let pace = (args.event_rate > 0)
        .then(|| Duration::from_secs_f64(f64::from(writers) / f64::from(args.event_rate)));
    let mut handles = Vec::with_capacity(writers as usize);
    for w in 0..writers {
        let conn = opened[w as usize % conns].fork().await?;
        let writer = Writer {
            shared: shared.clone(),
            conn,
            index: w,
            pace,
            count: args.count,
        };
        handles.push(tokio::spawn(writer.run(phase.clone())));
    }
    Ok(handles)
}

/// One writer.
struct Writer {
    shared: Arc<Shared>,
    conn: Conn,
    index: u32,
    /// The interval between its events (None: a closed loop).
    pace: Option<Duration>,
    /// Nodes in the fleet.
    count: u32,
}

impl Writer {
    /// Waits for the steady phase, then writes events until the phase is `Stop`.
    async fn run(mut self, mut phase: watch::Receiver<Phase>) {
        match phase.wait_for(|p| *p != Phase::Register).await {
            Ok(p) if *p == Phase::Run => {}
            _ => return,
        }
        let stop = async move {
            let _ = phase.wait_for(|p| *p == Phase::Stop).await;
        };
        tokio::pin!(stop);
        let writers = self.shared.events.writers;
        let mut names = EventNames::new(self.index, writers);
        let mut due = Instant::now();
        if let Some(pace) = self.pace {
            due += pace.mul_f64(f64::from(self.index) / f64::from(writers));
        }
        for turn in 0u64.. {
            if self.pace.is_some() {
                tokio::select! {
                    biased;
                    _ = &mut stop => return,
                    _ = tokio::time::sleep_until(due) => {}
                }
            }
            let node = (turn * u64::from(writers) + u64::from(self.index)) % u64::from(self.count);
            let body = self.body(&mut names, node as u32, turn);
            let started = Instant::now();
            let outcome = tokio::select! {
                biased;
                _ = &mut stop => return,
                outcome = self.post(body) => outcome,
            };
            let shared = &self.shared;
            match outcome {
                Some(status) if status.is_success() => {
                    if shared.steady.load(Ordering::Relaxed) {
                        shared.events.created.fetch_add(1, Ordering::Relaxed);
                        lock(&shared.events.latency).record(started.elapsed());
                    }
                }
                Some(StatusCode::TOO_MANY_REQUESTS) => shared.events.requests.error(format!(
                    "POST events: still 429 after {MAX_RETRIES} retries"
                )),
                // Counted where it was answered.
                Some(_) => {}
                None => tokio::time::sleep(PAUSE_AFTER_FAILURE).await,
            }
            if let Some(pace) = self.pace {
                due = (due + pace).max(Instant::now());
            }
        }
    }

    /// The next event's body: about node `node`, its `turn`-th.
    fn body(&self, names: &mut EventNames, node: u32, turn: u64) -> Bytes {
        let now = SystemTime::now();
        let nanos = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let name = self.shared.fleet.name(node);
        let at = microtime::format_seconds(microtime::micros(now));
        let event = kubelet_event::event(&name, names.next(nanos), turn, &at);
        Bytes::from(serde_json::to_vec(&event).expect("JSON values serialize"))
    }

    /// Creates one event: the final status, None if no answer came (counted either way).
    async fn post(&mut self, body: Bytes) -> Option<StatusCode> {
        let shared = &self.shared;
        let answer = call_counted(
            &shared.events.requests,
            shared.request_timeout,
            &mut self.conn,
            Method::POST,
            EVENTS_PATH,
            Some((body, JSON)),
            &[],
        )
        .await;
        answer.ok().map(|a| a.status)
    }
}
