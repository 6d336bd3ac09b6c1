//! Durations as Go reads and writes them (`time.ParseDuration`, `Duration.String`): `300ms`,
//! `1.5s`, `1h30m`; the syntax of every duration flag of etcd and kube-apiserver.

use std::time::Duration;

/// Reads a Go duration (`1h30m`, `10m`, `1.5s`, `100ms`, `250us`, `10ns`; `0` alone is
/// zero); the error says what was wrong, with an example.
pub fn parse(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?}: use Go syntax like 10m, 30s or 100ms");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(bad());
    }
    let mut rest = s;
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(bad()),
        };
        total += number * scale;
        rest = &rest[unit..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

/// Writes `d` as Go's `Duration.String` does: `0s`, `250ms`, `1.5s`, `1m30s`, `2h0m0s`.
pub fn format(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000_000_000 {
        let (unit, scale) = match nanos {
            n if n < 1_000 => ("ns", 1),
            n if n < 1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(nanos, scale));
    }
    let hours = nanos / 3_600_000_000_000;
    let minutes = nanos / 60_000_000_000 % 60;
    let seconds = decimal(nanos % 60_000_000_000, 1_000_000_000);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

/// `n / scale` with its fraction and no trailing zeros (`1500, 1000` → `1.5`).
fn decimal(n: u128, scale: u128) -> String {
    let (whole, fraction) = (n / scale, n % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_go_durations() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("10us"), Ok(Duration::from_micros(10)));
        assert_eq!(parse("10µs"), Ok(Duration::from_micros(10)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        for bad in ["", "10", "5x", "ms", "-1s", "1.2.3s"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn writes_them_as_go_does() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(15), "15ns"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_millis(200), "200ms"),
            (Duration::from_secs(2), "2s"),
            (Duration::from_millis(2500), "2.5s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(7200), "2h0m0s"),
        ];
        for (d, text) in cases {
            assert_eq!(format(d), text);
            assert_eq!(parse(text), Ok(d));
        }
    }
}
