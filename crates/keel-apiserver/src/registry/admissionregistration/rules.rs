//! What the admission registration kinds share, worded as
//! `pkg/apis/admissionregistration/validation/validation.go` and
//! `k8s.io/apiserver/pkg/util/webhook/validation.go` word it: rules (`validateRule`,
//! `validateRuleWithOperations`, `validateResources`), webhook URLs
//! (`ValidateWebhookURL`, https only) and services (`ValidateWebhookService`).

use serde_json::Value;

use crate::apimachinery::validation::is_dns1123_subdomain;
use crate::registry::rules::port_number;
use crate::registry::storage_k8s_io::fields::{go_strings, items, present, str_at};
use crate::storage::FieldError;

/// `supportedOperations`, sorted.
const OPERATIONS: [&str; 5] = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
/// `supportedScopes`, sorted.
const SCOPES: [&str; 3] = ["*", "Cluster", "Namespaced"];

fn strings(list: &[Value]) -> Vec<&str> {
    list.iter().map(|v| v.as_str().unwrap_or("")).collect()
}

/// `validateResources` (subresources allowed).
fn resources(list: &[Value], path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if list.is_empty() {
        errors.push(FieldError::required(path, ""));
    }
    let (mut double, mut single, mut plain) = (false, false, false);
    let (mut wild_sub, mut wild_res): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    for (i, r) in strings(list).into_iter().enumerate() {
        let at = format!("{path}[{i}]");
        if r.is_empty() {
            errors.push(FieldError::required(&at, ""));
            continue;
        }
        double |= r == "*/*";
        single |= r == "*";
        let Some((res, sub)) = r.split_once('/') else {
            plain = r != "*";
            continue;
        };
        if wild_sub.contains(&res) {
            errors.push(FieldError::invalid(
                &at,
                r,
                &format!("if '{res}/*' is present, must not specify {r}"),
            ));
        }
        if wild_res.contains(&sub) {
            errors.push(FieldError::invalid(
                &at,
                r,
                &format!("if '*/{sub}' is present, must not specify {r}"),
            ));
        }
        if sub == "*" {
            wild_sub.push(res);
        }
        if res == "*" {
            wild_res.push(sub);
        }
    }
    if list.len() > 1 && double {
        errors.push(FieldError::invalid_printed(
            path,
            go_strings(list),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && plain {
        errors.push(FieldError::invalid_printed(
            path,
            go_strings(list),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
    errors
}

/// `validateRuleWithOperations` (`with_operations`) or `validateRule` of the rule at `path`.
pub fn validate_rule(rule: &Value, path: &str, with_operations: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if with_operations {
        let ops = items(rule, "/operations");
        if ops.is_empty() {
            errors.push(FieldError::required(&format!("{path}.operations"), ""));
        }
        if ops.len() > 1 && strings(ops).contains(&"*") {
            errors.push(FieldError::invalid_printed(
                &format!("{path}.operations"),
                format!(
                    "[]admissionregistration.OperationType{}",
                    &go_strings(ops)[8..]
                ),
                "if '*' is present, must not specify other operations",
            ));
        }
        for (i, op) in strings(ops).into_iter().enumerate() {
            if !OPERATIONS.contains(&op) {
                errors.push(FieldError::not_supported(
                    &format!("{path}.operations[{i}]"),
                    op,
                    &OPERATIONS,
                ));
            }
        }
    }
    for (field, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let list = items(rule, &format!("/{field}"));
        if list.is_empty() {
            errors.push(FieldError::required(&format!("{path}.{field}"), ""));
        }
        if list.len() > 1 && strings(list).contains(&"*") {
            errors.push(FieldError::invalid_printed(
                &format!("{path}.{field}"),
                go_strings(list),
                &format!("if '*' is present, must not specify other {what}"),
            ));
        }
    }
    for (i, v) in strings(items(rule, "/apiVersions")).into_iter().enumerate() {
        if v.is_empty() {
            errors.push(FieldError::required(
                &format!("{path}.apiVersions[{i}]"),
                "",
            ));
        }
    }
    errors.extend(resources(
        items(rule, "/resources"),
        &format!("{path}.resources"),
    ));
    if let Some(scope) = present(rule, "/scope").and_then(Value::as_str)
        && !SCOPES.contains(&scope)
    {
        errors.push(FieldError::not_supported(
            &format!("{path}.scope"),
            scope,
            &SCOPES,
        ));
    }
    errors
}

/// The parts of a URL `url.Parse` finds: scheme, userinfo, host, query and fragment.
struct UrlParts<'a> {
    scheme: &'a str,
    user: Option<&'a str>,
    host: &'a str,
    query: &'a str,
    fragment: &'a str,
}

fn parse_url(url: &str) -> UrlParts<'_> {
    let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (scheme, rest) = match rest.split_once("://") {
        Some((s, r))
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            (s, Some(r))
        }
        _ => ("", None),
    };
    let authority = rest.map_or("", |r| r.split('/').next().unwrap_or(""));
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    UrlParts {
        scheme,
        user,
        host,
        query,
        fragment,
    }
}

/// `ValidateWebhookURL` with https required.
pub fn webhook_url(url: &str, path: &str) -> Vec<FieldError> {
    const FORM: &str = "; desired format: https://host[/path]";
    let u = parse_url(url);
    let mut errors = Vec::new();
    if u.scheme != "https" {
        errors.push(FieldError::invalid(
            path,
            u.scheme,
            &format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if u.host.is_empty() {
        errors.push(FieldError::invalid(
            path,
            u.host,
            &format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = u.user {
        errors.push(FieldError::invalid(
            path,
            user,
            "user information is not permitted in the URL",
        ));
    }
    if !u.fragment.is_empty() {
        errors.push(FieldError::invalid(
            path,
            u.fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !u.query.is_empty() {
        errors.push(FieldError::invalid(
            path,
            u.query,
            "query parameters are not permitted in the URL",
        ));
    }
    errors
}

/// `ValidateWebhookService`: name, namespace, port and path.
pub fn webhook_service(service: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if str_at(service, "/name").is_empty() {
        errors.push(FieldError::required(
            &format!("{path}.name"),
            "service name is required",
        ));
    }
    if str_at(service, "/namespace").is_empty() {
        errors.push(FieldError::required(
            &format!("{path}.namespace"),
            "service namespace is required",
        ));
    }
    let port = service.get("port").and_then(Value::as_i64).unwrap_or(443);
    if let Some(e) = port_number(&format!("{path}.port"), port) {
        errors.push(FieldError::invalid(
            &e.field,
            port,
            &format!("port is not valid: {}", e.detail),
        ));
    }
    let Some(url_path) = present(service, "/path").and_then(Value::as_str) else {
        return errors;
    };
    let at = format!("{path}.path");
    if url_path == "/" || url_path.is_empty() {
        return errors;
    }
    if url_path == "//" {
        errors.push(FieldError::invalid(
            &at,
            url_path,
            "segment[0] may not be empty",
        ));
        return errors;
    }
    if !url_path.starts_with('/') {
        errors.push(FieldError::invalid(&at, url_path, "must start with a '/'"));
    }
    let check = url_path.get(1..).unwrap_or("");
    let check = check.strip_suffix('/').unwrap_or(check);
    for (i, step) in check.split('/').enumerate() {
        if step.is_empty() {
            errors.push(FieldError::invalid(
                &at,
                url_path,
                &format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for problem in is_dns1123_subdomain(step) {
            errors.push(FieldError::invalid(
                &at,
                url_path,
                &format!("segment[{i}]: {problem}"),
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn rules_urls_and_services_are_worded_as_upstream() {
        let rule = json!({"operations": ["*", "CREATE"], "apiGroups": [], "apiVersions": ["v1"],
            "resources": ["*", "pods"], "scope": "Everywhere"});
        assert_eq!(
            messages(&validate_rule(&rule, "r", true)),
            vec![
                "r.operations: Invalid value: []admissionregistration.OperationType{\"*\", \"CREATE\"}: if '*' is present, must not specify other operations",
                "r.apiGroups: Required value",
                "r.resources: Invalid value: []string{\"*\", \"pods\"}: if '*' is present, must not specify other resources without subresources",
                "r.scope: Unsupported value: \"Everywhere\": supported values: \"*\", \"Cluster\", \"Namespaced\"",
            ]
        );
        assert_eq!(
            messages(&webhook_url("http://u@h/x#f", "u")),
            vec![
                "u: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "u: Invalid value: \"u\": user information is not permitted in the URL",
                "u: Invalid value: \"f\": fragments are not permitted in the URL",
            ]
        );
        let svc = json!({"namespace": "", "name": "s", "port": 0, "path": "x//"});
        assert_eq!(
            messages(&webhook_service(&svc, "s")),
            vec![
                "s.namespace: Required value: service namespace is required",
                "s.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
                "s.path: Invalid value: \"x//\": must start with a '/'",
                "s.path: Invalid value: \"x//\": segment[0] may not be empty",
                "s.path: Invalid value: \"x//\": segment[1] may not be empty",
            ]
        );
    }
}
