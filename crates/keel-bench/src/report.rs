//! Latency statistics and the benchmark report, printed like etcd's `pkg/report` or as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::apiserver_report::ApiserverSummary;

/// The percentiles etcd's report prints.
pub const PERCENTILES: [f64; 8] = [10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9];

/// Longest latency the histogram tells apart (longer ones count as this), in nanoseconds.
const HIGHEST_NANOS: u64 = 3_600 * 1_000_000_000;

/// Latencies of successful requests and the errors of failed ones.
#[derive(Debug, Clone)]
pub struct Stats {
    histogram: Histogram<u64>,
    count: u64,
    sum_secs: f64,
    sum_sq_secs: f64,
    fastest: Duration,
    slowest: Duration,
    errors: BTreeMap<String, u64>,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    /// Empty statistics.
    pub fn new() -> Self {
        Self {
            histogram: Histogram::new_with_bounds(1, HIGHEST_NANOS, 3)
                .expect("static histogram bounds are valid"),
            count: 0,
            sum_secs: 0.0,
            sum_sq_secs: 0.0,
            fastest: Duration::MAX,
            slowest: Duration::ZERO,
            errors: BTreeMap::new(),
        }
    }

    /// Records the latency of one successful request.
    pub fn record(&mut self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.histogram.saturating_record(nanos.max(1));
        let secs = latency.as_secs_f64();
        self.count += 1;
        self.sum_secs += secs;
        self.sum_sq_secs += secs * secs;
        self.fastest = self.fastest.min(latency);
        self.slowest = self.slowest.max(latency);
    }

    /// Records one failed request by its error message.
    pub fn record_error(&mut self, message: String) {
        *self.errors.entry(message).or_default() += 1;
    }

    /// Successful requests per second over `elapsed`.
    pub fn per_second(&self, elapsed: Duration) -> f64 {
        let secs = elapsed.as_secs_f64();
        if secs > 0.0 {
            self.succeeded() as f64 / secs
        } else {
            0.0
        }
    }

    /// Number of successful requests.
    pub fn succeeded(&self) -> u64 {
        self.count
    }

    /// Number of failed requests.
    pub fn failed(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Failed requests, counted by error message.
    pub fn errors(&self) -> &BTreeMap<String, u64> {
        &self.errors
    }

    /// Mean latency of successful requests, in seconds (0 when there are none).
    pub fn average_secs(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_secs / self.count as f64
        }
    }

    /// Population standard deviation of the latencies, in seconds.
    pub fn stddev_secs(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let mean = self.average_secs();
        (self.sum_sq_secs / self.count as f64 - mean * mean)
            .max(0.0)
            .sqrt()
    }

    /// Fastest successful request, in seconds.
    pub fn fastest_secs(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.fastest.as_secs_f64()
        }
    }

    /// Slowest successful request, in seconds.
    pub fn slowest_secs(&self) -> f64 {
        self.slowest.as_secs_f64()
    }

    /// Latency at `percentile` (0..=100), in seconds, to three significant digits.
    pub fn percentile_secs(&self, percentile: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        self.histogram.value_at_quantile(percentile / 100.0) as f64 / 1e9
    }

    /// Counts of successful requests in `buckets` equal slices between fastest and slowest, as
    /// `(upper bound in seconds, count)`, like etcd's response time histogram.
    pub fn buckets(&self, buckets: usize) -> Vec<(f64, u64)> {
        if self.count == 0 {
            return Vec::new();
        }
        let fastest = self.fastest_secs();
        let step = (self.slowest_secs() - fastest) / buckets as f64;
        let mut out: Vec<(f64, u64)> = (0..buckets)
            .map(|i| (fastest + step * i as f64, 0))
            .chain(std::iter::once((self.slowest_secs(), 0)))
            .collect();
        for value in self.histogram.iter_recorded() {
            let secs = self.histogram.highest_equivalent(value.value_iterated_to()) as f64 / 1e9;
            let secs = secs.clamp(fastest, self.slowest_secs());
            let slot = out.iter().position(|&(bound, _)| secs <= bound);
            let slot = slot.unwrap_or(out.len() - 1);
            out[slot].1 += value.count_at_value();
        }
        out
    }

    /// Adds `other`'s requests to these.
    pub fn merge(&mut self, other: &Stats) {
        self.histogram
            .add(&other.histogram)
            .expect("histograms share bounds");
        self.count += other.count;
        self.sum_secs += other.sum_secs;
        self.sum_sq_secs += other.sum_sq_secs;
        self.fastest = self.fastest.min(other.fastest);
        self.slowest = self.slowest.max(other.slowest);
        for (message, n) in &other.errors {
            *self.errors.entry(message.clone()).or_default() += n;
        }
    }
}

/// The outcome of one benchmark run.
#[derive(Debug, Clone)]
pub struct Report {
    /// Name of the benchmark (`put`, `range`, `txn-put`, `watch`, `lease-keepalive`, `compact`,
    /// `apiserver`).
    pub op: String,
    /// Wall-clock time from the first request sent to the last answer received (for `watch`:
    /// from the first put sent to the last event received).
    pub elapsed: Duration,
    /// Per-request statistics (for `watch`: one sample per event received, its delivery
    /// latency from the put sent to the event received; for `apiserver`: the PUTs).
    pub stats: Stats,
    /// What only `watch` measures.
    pub watch: Option<WatchSummary>,
    /// What only `compact` measures.
    pub compaction: Option<CompactionSummary>,
    /// What only `apiserver` measures.
    pub apiserver: Option<ApiserverSummary>,
}

/// What `keel bench compact` measures.
#[derive(Debug, Clone, Default)]
pub struct CompactionSummary {
    /// The revision compacted to.
    pub revision: i64,
    /// From the Compact sent to its (physical) answer.
    pub compaction: Duration,
    /// Length of the baseline load before the Compact.
    pub baseline: Duration,
    /// Puts sent during the compaction.
    pub put: Stats,
    /// Ranges sent during the compaction.
    pub range: Stats,
    /// Puts sent during the baseline.
    pub baseline_put: Stats,
    /// Ranges sent during the baseline.
    pub baseline_range: Stats,
}

impl CompactionSummary {
    /// Each kind of request during the compaction and during the baseline, with its rate.
    fn parts(&self) -> [(&'static str, &Stats, Duration); 4] {
        [
            ("put", &self.put, self.compaction),
            ("range", &self.range, self.compaction),
            ("baseline_put", &self.baseline_put, self.baseline),
            ("baseline_range", &self.baseline_range, self.baseline),
        ]
    }
}

/// What `keel bench watch` measures besides the delivery latency of each event.
#[derive(Debug, Clone, Default)]
pub struct WatchSummary {
    /// Watch streams opened.
    pub streams: usize,
    /// Watchers created over all streams.
    pub watchers: usize,
    /// Latency of each watch creation (create request sent to `created` response received).
    pub create_stats: Stats,
    /// Latency of each put (sent to answered), and the errors of failed puts.
    pub put_stats: Stats,
    /// Time from the first put sent to the last put answered.
    pub put_elapsed: Duration,
    /// Events the watchers should receive: for each successful put, the watchers of its key.
    pub expected: u64,
    /// Expected events received at least once.
    pub received: u64,
    /// Expected events never received (must be 0).
    pub lost: u64,
    /// Events received more than once by the same watcher (must be 0).
    pub duplicates: u64,
    /// Events received with a lower revision than an earlier event of the same watcher.
    pub out_of_order: u64,
    /// Events no put of this run explains (another writer, or a key the watcher does not watch).
    pub unexpected: u64,
    /// Watchers the server cancelled.
    pub canceled: u64,
    /// The server's resident memory at each step, with `--server-pid`.
    pub rss: Option<RssSamples>,
}

/// The server's VmRSS at each step of a watch benchmark, in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RssSamples {
    /// Before any stream is opened.
    pub before_kib: u64,
    /// With every stream open, each with one watcher.
    pub streams_kib: u64,
    /// With every watcher created, idle.
    pub watchers_kib: u64,
    /// After the puts (absent when `--put-total 0`).
    pub after_kib: Option<u64>,
}

impl WatchSummary {
    /// Server memory per stream in bytes (VmRSS growth from opening the streams, each with one
    /// watcher, divided by the number of streams).
    pub fn bytes_per_stream(&self) -> Option<f64> {
        let rss = self.rss?;
        (self.streams > 0).then(|| {
            (rss.streams_kib as f64 - rss.before_kib as f64) * 1024.0 / self.streams as f64
        })
    }

    /// Server memory per idle watcher in bytes (VmRSS growth from creating the watchers beyond
    /// the first of each stream, divided by their number).
    pub fn bytes_per_watcher(&self) -> Option<f64> {
        let rss = self.rss?;
        let extra = self.watchers.saturating_sub(self.streams);
        (extra > 0)
            .then(|| (rss.watchers_kib as f64 - rss.streams_kib as f64) * 1024.0 / extra as f64)
    }

    /// Successful puts per second.
    pub fn put_throughput(&self) -> f64 {
        self.put_stats.per_second(self.put_elapsed)
    }
}

impl Report {
    /// Successful requests per second of wall-clock time (etcd's `Requests/sec`).
    pub fn throughput(&self) -> f64 {
        self.stats.per_second(self.elapsed)
    }

    /// The report in the layout of etcd's `benchmark`, with an `Errors` count added.
    pub fn to_text(&self) -> String {
        if let Some(apiserver) = &self.apiserver {
            return apiserver.to_text();
        }
        let mut out = String::new();
        if let Some(watch) = &self.watch {
            watch_text_head(&mut out, watch);
        }
        out.push_str(&self.stats_text());
        if let Some(watch) = &self.watch {
            watch_text_tail(&mut out, watch);
        }
        if let Some(c) = &self.compaction {
            let _ = writeln!(
                out,
                "\nCompaction to revision {}: {:.3} secs.",
                c.revision,
                c.compaction.as_secs_f64()
            );
            for (name, stats, elapsed) in c.parts() {
                let _ = writeln!(
                    out,
                    "  {name}:\t{:.1} req/s, p50 {:.2} ms, p99 {:.2} ms, {} errors",
                    stats.per_second(elapsed),
                    stats.percentile_secs(50.0) * 1e3,
                    stats.percentile_secs(99.0) * 1e3,
                    stats.failed()
                );
            }
        }
        out
    }

    /// The statistics part of [`Report::to_text`].
    fn stats_text(&self) -> String {
        let secs = |s: f64| format!("{s:.4} secs");
        let stats = &self.stats;
        let mut out = String::new();
        if self.watch.is_some() && stats.succeeded() > 0 {
            out.push_str("\nWatch events received summary (latency: put sent -> event received):");
        }
        if stats.succeeded() > 0 {
            out.push_str("\nSummary:\n");
            let _ = writeln!(out, "  Total:\t{}.", secs(self.elapsed.as_secs_f64()));
            let _ = writeln!(out, "  Slowest:\t{}.", secs(stats.slowest_secs()));
            let _ = writeln!(out, "  Fastest:\t{}.", secs(stats.fastest_secs()));
            let _ = writeln!(out, "  Average:\t{}.", secs(stats.average_secs()));
            let _ = writeln!(out, "  Stddev:\t{}.", secs(stats.stddev_secs()));
            let _ = writeln!(out, "  Requests/sec:\t{:.4}", self.throughput());
            let _ = writeln!(out, "  Errors:\t{}", stats.failed());

            let buckets = stats.buckets(10);
            let max = buckets.iter().map(|&(_, n)| n).max().unwrap_or(0).max(1);
            out.push_str("\nResponse time histogram:\n");
            for (bound, n) in buckets {
                let bar = "∎".repeat((n * 40 / max) as usize);
                let _ = writeln!(out, "  {bound:.4} [{n}]\t|{bar}");
            }

            out.push_str("\nLatency distribution:\n");
            for p in PERCENTILES {
                let _ = writeln!(out, "  {p}% in {}.", secs(stats.percentile_secs(p)));
            }
        }
        if stats.failed() > 0 {
            out.push_str("\nError distribution:\n");
            for (message, n) in stats.errors() {
                let _ = writeln!(out, "  [{n}]\t{message}");
            }
        }
        out
    }

    /// The report as one line of JSON: throughput, latencies in milliseconds, counts, errors.
    pub fn to_json(&self) -> String {
        let stats = &self.stats;
        let ms = |s: f64| format!("{:.4}", s * 1e3);
        let mut out = String::from("{");
        let _ = write!(out, "\"op\":{}", json_string(&self.op));
        let _ = write!(out, ",\"total\":{}", stats.succeeded() + stats.failed());
        let _ = write!(out, ",\"succeeded\":{}", stats.succeeded());
        let _ = write!(out, ",\"errors\":{}", stats.failed());
        let _ = write!(out, ",\"elapsed_s\":{:.4}", self.elapsed.as_secs_f64());
        let _ = write!(out, ",\"throughput\":{:.2}", self.throughput());
        let _ = write!(out, ",\"avg_ms\":{}", ms(stats.average_secs()));
        let _ = write!(out, ",\"stddev_ms\":{}", ms(stats.stddev_secs()));
        let _ = write!(out, ",\"fastest_ms\":{}", ms(stats.fastest_secs()));
        let _ = write!(out, ",\"slowest_ms\":{}", ms(stats.slowest_secs()));
        for p in PERCENTILES {
            let name = format!("{p}").replace('.', "");
            let _ = write!(out, ",\"p{name}_ms\":{}", ms(stats.percentile_secs(p)));
        }
        if let Some(watch) = &self.watch {
            watch_json(&mut out, watch);
        }
        if let Some(apiserver) = &self.apiserver {
            apiserver.json_fields(&mut out);
        }
        if let Some(c) = &self.compaction {
            let _ = write!(out, ",\"compact_revision\":{}", c.revision);
            let _ = write!(out, ",\"compaction_s\":{:.4}", c.compaction.as_secs_f64());
            let all: u64 = c
                .parts()
                .iter()
                .map(|(_, s, _)| s.succeeded() + s.failed())
                .sum();
            let _ = write!(out, ",\"requests_all\":{all}");
            for (name, stats, elapsed) in c.parts() {
                let _ = write!(
                    out,
                    ",\"{name}_throughput\":{:.2}",
                    stats.per_second(elapsed)
                );
                let _ = write!(
                    out,
                    ",\"{name}_p50_ms\":{}",
                    ms(stats.percentile_secs(50.0))
                );
                let _ = write!(
                    out,
                    ",\"{name}_p99_ms\":{}",
                    ms(stats.percentile_secs(99.0))
                );
                let _ = write!(out, ",\"{name}_errors\":{}", stats.failed());
            }
        }
        out.push_str(",\"error_kinds\":{");
        for (i, (message, n)) in stats.errors().iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{}:{n}", json_string(message));
        }
        out.push_str("}}");
        out
    }
}

/// Watch creation and put summaries, printed before the event summary.
fn watch_text_head(out: &mut String, watch: &WatchSummary) {
    let ms = |s: f64| format!("{:.4} ms", s * 1e3);
    let c = &watch.create_stats;
    let _ = writeln!(
        out,
        "\nWatch creation summary:\n  Streams:\t{}\n  Watchers:\t{}\n  Average:\t{}.\n  99%:\t\t{}.\n  Slowest:\t{}.",
        watch.streams,
        watch.watchers,
        ms(c.average_secs()),
        ms(c.percentile_secs(99.0)),
        ms(c.slowest_secs()),
    );
    let p = &watch.put_stats;
    if p.succeeded() + p.failed() > 0 {
        let _ = writeln!(
            out,
            "\nPut summary:\n  Puts:\t\t{}\n  Errors:\t{}\n  Requests/sec:\t{:.4}\n  Average:\t{}.\n  99%:\t\t{}.",
            p.succeeded(),
            p.failed(),
            watch.put_throughput(),
            ms(p.average_secs()),
            ms(p.percentile_secs(99.0)),
        );
    }
}

/// Event counts and server memory, printed after the event summary.
fn watch_text_tail(out: &mut String, watch: &WatchSummary) {
    let _ = writeln!(
        out,
        "\nWatch events:\n  Expected:\t{}\n  Received:\t{}\n  Lost:\t\t{}\n  Duplicates:\t{}\n  Out of order:\t{}\n  Unexpected:\t{}\n  Canceled:\t{}",
        watch.expected,
        watch.received,
        watch.lost,
        watch.duplicates,
        watch.out_of_order,
        watch.unexpected,
        watch.canceled,
    );
    if let Some(rss) = watch.rss {
        let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
        let _ = writeln!(
            out,
            "\nServer memory (VmRSS):\n  Before:\t{}\n  Streams open:\t{}\n  Watchers idle:\t{}",
            mib(rss.before_kib),
            mib(rss.streams_kib),
            mib(rss.watchers_kib),
        );
        if let Some(after) = rss.after_kib {
            let _ = writeln!(out, "  After puts:\t{}", mib(after));
        }
        if let Some(b) = watch.bytes_per_stream() {
            let _ = writeln!(out, "  Per stream:\t{b:.0} B");
        }
        if let Some(b) = watch.bytes_per_watcher() {
            let _ = writeln!(out, "  Per watcher:\t{b:.0} B");
        }
    }
}

/// The watch-only fields of [`Report::to_json`].
fn watch_json(out: &mut String, watch: &WatchSummary) {
    let ms = |s: f64| format!("{:.4}", s * 1e3);
    let _ = write!(
        out,
        ",\"latency\":\"put-sent-to-event-received\",\"streams\":{},\"watchers\":{}",
        watch.streams, watch.watchers
    );
    let _ = write!(
        out,
        ",\"create_avg_ms\":{},\"create_p99_ms\":{}",
        ms(watch.create_stats.average_secs()),
        ms(watch.create_stats.percentile_secs(99.0))
    );
    let p = &watch.put_stats;
    let _ = write!(
        out,
        ",\"puts\":{},\"put_errors\":{},\"put_throughput\":{:.2},\"put_p50_ms\":{},\"put_p99_ms\":{}",
        p.succeeded(),
        p.failed(),
        watch.put_throughput(),
        ms(p.percentile_secs(50.0)),
        ms(p.percentile_secs(99.0))
    );
    let _ = write!(
        out,
        ",\"expected_events\":{},\"received_events\":{},\"lost\":{},\"duplicates\":{},\"out_of_order\":{},\"unexpected\":{},\"canceled\":{}",
        watch.expected,
        watch.received,
        watch.lost,
        watch.duplicates,
        watch.out_of_order,
        watch.unexpected,
        watch.canceled
    );
    if let Some(rss) = watch.rss {
        let _ = write!(
            out,
            ",\"rss_before_kib\":{},\"rss_streams_kib\":{},\"rss_watchers_kib\":{}",
            rss.before_kib, rss.streams_kib, rss.watchers_kib
        );
        if let Some(after) = rss.after_kib {
            let _ = write!(out, ",\"rss_after_kib\":{after}");
        }
    }
    if let Some(b) = watch.bytes_per_stream() {
        let _ = write!(out, ",\"bytes_per_stream\":{b:.1}");
    }
    if let Some(b) = watch.bytes_per_watcher() {
        let _ = write!(out, ",\"bytes_per_watcher\":{b:.1}");
    }
}

/// `text` as a JSON string literal.
pub(crate) fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let mut stats = Stats::new();
        for ms in 1..=1000 {
            stats.record(Duration::from_micros(ms * 100));
        }
        stats.record_error("Unavailable: \"down\"\n".into());
        Report {
            op: "put".into(),
            elapsed: Duration::from_secs(2),
            stats,
            watch: None,
            compaction: None,
            apiserver: None,
        }
    }

    #[test]
    fn statistics() {
        let r = report();
        assert_eq!(r.stats.succeeded(), 1000);
        assert_eq!(r.stats.failed(), 1);
        assert!((r.throughput() - 500.0).abs() < 1e-9);
        assert!((r.stats.average_secs() - 0.05005).abs() < 1e-9);
        assert!((r.stats.percentile_secs(50.0) - 0.05).abs() < 0.0001);
        assert!((r.stats.percentile_secs(99.0) - 0.099).abs() < 0.0001);
        assert!((r.stats.stddev_secs() - 0.028_867).abs() < 0.0001);
        let buckets = r.stats.buckets(10);
        assert_eq!(buckets.len(), 11);
        assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), 1000);
    }

    #[test]
    fn text_and_json() {
        let r = report();
        let text = r.to_text();
        for needle in [
            "Requests/sec:\t500.0000",
            "99.9% in",
            "Errors:\t1",
            "[1]\tUnavailable",
        ] {
            assert!(text.contains(needle), "{needle:?} missing in {text}");
        }
        let json = r.to_json();
        assert!(
            json.starts_with("{\"op\":\"put\",\"total\":1001,\"succeeded\":1000,\"errors\":1,")
        );
        assert!(json.contains("\"p999_ms\":"));
        assert!(json.contains("\"p50_ms\":50.0"));
        assert!(json.ends_with("\"error_kinds\":{\"Unavailable: \\\"down\\\"\\n\":1}}"));
    }

    #[test]
    fn merge_and_empty() {
        let mut a = Stats::new();
        a.record(Duration::from_millis(1));
        let mut b = Stats::new();
        b.record(Duration::from_millis(3));
        a.merge(&b);
        assert_eq!(a.succeeded(), 2);
        assert!((a.average_secs() - 0.002).abs() < 1e-12);
        let empty = Report {
            op: "range".into(),
            elapsed: Duration::ZERO,
            stats: Stats::new(),
            watch: None,
            compaction: None,
            apiserver: None,
        };
        assert!(empty.to_json().contains("\"throughput\":0.00"));
        assert_eq!(empty.to_text(), "");
    }

    #[test]
    fn compaction_fields() {
        let mut r = report();
        let mut put = Stats::new();
        put.record(Duration::from_millis(4));
        r.compaction = Some(CompactionSummary {
            revision: 42,
            compaction: Duration::from_secs(2),
            baseline: Duration::from_secs(1),
            put,
            ..CompactionSummary::default()
        });
        let json = r.to_json();
        for needle in [
            "\"compact_revision\":42",
            "\"compaction_s\":2.0000",
            "\"put_throughput\":0.50",
            "\"put_p99_ms\":4.0",
            "\"range_p99_ms\":",
            "\"baseline_put_errors\":0",
            "\"requests_all\":1,",
        ] {
            assert!(json.contains(needle), "{needle:?} missing in {json}");
        }
        assert!(
            r.to_text()
                .contains("Compaction to revision 42: 2.000 secs.")
        );
    }
}
