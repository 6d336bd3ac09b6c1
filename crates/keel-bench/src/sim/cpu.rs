//! CPU time: the simulator's own (user + system, all threads, from `/proc/self/stat`) and the
//! server's (`process_cpu_seconds_total` on its `/metrics`, where it exposes it), read before
//! and after the steady phase so each can be divided by the renewals made in between.
//!
//! `/proc/self/stat` counts in clock ticks of `USER_HZ`, which Linux fixes at 100 a second
//! for user space on every architecture; over a run of seconds that is precise enough.

use std::time::Duration;

use http::{Method, StatusCode};

use crate::https::Conn;

/// Clock ticks a second in `/proc/self/stat` (Linux's `USER_HZ`).
const USER_HZ: u64 = 100;

/// The CPU time this process has used so far, None where `/proc` is not there.
pub fn own() -> Option<Duration> {
    parse_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// user + system time of a `/proc/<pid>/stat` line (fields 14 and 15, after the command
/// name in parentheses, which may itself hold spaces and parentheses).
fn parse_stat(stat: &str) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_ascii_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((user + system) * 1000 / USER_HZ))
}

/// The server's `process_cpu_seconds_total`, None if its `/metrics` cannot be read or has
/// no such series.
pub async fn server(conn: &mut Conn, timeout: Duration) -> Option<Duration> {
    let answer = tokio::time::timeout(timeout, conn.call(Method::GET, "/metrics", None))
        .await
        .ok()?
        .ok()?;
    if answer.status != StatusCode::OK {
        return None;
    }
    metric(
        &String::from_utf8_lossy(&answer.body),
        "process_cpu_seconds_total",
    )
    .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
}

/// The value of the unlabelled series `name` in a Prometheus text exposition.
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(' ')?;
        value.split_ascii_whitespace().next()?.parse().ok()
    })
}

/// Microseconds of CPU per renewal between two readings, None without both or without
/// renewals.
pub fn per_renewal(
    before: Option<Duration>,
    after: Option<Duration>,
    renewals: u64,
) -> Option<f64> {
    let used = after?.checked_sub(before?)?;
    (renewals > 0).then(|| used.as_secs_f64() * 1e6 / renewals as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines() {
        let line = "4242 (keel (sim) x) S 1 4242 4242 0 -1 4194304 1000 0 0 0 250 130 0 0 20 0 9 0";
        assert_eq!(parse_stat(line), Some(Duration::from_millis(3800)));
        assert_eq!(parse_stat("garbage"), None);
        assert!(own().is_some_and(|d| d < Duration::from_secs(86_400)));
    }

    #[test]
    fn metrics_and_ratios() {
        let text = "# HELP process_cpu_seconds_total Total user and system CPU time.\n\
                    # TYPE process_cpu_seconds_total counter\n\
                    process_cpu_seconds_total_other 9\n\
                    process_cpu_seconds_total 12.5\n";
        assert_eq!(metric(text, "process_cpu_seconds_total"), Some(12.5));
        assert_eq!(metric("up 1\n", "process_cpu_seconds_total"), None);
        let s = Duration::from_secs;
        assert_eq!(per_renewal(Some(s(1)), Some(s(3)), 1000), Some(2000.0));
        assert_eq!(per_renewal(None, Some(s(3)), 1000), None);
        assert_eq!(per_renewal(Some(s(1)), Some(s(3)), 0), None);
    }
}
