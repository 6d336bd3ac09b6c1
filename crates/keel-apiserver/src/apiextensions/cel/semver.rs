//! Kubernetes' CEL semver library at the version 1.34 declares
//! (`k8s.io/apiserver/pkg/cel/library/semverlib.go`, `SemverVersion(1)`): `semver('1.2.3')`,
//! `semver('v1.2', true)` (normalized: a leading `v` dropped, missing minor and patch
//! numbers added, leading zeros removed), `isSemver(s)`, `isSemver(s, true)`, and on a
//! version `major`, `minor`, `patch`, `isGreaterThan`, `isLessThan`, `compareTo`. Versions
//! parse and compare as `github.com/blang/semver/v4` does, with its error words (`No
//! Major.Minor.Patch elements found`). A version is held as a map of one entry, its text
//! without build metadata (which neither comparison nor `==` looks at).

use std::cmp::Ordering;

use cel::common::types::{BOOL_TYPE, MAP_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::library::{Opaque, err, overload, owned, values};

/// A parsed version: major, minor, patch and the prerelease identifiers.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<Pre>,
}

/// A prerelease identifier: numeric or alphanumeric.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Pre {
    Num(u64),
    Str(String),
}

/// Registers the semver functions on `env` (the comparisons are shared with quantities:
/// see `quantity`).
pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("semver", "string_to_semver", vec![STRING_TYPE], semver)?;
    env.add_overload(
        "semver",
        "string_bool_to_semver",
        vec![STRING_TYPE, BOOL_TYPE],
        semver,
    )?;
    env.add_overload("isSemver", "is_semver_string", vec![STRING_TYPE], is_semver)?;
    env.add_overload(
        "isSemver",
        "is_semver_string_bool",
        vec![STRING_TYPE, BOOL_TYPE],
        is_semver,
    )?;
    env.add_member_overload("major", "semver_major", MAP_TYPE, vec![], major)?;
    env.add_member_overload("minor", "semver_minor", MAP_TYPE, vec![], minor)?;
    env.add_member_overload("patch", "semver_patch", MAP_TYPE, vec![], patch)
}

const NUMBERS: &str = "0123456789";
const ALPHANUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-0123456789";

fn only(s: &str, set: &str) -> bool {
    s.chars().all(|c| set.contains(c))
}

fn leading_zero(s: &str) -> bool {
    s.len() > 1 && s.starts_with('0')
}

/// Go's `strconv.ParseUint(s, 10, 64)`, with its errors.
fn parse_uint(s: &str) -> Result<u64, String> {
    s.parse().map_err(|_| {
        let why = if !s.is_empty() && only(s, NUMBERS) {
            "value out of range"
        } else {
            "invalid syntax"
        };
        format!("strconv.ParseUint: parsing {}: {why}", go_quote(s))
    })
}

use crate::apimachinery::quote::go_quote;

/// A numeric part of the version (`major`, `minor`, `patch`).
fn number(s: &str, name: &str, capital: &str) -> Result<u64, String> {
    if !only(s, NUMBERS) {
        return Err(format!(
            "Invalid character(s) found in {name} number {}",
            go_quote(s)
        ));
    }
    if leading_zero(s) {
        return Err(format!(
            "{capital} number must not contain leading zeroes {}",
            go_quote(s)
        ));
    }
    parse_uint(s)
}

/// blang/semver's `Parse`.
pub(super) fn parse(s: &str) -> Result<Version, String> {
    if s.is_empty() {
        return Err("Version string empty".into());
    }
    let parts: Vec<&str> = s.splitn(3, '.').collect();
    let [major, minor, rest] = parts.as_slice() else {
        return Err("No Major.Minor.Patch elements found".into());
    };
    let major = number(major, "major", "Major")?;
    let minor = number(minor, "minor", "Minor")?;
    let (rest, build) = match rest.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (*rest, None),
    };
    let (patch, pre) = match rest.split_once('-') {
        Some((p, pre)) => (p, Some(pre)),
        None => (rest, None),
    };
    let patch = number(patch, "patch", "Patch")?;
    let mut version = Version {
        major,
        minor,
        patch,
        pre: Vec::new(),
    };
    for p in pre
        .map(|p| p.split('.').collect::<Vec<_>>())
        .unwrap_or_default()
    {
        version.pre.push(prerelease(p)?);
    }
    for b in build
        .map(|b| b.split('.').collect::<Vec<_>>())
        .unwrap_or_default()
    {
        if b.is_empty() {
            return Err("Build meta data is empty".into());
        }
        if !only(b, ALPHANUM) {
            return Err(format!(
                "Invalid character(s) found in build meta data {}",
                go_quote(b)
            ));
        }
    }
    Ok(version)
}

/// blang/semver's `NewPRVersion`.
fn prerelease(s: &str) -> Result<Pre, String> {
    if s.is_empty() {
        return Err("Prerelease is empty".into());
    }
    if only(s, NUMBERS) {
        if leading_zero(s) {
            return Err(format!(
                "Numeric PreRelease version must not contain leading zeroes {}",
                go_quote(s)
            ));
        }
        return parse_uint(s).map(Pre::Num);
    }
    if only(s, ALPHANUM) {
        return Ok(Pre::Str(s.to_string()));
    }
    Err(format!(
        "Invalid character(s) found in prerelease {}",
        go_quote(s)
    ))
}

/// Upstream's `normalizeAndParse`: a leading `v` dropped, leading zeros removed, missing
/// minor and patch numbers added.
pub(super) fn normalize_and_parse(s: &str) -> Result<Version, String> {
    let s = s.strip_prefix('v').unwrap_or(s);
    let mut parts: Vec<String> = s
        .splitn(3, '.')
        .map(|p| {
            if p.len() <= 1 {
                return p.to_string();
            }
            let trimmed = p.trim_start_matches('0');
            if trimmed.is_empty() || !trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                format!("0{trimmed}")
            } else {
                trimmed.to_string()
            }
        })
        .collect();
    if parts.len() < 3 {
        if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
            return Err("short version cannot contain PreRelease/Build meta data".into());
        }
        parts.resize(3, "0".into());
    }
    parse(&parts.join("."))
}

impl Version {
    /// blang/semver's `Compare`.
    fn compare(&self, o: &Version) -> Ordering {
        let numbers = (self.major, self.minor, self.patch).cmp(&(o.major, o.minor, o.patch));
        if numbers != Ordering::Equal {
            return numbers;
        }
        match (self.pre.is_empty(), o.pre.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            // Numeric identifiers sort before alphanumeric ones; more identifiers is greater.
            (false, false) => self.pre.cmp(&o.pre),
        }
    }

    fn text(&self) -> String {
        let mut s = format!("{}.{}.{}", self.major, self.minor, self.patch);
        for (i, p) in self.pre.iter().enumerate() {
            s.push(if i == 0 { '-' } else { '.' });
            match p {
                Pre::Num(n) => s.push_str(&n.to_string()),
                Pre::Str(t) => s.push_str(t),
            }
        }
        s
    }
}

fn read(args: &[Value]) -> Option<Result<Version, String>> {
    let Some(Value::String(s)) = args.first() else {
        return None;
    };
    Some(match args.get(1) {
        Some(Value::Bool(true)) => normalize_and_parse(s),
        _ => parse(s),
    })
}

overload!(semver, |args| match read(args) {
    Some(Ok(v)) => Ok(Opaque::Semver.wrap(v.text())),
    Some(Err(e)) => Err(err("semver", &e)),
    None => Err(ExecutionError::no_such_overload("semver", Vec::new())),
});

overload!(is_semver, |args| Ok(Value::Bool(matches!(
    read(args),
    Some(Ok(_))
))));

/// The version a semver value holds; None for any other value.
pub(super) fn of(v: Option<&Value>) -> Option<Version> {
    Opaque::Semver.text(v).and_then(|s| parse(s).ok())
}

/// The order of two semver values, if both are.
pub(super) fn ordering(a: Option<&Value>, b: Option<&Value>) -> Option<Ordering> {
    Some(of(a)?.compare(&of(b)?))
}

fn part(args: &[Value], function: &str, f: fn(&Version) -> u64) -> Result<Value, ExecutionError> {
    let v = of(args.first()).ok_or_else(|| ExecutionError::no_such_overload(function, vec![]))?;
    Ok(Value::Int(f(&v) as i64))
}

overload!(major, |args| part(args, "major", |v| v.major));
overload!(minor, |args| part(args, "minor", |v| v.minor));
overload!(patch, |args| part(args, "patch", |v| v.patch));
