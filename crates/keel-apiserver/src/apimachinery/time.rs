//! Timestamps as Kubernetes writes them (RFC 3339 in UTC: a `metav1.Time` in whole seconds,
//! `2026-12-03T20:00:00Z`, a `metav1.MicroTime` with six digits of fraction,
//! `2026-12-03T20:00:00.123456Z`) and ages as kubectl shows them (`5m`, `2d3h`), worded as
//! apimachinery's `util/duration` package words them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time, in whole seconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Time(pub i64);

impl Time {
    /// Now.
    pub fn now() -> Time {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Time(since.as_secs() as i64)
    }

    /// How long after `earlier` this is (zero if it is before).
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_secs(self.0.saturating_sub(earlier.0).max(0) as u64)
    }

    /// Seconds after `earlier` this is, negative if it is before (for
    /// [`human_duration_secs`], which words a time in the future as `<invalid>`).
    pub fn seconds_since(self, earlier: Time) -> i64 {
        self.0.saturating_sub(earlier.0)
    }

    /// RFC 3339, UTC, whole seconds (`1970-01-01T00:00:00Z`).
    pub fn rfc3339(self) -> String {
        let days = self.0.div_euclid(86_400);
        let secs = self.0.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        if !(0..=9999).contains(&y) {
            return format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
                secs / 3600,
                secs / 60 % 60,
                secs % 60
            );
        }
        // Written by hand: it stamps every managedFields entry a write touches.
        let mut out = *b"0000-00-00T00:00:00Z";
        let mut put = |at: usize, width: usize, mut n: i64| {
            for i in (at..at + width).rev() {
                out[i] = b'0' + (n % 10) as u8;
                n /= 10;
            }
        };
        put(0, 4, y);
        put(5, 2, m);
        put(8, 2, d);
        put(11, 2, secs / 3600);
        put(14, 2, secs / 60 % 60);
        put(17, 2, secs % 60);
        out.into_iter().map(char::from).collect()
    }

    /// An HTTP date (RFC 1123 with the zone named `zone`, as Go's `http.TimeFormat` writes
    /// it with `GMT`: `Thu, 01 Jan 1970 00:00:00 GMT`).
    pub fn http_date(self, zone: &str) -> String {
        const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let days = self.0.div_euclid(86_400);
        let secs = self.0.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        format!(
            "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} {zone}",
            DAYS[(days + 4).rem_euclid(7) as usize],
            MONTHS[(m - 1) as usize],
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    }

    /// Parses RFC 3339 (`2026-12-03T20:00:00Z`, with fractional seconds, which are
    /// dropped, or with a `+hh:mm`/`-hh:mm` offset); None if it is not.
    pub fn parse(s: &str) -> Option<Time> {
        let b = s.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
            return None;
        }
        if b[13] != b':' || b[16] != b':' {
            return None;
        }
        let num = |from: usize, to: usize| -> Option<i64> {
            let part = s.get(from..to)?;
            if !part.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            part.parse().ok()
        };
        let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
        let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
        if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
            return None;
        }
        if hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        let mut rest = &s[19..];
        if let Some(frac) = rest.strip_prefix('.') {
            let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            rest = &frac[digits..];
        }
        let offset = match rest {
            "Z" => 0,
            _ => {
                let o = rest.as_bytes();
                if o.len() != 6 || !(o[0] == b'+' || o[0] == b'-') || o[3] != b':' {
                    return None;
                }
                let h: i64 = parse_digits(&rest[1..3])?;
                let m: i64 = parse_digits(&rest[4..6])?;
                if h > 23 || m > 59 {
                    return None;
                }
                let sign = if o[0] == b'-' { -1 } else { 1 };
                sign * (h * 3600 + m * 60)
            }
        };
        let days = days_from_civil(year, month, day);
        Some(Time(
            days * 86_400 + hour * 3600 + minute * 60 + second - offset,
        ))
    }
}

/// A point in time to the microsecond (`metav1.MicroTime`: a Lease's `renewTime`, an
/// events.k8s.io Event's `eventTime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MicroTime {
    /// Whole seconds since the Unix epoch.
    pub seconds: i64,
    /// Microseconds into the second (below 1,000,000).
    pub micros: u32,
}

impl MicroTime {
    /// Now.
    pub fn now() -> MicroTime {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        MicroTime {
            seconds: since.as_secs() as i64,
            micros: since.subsec_micros(),
        }
    }

    /// RFC 3339, UTC, six digits of fraction (`1970-01-01T00:00:00.000000Z`), as
    /// `MicroTime`'s JSON is written.
    pub fn rfc3339(self) -> String {
        let whole = Time(self.seconds).rfc3339();
        format!("{}.{:06}Z", whole.trim_end_matches('Z'), self.micros)
    }

    /// Parses RFC 3339 as [`Time::parse`] does, keeping the first six digits of the fraction
    /// (fewer are padded with zeros, nanoseconds cut); None if it is not RFC 3339.
    pub fn parse(s: &str) -> Option<MicroTime> {
        let seconds = Time::parse(s)?.0;
        let micros = s
            .get(19..)
            .and_then(|rest| rest.strip_prefix('.'))
            .map_or(0, |frac| {
                let digits = frac.bytes().take_while(u8::is_ascii_digit);
                let padded = digits.chain(std::iter::repeat(b'0')).take(6);
                padded.fold(0, |n, d| n * 10 + u32::from(d - b'0'))
            });
        Some(MicroTime { seconds, micros })
    }
}

fn parse_digits(s: &str) -> Option<i64> {
    if s.bytes().all(|c| c.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day counted from 1970-01-01 (the inverse of `days_from_civil`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// apimachinery's `duration.HumanDuration`.
pub fn human_duration(d: Duration) -> String {
    human_duration_secs(i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// apimachinery's `duration.HumanDuration` of a signed number of seconds: more than a
/// second in the future is `<invalid>`, a second is `0s` (clock skew).
pub fn human_duration_secs(seconds: i64) -> String {
    if let Some(early) = not_yet(seconds) {
        return early;
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return two_units(minutes, "m", seconds % 60, "s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return two_units(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return two_units(days, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return two_units(years, "y", days % 365, "d");
    }
    format!("{years}y")
}

/// `<big><unit>`, then `<small><small_unit>` unless it is zero (`5m`, `5m30s`).
fn two_units(big: i64, unit: &str, small: i64, small_unit: &str) -> String {
    if small == 0 {
        format!("{big}{unit}")
    } else {
        format!("{big}{unit}{small}{small_unit}")
    }
}

/// How both durations word a negative number of seconds: `<invalid>` from two seconds in
/// the future, `0s` for one (clock skew); None when it is not negative.
fn not_yet(seconds: i64) -> Option<String> {
    match seconds {
        ..-1 => Some("<invalid>".to_string()),
        -1 => Some("0s".to_string()),
        _ => None,
    }
}

/// apimachinery's `duration.ShortHumanDuration` (one unit: `45s`, `3m`, `5h`, `12d`,
/// `2y`) of a signed number of seconds.
pub fn short_human_duration_secs(seconds: i64) -> String {
    if let Some(early) = not_yet(seconds) {
        return early;
    }
    if seconds < 60 {
        return format!("{seconds}s");
    }
    if seconds / 60 < 60 {
        return format!("{}m", seconds / 60);
    }
    let hours = seconds / 3600;
    if hours < 24 {
        return format!("{hours}h");
    }
    if hours < 24 * 365 {
        return format!("{}d", hours / 24);
    }
    format!("{}y", hours / 24 / 365)
}

/// `translateTimestampSince` of kube's printers: the age of an RFC 3339 timestamp, or
/// `<unknown>` when it is unset or not a timestamp.
pub fn since_text(timestamp: Option<&str>, now: Time) -> String {
    match timestamp.and_then(Time::parse) {
        Some(t) => human_duration_secs(now.seconds_since(t)),
        None => "<unknown>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_times_format_parse_and_order_within_a_second() {
        let t = MicroTime {
            seconds: 1_780_000_000,
            micros: 42,
        };
        assert_eq!(t.rfc3339(), "2026-05-28T20:26:40.000042Z");
        assert_eq!(MicroTime::parse(&t.rfc3339()), Some(t));
        let parse = |s: &str| MicroTime::parse(s);
        assert!(parse("2026-01-01T00:00:00.1Z") > parse("2026-01-01T00:00:00.099999Z"));
        assert_eq!(parse("2026-01-01T00:00:00Z").unwrap().micros, 0);
        assert_eq!(parse("2026-01-01T00:00:00.000042Z").unwrap().micros, 42);
        assert_eq!(
            parse("2026-01-01T00:00:00.1234567Z").unwrap().micros,
            123_456,
            "nanoseconds are cut to microseconds"
        );
        assert_eq!(
            parse("2026-01-01T00:00:00.5+01:00").unwrap().micros,
            500_000
        );
        assert_eq!(parse("not a time"), None);
        assert_eq!(MicroTime::now().rfc3339().len(), 27);
    }

    #[test]
    fn timestamps_format_and_parse_as_rfc3339() {
        assert_eq!(Time(0).rfc3339(), "1970-01-01T00:00:00Z");
        assert_eq!(Time(1_780_000_000).rfc3339(), "2026-05-28T20:26:40Z");
        assert_eq!(Time(951_782_400).rfc3339(), "2000-02-29T00:00:00Z");
        assert_eq!(Time(1_709_164_799).rfc3339(), "2024-02-28T23:59:59Z");
        assert_eq!(Time(1_709_251_199).rfc3339(), "2024-02-29T23:59:59Z");
        assert_eq!(Time(-1).rfc3339(), "1969-12-31T23:59:59Z");
        for t in [
            0,
            1_780_000_000,
            951_782_400,
            1_709_251_199,
            -86_401,
            4_102_444_800,
        ] {
            assert_eq!(Time::parse(&Time(t).rfc3339()), Some(Time(t)), "{t}");
        }
        assert_eq!(
            Time::parse("2026-05-28T20:26:40.123456Z"),
            Some(Time(1_780_000_000))
        );
        assert_eq!(
            Time::parse("2026-05-28T22:26:40+02:00"),
            Some(Time(1_780_000_000))
        );
        assert_eq!(
            Time::parse("2026-05-28T15:56:40.5-04:30"),
            Some(Time(1_780_000_000))
        );
        for bad in [
            "",
            "2026-05-28",
            "2026-05-28 20:26:40Z",
            "2026-05-28T20:26:40",
            "2026-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-05-28T24:00:00Z",
            "2026-05-28T20:26:40.Z",
            "2026-05-28T20:26:40+0200",
            "2026-05-28T20:26:40Zjunk",
            "+026-05-28T20:26:40Z",
        ] {
            assert_eq!(Time::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn durations_read_as_apimachinery_words_them() {
        let cases = [
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (599, "9m59s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60 * 5, "3h5m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 3599, "47h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (8 * 86_400, "8d"),
            (729 * 86_400, "729d"),
            (730 * 86_400, "2y"),
            (731 * 86_400, "2y1d"),
            (8 * 365 * 86_400, "8y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration_secs(secs), want, "{secs}");
        }
        assert_eq!(human_duration(Duration::from_secs(125)), "2m5s");
        let short = [
            (-5, "<invalid>"),
            (59, "59s"),
            (60, "1m"),
            (3599, "59m"),
            (3600, "1h"),
            (86_399, "23h"),
            (86_400, "1d"),
            (365 * 86_400, "1y"),
        ];
        for (secs, want) in short {
            assert_eq!(short_human_duration_secs(secs), want, "{secs}");
        }
        let now = Time(1_780_000_000);
        assert_eq!(since_text(Some("2026-05-28T20:21:40Z"), now), "5m");
        assert_eq!(since_text(None, now), "<unknown>");
        assert_eq!(since_text(Some("2026-05-28T20:30:00Z"), now), "<invalid>");
    }
}
