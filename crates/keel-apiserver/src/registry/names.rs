//! Object names, validated as apimachinery validates them and worded the same way: most
//! kinds' names are DNS subdomains (RFC 1123, at most 253 characters), a namespace's name is a
//! DNS label (at most 63), and `metadata.name` or `metadata.generateName` must be given.

use crate::storage::FieldError;

const SUBDOMAIN_MAX: usize = 253;
const LABEL_MAX: usize = 63;

const SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
    alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
    (e.g. 'example.com', regex used for validation is \
    '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

const LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case \
    alphanumeric characters or '-', and must start and end with an alphanumeric character \
    (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Which rule a kind's names follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS subdomain (most kinds).
    Subdomain,
    /// A DNS label (namespaces).
    Label,
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
        let mut problems = Vec::new();
        let (max, ok, message) = match self {
            NameRule::Subdomain => (SUBDOMAIN_MAX, is_subdomain(name), SUBDOMAIN_MESSAGE),
            NameRule::Label => (LABEL_MAX, is_label(name), LABEL_MESSAGE),
        };
        if name.len() > max {
            problems.push(format!("must be no more than {max} characters"));
        }
        if !ok {
            problems.push(message.to_string());
        }
        problems
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && alnum(&b[0])
        && alnum(&b[b.len() - 1])
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// Labels joined by dots.
fn is_subdomain(s: &str) -> bool {
    s.split('.').all(is_label)
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

    #[test]
    fn names_are_checked_and_worded_as_apimachinery_does() {
        assert!(validate("my-config.v1", "", NameRule::Subdomain).is_empty());
        assert!(validate("kube-system", "", NameRule::Label).is_empty());
        let errors = validate("Bad_Name", "", NameRule::Subdomain);
        let status = Status::invalid("", "ConfigMap", "Bad_Name", &errors);
        assert_eq!(
            status.message,
            format!(
                "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN_MESSAGE}"
            )
        );
        assert!(
            SUBDOMAIN_MESSAGE.contains(
                "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]"
            )
        );
        let dotted = validate("a.b", "", NameRule::Label);
        assert_eq!(
            dotted[0].to_string(),
            format!("metadata.name: Invalid value: \"a.b\": {LABEL_MESSAGE}")
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
        for bad in ["-a", "a-", ".a", "a..b", "A", "a_b", ""] {
            assert!(!is_subdomain(bad), "{bad:?}");
        }
    }
}
