//! Who a write is recorded under in `managedFields`: the `fieldManager` and `force` query
//! parameters read and checked as kube-apiserver's handlers check `CreateOptions`,
//! `UpdateOptions` and `PatchOptions` (422 Invalid, `meta.k8s.io`), and a write that names
//! no manager recorded under its User-Agent's product (`kubectl`, `kube-controller-manager`).

use http::HeaderMap;

use super::entries::{manager_from_user_agent, validate_field_manager};
use crate::http::request_info::{Query, query_bool};
use crate::storage::{FieldError, Status};

/// The kind of write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// POST.
    Create,
    /// PUT.
    Update,
    /// A PATCH that is not an apply.
    Patch,
    /// A server-side apply.
    Apply,
}

/// The field manager options of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The manager the write is recorded under.
    pub manager: String,
    /// `force`: an apply takes the fields other managers own.
    pub force: bool,
}

/// Reads and checks the field manager options of a `verb` request.
pub fn options(query: &Query, headers: &HeaderMap, verb: Verb) -> Result<Options, Status> {
    let named = query.get("fieldManager").map(String::as_str).unwrap_or("");
    let force = query.get("force").map(String::as_str).map(query_bool);
    let mut errors = Vec::new();
    match verb {
        Verb::Apply if named.is_empty() => {
            errors.push(FieldError::required(
                "fieldManager",
                "is required for apply patch",
            ));
        }
        Verb::Patch if force.is_some() => {
            errors.push(FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            ));
        }
        _ => {}
    }
    errors.extend(validate_field_manager(named, "fieldManager"));
    if !errors.is_empty() {
        let kind = match verb {
            Verb::Create => "CreateOptions",
            Verb::Update => "UpdateOptions",
            Verb::Patch | Verb::Apply => "PatchOptions",
        };
        return Err(Status::invalid("meta.k8s.io", kind, "", &errors));
    }
    let manager = if named.is_empty() {
        let agent = headers
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        manager_from_user_agent(agent)
    } else {
        named.to_string()
    };
    Ok(Options {
        manager,
        force: force.unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> Query {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn agent(ua: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::USER_AGENT, ua.parse().unwrap());
        h
    }

    #[test]
    fn the_manager_is_the_parameter_or_the_user_agent_product() {
        let ua = agent("kubectl/v1.32.0 (linux/amd64) kubernetes/abc");
        let named = options(
            &query(&[("fieldManager", "kubectl-edit")]),
            &ua,
            Verb::Update,
        );
        assert_eq!(named.unwrap().manager, "kubectl-edit");
        let from_agent = options(&query(&[]), &ua, Verb::Create).unwrap();
        assert_eq!(from_agent.manager, "kubectl");
        assert_eq!(
            options(&query(&[]), &HeaderMap::new(), Verb::Patch)
                .unwrap()
                .manager,
            ""
        );
        let long = "k".repeat(300);
        assert_eq!(manager_from_user_agent(&long).len(), 128);
    }

    #[test]
    fn bad_options_are_refused_as_kube_apiserver_words_it() {
        let none = HeaderMap::new();
        let e = options(&query(&[]), &none, Verb::Apply).unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert_eq!(
            e.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
        );
        let long = "m".repeat(129);
        let e = options(&query(&[("fieldManager", &long)]), &none, Verb::Create).unwrap_err();
        assert_eq!(
            e.message,
            "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes"
        );
        let e = options(&query(&[("fieldManager", "a\u{7}b")]), &none, Verb::Update).unwrap_err();
        assert_eq!(
            e.message,
            "UpdateOptions.meta.k8s.io \"\" is invalid: fieldManager: Invalid value: \"a\\ab\": invalid character U+0007 (at position 1)"
        );
        let e = options(&query(&[("force", "false")]), &none, Verb::Patch).unwrap_err();
        assert_eq!(
            e.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
        let forced = options(
            &query(&[("fieldManager", "m"), ("force", "true")]),
            &none,
            Verb::Apply,
        );
        assert!(forced.unwrap().force);
        let q = query(&[("fieldManager", "m"), ("force", "False")]);
        assert!(!options(&q, &none, Verb::Apply).unwrap().force);
    }
}
