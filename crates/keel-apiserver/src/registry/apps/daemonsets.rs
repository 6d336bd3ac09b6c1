//! apps/v1 DaemonSets: NAME, DESIRED, CURRENT, READY, UP-TO-DATE, AVAILABLE, NODE SELECTOR,
//! AGE and, wide, CONTAINERS, IMAGES, SELECTOR, as `printDaemonSet`
//! (pkg/printers/internalversion/printers.go) shows them. Defaults as `SetDefaults_DaemonSet`
//! (pkg/apis/apps/v1/defaults.go) sets them, with the pod template's. The internal
//! `spec.templateGeneration` is the `deprecated.daemonset.template.generation` annotation in
//! apps/v1 (pkg/apis/apps/v1/conversion.go): 1 on create, one more on each template change
//! (pkg/registry/apps/daemonset/strategy.go). A new set's status has its four counts at 0.
//! `ValidateDaemonSet` and `ValidateDaemonSetUpdate` (pkg/apis/apps/validation/validation.go),
//! with the apps/v1 rule that the selector is immutable. The `status` subresource, checked by
//! `ValidateDaemonSetStatusUpdate`.

use serde_json::{Map, Value, json};

use super::workload::{self, str_field};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::registry::defaults::{default_str, default_value, object_entry};
use crate::registry::printing::{CONTAINERS_COLUMN, IMAGES_COLUMN};
use crate::registry::rules::non_negative;
use crate::registry::selector::LabelSelector;
use crate::registry::services::format_labels;
use crate::registry::{
    AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, meta, status, template,
};
use crate::storage::FieldError;

/// The DaemonSet strategy.
pub struct DaemonSets;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["ds"],
    categories: &["all"],
    status: true,
    ..ResourceInfo::new("apps", "v1", "DaemonSet", "daemonsets", "daemonset")
};

/// An integer column.
const fn integer(name: &'static str, description: &'static str) -> Column {
    Column {
        kind: "integer",
        ..Column::string(name, 0, description)
    }
}

static COLUMNS: [Column; 11] = [
    NAME_COLUMN,
    integer(
        "Desired",
        "The total number of nodes that should be running the daemon pod (including nodes \
         correctly running the daemon pod).",
    ),
    integer(
        "Current",
        "The number of nodes that are running at least 1 daemon pod and are supposed to run \
         the daemon pod.",
    ),
    integer(
        "Ready",
        "The number of nodes that should be running the daemon pod and have one or more of \
         the daemon pod running and ready.",
    ),
    integer(
        "Up-to-date",
        "The total number of nodes that are running updated daemon pod",
    ),
    integer(
        "Available",
        "The number of nodes that should be running the daemon pod and have one or more of \
         the daemon pod running and available (ready for at least \
         spec.minReadySeconds)",
    ),
    Column::string(
        "Node Selector",
        0,
        "NodeSelector is a selector which must be true for the pod to fit on a node. \
         Selector which must match a node's labels for the pod to be scheduled on that node.",
    ),
    AGE_COLUMN,
    CONTAINERS_COLUMN,
    IMAGES_COLUMN,
    Column::string(
        "Selector",
        1,
        "A label query over pods that are managed by the daemon set. Must match in order to \
         be controlled.",
    ),
];

/// The annotation apps/v1 keeps the internal `spec.templateGeneration` in.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// The update strategy types.
const STRATEGIES: [&str; 2] = ["RollingUpdate", "OnDelete"];

/// `SetDefaults_DaemonSet`.
fn daemonset_defaults(spec: &mut Map<String, Value>) {
    let strategy = object_entry(spec, "updateStrategy");
    default_str(strategy, "type", "RollingUpdate");
    if str_field(strategy, "type") == "RollingUpdate" {
        let rolling = object_entry(strategy, "rollingUpdate");
        default_value(rolling, "maxUnavailable", json!(1));
        default_value(rolling, "maxSurge", json!(0));
    }
    default_value(spec, "revisionHistoryLimit", json!(10));
}

/// The template generation the annotation holds (0 when there is none), or the error
/// `strconv.ParseInt` gives converting it.
fn template_generation(obj: &Value) -> Result<i64, String> {
    let annotations = obj.at("/metadata/annotations").and_then(Value::as_object);
    match annotations.and_then(|a| a.get(TEMPLATE_GENERATION)) {
        None => Ok(0),
        Some(v) => {
            let text = v.as_str().unwrap_or("");
            text.parse().map_err(|_| {
                format!(
                    "strconv.ParseInt: parsing {}: invalid syntax",
                    crate::apimachinery::quote::go_quote(text)
                )
            })
        }
    }
}

/// Writes the template generation into the annotation.
fn set_template_generation(obj: &mut Value, generation: i64) {
    let annotations = object_entry(meta::metadata(obj), "annotations");
    annotations.insert(TEMPLATE_GENERATION.into(), generation.to_string().into());
}

/// The internal `apps.DaemonSetUpdateStrategy` as Go's `json.Marshal` writes it (Go field
/// names: the internal types have no JSON tags).
fn internal_strategy(strategy: &Value) -> String {
    let rolling = match strategy.get("rollingUpdate").filter(|r| !r.is_null()) {
        None => "null".to_string(),
        Some(r) => format!(
            "{{\"MaxUnavailable\":{},\"MaxSurge\":{}}}",
            workload::int_or_string_json(r.get("maxUnavailable")),
            workload::int_or_string_json(r.get("maxSurge"))
        ),
    };
    let kind = Value::from(strategy.get("type").and_then(Value::as_str).unwrap_or(""));
    format!("{{\"Type\":{kind},\"RollingUpdate\":{rolling}}}")
}

/// `ValidateDaemonSetUpdateStrategy` and `ValidateRollingUpdateDaemonSet`.
fn validate_strategy(spec: &Value) -> Vec<FieldError> {
    let path = "spec.updateStrategy";
    let strategy = spec.get("updateStrategy").cloned().unwrap_or(json!({}));
    match strategy.get("type").and_then(Value::as_str).unwrap_or("") {
        "OnDelete" => Vec::new(),
        "RollingUpdate" => {
            let Some(rolling) = strategy.get("rollingUpdate").filter(|r| !r.is_null()) else {
                return vec![FieldError::required(&format!("{path}.rollingUpdate"), "")];
            };
            let at = |f: &str| format!("{path}.rollingUpdate.{f}");
            let (unavailable, surge) = (rolling.get("maxUnavailable"), rolling.get("maxSurge"));
            let mut errors = workload::positive_int_or_percent(unavailable, &at("maxUnavailable"));
            errors.extend(workload::positive_int_or_percent(surge, &at("maxSurge")));
            errors.extend(workload::not_more_than_100_percent(
                unavailable,
                &at("maxUnavailable"),
            ));
            errors.extend(workload::not_more_than_100_percent(surge, &at("maxSurge")));
            let has_unavailable = workload::int_or_percent_value(unavailable) != 0;
            let has_surge = workload::int_or_percent_value(surge) != 0;
            if has_unavailable && has_surge {
                errors.push(FieldError::invalid(
                    &at("maxSurge"),
                    workload::int_or_string_json(surge),
                    "may not be set when maxUnavailable is non-zero",
                ));
            } else if !has_unavailable && !has_surge {
                errors.push(FieldError::required(
                    &at("maxUnavailable"),
                    "cannot be 0 when maxSurge is 0",
                ));
            }
            errors
        }
        _ => vec![FieldError {
            printed: Some(internal_strategy(&strategy)),
            ..FieldError::not_supported(path, "", &STRATEGIES)
        }],
    }
}

/// `ValidateDaemonSetSpec` (the template generation read from the annotation).
fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let selector = spec.get("selector").filter(|s| !s.is_null());
    let empty = json!({});
    let template = spec.get("template").unwrap_or(&empty);
    let mut errors = selector
        .map(|s| crate::registry::selector::validate_label_selector(s, "spec.selector"))
        .unwrap_or_default();
    let matches = match selector {
        None => false,
        Some(s) => {
            LabelSelector::from_object(s).is_err() || template::selector_matches(s, template)
        }
    };
    if !matches {
        errors.push(template::labels_mismatch(template, "spec.template"));
    }
    if let Some(s) = selector
        && LabelSelector::from_object(s).is_ok_and(|s| s.is_empty())
    {
        errors.push(FieldError::invalid_printed(
            "spec.selector",
            crate::registry::printing::selector_json(Some(s)),
            "empty selector is invalid for daemonset",
        ));
    }
    errors.extend(template::validate(template, "spec.template"));
    errors.extend(template::always_restarting(
        template,
        "spec.template",
        "DaemonSet",
    ));
    errors.extend(non_negative(
        &spec,
        "/minReadySeconds",
        "spec.minReadySeconds",
    ));
    match template_generation(obj) {
        Ok(g) if g < 0 => errors.push(FieldError::invalid(
            "spec.templateGeneration",
            g,
            crate::apimachinery::validation::NON_NEGATIVE,
        )),
        Ok(_) => {}
        Err(e) => errors.push(FieldError::invalid(
            &format!("metadata.annotations[{TEMPLATE_GENERATION}]"),
            template_text(obj),
            &e,
        )),
    }
    errors.extend(validate_strategy(&spec));
    errors.extend(non_negative(
        &spec,
        "/revisionHistoryLimit",
        "spec.revisionHistoryLimit",
    ));
    errors
}

/// The annotation's text.
fn template_text(obj: &Value) -> String {
    let pointer = format!("/metadata/annotations/{TEMPLATE_GENERATION}");
    obj.at(&pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// `ValidateDaemonSetSpecUpdate`: the template generation never goes down, and goes up
/// exactly when the template changes.
fn validate_generation_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let (Ok(now), Ok(was)) = (template_generation(new), template_generation(old)) else {
        return Vec::new();
    };
    let path = "spec.templateGeneration";
    let changed = template_of(new) != template_of(old);
    let mut errors = Vec::new();
    if now < was {
        errors.push(FieldError::invalid(path, now, "must not be decremented"));
    }
    if now == was && changed {
        errors.push(FieldError::invalid(
            path,
            now,
            "must be incremented upon template update",
        ));
    } else if now > was && !changed {
        errors.push(FieldError::invalid(
            path,
            now,
            "must not be incremented without template update",
        ));
    }
    errors
}

/// The pod template as `apiequality.Semantic` compares it.
fn template_of(obj: &Value) -> Value {
    workload::semantic(obj.at("/spec/template").unwrap_or(&Value::Null))
}

/// `ValidateDaemonSetStatusUpdate`: `validateDaemonSetStatus` (counts not negative) and a
/// collision count not decremented.
fn validate_status_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = status::non_negative_counts(
        new,
        &[
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
            "observedGeneration",
            "updatedNumberScheduled",
            "numberAvailable",
            "numberUnavailable",
            "collisionCount",
        ],
    );
    errors.extend(status::collision_count_kept(new, old));
    errors
}

impl Strategy for DaemonSets {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        workload::default_spec(obj, daemonset_defaults);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.set_defaults(obj);
        workload::clear_status(
            obj,
            json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
                   "desiredNumberScheduled": 0, "numberReady": 0}),
        );
        if let Ok(g) = template_generation(obj) {
            set_template_generation(obj, g.max(1));
        }
    }

    /// A changed template is the next template generation.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        self.set_defaults(new);
        if template_of(new) != template_of(old) {
            let was = template_generation(old).unwrap_or(0);
            set_template_generation(new, was + 1);
        } else if let Ok(now) = template_generation(new) {
            set_template_generation(new, now);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj)
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_status_update(new, old)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = validate_generation_update(new, old);
        errors.extend(validate_spec(new));
        errors.extend(workload::selector_unchanged(new, old));
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let node_selector = obj
            .at("/spec/template/spec/nodeSelector")
            .and_then(Value::as_object);
        let middle = [
            workload::count(obj, "/status/desiredNumberScheduled").into(),
            workload::count(obj, "/status/currentNumberScheduled").into(),
            workload::count(obj, "/status/numberReady").into(),
            workload::count(obj, "/status/updatedNumberScheduled").into(),
            workload::count(obj, "/status/numberAvailable").into(),
            format_labels(node_selector).into(),
        ];
        let selector = obj.at("/spec/selector").unwrap_or(&Value::Null);
        let selector = LabelSelector::format_object(selector).into();
        workload::wide_row(obj, now, middle, Some(selector))
    }

    fn tracks_generation(&self) -> bool {
        true
    }
}

#[cfg(test)]
#[path = "daemonsets_tests.rs"]
mod tests;
