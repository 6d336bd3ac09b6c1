//! apps/v1 Deployments: NAME, READY, UP-TO-DATE, AVAILABLE, AGE and, wide, CONTAINERS, IMAGES,
//! SELECTOR, as `printDeployment` (pkg/printers/internalversion/printers.go) shows them.
//! Defaults as `SetDefaults_Deployment` (pkg/apis/apps/v1/defaults.go) sets them, with the
//! pod template's; a new deployment's status is empty and its generation 1, and changes of
//! the spec or of the annotations bump it (pkg/registry/apps/deployment/strategy.go);
//! `ValidateDeployment` and the apps/v1 update rule that the selector is immutable
//! (pkg/apis/apps/validation/validation.go). The `status` and `scale` subresources; a status
//! update keeps the labels and is checked by `ValidateDeploymentStatusUpdate`.

use serde_json::{Map, Value, json};

use super::workload::{self, str_field};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::registry::defaults::{default_str, default_value, object_entry};
use crate::registry::printing::{CONTAINERS_COLUMN, IMAGES_COLUMN};
use crate::registry::rules::non_negative;
use crate::registry::selector::LabelSelector;
use crate::registry::{
    AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, ScalePaths, Strategy, meta, status, template,
};
use crate::storage::FieldError;

/// The Deployment strategy.
pub struct Deployments;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["deploy"],
    categories: &["all"],
    status: true,
    ..ResourceInfo::new("apps", "v1", "Deployment", "deployments", "deployment")
};

static COLUMNS: [Column; 8] = [
    NAME_COLUMN,
    Column::string("Ready", 0, "Number of the pod with ready state"),
    Column::string(
        "Up-to-date",
        0,
        "Total number of non-terminated pods targeted by this deployment that have the \
         desired template spec.",
    ),
    Column::string(
        "Available",
        0,
        "Total number of available pods (ready for at least minReadySeconds) targeted by \
         this deployment.",
    ),
    AGE_COLUMN,
    CONTAINERS_COLUMN,
    IMAGES_COLUMN,
    Column::string(
        "Selector",
        1,
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will \
         be the ones affected by this deployment.",
    ),
];

/// The strategy types a deployment may have.
const STRATEGIES: [&str; 2] = ["Recreate", "RollingUpdate"];

/// `SetDefaults_Deployment`.
fn deployment_defaults(spec: &mut Map<String, Value>) {
    default_value(spec, "replicas", json!(1));
    let strategy = object_entry(spec, "strategy");
    default_str(strategy, "type", "RollingUpdate");
    if str_field(strategy, "type") == "RollingUpdate" {
        let rolling = object_entry(strategy, "rollingUpdate");
        default_value(rolling, "maxUnavailable", json!("25%"));
        default_value(rolling, "maxSurge", json!("25%"));
    }
    default_value(spec, "revisionHistoryLimit", json!(10));
    default_value(spec, "progressDeadlineSeconds", json!(600));
}

/// The internal `apps.DeploymentStrategy` as Go's `json.Marshal` writes it (no JSON tags:
/// its Go field names), the value of an unsupported strategy's error.
fn internal_strategy(strategy: &Value) -> String {
    let kind = Value::from(strategy.get("type").and_then(Value::as_str).unwrap_or(""));
    let rolling = match strategy.get("rollingUpdate").filter(|r| !r.is_null()) {
        None => "null".to_string(),
        Some(r) => format!(
            "{{\"MaxUnavailable\":{},\"MaxSurge\":{}}}",
            workload::int_or_string_json(r.get("maxUnavailable")),
            workload::int_or_string_json(r.get("maxSurge"))
        ),
    };
    format!("{{\"Type\":{kind},\"RollingUpdate\":{rolling}}}")
}

/// `ValidateDeploymentStrategy` and `ValidateRollingUpdateDeployment`.
fn validate_strategy(spec: &Value) -> Vec<FieldError> {
    let strategy = spec.get("strategy").cloned().unwrap_or(json!({}));
    let rolling = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    match strategy.get("type").and_then(Value::as_str).unwrap_or("") {
        "Recreate" => rolling
            .map(|_| {
                FieldError::forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                )
            })
            .into_iter()
            .collect(),
        "RollingUpdate" => match rolling {
            None => vec![FieldError::required(
                "spec.strategy.rollingUpdate",
                "this should be defaulted and never be nil",
            )],
            Some(rolling) => validate_rolling_update(rolling),
        },
        _ => vec![FieldError {
            printed: Some(internal_strategy(&strategy)),
            ..FieldError::not_supported("spec.strategy", "", &STRATEGIES)
        }],
    }
}

/// `ValidateRollingUpdateDeployment`: both bounds an int or a percent, not both 0, and at
/// most 100% unavailable.
fn validate_rolling_update(rolling: &Value) -> Vec<FieldError> {
    let path = "spec.strategy.rollingUpdate";
    let unavailable = rolling.get("maxUnavailable");
    let surge = rolling.get("maxSurge");
    let mut errors =
        workload::positive_int_or_percent(unavailable, &format!("{path}.maxUnavailable"));
    errors.extend(workload::positive_int_or_percent(
        surge,
        &format!("{path}.maxSurge"),
    ));
    if workload::int_or_percent_value(unavailable) == 0
        && workload::int_or_percent_value(surge) == 0
    {
        errors.push(FieldError::invalid(
            &format!("{path}.maxUnavailable"),
            workload::int_or_string_json(unavailable),
            "may not be 0 when `maxSurge` is 0",
        ));
    }
    errors.extend(workload::not_more_than_100_percent(
        unavailable,
        &format!("{path}.maxUnavailable"),
    ));
    errors
}

/// `ValidateDeploymentSpec`.
fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let mut errors: Vec<FieldError> = non_negative(&spec, "/replicas", "spec.replicas")
        .into_iter()
        .collect();
    errors.extend(replica_template(&spec, "deployment"));
    errors.extend(validate_strategy(&spec));
    errors.extend(non_negative(
        &spec,
        "/minReadySeconds",
        "spec.minReadySeconds",
    ));
    errors.extend(non_negative(
        &spec,
        "/revisionHistoryLimit",
        "spec.revisionHistoryLimit",
    ));
    if let Some(deadline) = spec.get("progressDeadlineSeconds").and_then(Value::as_i64) {
        errors.extend(non_negative(
            &spec,
            "/progressDeadlineSeconds",
            "spec.progressDeadlineSeconds",
        ));
        let min_ready = spec
            .get("minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if deadline <= min_ready {
            errors.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                deadline,
                "must be greater than minReadySeconds",
            ));
        }
    }
    errors
}

/// The selector and pod template checks Deployments and ReplicaSets share
/// (`ValidatePodTemplateSpecForReplicaSet` once the selector reads; the empty selector's
/// words say `deployment` for both, as upstream's do).
pub(super) fn replica_template(spec: &Value, kind: &str) -> Vec<FieldError> {
    let (mut errors, reads) = workload::validate_selector(spec, kind);
    let selector = spec.get("selector").filter(|s| !s.is_null());
    let empty = json!({});
    let template = spec.get("template").unwrap_or(&empty);
    match selector {
        Some(selector) if !reads => errors.push(FieldError::invalid_printed(
            "spec.selector",
            crate::registry::printing::selector_json(Some(selector)),
            "invalid label selector",
        )),
        Some(selector) => errors.extend(template::validate_for_replicas(
            Some(template),
            selector,
            "spec.template",
        )),
        None => {
            errors.push(template::labels_mismatch(template, "spec.template"));
            errors.extend(template::validate_for_replicas(
                Some(template),
                &empty,
                "spec.template",
            ));
        }
    }
    errors
}

/// `ValidateDeploymentStatusUpdate` (pkg/apis/apps/validation/validation.go): the counts
/// not negative, none above `status.replicas`, and the collision count not decremented.
fn validate_status_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = status::non_negative_counts(
        new,
        &[
            "observedGeneration",
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
            "terminatingReplicas",
            "collisionCount",
        ],
    );
    errors.extend(status::replica_bounds(
        new,
        &["updatedReplicas", "readyReplicas", "availableReplicas"],
        status::ABOVE_READY,
    ));
    errors.extend(status::collision_count_kept(new, old));
    errors
}

impl Strategy for Deployments {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        workload::default_spec(obj, deployment_defaults);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.set_defaults(obj);
        workload::clear_status(obj, json!({}));
    }

    /// Annotation changes bump the generation too (they are copied to the replica sets).
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        self.set_defaults(new);
        let annotations =
            |v: &Value| workload::semantic(v.at("/metadata/annotations").unwrap_or(&Value::Null));
        if annotations(new) != annotations(old) {
            let next = workload::count(old, "/metadata/generation") + 1;
            meta::metadata(new).insert("generation".into(), next.into());
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = validate_spec(new);
        errors.extend(workload::selector_unchanged(new, old));
        errors
    }

    /// `deploymentStatusStrategy.PrepareForUpdate`: the labels stay the stored ones.
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        status::keep_labels(new, old);
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_status_update(new, old)
    }

    fn status_reset_fields(&self) -> &'static [&'static [&'static str]] {
        &[&["spec"], &["metadata", "labels"]]
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let selector = obj
            .at("/spec/selector")
            .and_then(|s| LabelSelector::from_object(s).ok())
            .map(|s| s.to_string())
            .unwrap_or_default();
        let counts = [
            workload::ready_of_desired(obj),
            workload::count(obj, "/status/updatedReplicas").into(),
            workload::count(obj, "/status/availableReplicas").into(),
        ];
        workload::wide_row(obj, now, counts, Some(selector.into()))
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn scale(&self) -> Option<ScalePaths> {
        Some(super::scale_paths())
    }
}

#[cfg(test)]
#[path = "deployments_tests.rs"]
mod tests;
