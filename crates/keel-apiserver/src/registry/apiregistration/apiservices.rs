//! apiregistration.k8s.io/v1 APIServices, cluster-scoped, with a `status` subresource:
//! defaults from `k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/defaults.go` (a service's
//! `port` 443), validation from `k8s.io/kube-aggregator/pkg/apis/apiregistration/validation`
//! (`ValidateAPIService`: the name `<version>.<group>`, the group a DNS subdomain, the version
//! a DNS-1035 label, the priorities' ranges, a local APIService without `caBundle` or
//! `insecureSkipTLSVerify`, a service's namespace, name and port), the strategy's reset status
//! on create, and the table kube-aggregator's REST storage serves (NAME SERVICE AVAILABLE AGE).
//! A status update keeps the stored metadata but the status's own (`apiServerStatusStrategy`).

use serde_json::{Value, json};

use crate::apimachinery::time::Time;
use crate::apimachinery::validation::{is_dns1123_subdomain, path_segment_name};
use crate::registry::defaults::{as_map, default_value, object_entry};
use crate::registry::rules::port_number;
use crate::registry::storage_k8s_io::fields::{is_dns1035_label, items, present, str_at};
use crate::registry::{
    AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, meta, meta_str, name_age_row, status,
};
use crate::storage::FieldError;

/// The APIService strategy.
pub struct ApiServices;

static INFO: ResourceInfo = ResourceInfo {
    namespaced: false,
    status: true,
    categories: &["api-extensions"],
    ..ResourceInfo::new(
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        "apiservices",
        "apiservice",
    )
};

static COLUMNS: [Column; 4] = [
    NAME_COLUMN,
    Column::string(
        "Service",
        0,
        "The reference to the service that hosts this API endpoint.",
    ),
    Column::string("Available", 0, "Whether this service is available."),
    AGE_COLUMN,
];

fn validate(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let (group, version) = (str_at(obj, "/spec/group"), str_at(obj, "/spec/version"));
    let name = meta_str(obj, "name");
    let required = format!("{version}.{group}");
    let mut problems = path_segment_name(name);
    if problems.is_empty() && name != required {
        problems.push(format!(
            "must be `spec.version+\".\"+spec.group`: {}",
            crate::apimachinery::quote::go_quote(&required)
        ));
    }
    for p in problems {
        errors.push(FieldError::invalid("metadata.name", name, &p));
    }
    if group.is_empty() && version != "v1" {
        errors.push(FieldError::required(
            "spec.group",
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !group.is_empty() {
        for p in is_dns1123_subdomain(group) {
            errors.push(FieldError::invalid("spec.group", group, &p));
        }
    }
    for p in is_dns1035_label(version) {
        errors.push(FieldError::invalid("spec.version", version, &p));
    }
    let int = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let group_min = int("/spec/groupPriorityMinimum");
    if group_min <= 0 || group_min > 20000 {
        errors.push(FieldError::invalid(
            "spec.groupPriorityMinimum",
            group_min,
            "must be positive and less than 20000",
        ));
    }
    let version_priority = int("/spec/versionPriority");
    if version_priority <= 0 || version_priority > 1000 {
        errors.push(FieldError::invalid(
            "spec.versionPriority",
            version_priority,
            "must be positive and less than 1000",
        ));
    }
    let ca_bundle = str_at(obj, "/spec/caBundle");
    let insecure = obj
        .pointer("/spec/insecureSkipTLSVerify")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let Some(service) = present(obj, "/spec/service") else {
        if !ca_bundle.is_empty() {
            let n = base64_len(ca_bundle);
            errors.push(FieldError::invalid(
                "spec.caBundle",
                format!("{n} bytes"),
                "local APIServices may not have a caBundle",
            ));
        }
        if insecure {
            errors.push(FieldError::invalid(
                "spec.insecureSkipTLSVerify",
                true,
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return errors;
    };
    for field in ["namespace", "name"] {
        if str_at(service, &format!("/{field}")).is_empty() {
            errors.push(FieldError::required(&format!("spec.service.{field}"), ""));
        }
    }
    let port = service.get("port").and_then(Value::as_i64).unwrap_or(0);
    if let Some(e) = port_number("spec.service.port", port) {
        errors.push(FieldError::invalid(
            &e.field,
            port,
            &format!("port is not valid: {}", e.detail),
        ));
    }
    if insecure && !ca_bundle.is_empty() {
        errors.push(FieldError::invalid(
            "spec.insecureSkipTLSVerify",
            true,
            "may not be true if caBundle is present",
        ));
    }
    errors
}

/// The decoded length of a base64 `[]byte` field.
fn base64_len(b64: &str) -> usize {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_or(0, |b| b.len())
}

impl Strategy for ApiServices {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        let spec = object_entry(as_map(obj), "spec");
        if let Some(service) = spec.get_mut("service").filter(|s| s.is_object()) {
            default_value(as_map(service), "port", json!(443));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.set_defaults(obj);
        as_map(obj).insert("status".into(), json!({}));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate(obj)
    }

    /// `apiServerStatusStrategy.PrepareForUpdate`: the labels, annotations, finalizers and
    /// owner references stay the stored ones.
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        let kept = ["labels", "annotations", "finalizers", "ownerReferences"];
        let stored = old.get("metadata").and_then(Value::as_object);
        let metadata = meta::metadata(new);
        for field in kept {
            match stored.and_then(|m| m.get(field)) {
                Some(v) => metadata.insert(field.into(), v.clone()),
                None => metadata.remove(field),
            };
        }
    }

    /// `ValidateAPIServiceStatusUpdate`: each condition's status `True`, `False` or
    /// `Unknown`.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let statuses = ["True", "False", "Unknown"];
        let conditions = status::items(new, "/status/conditions");
        conditions
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let value = str_at(c, "/status");
                (!statuses.contains(&value)).then(|| {
                    let at = format!("status.conditions[{i}].status");
                    FieldError::not_supported(&at, value, &statuses)
                })
            })
            .collect()
    }

    fn status_reset_fields(&self) -> &'static [&'static [&'static str]] {
        &[&["spec"], &["metadata"]]
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let service = present(obj, "/spec/service").map_or("Local".to_string(), |s| {
            format!("{}/{}", str_at(s, "/namespace"), str_at(s, "/name"))
        });
        let available = items(obj, "/status/conditions")
            .iter()
            .find(|c| str_at(c, "/type") == "Available")
            .map_or("Unknown".to_string(), |c| {
                match (str_at(c, "/status"), str_at(c, "/reason")) {
                    ("True", _) => "True".to_string(),
                    (s, "") => s.to_string(),
                    (s, r) => format!("{s} ({r})"),
                }
            });
        name_age_row(obj, now, [Value::from(service), Value::from(available)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn defaults_validation_and_table() {
        let mut a = json!({"metadata": {"name": "v1beta1.metrics.k8s.io", "creationTimestamp": "2026-05-28T20:16:40Z"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
                "versionPriority": 100, "service": {"namespace": "kube-system", "name": "metrics-server"}},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}});
        ApiServices.prepare_for_create(&mut a);
        assert_eq!(a["spec"]["service"]["port"], json!(443));
        assert_eq!(a["status"], json!({}));
        assert!(ApiServices.validate(&a).is_empty());
        a["status"] = json!({"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]});
        assert_eq!(
            ApiServices.cells(&a, Time(1_780_000_000)),
            vec![
                json!("v1beta1.metrics.k8s.io"),
                json!("kube-system/metrics-server"),
                json!("False (MissingEndpoints)"),
                json!("10m")
            ]
        );
        let local = json!({"metadata": {"name": "v1."}, "spec": {"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}});
        assert!(ApiServices.validate(&local).is_empty());
        assert_eq!(
            ApiServices.cells(&local, Time(1_780_000_000))[1..3],
            [json!("Local"), json!("Unknown")]
        );
        let bad = json!({"metadata": {"name": "v1.wrong.io"}, "spec": {"group": "example.com", "version": "1",
            "groupPriorityMinimum": 0, "versionPriority": 1001, "caBundle": "AAEC", "insecureSkipTLSVerify": true}});
        let errors = messages(&ApiServices.validate(&bad));
        assert_eq!(
            errors[0],
            "metadata.name: Invalid value: \"v1.wrong.io\": must be `spec.version+\".\"+spec.group`: \"1.example.com\""
        );
        assert!(errors[1].starts_with("spec.version: Invalid value: \"1\": a DNS-1035 label"));
        assert_eq!(
            errors[2..],
            [
                "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
                "spec.versionPriority: Invalid value: 1001: must be positive and less than 1000",
                "spec.caBundle: Invalid value: \"3 bytes\": local APIServices may not have a caBundle",
                "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
            ]
        );
    }

    #[test]
    fn a_status_update_keeps_the_metadata_and_checks_condition_statuses() {
        let old = json!({"metadata": {"name": "v1.x", "labels": {"a": "b"}, "finalizers": ["f"]}});
        let mut new = json!({"metadata": {"name": "v1.x", "annotations": {"c": "d"}},
            "status": {"conditions": [{"type": "Available", "status": "Maybe"}]}});
        ApiServices.prepare_for_status_update(&mut new, &old);
        assert_eq!(new["metadata"], old["metadata"]);
        assert_eq!(
            crate::registry::rules::messages(&ApiServices.validate_status_update(&new, &old)),
            [
                "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \
              \"True\", \"False\", \"Unknown\""
            ]
        );
    }
}
