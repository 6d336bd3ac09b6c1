//! admissionregistration.k8s.io/v1 ValidatingWebhookConfigurations and
//! MutatingWebhookConfigurations, cluster-scoped, stored and validated (not called): defaults
//! from `pkg/apis/admissionregistration/v1/defaults.go` (`failurePolicy` Fail, `matchPolicy`
//! Equivalent, empty namespace and object selectors, `timeoutSeconds` 10, `reinvocationPolicy`
//! Never, each rule's `scope` `*`, a service's `port` 443), validation from
//! `pkg/apis/admissionregistration/validation/validation.go` (webhook names fully qualified and
//! unique, rules, `sideEffects` and `admissionReviewVersions` required, exactly one of
//! `clientConfig.url` or `clientConfig.service`, matchConditions that compile: `expressions`), generation bumped when the webhooks change
//! (the strategies' `PrepareForUpdate`), printed NAME WEBHOOKS AGE.

use serde_json::{Map, Value, json};

use super::expressions::{self, Options, Preexisting};
use super::rules::{validate_rule, webhook_service, webhook_url};
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::is_dns1123_subdomain;
use crate::registry::defaults::{as_map, default_value};
use crate::registry::selector::validate_label_selector;
use crate::registry::storage_k8s_io::fields::{
    go_strings, is_dns1035_label, items, present, str_at,
};
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, name_age_row};
use crate::storage::FieldError;

/// ValidatingWebhookConfigurations.
pub struct ValidatingWebhookConfigurations;

/// MutatingWebhookConfigurations.
pub struct MutatingWebhookConfigurations;

static VALIDATING: ResourceInfo = ResourceInfo {
    namespaced: false,
    categories: &["api-extensions"],
    ..ResourceInfo::new(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        "validatingwebhookconfiguration",
    )
};

static MUTATING: ResourceInfo = ResourceInfo {
    namespaced: false,
    categories: &["api-extensions"],
    ..ResourceInfo::new(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        "mutatingwebhookconfiguration",
    )
};

static COLUMNS: [Column; 3] = [
    NAME_COLUMN,
    Column {
        name: "Webhooks",
        kind: "integer",
        format: "",
        description: "Webhooks indicates the number of webhooks registered in this configuration",
        priority: 0,
    },
    AGE_COLUMN,
];

/// `AcceptedAdmissionReviewVersions`.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// `SetDefaults_ValidatingWebhook` / `SetDefaults_MutatingWebhook` and the `Rule` and
/// `ServiceReference` defaults under them.
fn webhook_defaults(hook: &mut Map<String, Value>, mutating: bool) {
    default_value(hook, "failurePolicy", json!("Fail"));
    default_value(hook, "matchPolicy", json!("Equivalent"));
    default_value(hook, "namespaceSelector", json!({}));
    default_value(hook, "objectSelector", json!({}));
    default_value(hook, "timeoutSeconds", json!(10));
    if mutating {
        default_value(hook, "reinvocationPolicy", json!("Never"));
    }
    if let Some(Value::Array(rules)) = hook.get_mut("rules") {
        for rule in rules.iter_mut() {
            default_value(as_map(rule), "scope", json!("*"));
        }
    }
    if let Some(service) = hook
        .get_mut("clientConfig")
        .and_then(|c| c.get_mut("service"))
        && service.is_object()
    {
        default_value(as_map(service), "port", json!(443));
    }
}

/// `IsFullyQualifiedName`.
fn fully_qualified_name(name: &str, path: &str) -> Option<FieldError> {
    if name.is_empty() {
        return Some(FieldError::required(path, ""));
    }
    let errs = is_dns1123_subdomain(name);
    if !errs.is_empty() {
        return Some(FieldError::invalid(path, name, &errs.join(",")));
    }
    (name.split('.').count() < 3).then(|| {
        FieldError::invalid(
            path,
            name,
            "should be a domain with at least three segments separated by dots",
        )
    })
}

/// `validateAdmissionReviewVersions` (a recognized version required).
fn review_versions(hook: &Value, path: &str) -> Vec<FieldError> {
    let versions = items(hook, "/admissionReviewVersions");
    if versions.is_empty() {
        return vec![FieldError::required(
            path,
            &format!("must specify one of {}", REVIEW_VERSIONS.join(", ")),
        )];
    }
    let mut errors = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let v = v.as_str().unwrap_or("");
        let at = format!("{path}[{i}]");
        if seen.contains(&v) {
            errors.push(FieldError::invalid(&at, v, "duplicate version"));
            continue;
        }
        seen.push(v);
        for problem in is_dns1035_label(v) {
            errors.push(FieldError::invalid(&at, v, &problem));
        }
    }
    if !seen.iter().any(|v| REVIEW_VERSIONS.contains(v)) {
        errors.push(FieldError::invalid_printed(
            path,
            go_strings(versions),
            &format!(
                "must include at least one of {}",
                REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
    errors
}

/// `validateValidatingWebhook` / `validateMutatingWebhook`.
fn validate_webhook(hook: &Value, path: &str, mutating: bool, opts: &Options) -> Vec<FieldError> {
    let mut errors = Vec::new();
    errors.extend(fully_qualified_name(
        str_at(hook, "/name"),
        &format!("{path}.name"),
    ));
    for (i, rule) in items(hook, "/rules").iter().enumerate() {
        errors.extend(validate_rule(rule, &format!("{path}.rules[{i}]"), true));
    }
    let one_of = |field: &str, supported: &[&str], errors: &mut Vec<FieldError>| {
        if let Some(v) = present(hook, &format!("/{field}")) {
            let v = v.as_str().unwrap_or("");
            if !supported.contains(&v) {
                errors.push(FieldError::not_supported(
                    &format!("{path}.{field}"),
                    v,
                    supported,
                ));
            }
        }
    };
    one_of("failurePolicy", &["Fail", "Ignore"], &mut errors);
    one_of("matchPolicy", &["Equivalent", "Exact"], &mut errors);
    if present(hook, "/sideEffects").is_none() {
        errors.push(FieldError::required(
            &format!("{path}.sideEffects"),
            "must specify one of None, NoneOnDryRun",
        ));
    }
    one_of("sideEffects", &["None", "NoneOnDryRun"], &mut errors);
    if let Some(t) = present(hook, "/timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&t)
    {
        errors.push(FieldError::invalid(
            &format!("{path}.timeoutSeconds"),
            t,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    for selector in ["namespaceSelector", "objectSelector"] {
        if let Some(s) = present(hook, &format!("/{selector}")) {
            errors.extend(validate_label_selector(s, &format!("{path}.{selector}")));
        }
    }
    if mutating {
        one_of("reinvocationPolicy", &["IfNeeded", "Never"], &mut errors);
    }
    let cc = format!("{path}.clientConfig");
    match (
        present(hook, "/clientConfig/url"),
        present(hook, "/clientConfig/service"),
    ) {
        (Some(url), None) => errors.extend(webhook_url(
            url.as_str().unwrap_or(""),
            &format!("{cc}.url"),
        )),
        (None, Some(service)) => errors.extend(webhook_service(service, &format!("{cc}.service"))),
        _ => errors.push(FieldError::required(
            &cc,
            "exactly one of url or service is required",
        )),
    }
    errors.extend(expressions::match_conditions(
        items(hook, "/matchConditions"),
        &format!("{path}.matchConditions"),
        opts,
    ));
    errors
}

/// `validateValidatingWebhookConfiguration` / `validateMutatingWebhookConfiguration`.
fn validate_configuration(obj: &Value, mutating: bool, opts: &Options) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, hook) in items(obj, "/webhooks").iter().enumerate() {
        let path = format!("webhooks[{i}]");
        errors.extend(validate_webhook(hook, &path, mutating, opts));
        errors.extend(review_versions(
            hook,
            &format!("{path}.admissionReviewVersions"),
        ));
        let name = str_at(hook, "/name");
        if !name.is_empty() {
            if names.contains(&name) {
                errors.push(FieldError::duplicate(&format!("{path}.name"), name));
            } else {
                names.push(name);
            }
        }
    }
    errors
}

/// The options of `Validate*WebhookConfigurationUpdate` about expressions: the
/// matchConditions are not checked again when there are as many webhooks and none's
/// changed (`ignore*WebhookMatchConditions`), and those the stored configuration had are
/// not refused.
fn update_options<'a>(new: &Value, old: &'a Value) -> Options<'a> {
    let (n, o) = (items(new, "/webhooks"), items(old, "/webhooks"));
    let unchanged = n.len() == o.len()
        && n.iter()
            .zip(o)
            .all(|(a, b)| a.get("matchConditions") == b.get("matchConditions"));
    Options {
        ignore_match_conditions: unchanged,
        params: false,
        preexisting: Preexisting::of_webhooks(old),
    }
}

fn defaults(obj: &mut Value, mutating: bool) {
    if let Some(Value::Array(hooks)) = obj.get_mut("webhooks") {
        for hook in hooks.iter_mut() {
            webhook_defaults(as_map(hook), mutating);
        }
    }
}

fn cells(obj: &Value, now: Time) -> Vec<Value> {
    name_age_row(obj, now, [Value::from(items(obj, "/webhooks").len())])
}

/// The Strategy of a webhook configuration kind `$kind`: its info (`$info`), its defaults and
/// validation (`$mutating`: a MutatingWebhookConfiguration's), generation tracked, and the
/// WEBHOOKS column.
macro_rules! webhook_strategy {
    ($kind:ty, $info:expr, $mutating:expr) => {
        impl Strategy for $kind {
            fn info(&self) -> &'static ResourceInfo {
                &$info
            }

            fn set_defaults(&self, obj: &mut Value) {
                defaults(obj, $mutating);
            }

            fn validate(&self, obj: &Value) -> Vec<FieldError> {
                validate_configuration(obj, $mutating, &Options::default())
            }

            fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
                validate_configuration(new, $mutating, &update_options(new, old))
            }

            fn tracks_generation(&self) -> bool {
                true
            }

            fn columns(&self) -> &'static [Column] {
                &COLUMNS
            }

            fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
                cells(obj, now)
            }
        }
    };
}

webhook_strategy!(ValidatingWebhookConfigurations, VALIDATING, false);
webhook_strategy!(MutatingWebhookConfigurations, MUTATING, true);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn defaults_are_upstreams() {
        let mut m = json!({"webhooks": [{"name": "m.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "default", "name": "hook"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}]});
        MutatingWebhookConfigurations.set_defaults(&mut m);
        assert_eq!(
            m["webhooks"][0],
            json!({"name": "m.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "clientConfig": {"service": {"namespace": "default", "name": "hook", "port": 443}},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["pods"], "scope": "*"}],
                "failurePolicy": "Fail", "matchPolicy": "Equivalent", "namespaceSelector": {},
                "objectSelector": {}, "timeoutSeconds": 10, "reinvocationPolicy": "Never"})
        );
        assert!(MutatingWebhookConfigurations.validate(&m).is_empty());
        let mut v = json!({"webhooks": [{"name": "v.example.com"}]});
        ValidatingWebhookConfigurations.set_defaults(&mut v);
        assert!(v["webhooks"][0].get("reinvocationPolicy").is_none());
        assert_eq!(v["webhooks"][0]["timeoutSeconds"], json!(10));
    }

    #[test]
    fn validation_is_worded_as_upstream() {
        let mut v = json!({"webhooks": [
            {"name": "hook", "timeoutSeconds": 31, "admissionReviewVersions": ["v2"],
             "clientConfig": {"url": "http://h.example.com/x", "service": {"namespace": "a", "name": "b"}}},
            {"name": "a.example.com", "sideEffects": "Some", "clientConfig": {"url": "https://a.example.com"}},
            {"name": "a.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
             "clientConfig": {"url": "https://a.example.com/path?x=1"}}]});
        ValidatingWebhookConfigurations.set_defaults(&mut v);
        assert_eq!(
            messages(&ValidatingWebhookConfigurations.validate(&v)),
            vec![
                "webhooks[0].name: Invalid value: \"hook\": should be a domain with at least three segments separated by dots",
                "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
                "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
                "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
                "webhooks[0].admissionReviewVersions: Invalid value: []string{\"v2\"}: must include at least one of v1, v1beta1",
                "webhooks[1].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
                "webhooks[1].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
                "webhooks[2].clientConfig.url: Invalid value: \"x=1\": query parameters are not permitted in the URL",
                "webhooks[2].name: Duplicate value: \"a.example.com\"",
            ]
        );
        assert_eq!(
            ValidatingWebhookConfigurations.cells(&v, Time(1_780_000_000))[1],
            json!(3)
        );
    }
}
