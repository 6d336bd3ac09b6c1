//! What the CEL rules see of a schema node (a `JSONSchemaProps` held as JSON): its declared
//! type, its children, and the bounds the cost estimator takes from it: how many items,
//! properties or characters a value of it can have, and how many values of it one object
//! can hold. Unbounded ones are derived as upstream's `estimateMaxArrayItemsFromMinSize`
//! does: from the largest request (3 MiB) and the smallest serialized element.

use serde_json::{Map, Value};

/// The largest request the apiserver reads (upstream's `maxRequestSizeBytes`, 3 MiB).
pub(super) const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

/// The longest `date-time` string (upstream's `MaxDatetimeSizeJSON`).
const MAX_DATETIME_SIZE_JSON: u64 = 35;

/// The longest `duration` string (upstream's `MaxDurationSizeJSON`).
const MAX_DURATION_SIZE_JSON: u64 = 32;

/// The `type` of a schema node, as upstream prints it in an error (`"object"`, `"string"`,
/// or `""` for an int-or-string or an untyped node).
pub(super) fn type_name(s: &Value) -> &str {
    s.get("type").and_then(Value::as_str).unwrap_or("")
}

fn flag(s: &Value, name: &str) -> bool {
    s.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// `x-kubernetes-int-or-string: true`.
pub(super) fn is_int_or_string(s: &Value) -> bool {
    flag(s, "x-kubernetes-int-or-string")
}

/// `x-kubernetes-preserve-unknown-fields: true`.
pub(super) fn preserves_unknown(s: &Value) -> bool {
    flag(s, "x-kubernetes-preserve-unknown-fields")
}

/// `x-kubernetes-embedded-resource: true`.
pub(super) fn is_embedded(s: &Value) -> bool {
    flag(s, "x-kubernetes-embedded-resource")
}

/// The declared properties, if any.
pub(super) fn properties(s: &Value) -> Option<&Map<String, Value>> {
    s.get("properties").and_then(Value::as_object)
}

/// The item schema of an array.
pub(super) fn items(s: &Value) -> Option<&Value> {
    s.get("items").filter(|v| v.is_object())
}

/// The value schema of a map (`additionalProperties` as a schema, not a bool).
pub(super) fn additional(s: &Value) -> Option<&Value> {
    s.get("additionalProperties").filter(|v| v.is_object())
}

/// The node's `x-kubernetes-validations`, each an object.
pub(super) fn rules(s: &Value) -> &[Value] {
    s.get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn bound(s: &Value, name: &str) -> Option<u64> {
    s.get(name).and_then(Value::as_u64)
}

/// The fewest bytes a value of this schema takes in JSON (upstream's `MinSerializedSize`).
pub(super) fn min_size(s: &Value) -> u64 {
    if is_int_or_string(s) {
        return 1;
    }
    match type_name(s) {
        "string" => match s.get("format").and_then(Value::as_str) {
            Some("date-time") => 22,
            Some("date") => 12,
            Some("duration") => 4,
            _ => 2,
        },
        "boolean" => 4,
        "integer" | "number" => 1,
        "array" | "object" => 2,
        _ => 1,
    }
}

/// How many array items fit in one request when each takes at least `min` bytes.
pub(super) fn max_items_from_min_size(min: u64) -> u64 {
    (MAX_REQUEST_SIZE_BYTES - 2) / (min + 1)
}

/// How many map entries fit in one request when each value takes at least `min` bytes.
pub(super) fn max_properties_from_min_size(min: u64) -> u64 {
    (MAX_REQUEST_SIZE_BYTES - 2) / (min + 6)
}

/// The most characters a string of this schema holds.
pub(super) fn max_length(s: &Value) -> u64 {
    if let Some(n) = bound(s, "maxLength") {
        return n;
    }
    match s.get("format").and_then(Value::as_str) {
        Some("date-time") if !is_int_or_string(s) => MAX_DATETIME_SIZE_JSON,
        Some("duration") if !is_int_or_string(s) => MAX_DURATION_SIZE_JSON,
        _ => MAX_REQUEST_SIZE_BYTES - 2,
    }
}

/// The most items of an array schema, and whether `maxItems` said so.
pub(super) fn max_items(s: &Value) -> (u64, bool) {
    match bound(s, "maxItems") {
        Some(n) => (n, true),
        None => (max_items_from_min_size(items(s).map_or(1, min_size)), false),
    }
}

/// The most entries of a map schema, and whether `maxProperties` said so.
pub(super) fn max_properties(s: &Value) -> (u64, bool) {
    match bound(s, "maxProperties") {
        Some(n) => (n, true),
        None => (
            max_properties_from_min_size(additional(s).map_or(1, min_size)),
            false,
        ),
    }
}

/// A child of a schema path (`a.b`), or the name alone at the root.
pub(super) fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// A keyed or indexed child of a path (`a[b]`, `a[0]`).
pub(super) fn key(path: &str, key: impl std::fmt::Display) -> String {
    format!("{path}[{key}]")
}

/// CEL's reserved words: a property so named is `__<word>__` in a rule.
pub(super) const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A property's name as rules spell it (upstream's `Escape`): reserved words as
/// `__<word>__`, and `__`, `.`, `-`, `/` as `__underscores__`, `__dot__`, `__dash__`,
/// `__slash__`; `None` for a name no rule can spell (a leading digit, other characters).
pub(super) fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("__") {
            out.push_str("__underscores__");
            rest = r;
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}
