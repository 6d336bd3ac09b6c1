//! What `k8s.io/apimachinery/pkg/util/validation` finds wrong with a name, a label or a key,
//! worded exactly as it words it (Kubernetes 1.34): each function returns its messages, none
//! when the value is good, and the caller makes field errors of them.
//!
//! Kubernetes 1.35 words two of them differently ("must be no more than 63 bytes" for
//! "characters"; "a valid label key" for "a qualified name" when a key has more than one
//! `/`); these follow 1.34.

/// `qualifiedNameFmt`.
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
/// `qualifiedNameErrMsg`.
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
    and must start and end with an alphanumeric character";
/// `qualifiedNameMaxLength`.
const QUALIFIED_NAME_MAX: usize = 63;
/// The examples `IsQualifiedName` gives.
const QUALIFIED_NAME_EXAMPLES: [&str; 3] = ["MyName", "my.name", "123-abc"];

/// `labelValueFmt`.
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
/// `labelValueErrMsg`.
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of \
    alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
    character";
/// `LabelValueMaxLength`.
const LABEL_VALUE_MAX: usize = 63;

/// `dns1123LabelFmt`.
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
/// `dns1123LabelErrMsg`.
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case \
    alphanumeric characters or '-', and must start and end with an alphanumeric character";
/// `DNS1123LabelMaxLength`.
pub const DNS1123_LABEL_MAX: usize = 63;

/// `dns1123SubdomainFmt`.
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
/// `dns1123SubdomainErrorMsg`.
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower \
    case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric \
    character";
/// `DNS1123SubdomainMaxLength`.
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// `configMapKeyFmt`.
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
/// `configMapKeyErrMsg`.
const CONFIG_MAP_KEY_ERR: &str = "a valid config key must consist of alphanumeric \
    characters, '-', '_' or '.'";

/// The longest port name (`IsValidPortName`).
const PORT_NAME_MAX: usize = 15;

/// What `IsValidPortNum` says of a port outside 1 to 65535 (`InclusiveRangeError(1, 65535)`).
pub const PORT_NUM_RANGE: &str = "must be between 1 and 65535, inclusive";

/// What `ValidateNonnegativeField` says of a negative value.
pub const NON_NEGATIVE: &str = "must be greater than or equal to 0";

/// `path.IsValidPathSegmentName`: what is wrong with a name that goes into a URL path
/// (`.` and `..` are not, and it may not contain `/` or `%`).
pub fn path_segment_name(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|bad| name.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

/// The digits of `value` if it is a percent string as `IsValidPercent` reads one (`[0-9]+%`).
pub fn percent_digits(value: &str) -> Option<&str> {
    let digits = value.strip_suffix('%')?;
    (!digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit())).then_some(digits)
}

/// What `IsValidPercent` says of a string that is not a percent.
pub fn percent_error() -> String {
    regex_error(
        "a valid percent string must be a numeric string followed by an ending '%'",
        "[0-9]+%",
        &["1%", "93%"],
    )
}

/// `MaxLenError`.
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `EmptyError`.
fn empty_error() -> &'static str {
    "must be non-empty"
}

/// `RegexError`: `msg`, then examples and the regex in parentheses (with Go's odd
/// `',  or '` spacing between examples).
pub fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{re}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push('\'');
        s.push_str(e);
        s.push_str("', ");
    }
    s.push_str("regex used for validation is '");
    s.push_str(re);
    s.push_str("')");
    s
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`: a qualified name's name part, and a
/// non-empty label value.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`.
fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => alnum(f) && alnum(l) && b.iter().all(|c| alnum(c) || *c == b'-'),
        _ => false,
    }
}

/// The DNS-1123 subdomain regex: labels joined by dots.
fn is_subdomain(s: &str) -> bool {
    s.split('.').all(is_label)
}

/// `IsQualifiedName`: what is wrong with a label or annotation key (`[prefix/]name`, the
/// prefix a DNS subdomain, the name at most 63 characters).
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &QUALIFIED_NAME_EXAMPLES
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &QUALIFIED_NAME_EXAMPLES
            )
        ));
    }
    errs
}

/// The two checks most of these make: a length of at most `max` bytes, then a regex
/// (`matches`: whether the value matched it), worded `msg (e.g. ..., regex used ...)`.
fn length_and_regex(
    value: &str,
    max: usize,
    matches: bool,
    (msg, re, examples): (&str, &str, &[&str]),
) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > max {
        errs.push(max_len_error(max));
    }
    if !matches {
        errs.push(regex_error(msg, re, examples));
    }
    errs
}

/// `IsValidLabelValue`: what is wrong with a label value (empty, or a qualified name's name
/// part of at most 63 characters).
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let matches = value.is_empty() || is_qualified_name_part(value);
    let regex = (
        LABEL_VALUE_ERR,
        LABEL_VALUE_FMT,
        &["MyValue", "my_value", "12345"][..],
    );
    length_and_regex(value, LABEL_VALUE_MAX, matches, regex)
}

/// `IsDNS1123Label`: what is wrong with a DNS label (a namespace's name, a container's).
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let regex = (
        DNS1123_LABEL_ERR,
        DNS1123_LABEL_FMT,
        &["my-name", "123-abc"][..],
    );
    length_and_regex(value, DNS1123_LABEL_MAX, is_label(value), regex)
}

/// `IsDNS1123Subdomain`: what is wrong with a DNS subdomain (most kinds' names).
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let regex = (
        DNS1123_SUBDOMAIN_ERR,
        DNS1123_SUBDOMAIN_FMT,
        &["example.com"][..],
    );
    length_and_regex(value, DNS1123_SUBDOMAIN_MAX, is_subdomain(value), regex)
}

/// `IsConfigMapKey`: what is wrong with a ConfigMap's or a Secret's data key.
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let matches = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    let regex = (
        CONFIG_MAP_KEY_ERR,
        CONFIG_MAP_KEY_FMT,
        &["key.name", "KEY_NAME", "key-name"][..],
    );
    let mut errs = length_and_regex(value, DNS1123_SUBDOMAIN_MAX, matches, regex);
    if value == "." {
        errs.push("must not be '.'".to_string());
    } else if value == ".." {
        errs.push("must not be '..'".to_string());
    } else if value.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// `IsValidPortName`: what is wrong with a port's name (an IANA service name: at most 15
/// lower case letters, digits and single inner hyphens, one letter at least).
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > PORT_NAME_MAX {
        errs.push(max_len_error(PORT_NAME_MAX));
    }
    let b = port.as_bytes();
    if b.is_empty()
        || !b
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    {
        errs.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string(),
        );
    }
    if !b.iter().any(u8::is_ascii_lowercase) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if !b.is_empty() && (b[0] == b'-' || b[b.len() - 1] == b'-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower \
        case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric \
        character (e.g. 'example.com', regex used for validation is \
        '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

    const LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case \
        alphanumeric characters or '-', and must start and end with an alphanumeric character \
        (e.g. 'my-name',  or '123-abc', regex used for validation is \
        '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

    const QUALIFIED_NAME_MESSAGE: &str = "name part must consist of alphanumeric characters, \
        '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
        'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
        '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    const LABEL_VALUE_MESSAGE: &str = "a valid label must be an empty string or consist of \
        alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
        character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is \
        '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    #[test]
    fn dns_names_are_checked_and_worded_as_apimachinery_does() {
        assert!(is_dns1123_subdomain("my-config.v1").is_empty());
        assert!(is_dns1123_label("kube-system").is_empty());
        assert_eq!(is_dns1123_subdomain("Bad_Name"), vec![SUBDOMAIN_MESSAGE]);
        assert_eq!(is_dns1123_label("a.b"), vec![LABEL_MESSAGE]);
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert_eq!(
            is_dns1123_subdomain(&"a".repeat(254)),
            vec!["must be no more than 253 characters"]
        );
        for bad in ["-a", "a-", ".a", "a..b", "A", "a_b", ""] {
            assert!(!is_subdomain(bad), "{bad:?}");
        }
    }

    #[test]
    fn qualified_names_and_label_values_are_worded_as_apimachinery_does() {
        assert!(is_qualified_name("app").is_empty());
        assert!(is_qualified_name("example.com/My_name.1").is_empty());
        assert_eq!(is_qualified_name("bad key"), vec![QUALIFIED_NAME_MESSAGE]);
        assert_eq!(
            is_qualified_name("/a"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(
            is_qualified_name("Example.com/a"),
            vec![format!("prefix part {SUBDOMAIN_MESSAGE}")]
        );
        // An empty name part is both empty and not matching the regex, as Go reports it.
        assert_eq!(
            is_qualified_name("a/"),
            vec![
                "name part must be non-empty".to_string(),
                QUALIFIED_NAME_MESSAGE.to_string()
            ]
        );
        assert_eq!(
            is_qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
        assert!(
            is_qualified_name("a/b/c")[0]
                .starts_with("a qualified name must consist of alphanumeric characters")
        );
        assert!(is_qualified_name("a/b/c")[0].ends_with(
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ));
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("web_1.x").is_empty());
        assert_eq!(is_valid_label_value("-v"), vec![LABEL_VALUE_MESSAGE]);
        assert_eq!(
            is_valid_label_value(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
    }

    #[test]
    fn config_keys_and_port_names_are_worded_as_apimachinery_does() {
        assert!(is_config_map_key("ok.key").is_empty());
        assert_eq!(
            is_config_map_key("a b"),
            vec![
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' \
                 (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation \
                 is '[-._a-zA-Z0-9]+')"
            ]
        );
        assert_eq!(is_config_map_key("."), vec!["must not be '.'"]);
        assert_eq!(is_config_map_key(".."), vec!["must not be '..'"]);
        assert_eq!(is_config_map_key("..a"), vec!["must not start with '..'"]);
        assert!(is_valid_port_name("http").is_empty());
        assert_eq!(
            is_valid_port_name("-8080-"),
            vec![
                "must contain at least one letter (a-z)",
                "must not begin or end with a hyphen"
            ]
        );
        assert_eq!(
            is_valid_port_name("a--very-long-port-name"),
            vec![
                "must be no more than 15 characters",
                "must not contain consecutive hyphens"
            ]
        );
    }
}
