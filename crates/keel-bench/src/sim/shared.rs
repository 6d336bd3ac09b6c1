//! What the workers, the node watch and the run share: where the server is, the fleet's
//! settings, the phase of the run, and the counters the live line and the summary read.
//!
//! Counters are atomics bumped where an answer lands. Renewals and their latency count only
//! in the steady phase (every node registered, until the end), so rates, percentiles and CPU
//! per renewal describe steady state; conflicts, throttled answers, errors and status posts
//! count from the first request on. The event writers' figures ([`EventCounts`]) are kept
//! apart from the nodes', each kind of request with its own [`Tally`] of failures.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use super::events::EventCounts;
use super::objects::Fleet;
use super::readiness::Readiness;
use crate::https::Endpoint;
use crate::report::Stats;

/// Distinct error messages kept for the summary.
const MAX_MESSAGES: usize = 32;

/// Where the run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Nodes are registering (the registered ones already heartbeat).
    Register,
    /// Every node is registered: the steady phase.
    Run,
    /// Stop sending.
    Stop,
}

/// What every part of the run shares.
pub struct Shared {
    /// The API server.
    pub endpoint: Arc<Endpoint>,
    /// Names and shapes of the nodes.
    pub fleet: Fleet,
    /// Lease renewal period.
    pub renew_interval: Duration,
    /// Status post period.
    pub status_interval: Duration,
    /// Timeout of each request.
    pub request_timeout: Duration,
    /// How long after the steady phase starts the failing nodes stop.
    pub fail_after: Duration,
    /// When the failing nodes stop (set when the steady phase starts).
    pub fail_at: OnceLock<Instant>,
    /// Whether the steady phase is on.
    pub steady: AtomicBool,
    /// Nodes registered.
    pub registered: AtomicU64,
    /// Lease renewals (steady phase).
    pub renewals: AtomicU64,
    /// Renewals that failed every attempt (steady phase).
    pub failed_renewals: AtomicU64,
    /// 409 answers to lease updates.
    pub conflicts: AtomicU64,
    /// The nodes' 429s and failed requests.
    pub requests: Tally,
    /// Node status posts.
    pub status_updates: AtomicU64,
    /// Renewal latency: the steady phase's and the live line's window.
    pub latency: Mutex<Latency>,
    /// The NotReady measurement.
    pub readiness: Mutex<Readiness>,
    /// What the event writers (`--event-writers`) count.
    pub events: EventCounts,
}

/// The failures of one kind of request: 429 answers, other failures and their messages.
#[derive(Default)]
pub struct Tally {
    /// 429 answers.
    pub throttled: AtomicU64,
    /// Failed requests (other answers, timeouts, connection errors).
    pub errors: AtomicU64,
    /// Error messages and how often each came (the first [`MAX_MESSAGES`] distinct ones).
    pub messages: Mutex<BTreeMap<String, u64>>,
}

impl Tally {
    /// Counts a failed request, keeping its message.
    pub fn error(&self, message: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut messages = lock(&self.messages);
        if messages.len() < MAX_MESSAGES || messages.contains_key(&message) {
            *messages.entry(message).or_default() += 1;
        }
    }

    /// Counts a 429 answer.
    pub fn throttled(&self) {
        self.throttled.fetch_add(1, Ordering::Relaxed);
    }
}

/// Latency histograms of one kind of request (lease renewals, event POSTs).
#[derive(Default)]
pub struct Latency {
    /// Over the steady phase.
    pub total: Stats,
    /// Since the live line last read it.
    pub window: Stats,
}

impl Latency {
    /// Records one request that took `latency`.
    pub fn record(&mut self, latency: Duration) {
        self.total.record(latency);
        self.window.record(latency);
    }
}

impl Shared {
    /// Shared state for a run.
    pub fn new(
        endpoint: Arc<Endpoint>,
        fleet: Fleet,
        args: &super::NodesArgs,
        readiness: Readiness,
    ) -> Self {
        Self {
            endpoint,
            fleet,
            renew_interval: args.renew_interval,
            status_interval: args.status_interval,
            request_timeout: args.request_timeout,
            fail_after: args.fail_after,
            fail_at: OnceLock::new(),
            steady: AtomicBool::new(false),
            registered: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            failed_renewals: AtomicU64::new(0),
            conflicts: AtomicU64::new(0),
            requests: Tally::default(),
            status_updates: AtomicU64::new(0),
            latency: Mutex::new(Latency::default()),
            readiness: Mutex::new(readiness),
            events: EventCounts::new(args.event_writers),
        }
    }

    /// Counts a failed request of the nodes, keeping its message.
    pub fn error(&self, message: String) {
        self.requests.error(message);
    }

    /// Counts a renewal that took `latency` (in the steady phase only).
    pub fn renewed(&self, latency: Duration) {
        if self.steady.load(Ordering::Relaxed) {
            self.renewals.fetch_add(1, Ordering::Relaxed);
            lock(&self.latency).record(latency);
        }
    }

    /// Counts a renewal that failed every attempt (in the steady phase only).
    pub fn renewal_failed(&self) {
        if self.steady.load(Ordering::Relaxed) {
            self.failed_renewals.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether a failing node is due to stop at `now`.
    pub fn failing_due(&self, now: Instant) -> bool {
        self.fail_at.get().is_some_and(|at| now >= *at)
    }
}

/// Locks `mutex`, also when a panicking thread poisoned it (the data stays usable).
pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
