//! Steps the built-in groups added beside `networking.k8s.io` share (policy, discovery,
//! scheduling and node use them too): an int-or-percent (`ValidatePositiveIntOrPercent`,
//! `IsNotMoreThan100Percent`) with the value as Go's `%#v` prints an `intstr.IntOrString`, a
//! typed local object reference (`validateIngressTypedLocalObjectReference`), a wildcard DNS
//! subdomain (`IsWildcardDNS1123Subdomain`), the generation a kind without spec tracking
//! still starts at, and an object's field made an object to default into.

use serde_json::{Map, Value};

use crate::apimachinery::quote::go_quote;
use crate::apimachinery::validation::{
    DNS1123_SUBDOMAIN_MAX, is_dns1123_subdomain, path_segment_name, percent_digits, percent_error,
    regex_error,
};
use crate::registry::defaults::object_entry;
use crate::registry::meta;
use crate::storage::FieldError;

/// `obj[key]` as an object, made one if it is missing or is not.
pub fn object_at<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    Some(object_entry(obj.as_object_mut()?, key))
}

/// `metadata.generation = 1`, what a new object of a kind whose strategy sets it on create
/// but never bumps it (PriorityClass, RuntimeClass) starts with.
pub fn generation_one(obj: &mut Value) {
    meta::metadata(obj).insert("generation".into(), 1.into());
}

/// An `intstr.IntOrString` as Go's `%#v` prints it
/// (`intstr.IntOrString{Type:1, IntVal:0, StrVal:"50%"}`).
pub fn int_or_string_go(v: &Value) -> String {
    match v {
        Value::String(s) => format!(
            "intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}",
            go_quote(s)
        ),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or(0)
        ),
    }
}

/// The number of a percent string (`50%`), if it is one.
fn percent(s: &str) -> Option<i64> {
    percent_digits(s).map(|digits| digits.parse().unwrap_or(i64::MAX))
}

/// `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent` of the int-or-string at
/// `path`.
pub fn int_or_percent(v: &Value, path: &str) -> Vec<FieldError> {
    let printed = || int_or_string_go(v);
    let mut errors = Vec::new();
    match v {
        Value::String(s) => match percent(s) {
            None => errors.push(FieldError::invalid_printed(
                path,
                printed(),
                &percent_error(),
            )),
            Some(p) if p > 100 => errors.push(FieldError::invalid_printed(
                path,
                printed(),
                "must not be greater than 100%",
            )),
            Some(_) => {}
        },
        other => {
            let n = other.as_i64().unwrap_or(0);
            if n < 0 {
                errors.push(FieldError::invalid(
                    path,
                    n,
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    errors
}

/// `IntOrString.String()`: the number or the string.
pub fn int_or_string_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.as_i64().unwrap_or(0).to_string(),
    }
}

/// `wildcardDNS1123SubdomainFmt` and its message.
const WILDCARD_FMT: &str = "\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const WILDCARD_ERR: &str = "a wildcard DNS-1123 subdomain must start with '*.', followed by a \
    valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' \
    and end with an alphanumeric character";

/// `IsWildcardDNS1123Subdomain`: what is wrong with `*.example.com`.
pub fn wildcard_subdomain(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        problems.push(crate::apimachinery::validation::max_len_error(
            DNS1123_SUBDOMAIN_MAX,
        ));
    }
    let ok = value
        .strip_prefix("*.")
        .is_some_and(|rest| is_dns1123_subdomain(rest).is_empty());
    if !ok {
        problems.push(regex_error(WILDCARD_ERR, WILDCARD_FMT, &["*.example.com"]));
    }
    problems
}

/// `validateIngressTypedLocalObjectReference` of the reference at `path` (an Ingress
/// backend's `resource`, an IngressClass's `parameters`): its apiGroup, kind and name.
pub fn typed_local_object_reference(r: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(group) = r.get("apiGroup").and_then(Value::as_str) {
        for problem in is_dns1123_subdomain(group) {
            errors.push(FieldError::invalid(
                &format!("{path}.apiGroup"),
                group,
                &problem,
            ));
        }
    }
    for (field, words) in [("kind", "kind is required"), ("name", "name is required")] {
        let at = format!("{path}.{field}");
        let value = r.get(field).and_then(Value::as_str).unwrap_or("");
        if value.is_empty() {
            errors.push(FieldError::required(&at, words));
        }
        for problem in path_segment_name(value) {
            errors.push(FieldError::invalid(&at, value, &problem));
        }
    }
    errors
}

/// The strings of the list at `key` of `obj` (none when it is missing).
pub fn strings_at<'a>(obj: &'a Value, key: &str) -> Vec<&'a str> {
    obj.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn int_or_percent_is_checked_and_printed_as_go_prints_it() {
        assert!(int_or_percent(&json!(3), "p").is_empty());
        assert!(int_or_percent(&json!("100%"), "p").is_empty());
        assert_eq!(
            messages(&int_or_percent(&json!(-1), "p")),
            vec!["p: Invalid value: -1: must be greater than or equal to 0"]
        );
        assert_eq!(
            messages(&int_or_percent(&json!("120%"), "p")),
            vec![
                "p: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"120%\"}: must not \
                 be greater than 100%"
            ]
        );
        assert_eq!(
            messages(&int_or_percent(&json!("abc"), "p")),
            vec![
                "p: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"abc\"}: a valid \
                 percent string must be a numeric string followed by an ending '%' (e.g. '1%',  \
                 or '93%', regex used for validation is '[0-9]+%')"
            ]
        );
        assert_eq!(int_or_string_text(&json!(2)), "2");
        assert_eq!(int_or_string_text(&json!("5%")), "5%");
    }

    #[test]
    fn references_names_and_hosts_are_checked() {
        assert_eq!(path_segment_name(".."), vec!["may not be '..'"]);
        assert_eq!(
            path_segment_name("a/b%"),
            vec!["may not contain '/'", "may not contain '%'"]
        );
        assert!(wildcard_subdomain("*.example.com").is_empty());
        assert_eq!(wildcard_subdomain("*.Example").len(), 1);
        assert_eq!(
            messages(&typed_local_object_reference(
                &json!({"apiGroup": "A_B"}),
                "r"
            ))
            .len(),
            3
        );
        assert_eq!(
            messages(&typed_local_object_reference(&json!({"kind": "K"}), "r")),
            vec!["r.name: Required value: name is required"]
        );
    }
}
