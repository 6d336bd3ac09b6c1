//! Validation steps many kinds share, worded as kube words them: a value that must be one of
//! a fixed set, a port number and a port's name.

use crate::apimachinery::validation::{PORT_NUM_RANGE, is_dns1123_label};
use crate::storage::FieldError;

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
}
