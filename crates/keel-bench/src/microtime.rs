//! Kubernetes `MicroTime` (`metav1.MicroTime`, the type of a Lease's `spec.renewTime`):
//! RFC 3339 in UTC with exactly six fractional digits, `2006-01-02T15:04:05.000000Z`, and back
//! to microseconds since the Unix epoch (any number of fractional digits, `Z` or an offset).
//! Also `metav1.Time` (a condition's `lastHeartbeatTime`): the same at whole seconds,
//! `2006-01-02T15:04:05Z`.

use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch of `time` (negative before it).
pub fn micros(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_micros() as i64,
        Err(before) => -(before.duration().as_micros() as i64),
    }
}

/// `micros` (since the Unix epoch) as a MicroTime.
pub fn format(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:06}Z",
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60
    )
}

/// `micros` (since the Unix epoch) as a `metav1.Time`: whole seconds, the fraction dropped.
pub fn format_seconds(micros: i64) -> String {
    let mut text = format(micros);
    text.replace_range(19..26, "");
    text
}

/// Microseconds since the Unix epoch of an RFC 3339 time; None if `text` is not one.
pub fn parse(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let part = &b[from..to];
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |n, &c| n * 10 + i64::from(c - b'0')))
    };
    let (y, mo, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (h, mi, s) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac = 0i64;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 6 {
                frac = frac * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        let digits = i - start;
        if digits == 0 {
            return None;
        }
        for _ in digits..6 {
            frac *= 10;
        }
    }
    let offset = match &b[i..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let off = num(i + 1, i + 3)? * 3600 + num(i + 4, i + 6)? * 60;
            if *sign == b'+' { off } else { -off }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset;
    Some(secs * 1_000_000 + frac)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (the inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_and_parse() {
        assert_eq!(format(0), "1970-01-01T00:00:00.000000Z");
        let t = 1_767_225_599_123_456; // 2025-12-31T23:59:59.123456Z
        assert_eq!(format(t), "2025-12-31T23:59:59.123456Z");
        assert_eq!(format_seconds(t), "2025-12-31T23:59:59Z");
        assert_eq!(format_seconds(-1), "1969-12-31T23:59:59Z");
        assert_eq!(parse(&format(t)), Some(t));
        assert_eq!(parse("2024-02-29T12:00:00Z"), Some(1_709_208_000_000_000));
        assert_eq!(
            parse("2024-02-29T13:30:00.5+01:30"),
            Some(1_709_208_000_500_000)
        );
        assert_eq!(
            parse("2024-02-29T12:00:00.1234567Z"),
            Some(1_709_208_000_123_456)
        );
        for bad in [
            "",
            "2024-02-29",
            "2024-02-29T12:00:00",
            "2024-13-01T00:00:00Z",
            "2024-02-29T12:00:00.Z",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        let now = micros(SystemTime::now());
        assert_eq!(parse(&format(now)), Some(now));
    }
}
