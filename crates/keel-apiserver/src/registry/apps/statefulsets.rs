//! apps/v1 StatefulSets: NAME, READY, AGE and, wide, CONTAINERS, IMAGES, as
//! `printStatefulSet` (pkg/printers/internalversion/printers.go) shows them. Names are DNS
//! labels (`ValidateStatefulSetName`). Defaults as `SetDefaults_StatefulSet`
//! (pkg/apis/apps/v1/defaults.go) sets them, with the pod template's and, for each volume
//! claim template, `SetDefaults_PersistentVolumeClaim` and `SetDefaults_PersistentVolumeClaimSpec`
//! (pkg/apis/core/v1/defaults.go), each template served with apiVersion `v1` and kind
//! `PersistentVolumeClaim` (pkg/apis/apps/v1/conversion.go). A new set's status is
//! `{replicas: 0, availableReplicas: 0}` and its generation 1; `maxUnavailable` is dropped as
//! its alpha feature gate is off (pkg/registry/apps/statefulset/strategy.go).
//! `ValidateStatefulSet` and `ValidateStatefulSetUpdate` (pkg/apis/apps/validation/
//! validation.go). The `status` and `scale` subresources; a status update is checked by
//! `ValidateStatefulSetStatusUpdate`.

use serde_json::{Map, Value, json};

use super::workload::{self, str_field};
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::is_dns1123_label;
use crate::json_pointer::At;
use crate::registry::defaults::{default_str, default_value, object_entry};
use crate::registry::meta::validate_labels;
use crate::registry::names::NameRule;
use crate::registry::printing::{CONTAINERS_COLUMN, IMAGES_COLUMN};
use crate::registry::rules::non_negative;
use crate::registry::template;
use crate::registry::{
    AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, ScalePaths, Strategy, status,
};
use crate::storage::FieldError;

/// The StatefulSet strategy.
pub struct StatefulSets;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["sts"],
    categories: &["all"],
    status: true,
    name_rule: NameRule::Label,
    ..ResourceInfo::new("apps", "v1", "StatefulSet", "statefulsets", "statefulset")
};

static COLUMNS: [Column; 5] = [
    NAME_COLUMN,
    Column::string("Ready", 0, "Number of the pod with ready state"),
    AGE_COLUMN,
    CONTAINERS_COLUMN,
    IMAGES_COLUMN,
];

/// The PVC retention policies (`ValidatePersistentVolumeClaimRetentionPolicyType`).
const RETENTION: [&str; 2] = ["Retain", "Delete"];

/// The spec fields an update may change, as `ValidateStatefulSetUpdate` lets it.
const MUTABLE: [&str; 6] = [
    "replicas",
    "template",
    "updateStrategy",
    "minReadySeconds",
    "ordinals",
    "persistentVolumeClaimRetentionPolicy",
];

/// `SetDefaults_StatefulSet` and the volume claim templates' defaults.
fn statefulset_defaults(spec: &mut Map<String, Value>) {
    default_str(spec, "podManagementPolicy", "OrderedReady");
    let strategy = object_entry(spec, "updateStrategy");
    if str_field(strategy, "type").is_empty() {
        strategy.insert("type".into(), "RollingUpdate".into());
        object_entry(strategy, "rollingUpdate");
    }
    if str_field(strategy, "type") == "RollingUpdate"
        && let Some(rolling) = strategy
            .get_mut("rollingUpdate")
            .and_then(Value::as_object_mut)
    {
        default_value(rolling, "partition", json!(0));
    }
    // StatefulSetAutoDeletePVC is GA: the retention policy is always defaulted.
    let retention = object_entry(spec, "persistentVolumeClaimRetentionPolicy");
    default_str(retention, "whenDeleted", "Retain");
    default_str(retention, "whenScaled", "Retain");
    default_value(spec, "replicas", json!(1));
    default_value(spec, "revisionHistoryLimit", json!(10));
    // `serviceName` has no `omitempty`: Go writes it even when empty.
    default_str(spec, "serviceName", "");
    let claims = spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut);
    for claim in claims
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        claim.insert("apiVersion".into(), "v1".into());
        claim.insert("kind".into(), "PersistentVolumeClaim".into());
        default_str(object_entry(claim, "status"), "phase", "Pending");
        default_value(
            object_entry(claim, "spec"),
            "volumeMode",
            json!("Filesystem"),
        );
    }
}

/// Drops `updateStrategy.rollingUpdate.maxUnavailable` unless `old` uses it
/// (`dropStatefulSetDisabledFields`: MaxUnavailableStatefulSet is alpha and off in 1.34).
fn drop_max_unavailable(obj: &mut Value, old: Option<&Value>) {
    let pointer = "/spec/updateStrategy/rollingUpdate";
    let in_use = old
        .and_then(|o| o.at(pointer))
        .and_then(|r| r.get("maxUnavailable"))
        .is_some_and(|m| !m.is_null());
    if !in_use && let Some(rolling) = obj.at_mut(pointer).and_then(Value::as_object_mut) {
        rolling.remove("maxUnavailable");
    }
}

/// The internal `apps.StatefulSetUpdateStrategy` (or its `RollingUpdate`) as Go's
/// `json.Marshal` writes it: Go field names, as the internal types have no JSON tags.
fn internal_rolling(rolling: Option<&Value>) -> String {
    match rolling.filter(|r| !r.is_null()) {
        None => "null".into(),
        Some(r) => format!(
            "{{\"Partition\":{},\"MaxUnavailable\":{}}}",
            r.get("partition").and_then(Value::as_i64).unwrap_or(0),
            r.get("maxUnavailable").cloned().unwrap_or(Value::Null)
        ),
    }
}

/// `validateRollingUpdateStatefulSet`.
fn validate_rolling(rolling: &Value) -> Vec<FieldError> {
    let path = "spec.updateStrategy.rollingUpdate";
    let mut errors: Vec<FieldError> =
        non_negative(rolling, "/partition", &format!("{path}.partition"))
            .into_iter()
            .collect();
    let max = rolling.get("maxUnavailable").filter(|m| !m.is_null());
    if max.is_some() {
        let at = format!("{path}.maxUnavailable");
        errors.extend(workload::positive_int_or_percent(max, &at));
        if workload::int_or_percent_value(max) == 0 {
            errors.push(FieldError::invalid(&at, max.cloned(), "cannot be 0"));
        }
        errors.extend(workload::not_more_than_100_percent(max, &at));
    }
    errors
}

/// The update strategy checks of `ValidateStatefulSetSpec`.
fn validate_strategy(spec: &Value) -> Vec<FieldError> {
    let strategy = spec.get("updateStrategy").cloned().unwrap_or(json!({}));
    let rolling = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    let kind = strategy.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "" => vec![FieldError::required("spec.updateStrategy", "")],
        "OnDelete" => rolling
            .map(|r| {
                FieldError::invalid_printed(
                    "spec.updateStrategy.rollingUpdate",
                    internal_rolling(Some(r)),
                    "only allowed for updateStrategy 'RollingUpdate'",
                )
            })
            .into_iter()
            .collect(),
        "RollingUpdate" => rolling.map(validate_rolling).unwrap_or_default(),
        other => vec![FieldError::invalid_printed(
            "spec.updateStrategy",
            format!(
                "{{\"Type\":{},\"RollingUpdate\":{}}}",
                Value::from(other),
                internal_rolling(rolling)
            ),
            "must be 'RollingUpdate' or 'OnDelete'",
        )],
    }
}

/// `ValidatePodTemplateSpecForStatefulSet`: matched by the selector, its labels valid (the
/// pod spec itself is not validated, as upstream leaves it), restarting `Always`.
fn validate_template(spec: &Value, selector: Option<&Value>) -> Vec<FieldError> {
    let empty = json!({});
    let template = spec.get("template").unwrap_or(&empty);
    let mut errors = Vec::new();
    match selector {
        None => errors.push(template::labels_mismatch(template, "spec.template")),
        Some(s) if !template::selector_matches(s, template) => {
            errors.push(template::labels_mismatch(template, "spec.template"));
        }
        Some(_) => {}
    }
    if let Some(labels) = template.at("/metadata/labels") {
        errors.extend(validate_labels(labels, "spec.template.labels"));
    }
    errors.extend(template::always_restarting(
        template,
        "spec.template",
        "StatefulSet",
    ));
    errors
}

/// `ValidateStatefulSetSpec`.
fn validate_spec(spec: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match spec
        .get("podManagementPolicy")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "" => errors.push(FieldError::required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => errors.push(FieldError::invalid(
            "spec.podManagementPolicy",
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    errors.extend(validate_strategy(spec));
    for field in ["whenDeleted", "whenScaled"] {
        if let Some(policy) = spec.get("persistentVolumeClaimRetentionPolicy") {
            let value = policy.get(field).and_then(Value::as_str).unwrap_or("");
            if !RETENTION.contains(&value) {
                errors.push(FieldError::not_supported(
                    &format!("spec.persistentVolumeClaimRetentionPolicy.{field}"),
                    value,
                    &RETENTION,
                ));
            }
        }
    }
    errors.extend(non_negative(spec, "/replicas", "spec.replicas"));
    errors.extend(non_negative(
        spec,
        "/minReadySeconds",
        "spec.minReadySeconds",
    ));
    errors.extend(non_negative(
        spec,
        "/revisionHistoryLimit",
        "spec.revisionHistoryLimit",
    ));
    errors.extend(non_negative(spec, "/ordinals/start", "spec.ordinals.start"));
    let (selector_errors, reads) = workload::validate_selector(spec, "statefulset");
    errors.extend(selector_errors);
    let selector = spec.get("selector").filter(|s| !s.is_null());
    if reads {
        errors.extend(validate_template(spec, selector));
    } else {
        errors.push(FieldError::invalid_printed(
            "spec.selector",
            crate::registry::printing::selector_json(selector),
            "",
        ));
    }
    errors
}

/// The spec without what an update may change, compared as `apiequality.Semantic` does.
fn fixed_part(obj: &Value) -> Value {
    let mut spec = obj.get("spec").cloned().unwrap_or(json!({}));
    if let Some(spec) = spec.as_object_mut() {
        for field in MUTABLE {
            spec.remove(field);
        }
    }
    workload::semantic(&spec)
}

/// `ValidateStatefulSetStatusUpdate`: `ValidateStatefulSetStatus` (counts not negative, none
/// above `status.replicas`, no more available than ready) and a collision count not
/// decremented.
fn validate_status_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = status::non_negative_counts(
        new,
        &[
            "replicas",
            "readyReplicas",
            "currentReplicas",
            "updatedReplicas",
            "availableReplicas",
            "observedGeneration",
            "collisionCount",
        ],
    );
    errors.extend(status::replica_bounds(
        new,
        &[
            "readyReplicas",
            "currentReplicas",
            "updatedReplicas",
            "availableReplicas",
        ],
        "cannot be greater than status.readyReplicas",
    ));
    errors.extend(status::collision_count_kept(new, old));
    errors
}

impl Strategy for StatefulSets {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        workload::default_spec(obj, statefulset_defaults);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.set_defaults(obj);
        drop_max_unavailable(obj, None);
        workload::clear_status(obj, json!({"replicas": 0, "availableReplicas": 0}));
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        self.set_defaults(new);
        drop_max_unavailable(new, Some(old));
    }

    /// `ValidateStatefulSet`, and the service name a DNS label (it becomes each pod's
    /// subdomain), checked on create.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let spec = obj.get("spec").cloned().unwrap_or(json!({}));
        let mut errors = validate_spec(&spec);
        let service = spec
            .get("serviceName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !service.is_empty() {
            for problem in is_dns1123_label(service) {
                errors.push(FieldError::invalid("spec.serviceName", service, &problem));
            }
        }
        errors
    }

    /// `ValidateStatefulSetUpdate`: the spec valid, and only `replicas`, `ordinals`,
    /// `template`, `updateStrategy`, `persistentVolumeClaimRetentionPolicy` and
    /// `minReadySeconds` changed.
    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_status_update(new, old)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let spec = new.get("spec").cloned().unwrap_or(json!({}));
        let mut errors = validate_spec(&spec);
        if fixed_part(new) != fixed_part(old) {
            errors.push(FieldError::forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', \
                 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and \
                 'minReadySeconds' are forbidden",
            ));
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        workload::wide_row(obj, now, [workload::ready_of_desired(obj)], None)
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn scale(&self) -> Option<ScalePaths> {
        Some(super::scale_paths())
    }
}

#[cfg(test)]
#[path = "statefulsets_tests.rs"]
mod tests;
