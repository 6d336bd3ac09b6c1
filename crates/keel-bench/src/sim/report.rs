//! What `keel sim nodes` reports: the live line while it runs, the summary table at the end,
//! and the same summary as one JSON object for scripts (`--json`). The event writers'
//! figures (`events_*`) stand apart from the renewals' and are shown only when there are
//! writers.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use serde::Serialize;

use super::shared::{Shared, lock};
use crate::report::Stats;

/// The summary of a run. Renewal and event counts, rates, latencies and CPU cover the steady
/// phase; the other counters the whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SimSummary {
    /// The server URL.
    pub server: String,
    /// HTTP/2 or HTTP/1.1.
    pub protocol: String,
    /// Connections used by the nodes.
    pub connections: usize,
    /// Nodes registered.
    pub nodes: u64,
    /// Seconds registration took.
    pub registration_s: f64,
    /// Seconds of the steady phase.
    pub duration_s: f64,
    /// Lease renewals.
    pub renewals: u64,
    /// Renewals a second.
    pub renewals_per_s: f64,
    /// Median renewal latency (all the renewal's requests), milliseconds.
    pub p50_ms: f64,
    /// 99th percentile renewal latency, milliseconds.
    pub p99_ms: f64,
    /// Renewals that failed every attempt.
    pub failed_renewals: u64,
    /// 409 Conflict answers to lease updates.
    pub conflicts: u64,
    /// 429 Too Many Requests answers to the nodes' requests.
    pub throttled: u64,
    /// The nodes' other failed requests.
    pub errors: u64,
    /// Node status posts.
    pub status_updates: u64,
    /// Nodes stopped on purpose.
    pub failed_nodes: u64,
    /// Of those, the ones seen NotReady.
    pub not_ready_nodes: u64,
    /// Median seconds from a stopped node's last heartbeat to its NotReady.
    pub not_ready_seconds_p50: Option<f64>,
    /// The longest of those.
    pub not_ready_seconds_max: Option<f64>,
    /// Nodes not stopped that went NotReady.
    pub false_not_ready: u64,
    /// The simulator's CPU per renewal, microseconds.
    pub cpu_us_per_renewal: Option<f64>,
    /// The server's CPU per renewal (its `process_cpu_seconds_total`), microseconds.
    pub server_cpu_us_per_renewal: Option<f64>,
    /// Error messages of the nodes' requests and their counts.
    pub error_messages: BTreeMap<String, u64>,
    /// Whether the nodes were left in place (`--keep`).
    pub kept: bool,
    /// Event writers (`--event-writers`).
    pub event_writers: u32,
    /// Events a second they were asked for (`--event-rate`; 0: as fast as they can).
    pub event_rate: u32,
    /// Events created.
    pub events_created: u64,
    /// Events created a second.
    pub events_per_s: f64,
    /// Median event POST latency (first send to answer, `Retry-After` waits included), ms.
    pub events_p50_ms: f64,
    /// 99th percentile event POST latency, milliseconds.
    pub events_p99_ms: f64,
    /// 429 answers to event POSTs.
    pub events_throttled: u64,
    /// Event POSTs that failed (an event still refused with 429 after the retries included).
    pub events_errors: u64,
    /// Their error messages and counts.
    pub events_error_messages: BTreeMap<String, u64>,
}

impl SimSummary {
    /// Fills the counters and latencies from `shared`.
    pub fn count(&mut self, shared: &Shared) {
        let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        self.nodes = load(&shared.registered);
        self.renewals = load(&shared.renewals);
        self.failed_renewals = load(&shared.failed_renewals);
        self.conflicts = load(&shared.conflicts);
        self.throttled = load(&shared.requests.throttled);
        self.errors = load(&shared.requests.errors);
        self.status_updates = load(&shared.status_updates);
        let events = &shared.events;
        self.event_writers = events.writers;
        self.events_created = load(&events.created);
        self.events_throttled = load(&events.requests.throttled);
        self.events_errors = load(&events.requests.errors);
        if self.duration_s > 0.0 {
            self.renewals_per_s = self.renewals as f64 / self.duration_s;
            self.events_per_s = self.events_created as f64 / self.duration_s;
        }
        (self.p50_ms, self.p99_ms) = percentiles_ms(&lock(&shared.latency).total);
        (self.events_p50_ms, self.events_p99_ms) = percentiles_ms(&lock(&events.latency).total);
        let readiness = lock(&shared.readiness).summary();
        self.failed_nodes = readiness.failed_nodes;
        self.not_ready_nodes = readiness.not_ready_nodes;
        self.not_ready_seconds_p50 = readiness.not_ready_seconds_p50;
        self.not_ready_seconds_max = readiness.not_ready_seconds_max;
        self.false_not_ready = readiness.false_not_ready;
        self.error_messages = lock(&shared.requests.messages).clone();
        self.events_error_messages = lock(&events.requests.messages).clone();
    }

    /// The summary as one JSON object.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("the summary serializes")
    }

    /// The summary table.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "keel sim nodes: {} nodes on {} ({}, {} connections), registered in {:.1}s, ran {:.1}s",
            self.nodes,
            self.server,
            self.protocol,
            self.connections,
            self.registration_s,
            self.duration_s
        );
        let optional = |v: Option<f64>, unit: &str| match v {
            Some(v) => format!("{v:.1} {unit}"),
            None => "-".to_string(),
        };
        let rows = [
            ("Renewals", self.renewals.to_string()),
            ("Renewals/s", format!("{:.1}", self.renewals_per_s)),
            ("Renewal p50", format!("{:.2} ms", self.p50_ms)),
            ("Renewal p99", format!("{:.2} ms", self.p99_ms)),
            ("Failed renewals", self.failed_renewals.to_string()),
            ("Conflicts (409)", self.conflicts.to_string()),
            ("Throttled (429)", self.throttled.to_string()),
            ("Errors", self.errors.to_string()),
            ("Status updates", self.status_updates.to_string()),
            ("Failed nodes", self.failed_nodes.to_string()),
            (
                "Seen NotReady",
                format!("{} of {}", self.not_ready_nodes, self.failed_nodes),
            ),
            (
                "NotReady after p50",
                optional(self.not_ready_seconds_p50, "s"),
            ),
            (
                "NotReady after max",
                optional(self.not_ready_seconds_max, "s"),
            ),
            ("False NotReady", self.false_not_ready.to_string()),
            ("CPU/renewal", optional(self.cpu_us_per_renewal, "µs")),
            (
                "Server CPU/renewal",
                optional(self.server_cpu_us_per_renewal, "µs"),
            ),
        ];
        table(&mut out, &rows);
        messages(&mut out, "Errors:", &self.error_messages);
        if self.event_writers > 0 {
            self.events_text(&mut out);
        }
        if self.kept {
            let _ = writeln!(out, "The nodes and their leases were kept (--keep).");
        }
        out
    }
}

impl SimSummary {
    /// The event writers' part of the summary table.
    fn events_text(&self, out: &mut String) {
        let offered = match self.event_rate {
            0 => "as fast as they can".to_string(),
            rate => format!("{rate}/s offered"),
        };
        let _ = writeln!(out, "Events: {} writers, {offered}", self.event_writers);
        let rows = [
            ("Events created", self.events_created.to_string()),
            ("Events/s", format!("{:.1}", self.events_per_s)),
            ("Event POST p50", format!("{:.2} ms", self.events_p50_ms)),
            ("Event POST p99", format!("{:.2} ms", self.events_p99_ms)),
            ("Throttled (429)", self.events_throttled.to_string()),
            ("Errors", self.events_errors.to_string()),
        ];
        table(out, &rows);
        messages(out, "Event errors:", &self.events_error_messages);
    }
}

/// Writes `rows` of labels and values as two aligned columns.
fn table(out: &mut String, rows: &[(&str, String)]) {
    for (label, value) in rows {
        let _ = writeln!(out, "  {label:<20}{value:>14}");
    }
}

/// Lists error `messages` with their counts under `heading`, if there are any.
fn messages(out: &mut String, heading: &str, messages: &BTreeMap<String, u64>) {
    if !messages.is_empty() {
        let _ = writeln!(out, "{heading}");
        for (message, n) in messages {
            let _ = writeln!(out, "  {n}\t{message}");
        }
    }
}

/// p50 and p99 of `stats` in milliseconds (0 without samples).
fn percentiles_ms(stats: &Stats) -> (f64, f64) {
    if stats.succeeded() == 0 {
        return (0.0, 0.0);
    }
    (
        stats.percentile_secs(50.0) * 1e3,
        stats.percentile_secs(99.0) * 1e3,
    )
}

/// The live line's counters, read every second.
#[derive(Debug, Default)]
pub struct LiveLine {
    renewals: u64,
    events: u64,
}

impl LiveLine {
    /// The line for the `elapsed` seconds since the last call: renewals a second, the
    /// window's p50 and p99, and the totals of 409s, 429s, errors, status posts and NotReady;
    /// then, with event writers, events a second, the window's p99 and the events' 429s and
    /// errors.
    pub fn next(&mut self, shared: &Shared, elapsed: f64) -> String {
        let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        let renewals = load(&shared.renewals);
        let rate = (renewals - self.renewals) as f64 / elapsed.max(1e-9);
        self.renewals = renewals;
        let window = std::mem::take(&mut lock(&shared.latency).window);
        let (p50, p99) = percentiles_ms(&window);
        let readiness = lock(&shared.readiness).summary();
        let mut line = format!(
            "{rate:.0} renewals/s, p50 {p50:.1} ms, p99 {p99:.1} ms, {} 409s, {} 429s, {} errors, \
             {} status, NotReady {}/{} ({} false)",
            load(&shared.conflicts),
            load(&shared.requests.throttled),
            load(&shared.requests.errors),
            load(&shared.status_updates),
            readiness.not_ready_nodes,
            readiness.failed_nodes,
            readiness.false_not_ready,
        );
        let events = &shared.events;
        if events.writers > 0 {
            let created = load(&events.created);
            let rate = (created - self.events) as f64 / elapsed.max(1e-9);
            self.events = created;
            let window = std::mem::take(&mut lock(&events.latency).window);
            let (_, p99) = percentiles_ms(&window);
            let _ = write!(
                line,
                "; {rate:.0} events/s, p99 {p99:.1} ms, {} 429s, {} errors",
                load(&events.requests.throttled),
                load(&events.requests.errors),
            );
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_the_documented_fields() {
        let summary = SimSummary {
            nodes: 3,
            renewals: 30,
            not_ready_seconds_p50: Some(41.5),
            ..SimSummary::default()
        };
        let json: serde_json::Value = serde_json::from_str(&summary.to_json()).unwrap();
        for field in [
            "nodes",
            "renewals",
            "renewals_per_s",
            "p50_ms",
            "p99_ms",
            "conflicts",
            "throttled",
            "errors",
            "status_updates",
            "failed_nodes",
            "not_ready_seconds_p50",
            "false_not_ready",
            "cpu_us_per_renewal",
            "server_cpu_us_per_renewal",
        ] {
            assert!(json.get(field).is_some(), "{field} missing in {json}");
        }
        assert_eq!(json["not_ready_seconds_p50"], 41.5);
        assert!(json["cpu_us_per_renewal"].is_null());
        let text = summary.to_text();
        assert!(text.contains("  Renewals"), "{text}");
        assert!(
            text.contains("NotReady after p50          41.5 s"),
            "{text}"
        );
        assert!(!text.contains("Events"), "{text}");
    }

    #[test]
    fn events_stand_apart_from_renewals() {
        let mut summary = SimSummary {
            renewals: 30,
            errors: 1,
            event_writers: 2,
            events_created: 500,
            events_per_s: 50.0,
            events_p99_ms: 12.5,
            events_throttled: 7,
            events_errors: 3,
            ..SimSummary::default()
        };
        summary
            .events_error_messages
            .insert("POST events: 500: boom".into(), 3);
        let json: serde_json::Value = serde_json::from_str(&summary.to_json()).unwrap();
        for (field, want) in [
            ("event_writers", 2.0),
            ("event_rate", 0.0),
            ("events_created", 500.0),
            ("events_per_s", 50.0),
            ("events_p50_ms", 0.0),
            ("events_p99_ms", 12.5),
            ("events_throttled", 7.0),
            ("events_errors", 3.0),
            ("errors", 1.0),
        ] {
            assert_eq!(json[field].as_f64(), Some(want), "{field} in {json}");
        }
        assert_eq!(json["events_error_messages"]["POST events: 500: boom"], 3);
        let text = summary.to_text();
        assert!(
            text.contains("Events: 2 writers, as fast as they can"),
            "{text}"
        );
        assert!(
            text.contains("  Event POST p99            12.50 ms"),
            "{text}"
        );
        assert!(
            text.contains("Event errors:\n  3\tPOST events: 500: boom"),
            "{text}"
        );
        summary.event_rate = 100;
        assert!(summary.to_text().contains("2 writers, 100/s offered"));
    }
}
