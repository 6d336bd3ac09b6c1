//! kube-apiserver's max-in-flight filter: at most `--max-requests-inflight` read-only and
//! `--max-mutating-requests-inflight` mutating requests at once (watches apart), and a 429
//! with `Retry-After` past them. A quarter of the mutating slots is kept for node heartbeats
//! (writes of Nodes and of the Leases in `kube-node-lease`), as API Priority and Fairness
//! keeps seats for them in its `node-high` level: a flood of other writes fills the rest and
//! gets 429s, and nodes keep renewing. Event writes, a cluster's noisiest, may hold an eighth
//! of the mutating slots, as a priority level of their own would: a flood of them is shed
//! before it takes the CPU every other request needs.

use std::sync::Arc;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::App;
use super::request_info::ResourcePath;

/// The in-flight limits of one server.
pub struct Limits {
    read_only: Arc<Semaphore>,
    mutating: Arc<Semaphore>,
    /// The mutating slots requests other than heartbeats may hold.
    others: Arc<Semaphore>,
    /// The mutating slots Event writes may hold.
    events: Arc<Semaphore>,
}

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
        }
    }

    /// A slot for a request to `path`, mutating or not; `None` past the limits.
    pub fn try_slot(&self, app: &App, path: &ResourcePath, mutating: bool) -> Option<Slot> {
        let mut permits = Vec::with_capacity(2);
        let kind = match mutating {
            false => {
                permits.push(self.read_only.clone().try_acquire_owned().ok()?);
                "readOnly"
            }
            true => {
                if is_event(path) {
                    permits.push(self.events.clone().try_acquire_owned().ok()?);
                }
                if !is_heartbeat(path) {
                    permits.push(self.others.clone().try_acquire_owned().ok()?);
                }
                permits.push(self.mutating.clone().try_acquire_owned().ok()?);
                "mutating"
            }
        };
        let gauge = app
            .metrics
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

/// Whether a write to `path` is one of Events (core or events.k8s.io).
fn is_event(path: &ResourcePath) -> bool {
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
