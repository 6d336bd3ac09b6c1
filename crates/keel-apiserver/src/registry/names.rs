//! Object names, validated as apimachinery validates them and worded the same way: most
//! kinds' names are DNS subdomains (RFC 1123, at most 253 characters), a namespace's name is a
//! DNS label (at most 63), and `metadata.name` or `metadata.generateName` must be given.

use crate::apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain, path_segment_name};
use crate::storage::FieldError;

/// Which rule a kind's names follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS subdomain (most kinds).
    Subdomain,
    /// A DNS label (namespaces).
    Label,
    /// Anything that can be one segment of a URL path: not `.` or `..`, without `/` or `%`
    /// (apimachinery's `path.IsValidPathSegmentName`; RBAC roles and bindings).
    PathSegment,
}

impl NameRule {
    /// What is wrong with `name` (nothing: empty). `prefix` is for a `generateName`, which
    /// may end in `-` (a random suffix follows it).
    pub fn check(self, name: &str, prefix: bool) -> Vec<String> {
        let masked;
        let name = if prefix && name.len() > 1 && name.ends_with('-') {
            masked = format!("{}a", &name[..name.len() - 1]);
            masked.as_str()
        } else {
            name
        };
        match self {
            NameRule::Subdomain => is_dns1123_subdomain(name),
            NameRule::Label => is_dns1123_label(name),
            NameRule::PathSegment => path_segment_name(name),
        }
    }
}

/// apimachinery's `ValidateObjectMeta` for the name: `metadata.generateName` is checked as a
/// prefix, and `metadata.name` must be given (or generated from it before this runs).
pub fn validate(name: &str, generate_name: &str, rule: NameRule) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if !generate_name.is_empty() {
        for problem in rule.check(generate_name, true) {
            errors.push(FieldError::invalid(
                "metadata.generateName",
                generate_name,
                &problem,
            ));
        }
    }
    if name.is_empty() {
        errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for problem in rule.check(name, false) {
            errors.push(FieldError::invalid("metadata.name", name, &problem));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Status;

    fn message(rule: NameRule, bad: &str) -> String {
        rule.check(bad, false).remove(0)
    }

    #[test]
    fn names_are_checked_and_worded_as_apimachinery_does() {
        assert!(validate("my-config.v1", "", NameRule::Subdomain).is_empty());
        assert!(validate("kube-system", "", NameRule::Label).is_empty());
        let subdomain_message = message(NameRule::Subdomain, "Bad_Name");
        let label_message = message(NameRule::Label, "a.b");
        let errors = validate("Bad_Name", "", NameRule::Subdomain);
        let status = Status::invalid("", "ConfigMap", "Bad_Name", &errors);
        assert_eq!(
            status.message,
            format!(
                "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": {subdomain_message}"
            )
        );
        assert!(
            subdomain_message.contains(
                "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]"
            )
        );
        let dotted = validate("a.b", "", NameRule::Label);
        assert_eq!(
            dotted[0].to_string(),
            format!("metadata.name: Invalid value: \"a.b\": {label_message}")
        );
        let long = "a".repeat(64);
        let too_long = validate(&long, "", NameRule::Label);
        assert_eq!(too_long.len(), 1);
        assert!(
            too_long[0]
                .to_string()
                .ends_with(": must be no more than 63 characters")
        );
        assert_eq!(
            validate("", "", NameRule::Subdomain)[0].to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
        // A generateName may end in '-'; the name generated from it is checked as a name.
        assert!(validate("web-x7k2p", "web-", NameRule::Subdomain).is_empty());
        assert_eq!(validate("", "Web-", NameRule::Subdomain).len(), 2);
        for bad in ["-a", "a-", ".a", "a..b", "A", "a_b"] {
            assert!(
                !validate(bad, "", NameRule::Subdomain).is_empty(),
                "{bad:?}"
            );
        }
    }
}
