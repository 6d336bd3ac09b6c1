//! ResourceLists (`{"cpu": "500m", "requests.memory": "1Gi"}`): which resource names core's
//! `helper` package knows (standard, quota, container, extended, integer-valued) and how
//! `pkg/apis/core/validation` checks a name and its quantity, for ResourceQuotas and
//! LimitRanges.
//!
//! A map's keys are checked in sorted order, one of the orders Go's map iteration takes.
//! Quantities are compared by value ([`crate::apimachinery::quantity::quantity_nanos`]) and
//! shown in the canonical form every write leaves them in before it is validated
//! ([`crate::schema::quantities`]; `1000m` is `1`), as upstream shows them.

use serde_json::{Map, Value};

use crate::apimachinery::quantity::quantity_nanos;
use crate::apimachinery::validation::is_qualified_name;
use crate::storage::FieldError;

/// `core.ResourceDefaultNamespacePrefix`.
const DEFAULT_NAMESPACE_PREFIX: &str = "kubernetes.io/";
/// `core.DefaultResourceRequestsPrefix`.
const REQUESTS_PREFIX: &str = "requests.";
/// `core.ResourceHugePagesPrefix`.
const HUGE_PAGES_PREFIX: &str = "hugepages-";
/// `core.ResourceRequestsHugePagesPrefix`.
const REQUESTS_HUGE_PAGES_PREFIX: &str = "requests.hugepages-";

/// `standardResources`.
const STANDARD: [&str; 20] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

/// `standardQuotaResources`.
const STANDARD_QUOTA: [&str; 19] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];

/// `integerResources`.
const INTEGER: [&str; 9] = [
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

/// `IsHugePageResourceName`.
pub fn is_huge_page(name: &str) -> bool {
    name.starts_with(HUGE_PAGES_PREFIX)
}

/// `IsQuotaHugePageResourceName`.
fn is_quota_huge_page(name: &str) -> bool {
    name.starts_with(HUGE_PAGES_PREFIX) || name.starts_with(REQUESTS_HUGE_PAGES_PREFIX)
}

/// `IsStandardResourceName`.
fn is_standard(name: &str) -> bool {
    STANDARD.contains(&name) || is_quota_huge_page(name)
}

/// `IsStandardQuotaResourceName`.
pub fn is_standard_quota(name: &str) -> bool {
    STANDARD_QUOTA.contains(&name) || is_quota_huge_page(name)
}

/// `IsStandardContainerResourceName`.
fn is_standard_container(name: &str) -> bool {
    ["cpu", "memory", "ephemeral-storage"].contains(&name) || is_huge_page(name)
}

/// `IsNativeResource`: unprefixed, or in the `kubernetes.io/` namespace.
pub fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains(DEFAULT_NAMESPACE_PREFIX)
}

/// `IsExtendedResourceName`: not native, not `requests.`-prefixed, and a qualified name
/// once `requests.` is put in front (as quota names it).
fn is_extended(name: &str) -> bool {
    if is_native(name) || name.starts_with(REQUESTS_PREFIX) {
        return false;
    }
    is_qualified_name(&format!("{REQUESTS_PREFIX}{name}")).is_empty()
}

/// `IsOvercommitAllowed`: native and not huge pages.
pub fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !is_huge_page(name)
}

/// `IsIntegerResourceName`.
fn is_integer(name: &str) -> bool {
    INTEGER.contains(&name) || is_extended(name)
}

/// `validateResourceName`: a qualified name, and a standard one unless it has a prefix.
pub fn validate_name(name: &str, path: &str) -> Vec<FieldError> {
    let errors: Vec<FieldError> = is_qualified_name(name)
        .iter()
        .map(|msg| FieldError::invalid(path, name, msg))
        .collect();
    if !errors.is_empty() {
        return errors;
    }
    if !name.contains('/') && !is_standard(name) {
        return vec![FieldError::invalid(
            path,
            name,
            "must be a standard resource type or fully qualified",
        )];
    }
    errors
}

/// `validateContainerResourceName`: [`validate_name`], then a standard container resource
/// unless prefixed, an extended resource if prefixed outside `kubernetes.io/`.
pub fn validate_container_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut errors = validate_name(name, path);
    if !name.contains('/') {
        if !is_standard_container(name) {
            errors.push(FieldError::invalid(
                path,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native(name) && !is_extended(name) {
        errors.push(FieldError::invalid(
            path,
            name,
            "doesn't follow extended resource name standard",
        ));
    }
    errors
}

/// `ValidateResourceQuotaResourceName`: [`validate_name`], then a resource quota tracks
/// unless prefixed.
fn validate_quota_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut errors = validate_name(name, path);
    if !name.contains('/') && !is_standard_quota(name) {
        errors.push(FieldError::invalid(
            path,
            name,
            "must be a standard resource for quota",
        ));
    }
    errors
}

/// A quantity's text: a string as sent, a number as JSON writes it (Quantity reads both).
pub fn quantity_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A quantity in billionths (None: not a quantity, which the decoder refuses first).
pub fn nanos(value: &Value) -> Option<i128> {
    quantity_nanos(&quantity_text(value))
}

/// `Quantity.MilliValue`: rounded up.
pub fn milli_value(nanos: i128) -> i128 {
    ceil_div(nanos, 1_000_000)
}

/// `Quantity.Value`: rounded up.
pub fn value(nanos: i128) -> i128 {
    ceil_div(nanos, 1_000_000_000)
}

fn ceil_div(n: i128, d: i128) -> i128 {
    -(-n).div_euclid(d)
}

/// `ValidateResourceQuantityValue`: not negative, and whole for integer resources.
fn validate_quantity(name: &str, quantity: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(n) = nanos(quantity) else {
        return errors;
    };
    let text = quantity_text(quantity);
    if n < 0 {
        errors.push(FieldError::invalid(
            path,
            text.as_str(),
            "must be greater than or equal to 0",
        ));
    }
    if is_integer(name) && milli_value(n) % 1000 != 0 {
        errors.push(FieldError::invalid(
            path,
            text.as_str(),
            "must be an integer",
        ));
    }
    errors
}

/// A ResourceList of a ResourceQuota (`spec.hard`, `status.hard`, `status.used`) at
/// `path`: each name one a quota tracks, each quantity valid for it.
pub fn validate_quota_list(list: Option<&Map<String, Value>>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (name, quantity) in list.into_iter().flatten() {
        let at = format!("{path}[{name}]");
        errors.extend(validate_quota_name(name, &at));
        errors.extend(validate_quantity(name, quantity, &at));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn names_are_classified_as_cores_helpers_classify_them() {
        assert!(is_standard_quota("requests.hugepages-2Mi") && is_standard_quota("pods"));
        assert!(!is_standard_quota("storage"));
        assert!(is_native("cpu") && is_native("example.kubernetes.io/x"));
        assert!(is_extended("example.com/gpu") && !is_extended("requests.example.com/gpu"));
        assert!(is_integer("example.com/gpu") && is_integer("pods") && !is_integer("cpu"));
        assert!(!overcommit_allowed("hugepages-2Mi") && !overcommit_allowed("example.com/gpu"));
    }

    #[test]
    fn names_and_quantities_are_refused_in_upstreams_words() {
        assert_eq!(
            messages(&validate_container_name(
                "storage",
                "spec.limits[0].max[storage]"
            )),
            [
                "spec.limits[0].max[storage]: Invalid value: \"storage\": must be a standard \
              resource for containers"
            ]
        );
        assert_eq!(
            messages(&validate_name("foo", "x")),
            ["x: Invalid value: \"foo\": must be a standard resource type or fully qualified"]
        );
        let hard = json!({"pods": "1500m", "cpu": "-1", "bogus": "1"});
        assert_eq!(
            messages(&validate_quota_list(hard.as_object(), "spec.hard")),
            [
                "spec.hard[bogus]: Invalid value: \"bogus\": must be a standard resource type \
                 or fully qualified",
                "spec.hard[bogus]: Invalid value: \"bogus\": must be a standard resource for quota",
                "spec.hard[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.hard[pods]: Invalid value: \"1500m\": must be an integer",
            ]
        );
        assert!(validate_quota_list(json!({"pods": 10}).as_object(), "spec.hard").is_empty());
    }

    #[test]
    fn values_round_up_as_quantities_do() {
        assert_eq!(value(1_500_000_000), 2);
        assert_eq!(value(-1_500_000_000), -1);
        assert_eq!(milli_value(1), 1);
    }
}
