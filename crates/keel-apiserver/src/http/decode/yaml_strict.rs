//! What Go's `yaml.v2` reading a document strictly into `interface{}` (`sigs.k8s.io/yaml`'s
//! `UnmarshalStrict` and `YAMLToJSONStrict`, which kube-apiserver runs over YAML bodies and
//! server-side apply configurations) finds wrong with it: each mapping key already set in its
//! mapping, at the line of the repeated key, in document order (`line 7: key "a" already set
//! in map`). JSON is YAML, so a JSON body is read the same way, line by line.
//!
//! As yaml.v2 does, the value of a repeated key is not read (nothing inside it is reported),
//! and keys are compared as it resolves them: plain scalars by the YAML 1.1 rules (`1` and
//! `0x1` are the same int, `yes` and `true` the same bool, `~` and `null` nil), quoted ones as
//! strings, explicitly tagged ones by their tag. A key is shown as Go's `%#v` shows it
//! (`"a"`, `1`, `true`, `<nil>`). Merge keys (`<<`) and aliases used as keys are not
//! expanded. A document the parser refuses reports nothing here: the non-strict read refuses
//! it first.

use std::collections::HashSet;

use granit_parser::{Event, Parser, ScalarStyle, Tag};

use crate::apimachinery::go_value::go_float;
use crate::apimachinery::quote::go_quote;

/// A mapping key as yaml.v2 resolves it into `interface{}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Null,
    Bool(bool),
    Int(i128),
    /// A float, by its bits (`-0` and `0` differ, as Go's map keys of float64 do not; rare
    /// enough not to matter).
    Float(u64),
    Str(String),
    /// A key that is never equal to another (a collection, an alias).
    Unique(usize),
}

impl Key {
    /// Go's `%#v` of the key's value.
    fn go_syntax(&self) -> String {
        match self {
            Key::Null => "<nil>".to_string(),
            Key::Bool(b) => b.to_string(),
            Key::Int(i) if *i > i128::from(i64::MAX) => format!("0x{i:x}"),
            Key::Int(i) => i.to_string(),
            Key::Float(bits) => go_float(f64::from_bits(*bits)),
            Key::Str(s) => go_quote(s),
            Key::Unique(_) => "<unknown>".to_string(),
        }
    }
}

/// A plain scalar as yaml.v2's `resolve` reads it.
fn resolve_plain(text: &str) -> Key {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Key::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" => {
            return Key::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False" | "FALSE" => {
            return Key::Bool(false);
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Key::Float(f64::INFINITY.to_bits());
        }
        "-.inf" | "-.Inf" | "-.INF" => return Key::Float(f64::NEG_INFINITY.to_bits()),
        ".nan" | ".NaN" | ".NAN" => return Key::Float(f64::NAN.to_bits()),
        _ => {}
    }
    if !text.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '.')) {
        return Key::Str(text.to_string());
    }
    let plain = text.replace('_', "");
    if let Some(i) = go_parse_int(&plain) {
        return Key::Int(i);
    }
    if let Some(bits) = plain
        .strip_prefix("0b")
        .and_then(|b| i128::from_str_radix(b, 2).ok())
    {
        return Key::Int(bits);
    }
    if let Some(bits) = plain
        .strip_prefix("-0b")
        .and_then(|b| i128::from_str_radix(b, 2).ok())
    {
        return Key::Int(-bits);
    }
    if is_yaml_float(&plain)
        && let Ok(f) = plain.parse::<f64>()
    {
        return Key::Float(f.to_bits());
    }
    Key::Str(text.to_string())
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint(s, 0, 64)`: a sign, then `0x`, `0o`,
/// `0b` or a leading `0` (octal) choosing the base.
fn go_parse_int(s: &str) -> Option<i128> {
    let (negative, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = digits.to_ascii_lowercase();
    let (radix, body) = if let Some(hex) = lower.strip_prefix("0x") {
        (16, hex.to_string())
    } else if let Some(oct) = lower.strip_prefix("0o") {
        (8, oct.to_string())
    } else if let Some(bin) = lower.strip_prefix("0b") {
        (2, bin.to_string())
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string())
    } else {
        (10, lower)
    };
    if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let value = i128::from_str_radix(&body, radix).ok()?;
    let value = if negative { -value } else { value };
    let fits = if negative {
        value >= i128::from(i64::MIN)
    } else {
        value <= i128::from(u64::MAX)
    };
    fits.then_some(value)
}

/// yaml.v2's float syntax: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
fn is_yaml_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (number, exponent) = match s.find(['e', 'E']) {
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    };
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit());
    let number_ok = match number.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(number),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    number_ok && exponent_ok
}

/// A scalar key: tagged by its tag, quoted as a string, plain as resolved.
fn scalar_key(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Key {
    if let Some(tag) = tag {
        let core = |suffix: &str| tag.is_yaml_core_schema_tag(suffix);
        if core("str") {
            return Key::Str(text.to_string());
        }
        if core("null") {
            return Key::Null;
        }
        if core("bool") || core("int") || core("float") {
            return resolve_plain(text);
        }
        return Key::Str(text.to_string());
    }
    match style {
        ScalarStyle::Plain => resolve_plain(text),
        _ => Key::Str(text.to_string()),
    }
}

/// One open collection.
enum Frame {
    /// A mapping: its keys so far, and whether the next node is a key.
    Mapping { keys: HashSet<Key>, want_key: bool },
    /// A sequence.
    Sequence,
}

/// The repeated keys of the YAML (or JSON) document `bytes`, as yaml.v2's strict errors
/// word them (`line 7: key "a" already set in map`), in document order.
pub fn duplicate_keys(bytes: &[u8]) -> Vec<String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    // A node being passed over (a repeated key's value, a collection used as a key): how
    // deep inside it the parser is, and whether the mapping wants a key once it is passed.
    let mut skipping: Option<(usize, bool)> = None;
    let mut unique = 0;
    for next in Parser::new_from_str(text) {
        let Ok((event, span)) = next else {
            return Vec::new();
        };
        if matches!(event, Event::DocumentEnd) {
            // yaml.v2's Unmarshal reads the first document only.
            break;
        }
        let opens = matches!(event, Event::MappingStart(..) | Event::SequenceStart(..));
        let closes = matches!(event, Event::MappingEnd | Event::SequenceEnd);
        let node = opens || matches!(event, Event::Scalar(..) | Event::Alias(..));
        if let Some((depth, want_key)) = skipping.as_mut() {
            if opens {
                *depth += 1;
            } else if closes {
                *depth -= 1;
            }
            if *depth == 0 && (node || closes) {
                let want_key = *want_key;
                skipping = None;
                if let Some(Frame::Mapping { want_key: want, .. }) = stack.last_mut() {
                    *want = want_key;
                }
            }
            continue;
        }
        if closes {
            stack.pop();
            value_done(&mut stack);
            continue;
        }
        if !node {
            continue;
        }
        let Some(Frame::Mapping {
            keys,
            want_key: want_key @ true,
        }) = stack.last_mut()
        else {
            match event {
                Event::MappingStart(..) => stack.push(Frame::Mapping {
                    keys: HashSet::new(),
                    want_key: true,
                }),
                Event::SequenceStart(..) => stack.push(Frame::Sequence),
                _ => value_done(&mut stack),
            }
            continue;
        };
        *want_key = false;
        if opens {
            // A collection as a key: never equal to another, and nothing inside it counts.
            skipping = Some((1, false));
            continue;
        }
        unique += 1;
        let key = match &event {
            Event::Scalar(text, style, _, tag) => scalar_key(text, *style, tag.as_deref()),
            _ => Key::Unique(unique),
        };
        let merge =
            matches!(&event, Event::Scalar(text, ScalarStyle::Plain, _, None) if text == "<<");
        if merge {
            skipping = Some((0, true));
        } else if !keys.insert(key.clone()) {
            errors.push(format!(
                "line {}: key {} already set in map",
                span.start.line(),
                key.go_syntax()
            ));
            skipping = Some((0, true));
        }
    }
    errors
}

/// A value of the innermost mapping is complete: its next node is a key.
fn value_done(stack: &mut [Frame]) {
    if let Some(Frame::Mapping { want_key, .. }) = stack.last_mut() {
        *want_key = true;
    }
}

/// One step into a document: a mapping's key (as written) or a sequence's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A mapping's value, by its key's text.
    Key(String),
    /// A sequence's item.
    Index(usize),
}

/// Where the plain scalar values of a document that yaml.v2 reads as YAML 1.1 null, bool,
/// int or float are, with the JSON value each becomes (`yes` true, `0644` 420, `1_000`
/// 1000): what a YAML 1.2 reader makes strings of must be typed as kube-apiserver types it.
/// Documents with aliases or merge keys give nothing (their paths are not the text's).
pub fn yaml11_scalars(bytes: &[u8]) -> Vec<(Vec<Step>, serde_json::Value)> {
    use serde_json::Value;
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Vec::new();
    };
    /// An open collection: a mapping with the key of the value it waits for (None: it
    /// wants a key), or a sequence with its next index.
    enum Open {
        Mapping(Option<String>),
        Sequence(usize),
    }
    let mut out = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    let path = |stack: &[Open]| -> Vec<Step> {
        stack
            .iter()
            .map(|open| match open {
                Open::Mapping(key) => Step::Key(key.clone().unwrap_or_default()),
                Open::Sequence(i) => Step::Index(*i),
            })
            .collect()
    };
    // A node in value position is done: its mapping wants a key, its sequence moves on.
    let done = |stack: &mut Vec<Open>| match stack.last_mut() {
        Some(Open::Mapping(key)) => *key = None,
        Some(Open::Sequence(i)) => *i += 1,
        None => {}
    };
    for next in Parser::new_from_str(text) {
        let Ok((event, _)) = next else {
            return Vec::new();
        };
        let wants_key = matches!(stack.last(), Some(Open::Mapping(None)));
        match event {
            Event::DocumentEnd => break,
            Event::Alias(..) => return Vec::new(),
            Event::Scalar(text, style, _, tag) if wants_key => {
                if style == ScalarStyle::Plain && tag.is_none() && text == "<<" {
                    return Vec::new();
                }
                if let Some(Open::Mapping(key)) = stack.last_mut() {
                    *key = Some(text.to_string());
                }
            }
            Event::MappingStart(..) | Event::SequenceStart(..) if wants_key => {
                // A collection as a key: not something a JSON path can name.
                return Vec::new();
            }
            Event::Scalar(text, style, _, tag) => {
                if style == ScalarStyle::Plain && tag.is_none() {
                    let value = match resolve_plain(&text) {
                        Key::Null => Some(Value::Null),
                        Key::Bool(b) => Some(Value::Bool(b)),
                        Key::Int(i) => i64::try_from(i)
                            .map(Value::from)
                            .or_else(|_| u64::try_from(i).map(Value::from))
                            .ok(),
                        Key::Float(bits) => {
                            serde_json::Number::from_f64(f64::from_bits(bits)).map(Value::Number)
                        }
                        _ => None,
                    };
                    if let Some(value) = value {
                        out.push((path(&stack), value));
                    }
                }
                done(&mut stack);
            }
            Event::MappingStart(..) => stack.push(Open::Mapping(None)),
            Event::SequenceStart(..) => stack.push(Open::Sequence(0)),
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                done(&mut stack);
            }
            _ => {}
        }
    }
    out
}

/// yaml.v2's `TypeError` message for `errors`: `yaml: unmarshal errors:` and each on a line
/// of its own, indented by two spaces.
pub fn unmarshal_errors(errors: &[String]) -> String {
    format!("yaml: unmarshal errors:\n  {}", errors.join("\n  "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_reported_at_their_lines_in_document_order() {
        let json = b"{\n  \"metadata\": {\"name\": \"a\"},\n  \"spec\": {\n    \"paused\": false,\n    \"paused\": true,\n    \"c\": [{\"p\": 1, \"p\": 2}]\n  }\n}";
        assert_eq!(
            duplicate_keys(json),
            [
                "line 5: key \"paused\" already set in map",
                "line 6: key \"p\" already set in map"
            ]
        );
        let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\ndata:\n  x: '1'\n  x: '2'\n";
        assert_eq!(
            duplicate_keys(yaml),
            [
                "line 5: key \"name\" already set in map",
                "line 8: key \"x\" already set in map"
            ]
        );
        assert!(duplicate_keys(b"a: {b: 1}\nc: [1, 1]\n").is_empty());
    }

    #[test]
    fn a_repeated_keys_value_is_not_read() {
        let yaml = b"a:\n  x: 1\na:\n  y: 1\n  y: 2\nb: 1\n";
        assert_eq!(
            duplicate_keys(yaml),
            ["line 3: key \"a\" already set in map"]
        );
    }

    #[test]
    fn keys_compare_as_yaml_v2_resolves_them() {
        assert_eq!(
            duplicate_keys(b"1: a\n0x1: b\n\"1\": c\n"),
            ["line 2: key 1 already set in map"]
        );
        assert_eq!(
            duplicate_keys(b"yes: a\ntrue: b\n~: c\nnull: d\n"),
            [
                "line 2: key true already set in map",
                "line 4: key <nil> already set in map"
            ]
        );
        assert_eq!(
            duplicate_keys(b"1.5: a\n15e-1: b\n"),
            ["line 2: key 1.5 already set in map"]
        );
        assert_eq!(
            duplicate_keys(b"a: 1\n!!str a: 2\n'a': 3\n"),
            [
                "line 2: key \"a\" already set in map",
                "line 3: key \"a\" already set in map"
            ]
        );
    }

    #[test]
    fn unmarshal_errors_read_as_yaml_v2_words_them() {
        assert_eq!(
            unmarshal_errors(&["line 1: a".into(), "line 2: b".into()]),
            "yaml: unmarshal errors:\n  line 1: a\n  line 2: b"
        );
        assert!(duplicate_keys(b"a: [").is_empty());
        assert!(duplicate_keys(b"a: 1\n---\na: 1\na: 2\n").is_empty());
    }
}
