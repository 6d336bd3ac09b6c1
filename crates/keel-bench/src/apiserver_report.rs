//! What `keel bench apiserver` measures, and its part of the report: the updates and their
//! rate, 409 conflicts, GET and PUT latency, watch delivery latency, and the event accounting
//! (expected, received, lost, duplicated, out of order, mismatched).

use std::fmt::Write as _;
use std::time::Duration;

use crate::report::Stats;

/// The percentiles the apiserver report prints per verb and for watch delivery.
const POINTS: [(&str, f64); 3] = [("p50", 50.0), ("p90", 90.0), ("p99", 99.0)];

/// What `keel bench apiserver` measures.
#[derive(Debug, Clone, Default)]
pub struct ApiserverSummary {
    /// The server URL.
    pub server: String,
    /// `HTTP/2` or `HTTP/1.1`.
    pub protocol: String,
    /// The namespace the leases lived in.
    pub namespace: String,
    /// Lease renewers.
    pub clients: usize,
    /// Leases renewed (over all renewers).
    pub leases: usize,
    /// Watchers.
    pub watchers: usize,
    /// Connections the renewers used.
    pub client_conns: usize,
    /// Connections the watchers used.
    pub watcher_conns: usize,
    /// Updates per second asked for (0: no limit).
    pub target_rate: u64,
    /// Acknowledged updates (PUTs answered 200).
    pub updates: u64,
    /// Updates that failed (an error other than a conflict, or conflicts on every attempt).
    pub failed_updates: u64,
    /// From the first update sent to the last one answered.
    pub update_elapsed: Duration,
    /// PUTs answered 409 Conflict (each retried after a new GET).
    pub conflicts: u64,
    /// GET latency (every answered GET) and errors.
    pub get: Stats,
    /// PUT latency (every answered PUT, conflicts included) and errors.
    pub put: Stats,
    /// Delivery latency of each expected event (PUT sent to event received), and the watch
    /// errors.
    pub delivery: Stats,
    /// Events the watchers should receive: each acknowledged update, once per watcher.
    pub expected: u64,
    /// Expected events received.
    pub received: u64,
    /// Expected events never received (must be 0).
    pub lost: u64,
    /// Events a watcher received twice (must be 0).
    pub duplicates: u64,
    /// Events with a lower resourceVersion than an earlier event of the same watcher.
    pub out_of_order: u64,
    /// Events whose resourceVersion is an acknowledged update of another lease (must be 0).
    pub mismatched: u64,
    /// MODIFIED events of no acknowledged update (a PUT that failed on the client's side but
    /// was applied), and events of other types.
    pub unacknowledged: u64,
    /// Watches that ended and were opened again from their last resourceVersion.
    pub restarts: u64,
    /// From the last update answered until every watcher had caught up (or the drain timed
    /// out).
    pub drain: Duration,
}

impl ApiserverSummary {
    /// Acknowledged updates per second.
    pub fn update_rate(&self) -> f64 {
        let secs = self.update_elapsed.as_secs_f64();
        if secs > 0.0 {
            self.updates as f64 / secs
        } else {
            0.0
        }
    }

    /// Share of answered PUTs that were 409 Conflict, in percent.
    pub fn conflict_percent(&self) -> f64 {
        let puts = self.put.succeeded();
        if puts == 0 {
            0.0
        } else {
            self.conflicts as f64 * 100.0 / puts as f64
        }
    }

    /// Whether the watchers missed, repeated or confused an event.
    pub fn watch_failed(&self) -> bool {
        self.lost > 0 || self.duplicates > 0 || self.mismatched > 0
    }

    /// The event counts: text label, JSON key, value.
    fn counts(&self) -> [(&'static str, &'static str, u64); 8] {
        [
            ("Expected", "expected_events", self.expected),
            ("Received", "received_events", self.received),
            ("Lost", "lost", self.lost),
            ("Duplicates", "duplicates", self.duplicates),
            ("Out of order", "out_of_order", self.out_of_order),
            ("Mismatched", "mismatched", self.mismatched),
            ("Unacknowledged", "unacknowledged", self.unacknowledged),
            ("Restarts", "restarts", self.restarts),
        ]
    }

    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let target = match self.target_rate {
            0 => "no limit".to_string(),
            r => format!("{r}/s targeted"),
        };
        let _ = writeln!(
            out,
            "\nLease renewals against {} ({}), namespace {}:",
            self.server, self.protocol, self.namespace
        );
        let head = [
            (
                "Renewers",
                format!(
                    "{} ({} leases) on {}",
                    self.clients,
                    self.leases,
                    connections(self.client_conns)
                ),
            ),
            (
                "Watchers",
                format!("{} on {}", self.watchers, connections(self.watcher_conns)),
            ),
            (
                "Total",
                format!("{:.4} secs.", self.update_elapsed.as_secs_f64()),
            ),
            (
                "Updates",
                format!("{} ({:.1}/s, {target})", self.updates, self.update_rate()),
            ),
            ("Failed", self.failed_updates.to_string()),
            (
                "Conflicts",
                format!(
                    "{} ({:.2}% of PUTs)",
                    self.conflicts,
                    self.conflict_percent()
                ),
            ),
        ];
        for (label, value) in head {
            let _ = writeln!(out, "  {:<16}{value}", format!("{label}:"));
        }
        out.push_str("\nRequest latency:\n  verb\tcount\terrors\tp50\tp90\tp99\tmax\n");
        for (verb, stats) in [("GET", &self.get), ("PUT", &self.put)] {
            let _ = write!(out, "  {verb}\t{}\t{}", stats.succeeded(), stats.failed());
            for (_, p) in POINTS {
                let _ = write!(out, "\t{}", ms(stats.percentile_secs(p)));
            }
            let _ = writeln!(out, "\t{}", ms(stats.slowest_secs()));
        }
        let d = &self.delivery;
        let _ = write!(
            out,
            "\nWatch delivery (PUT sent -> MODIFIED event received):\n "
        );
        for (name, p) in POINTS {
            let _ = write!(out, " {name} {},", ms(d.percentile_secs(p)));
        }
        let _ = writeln!(out, " max {}", ms(d.slowest_secs()));
        for (label, _, n) in self.counts() {
            let _ = writeln!(out, "  {:<16}{n}", format!("{label}:"));
        }
        let _ = writeln!(
            out,
            "  Drain:          {:.4} secs.",
            self.drain.as_secs_f64()
        );
        for (what, stats) in [
            ("GET", &self.get),
            ("PUT", &self.put),
            ("watch", &self.delivery),
        ] {
            if stats.failed() > 0 {
                let _ = writeln!(out, "\n{what} errors:");
                for (message, n) in stats.errors() {
                    let _ = writeln!(out, "  [{n}]\t{message}");
                }
            }
        }
        out
    }

    /// The apiserver fields of the one-line JSON report (each starting with a comma).
    pub fn json_fields(&self, out: &mut String) {
        let msf = |s: f64| format!("{:.4}", s * 1e3);
        let _ = write!(
            out,
            ",\"server\":{},\"protocol\":{},\"namespace\":{}",
            crate::report::json_string(&self.server),
            crate::report::json_string(&self.protocol),
            crate::report::json_string(&self.namespace)
        );
        let _ = write!(
            out,
            ",\"clients\":{},\"leases\":{},\"watchers\":{},\"client_conns\":{},\"watcher_conns\":{},\"target_rate\":{}",
            self.clients,
            self.leases,
            self.watchers,
            self.client_conns,
            self.watcher_conns,
            self.target_rate
        );
        let _ = write!(
            out,
            ",\"updates\":{},\"failed_updates\":{},\"update_rate\":{:.2},\"conflicts\":{},\"conflict_percent\":{:.4}",
            self.updates,
            self.failed_updates,
            self.update_rate(),
            self.conflicts,
            self.conflict_percent()
        );
        for (name, stats) in [
            ("get", &self.get),
            ("put", &self.put),
            ("watch", &self.delivery),
        ] {
            let _ = write!(out, ",\"{name}_count\":{}", stats.succeeded());
            let _ = write!(out, ",\"{name}_errors\":{}", stats.failed());
            for (p, q) in POINTS {
                let _ = write!(out, ",\"{name}_{p}_ms\":{}", msf(stats.percentile_secs(q)));
            }
            let _ = write!(out, ",\"{name}_max_ms\":{}", msf(stats.slowest_secs()));
        }
        for (_, key, n) in self.counts() {
            let _ = write!(out, ",\"{key}\":{n}");
        }
        let _ = write!(out, ",\"drain_s\":{:.4}", self.drain.as_secs_f64());
    }
}

/// `n connections`, singular for one.
fn connections(n: usize) -> String {
    format!("{n} connection{}", if n == 1 { "" } else { "s" })
}

/// Seconds as milliseconds with two decimals and the unit.
fn ms(secs: f64) -> String {
    format!("{:.2} ms", secs * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json() {
        let mut s = ApiserverSummary {
            server: "https://127.0.0.1:6443".into(),
            protocol: "HTTP/2".into(),
            namespace: "keel-bench-abcde".into(),
            clients: 2,
            leases: 2,
            watchers: 3,
            target_rate: 10,
            updates: 20,
            update_elapsed: Duration::from_secs(2),
            conflicts: 1,
            expected: 60,
            received: 59,
            lost: 1,
            ..ApiserverSummary::default()
        };
        for ms in 1..=21 {
            s.put.record(Duration::from_millis(ms));
            s.get.record(Duration::from_millis(1));
        }
        s.delivery.record(Duration::from_millis(3));
        s.delivery.record_error("watch: 410: too old".into());
        assert!((s.update_rate() - 10.0).abs() < 1e-9);
        assert!((s.conflict_percent() - 100.0 / 21.0).abs() < 1e-9);
        assert!(s.watch_failed());
        let text = s.to_text();
        for needle in [
            "  Updates:        20 (10.0/s, 10/s targeted)\n",
            "  Conflicts:      1 (4.76% of PUTs)\n",
            "  PUT\t21\t0\t11.00 ms",
            "  Lost:           1\n",
            "[1]\twatch: 410: too old",
        ] {
            assert!(text.contains(needle), "{needle:?} missing in {text}");
        }
        let mut json = String::new();
        s.json_fields(&mut json);
        for needle in [
            ",\"updates\":20,",
            "\"update_rate\":10.00",
            "\"put_count\":21,\"put_errors\":0,\"put_p50_ms\":11.0",
            "\"watch_errors\":1",
            "\"lost\":1,",
            "\"namespace\":\"keel-bench-abcde\"",
        ] {
            assert!(json.contains(needle), "{needle:?} missing in {json}");
        }
    }
}
