//! The string formats a CRD schema may name (`format`), checked as kube-openapi's format
//! registry checks them: the formats apiextensions-apiserver supports (`bsonobjectid`, `uri`,
//! `email`, `hostname`, `ipv4`, `ipv6`, `cidr`, `mac`, `uuid`, `uuid3`, `uuid4`, `uuid5`,
//! `isbn`, `isbn10`, `isbn13`, `creditcard`, `ssn`, `hexcolor`, `rgbcolor`, `byte`,
//! `password`, `date`, `duration`, `datetime`/`date-time`). Any other format (`int32`,
//! `int64`, `float`, a made-up name) is not checked, as upstream does not check it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use base64::Engine;
use regex::Regex;

/// Whether `s` is of `format`; None for a format that is not checked.
pub fn fits(format: &str, s: &str) -> Option<bool> {
    Some(match format {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_uri(s),
        "email" => EMAIL.is_match(s),
        "hostname" => is_hostname(s),
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        "mac" => MAC.is_match(s),
        "uuid" => UUID.is_match(s),
        "uuid3" => is_uuid_version(s, '3'),
        "uuid4" => is_uuid_version(s, '4'),
        "uuid5" => is_uuid_version(s, '5'),
        "isbn" => is_isbn10(s) || is_isbn13(s),
        "isbn10" => is_isbn10(s),
        "isbn13" => is_isbn13(s),
        "creditcard" => is_credit_card(s),
        "ssn" => SSN.is_match(s),
        "hexcolor" => HEX_COLOR.is_match(s),
        "rgbcolor" => RGB_COLOR.is_match(s),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "password" => true,
        "date" => is_date(s),
        "duration" => DURATION.is_match(s),
        "datetime" | "date-time" => is_date_time(s),
        _ => return None,
    })
}

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a format's pattern compiles")
}

static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^[^@\s]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$",
    )
});
static MAC: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^(?:[0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$|^(?:[0-9A-Fa-f]{2}[:-]){7}[0-9A-Fa-f]{2}$|^(?:[0-9A-Fa-f]{4}\.){2}[0-9A-Fa-f]{4}$",
    )
});
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
});
static SSN: LazyLock<Regex> = LazyLock::new(|| regex(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static HEX_COLOR: LazyLock<Regex> = LazyLock::new(|| regex(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGB_COLOR: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
    )
});
/// A Go duration as `time.ParseDuration` or kube-openapi's duration format reads it
/// (`1h30m`, `1.5s`, `3 days`).
static DURATION: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)\s*(?:ns|us|µs|ms|s|m|h|d|w|(?:sec|second|min|minute|hour|day|week)s?)\s*)+$|^0$",
    )
});

/// An absolute URI or an absolute path, as Go's `url.ParseRequestURI` takes it.
fn is_uri(s: &str) -> bool {
    if s.starts_with('/') {
        return !s.contains(char::is_whitespace);
    }
    match s.split_once(':') {
        Some((scheme, rest)) => {
            scheme
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !rest.is_empty()
                && !s.contains(char::is_whitespace)
        }
        None => false,
    }
}

/// An RFC 1123 host name: labels of letters, digits and `-`, at most 255 characters.
fn is_hostname(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 255
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => bits <= 32,
        Ok(IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

fn is_uuid_version(s: &str, version: char) -> bool {
    UUID.is_match(s) && s.replace('-', "").chars().nth(12) == Some(version)
}

fn digits(s: &str) -> String {
    s.chars().filter(|c| !matches!(c, ' ' | '-')).collect()
}

fn is_isbn10(s: &str) -> bool {
    let d = digits(s);
    if d.len() != 10 {
        return false;
    }
    let mut sum = 0;
    for (i, c) in d.chars().enumerate() {
        let v = match c {
            'X' | 'x' if i == 9 => 10,
            c => match c.to_digit(10) {
                Some(v) => v,
                None => return false,
            },
        };
        sum += v * (10 - i as u32);
    }
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let d = digits(s);
    if d.len() != 13 || !d.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let sum: u32 = d
        .chars()
        .enumerate()
        .map(|(i, c)| c.to_digit(10).unwrap_or(0) * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    sum.is_multiple_of(10)
}

/// A card number passing the Luhn check.
fn is_credit_card(s: &str) -> bool {
    let d = digits(s);
    if !(12..=19).contains(&d.len()) || !d.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let sum: u32 = d
        .chars()
        .rev()
        .enumerate()
        .map(|(i, c)| {
            let v = c.to_digit(10).unwrap_or(0);
            if i % 2 == 1 {
                let v = v * 2;
                if v > 9 { v - 9 } else { v }
            } else {
                v
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// `YYYY-MM-DD` with a real month and day.
fn is_date(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return false;
    };
    let number = |p: &str, len: usize| {
        (p.len() == len && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<u32>().ok())
            .flatten()
    };
    let (Some(y), Some(m), Some(d)) = (number(y, 4), number(m, 2), number(d, 2)) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// RFC 3339 (`2006-01-02T15:04:05Z`, fractions and offsets allowed; `t`, `z` and a space
/// for `T` as strfmt takes them).
fn is_date_time(s: &str) -> bool {
    let Some(split) = s.find(['T', 't', ' ']) else {
        return false;
    };
    let (date, time) = (&s[..split], &s[split + 1..]);
    if !is_date(date) {
        return false;
    }
    let (clock, zone) = match time.find(['Z', 'z', '+', '-']) {
        Some(i) => (&time[..i], &time[i..]),
        None => return false,
    };
    let zone_ok = matches!(zone, "Z" | "z")
        || (zone.len() == 6
            && zone.as_bytes()[3] == b':'
            && is_clock(&zone[1..3], &zone[4..6], "00"));
    let (hms, fraction) = match clock.split_once('.') {
        Some((hms, f)) => (hms, Some(f)),
        None => (clock, None),
    };
    let parts: Vec<&str> = hms.split(':').collect();
    let [h, m, sec] = parts.as_slice() else {
        return false;
    };
    zone_ok
        && is_clock(h, m, sec)
        && fraction.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
}

fn is_clock(h: &str, m: &str, s: &str) -> bool {
    let two = |p: &str, max: u32| {
        p.len() == 2
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|v| v <= max)
    };
    two(h, 23) && two(m, 59) && two(s, 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_takes_its_own_and_refuses_the_rest() {
        let cases = [
            (
                "date-time",
                "2024-02-29T23:59:59.5+01:00",
                "2023-02-29T00:00:00Z",
            ),
            ("datetime", "2024-01-02T03:04:05Z", "2024-01-02"),
            ("date", "2024-12-31", "2024-13-01"),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123"),
            (
                "uuid4",
                "123e4567-e89b-42d3-a456-426614174000",
                "123e4567-e89b-12d3-a456-426614174000",
            ),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("ipv6", "::1", "10.0.0.1"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("mac", "00:1a:2b:3c:4d:5e", "00:1a:2b"),
            ("hostname", "a-b.example.com", "-a.example.com"),
            ("email", "a@example.com", "a@"),
            ("uri", "https://example.com/x", "example.com"),
            ("byte", "aGVsbG8=", "not base64!"),
            ("duration", "1h30m", "soon"),
            ("hexcolor", "#ff0000", "#ff00"),
            ("rgbcolor", "rgb(255, 0, 0)", "rgb(256,0,0)"),
            ("bsonobjectid", "507f1f77bcf86cd799439011", "507f"),
            ("isbn10", "0-306-40615-2", "0-306-40615-3"),
            ("isbn13", "978-0-306-40615-7", "978-0-306-40615-8"),
            ("creditcard", "4111 1111 1111 1111", "4111 1111 1111 1112"),
            ("ssn", "123-45-6789", "123-456-789"),
        ];
        for (format, good, bad) in cases {
            assert_eq!(fits(format, good), Some(true), "{format} {good}");
            assert_eq!(fits(format, bad), Some(false), "{format} {bad}");
        }
        assert_eq!(fits("int32", "x"), None);
        assert_eq!(fits("password", "anything"), Some(true));
    }
}
