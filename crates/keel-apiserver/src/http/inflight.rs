//! kube-apiserver's max-in-flight filter: at most `--max-requests-inflight` read-only and
//! `--max-mutating-requests-inflight` mutating requests at once (watches apart), and a 429
//! with `Retry-After` past them. A quarter of the mutating slots is kept for node heartbeats
//! (writes of Nodes and of the Leases in `kube-node-lease`), as API Priority and Fairness
//! keeps seats for them in its `node-high` level: a flood of other writes fills the rest and
//! gets 429s, and nodes keep renewing. Event writes, a cluster's noisiest, may hold an eighth
//! of the mutating slots, as a priority level of their own would: a flood of them is shed
//! before it takes the CPU every other request needs. Like an APF priority level, the Events
//! share has a queue: an Event write that finds its slots taken waits for one in arrival
//! order (at most twice as many waiting as slots, for at most [`EVENT_WAIT`]) instead of
//! being refused at once, so a writer retrying after its `Retry-After` is not starved by
//! writers that send their next event the moment the last one is answered.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::request_info::ResourcePath;
use crate::metrics::Metrics;

/// The in-flight limits of one server.
pub struct Limits {
    read_only: Arc<Semaphore>,
    mutating: Arc<Semaphore>,
    /// The mutating slots requests other than heartbeats may hold.
    others: Arc<Semaphore>,
    /// The mutating slots Event writes may hold.
    events: Arc<Semaphore>,
    /// Event writes waiting for one of those slots, and how many may.
    events_waiting: AtomicUsize,
    events_queue: usize,
}

/// The longest an Event write waits in the Events queue before its 429.
pub const EVENT_WAIT: Duration = Duration::from_secs(5);

/// A request's slot, held while it runs and counted in `apiserver_current_inflight_requests`.
pub struct Slot {
    _permits: Vec<OwnedSemaphorePermit>,
    gauge: Gauge,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

impl Limits {
    /// The limits for `read_only` and `mutating` requests at once (0: no limit).
    pub fn new(read_only: u32, mutating: u32) -> Limits {
        let semaphore = |n: u32| {
            Arc::new(Semaphore::new(match n {
                0 => Semaphore::MAX_PERMITS,
                n => n as usize,
            }))
        };
        let (others, events) = match mutating {
            0 => (0, 0),
            n => (n - n / 4, (n / 8).max(1)),
        };
        Limits {
            read_only: semaphore(read_only),
            mutating: semaphore(mutating),
            others: semaphore(others),
            events: semaphore(events),
            events_waiting: AtomicUsize::new(0),
            events_queue: 2 * events as usize,
        }
    }

    /// A slot for a request to `path`, mutating or not; `None` past the limits (an Event
    /// write first waits in the Events queue, see the module docs).
    pub async fn slot(
        &self,
        metrics: &Metrics,
        path: &ResourcePath,
        mutating: bool,
    ) -> Option<Slot> {
        let mut permits = Vec::with_capacity(3);
        let kind = match mutating {
            false => {
                permits.push(self.read_only.clone().try_acquire_owned().ok()?);
                "readOnly"
            }
            true => {
                if is_event(path) {
                    let label = vec![("request_kind", "mutating".to_string())];
                    let queued = metrics.inqueue.get_or_create(&label).clone();
                    permits.push(self.event_slot(&queued).await?);
                }
                if !is_heartbeat(path) {
                    permits.push(self.others.clone().try_acquire_owned().ok()?);
                }
                permits.push(self.mutating.clone().try_acquire_owned().ok()?);
                "mutating"
            }
        };
        let gauge = metrics
            .inflight
            .get_or_create(&vec![("request_kind", kind.to_string())])
            .clone();
        gauge.inc();
        Some(Slot {
            _permits: permits,
            gauge,
        })
    }
}

impl Limits {
    /// One of the Events slots: at once if one is free, else after a wait in the queue;
    /// `None` if the queue is full or the wait passed [`EVENT_WAIT`].
    /// `queued` counts the waiting.
    async fn event_slot(&self, queued: &Gauge) -> Option<OwnedSemaphorePermit> {
        if let Ok(permit) = self.events.clone().try_acquire_owned() {
            return Some(permit);
        }
        let place = Waiting::join(&self.events_waiting, queued);
        if place.ahead >= self.events_queue {
            return None;
        }
        // The semaphore serves its waiters in arrival order.
        tokio::time::timeout(EVENT_WAIT, self.events.clone().acquire_owned())
            .await
            .ok()?
            .ok()
    }
}

/// A place in a queue, given back when dropped (also when the waiting request is dropped).
struct Waiting<'a> {
    count: &'a AtomicUsize,
    gauge: &'a Gauge,
    /// How many were waiting before this one.
    ahead: usize,
}

impl<'a> Waiting<'a> {
    fn join(count: &'a AtomicUsize, gauge: &'a Gauge) -> Waiting<'a> {
        let ahead = count.fetch_add(1, Ordering::AcqRel);
        gauge.inc();
        Waiting {
            count,
            gauge,
            ahead,
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
        self.gauge.dec();
    }
}

/// Whether a request to `path` is one of Events (core or events.k8s.io).
pub fn is_event(path: &ResourcePath) -> bool {
    path.resource == "events" && matches!(path.group.as_str(), "" | "events.k8s.io")
}

/// Whether a write to `path` is a node heartbeat: a Node (or its status) or a Lease in
/// `kube-node-lease`.
fn is_heartbeat(path: &ResourcePath) -> bool {
    match (path.group.as_str(), path.resource.as_str()) {
        ("", "nodes") => true,
        ("coordination.k8s.io", "leases") => path.namespace.as_deref() == Some("kube-node-lease"),
        _ => false,
    }
}
