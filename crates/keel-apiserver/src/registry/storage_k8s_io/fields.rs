//! Small steps the storage, autoscaling, admissionregistration, certificates and
//! apiregistration kinds share: reading a field that may be missing (as a `nil` pointer is in
//! Go), a bool cell, a DNS-1035 label and a Go string list as a field error prints it.

use serde_json::Value;

use crate::apimachinery::validation::{max_len_error, regex_error};
use crate::json_pointer::At;

/// The value at `pointer` in `obj`, null ones read as missing.
pub fn present<'a>(obj: &'a Value, pointer: &str) -> Option<&'a Value> {
    obj.at(pointer).filter(|v| !v.is_null())
}

/// A string field's value at `pointer` ("" when unset).
pub fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.at(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The array at `pointer` (empty when unset).
pub fn items<'a>(obj: &'a Value, pointer: &str) -> &'a [Value] {
    obj.at(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A bool cell: the value at `pointer`, `unset` when missing (printers' `if x != nil`).
pub fn bool_or(obj: &Value, pointer: &str, unset: bool) -> Value {
    Value::from(obj.at(pointer).and_then(Value::as_bool).unwrap_or(unset))
}

/// `IsDNS1035Label`: what is wrong with `value` as a DNS-1035 label (an API version, an
/// admission review version).
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    let b = value.as_bytes();
    let ok = match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_lowercase()
                && (l.is_ascii_lowercase() || l.is_ascii_digit())
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        }
        _ => false,
    };
    if !ok {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
                with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `%#v` of a Go `[]string` (how a field error shows a string list it holds).
pub fn go_strings(list: &[Value]) -> String {
    let quoted: Vec<String> = list
        .iter()
        .map(|v| crate::apimachinery::quote::go_quote(v.as_str().unwrap_or("")))
        .collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dns1035_labels_and_go_strings() {
        assert!(is_dns1035_label("v1beta1").is_empty());
        assert_eq!(
            is_dns1035_label("1v"),
            vec![
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', \
                start with an alphabetic character, and end with an alphanumeric character (e.g. \
                'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(
            go_strings(&[json!("a"), json!("b")]),
            r#"[]string{"a", "b"}"#
        );
    }
}
