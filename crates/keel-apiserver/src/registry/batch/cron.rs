//! A CronJob's schedule read as kube-apiserver reads it: `cron.ParseStandard` of
//! `github.com/robfig/cron/v3` (v3.0.1, `parser.go` and `spec.go`): five fields (minute,
//! hour, day of month, month, day of week) of comma-separated ranges with steps and names,
//! or a descriptor (`@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
//! `@hourly`, `@every <duration>`), optionally after `TZ=<zone>` or `CRON_TZ=<zone>`; its
//! errors are the library's words, which `ValidateCronJob` shows as they are.

use super::zones::load_location;
use crate::apimachinery::quote::go_quote;

/// One field's bounds and the names it accepts (`bounds` in `spec.go`).
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// The descriptors `parseDescriptor` knows besides `@every`.
const DESCRIPTORS: [&str; 7] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// `cron.ParseStandard(spec)`: Ok if the schedule reads, else the library's error text.
pub fn parse_standard(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".to_string());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        // Go slices `spec[eq+1:i]` with i the first space; without one it panics, which
        // keel answers as a location that does not load.
        let eq = spec.find('=').unwrap_or(0);
        let end = spec.find(' ').unwrap_or(spec.len()).max(eq + 1);
        let zone = &spec[eq + 1..end];
        if let Err(e) = load_location(zone) {
            return Err(format!("provided bad location {zone}: {e}"));
        }
        spec = spec[end..].trim();
    }
    if spec.starts_with('@') {
        return parse_descriptor(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    // The seconds field (not part of a standard spec) is "0", which always reads.
    for (field, bounds) in fields.iter().zip([&MINUTES, &HOURS, &DOM, &MONTHS, &DOW]) {
        get_field(field, bounds)?;
    }
    Ok(())
}

/// `getField`: each comma-separated range of `field` (empty ones skipped).
fn get_field(field: &str, bounds: &Bounds) -> Result<(), String> {
    for expr in field.split(',').filter(|r| !r.is_empty()) {
        get_range(expr, bounds)?;
    }
    Ok(())
}

/// `getRange`: `*`, `?`, a number or name, or a range `a-b`, each with an optional `/step`.
fn get_range(expr: &str, bounds: &Bounds) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end);
    if low_and_high[0] == "*" || low_and_high[0] == "?" {
        start = bounds.min;
        end = bounds.max;
    } else {
        start = parse_int_or_name(low_and_high[0], bounds)?;
        end = match low_and_high.len() {
            1 => start,
            2 => parse_int_or_name(low_and_high[1], bounds)?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
    }
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = must_parse_int(range_and_step[1])?;
            if single {
                end = bounds.max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < bounds.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            bounds.min
        ));
    }
    if end > bounds.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            bounds.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

/// `parseIntOrName`: a name of the field (any case), else a number.
fn parse_int_or_name(expr: &str, bounds: &Bounds) -> Result<u64, String> {
    let lower = expr.to_lowercase();
    match bounds.names.iter().find(|(name, _)| *name == lower) {
        Some((_, n)) => Ok(*n),
        None => must_parse_int(expr),
    }
}

/// `mustParseInt`: `strconv.Atoi`, not negative.
fn must_parse_int(expr: &str) -> Result<u64, String> {
    let n = atoi(expr).map_err(|e| format!("failed to parse int from {expr}: {e}"))?;
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {expr}"));
    }
    Ok(n as u64)
}

/// Go's `strconv.Atoi` (an optional sign, then decimal digits), with its error text.
fn atoi(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    let syntax = || format!("strconv.Atoi: parsing {}: invalid syntax", go_quote(s));
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {}: value out of range", go_quote(s)))
}

/// `parseDescriptor`.
fn parse_descriptor(descriptor: &str) -> Result<(), String> {
    if DESCRIPTORS.contains(&descriptor) {
        return Ok(());
    }
    if let Some(duration) = descriptor.strip_prefix("@every ") {
        return parse_duration(duration)
            .map(|_| ())
            .map_err(|e| format!("failed to parse duration {descriptor}: {e}"));
    }
    Err(format!("unrecognized descriptor: {descriptor}"))
}

/// Go's `time.ParseDuration` (`[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`): nanoseconds, or the
/// error text of Go's `time` package.
pub fn parse_duration(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", time_quote(orig));
    let mut s = orig.as_bytes();
    let mut neg = false;
    if let Some((&c, rest)) = s.split_first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = rest;
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(invalid());
        }
        let int_len = s.iter().take_while(|b| b.is_ascii_digit()).count();
        let mut v: u128 = 0;
        for &b in &s[..int_len] {
            v = v * 10 + u128::from(b - b'0');
            if v > 1 << 63 {
                return Err(invalid());
            }
        }
        s = &s[int_len..];
        let (mut frac, mut scale, mut post) = (0u128, 1f64, false);
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let frac_len = s.iter().take_while(|b| b.is_ascii_digit()).count();
            for &b in &s[..frac_len] {
                // Digits past what a u64 holds are dropped, as leadingFraction does.
                if frac < (1 << 63) / 10 {
                    frac = frac * 10 + u128::from(b - b'0');
                    scale *= 10.0;
                }
            }
            post = frac_len > 0;
            s = &s[frac_len..];
        }
        if int_len == 0 && !post {
            return Err(invalid());
        }
        let unit_len = s
            .iter()
            .take_while(|b| !(**b == b'.' || b.is_ascii_digit()))
            .count();
        if unit_len == 0 {
            return Err(format!(
                "time: missing unit in duration {}",
                time_quote(orig)
            ));
        }
        let unit_text = String::from_utf8_lossy(&s[..unit_len]).into_owned();
        s = &s[unit_len..];
        let unit: u128 = match unit_text.as_str() {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    time_quote(&unit_text),
                    time_quote(orig)
                ));
            }
        };
        if v > (1 << 63) / unit {
            return Err(invalid());
        }
        v *= unit;
        if frac > 0 {
            v += (frac as f64 * (unit as f64 / scale)) as u128;
            if v > 1 << 63 {
                return Err(invalid());
            }
        }
        total += v;
        if total > 1 << 63 {
            return Err(invalid());
        }
    }
    if neg {
        return Ok((total as i128).wrapping_neg() as i64);
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// The `time` package's own `quote`: double quotes, `"` and `\` escaped, any byte outside
/// printable ASCII as `\xNN`.
fn time_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(b as char);
            }
            b' '..=b'~' => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_schedules_and_descriptors_read() {
        for spec in [
            "*/5 * * * *",
            "0 0 1 1 *",
            "15,45 9-17 * JAN-jun Mon-FRI",
            "0 0 ? * sun",
            "5/15 2-20/3 1 */2 0",
            "+5 * * * *",
            "@hourly",
            "@daily",
            "@midnight",
            "@weekly",
            "@monthly",
            "@yearly",
            "@annually",
            "@every 1h30m",
            "@every .5s",
            "TZ=Europe/Berlin 0 5 * * *",
            "CRON_TZ=UTC @daily",
        ] {
            assert_eq!(parse_standard(spec), Ok(()), "{spec}");
        }
    }

    #[test]
    fn bad_schedules_are_refused_in_the_librarys_words() {
        let cases = [
            ("", "empty spec string"),
            ("bad", "expected exactly 5 fields, found 1: [bad]"),
            (
                "* * * * * *",
                "expected exactly 5 fields, found 6: [* * * * * *]",
            ),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            (
                "5-2 * * * *",
                "beginning of range (5) beyond end of range (2): 5-2",
            ),
            (
                "x * * * *",
                "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            (
                "-1 * * * *",
                "failed to parse int from : strconv.Atoi: parsing \"\": invalid syntax",
            ),
            ("*/-1 * * * *", "negative number (-1) not allowed: -1"),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("1/2/3 * * * *", "too many slashes: 1/2/3"),
            (
                "* * * foo *",
                "failed to parse int from foo: strconv.Atoi: parsing \"foo\": invalid syntax",
            ),
            ("@often", "unrecognized descriptor: @often"),
            (
                "@every 5",
                "failed to parse duration @every 5: time: missing unit in duration \"5\"",
            ),
            (
                "@every 5y",
                "failed to parse duration @every 5y: time: unknown unit \"y\" in duration \"5y\"",
            ),
            (
                "TZ=Mars/Base 0 5 * * *",
                "provided bad location Mars/Base: unknown time zone Mars/Base",
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(parse_standard(spec), Err(want.to_string()), "{spec}");
        }
    }

    #[test]
    fn durations_read_as_go_reads_them() {
        assert_eq!(parse_duration("1h30m"), Ok(5_400_000_000_000));
        assert_eq!(parse_duration("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration("-2ms"), Ok(-2_000_000));
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration("300\u{b5}s"), Ok(300_000));
        assert_eq!(
            parse_duration(""),
            Err("time: invalid duration \"\"".to_string())
        );
        assert_eq!(
            parse_duration(".s"),
            Err("time: invalid duration \".s\"".to_string())
        );
        assert_eq!(
            parse_duration("9999999999h"),
            Err("time: invalid duration \"9999999999h\"".to_string())
        );
    }
}
