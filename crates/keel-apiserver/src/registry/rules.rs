//! Validation steps many kinds share, worded as kube words them: a value that must be one of
//! a fixed set, a port number and a port's name, a field that may not change
//! (`ValidateImmutableField`) and a count that may not be negative
//! (`ValidateNonnegativeField`), and a domain-prefixed path (`IsDomainPrefixedPath`).

use serde_json::Value;

use crate::apimachinery::validation::{
    NON_NEGATIVE, PORT_NUM_RANGE, is_dns1123_label, is_dns1123_subdomain, regex_error,
};
use crate::json_pointer::At;
use crate::storage::FieldError;

/// `ValidateImmutableField`: `<path>: Invalid value: <new>: field is immutable` when `new`
/// differs from `old` (a missing value reads as null).
pub fn immutable(path: &str, new: Option<&Value>, old: Option<&Value>) -> Option<FieldError> {
    let unset = |v: Option<&Value>| v.cloned().unwrap_or(Value::Null);
    let (new, old) = (unset(new), unset(old));
    (new != old).then(|| FieldError::invalid(path, new, "field is immutable"))
}

/// [`immutable`] of the value at `pointer` in `new` and `old`.
pub fn immutable_at(new: &Value, old: &Value, pointer: &str, path: &str) -> Option<FieldError> {
    immutable(path, new.at(pointer), old.at(pointer))
}

/// `ValidateImmutableField` with the new value as upstream prints it (`printed`): `<path>:
/// Invalid value: <printed>: field is immutable` when the values differ (missing and null
/// alike).
pub fn immutable_printed(
    path: &str,
    new: Option<&Value>,
    old: Option<&Value>,
    printed: String,
) -> Option<FieldError> {
    let unset = |v: Option<&Value>| v.filter(|v| !v.is_null()).cloned();
    (unset(new) != unset(old))
        .then(|| FieldError::invalid_printed(path, printed, "field is immutable"))
}

/// `ValidateNonnegativeField`: `<path>: Invalid value: <n>: must be greater than or equal to
/// 0` when the integer at `pointer` in `obj` is negative.
pub fn non_negative(obj: &Value, pointer: &str, path: &str) -> Option<FieldError> {
    let n = obj.at(pointer).and_then(Value::as_i64)?;
    (n < 0).then(|| FieldError::invalid(path, n, NON_NEGATIVE))
}

/// `<path>: Required value` when `value` is empty, `<path>: Unsupported value: ...` when it
/// is not one of `supported`, nothing when it is.
pub fn required_one_of(path: &str, value: &str, supported: &[&str]) -> Option<FieldError> {
    if value.is_empty() {
        Some(FieldError::required(path, ""))
    } else if !supported.contains(&value) {
        Some(FieldError::not_supported(path, value, supported))
    } else {
        None
    }
}

/// `<path>: Invalid value: <port>: must be between 1 and 65535, inclusive` unless `port` is
/// a port number (`IsValidPortNum`).
pub fn port_number(path: &str, port: i64) -> Option<FieldError> {
    (!(1..=65535).contains(&port)).then(|| FieldError::invalid(path, port, PORT_NUM_RANGE))
}

/// A port's name at `path`, one of `count` ports: required when there are several, a DNS
/// label when it is set.
pub fn port_name(path: &str, name: &str, count: usize) -> Vec<FieldError> {
    if name.is_empty() {
        return match count > 1 {
            true => vec![FieldError::required(path, "")],
            false => Vec::new(),
        };
    }
    is_dns1123_label(name)
        .iter()
        .map(|problem| FieldError::invalid(path, name, problem))
        .collect()
}

/// `httpPathFmt`, what `IsDomainPrefixedPath` asks of the path.
const HTTP_PATH: &str = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+";

/// `apimachineryvalidation.IsDomainPrefixedPath` of `value` at `path` (a Job's `managedBy`,
/// an IngressClass's controller).
pub fn domain_prefixed_path(path: &str, value: &str) -> Vec<FieldError> {
    if value.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let Some((host, rest)) = value
        .split_once('/')
        .filter(|(h, r)| !h.is_empty() && !r.is_empty())
    else {
        return vec![FieldError::invalid(
            path,
            value,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )];
    };
    let mut errors: Vec<FieldError> = is_dns1123_subdomain(host)
        .iter()
        .map(|e| FieldError::invalid(path, host, e))
        .collect();
    let ok = rest
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&b));
    if !ok {
        errors.push(FieldError::invalid(
            path,
            rest,
            &regex_error("Invalid path", HTTP_PATH, &[]),
        ));
    }
    errors
}

/// The errors as their messages read (`<field>: <body>`), for tests.
#[cfg(test)]
pub(crate) fn messages(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(|e| e.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_from_a_set_and_port_numbers_are_worded_as_kube_words_them() {
        let one_of = |v| required_one_of("spec.x", v, &["A", "B"]).map(|e| e.to_string());
        assert_eq!(one_of(""), Some("spec.x: Required value".to_string()));
        assert_eq!(
            one_of("C"),
            Some(r#"spec.x: Unsupported value: "C": supported values: "A", "B""#.to_string())
        );
        assert_eq!(one_of("B"), None);
        assert!(port_number("p", 1).is_none() && port_number("p", 65535).is_none());
        assert_eq!(
            port_number("p", 0).map(|e| e.to_string()),
            Some("p: Invalid value: 0: must be between 1 and 65535, inclusive".to_string())
        );
        assert!(port_name("n", "", 1).is_empty() && port_name("n", "http", 2).is_empty());
        assert_eq!(messages(&port_name("n", "", 2)), vec!["n: Required value"]);
        assert!(
            messages(&port_name("n", "Web", 1))[0]
                .starts_with("n: Invalid value: \"Web\": a lowercase RFC 1123 label")
        );
    }
    #[test]
    fn immutable_fields_and_negative_counts_are_worded_as_kube_words_them() {
        use serde_json::json;
        let (old, new) = (json!({"s": {"x": 1}}), json!({"s": {"x": 2}}));
        assert_eq!(
            immutable_at(&new, &old, "/s/x", "s.x").map(|e| e.to_string()),
            Some("s.x: Invalid value: 2: field is immutable".to_string())
        );
        assert_eq!(
            immutable("x", Some(&json!("b")), Some(&json!("a"))).map(|e| e.to_string()),
            Some("x: Invalid value: \"b\": field is immutable".to_string())
        );
        assert!(immutable("x", None, Some(&Value::Null)).is_none());
        assert!(immutable_at(&old, &json!({"s": {"x": 1, "y": null}}), "/s/y", "s.y").is_none());
        assert_eq!(
            immutable_printed("spec.a", Some(&json!(2)), Some(&json!(1)), "2".into())
                .map(|e| e.to_string()),
            Some("spec.a: Invalid value: 2: field is immutable".to_string())
        );
        assert!(immutable_printed("spec.a", Some(&Value::Null), None, "null".into()).is_none());
        assert_eq!(
            non_negative(&json!({"r": -1}), "/r", "spec.r").map(|e| e.to_string()),
            Some("spec.r: Invalid value: -1: must be greater than or equal to 0".to_string())
        );
        assert!(non_negative(&json!({"r": 0}), "/r", "spec.r").is_none());
        assert!(non_negative(&json!({}), "/r", "spec.r").is_none());
    }
}
