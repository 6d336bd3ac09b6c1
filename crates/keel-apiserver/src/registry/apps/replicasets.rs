//! apps/v1 ReplicaSets: NAME, DESIRED, CURRENT, READY, AGE and, wide, CONTAINERS, IMAGES,
//! SELECTOR, as `printReplicaSet` (pkg/printers/internalversion/printers.go) shows them.
//! Defaults as `SetDefaults_ReplicaSet` (pkg/apis/apps/v1/defaults.go) sets them (replicas
//! 1), with the pod template's; a new replica set's status is `{replicas: 0}` and its
//! generation 1, and spec changes bump it (pkg/registry/apps/replicaset/strategy.go);
//! `ValidateReplicaSet` and the apps/v1 update rule that the selector is immutable
//! (pkg/apis/apps/validation/validation.go). The `status` and `scale` subresources; a status
//! update is checked by `ValidateReplicaSetStatusUpdate`.

use serde_json::{Value, json};

use super::workload;
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::registry::defaults::default_value;
use crate::registry::printing::{CONTAINERS_COLUMN, IMAGES_COLUMN};
use crate::registry::rules::non_negative;
use crate::registry::selector::LabelSelector;
use crate::registry::{
    AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, ScalePaths, Strategy, status,
};
use crate::storage::FieldError;

/// The ReplicaSet strategy.
pub struct ReplicaSets;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["rs"],
    categories: &["all"],
    status: true,
    ..ResourceInfo::new("apps", "v1", "ReplicaSet", "replicasets", "replicaset")
};

static COLUMNS: [Column; 8] = [
    NAME_COLUMN,
    Column {
        kind: "integer",
        ..Column::string(
            "Desired",
            0,
            "Replicas is the number of desired replicas. This is a pointer to distinguish \
             between explicit zero and unspecified. Defaults to 1.",
        )
    },
    Column {
        kind: "integer",
        ..Column::string(
            "Current",
            0,
            "Replicas is the most recently observed number of replicas.",
        )
    },
    Column {
        kind: "integer",
        ..Column::string(
            "Ready",
            0,
            "The number of ready replicas for this replica set.",
        )
    },
    AGE_COLUMN,
    CONTAINERS_COLUMN,
    IMAGES_COLUMN,
    Column::string(
        "Selector",
        1,
        "Selector is a label query over pods that should match the replica count. If the \
         selector is empty, it is defaulted to the labels present on the pod template.",
    ),
];

/// `ValidateReplicaSetSpec`.
fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let mut errors: Vec<FieldError> = non_negative(&spec, "/replicas", "spec.replicas")
        .into_iter()
        .collect();
    errors.extend(non_negative(
        &spec,
        "/minReadySeconds",
        "spec.minReadySeconds",
    ));
    // Upstream's ReplicaSet check says `deployment` too.
    errors.extend(super::deployments::replica_template(&spec, "deployment"));
    errors
}

impl Strategy for ReplicaSets {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// `SetDefaults_ReplicaSet`.
    fn set_defaults(&self, obj: &mut Value) {
        workload::default_spec(obj, |spec| default_value(spec, "replicas", json!(1)));
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.set_defaults(obj);
        workload::clear_status(obj, json!({"replicas": 0}));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = validate_spec(new);
        errors.extend(workload::selector_unchanged(new, old));
        errors
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        status::replica_set_status(new)
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let counts = [
            workload::count(obj, "/spec/replicas").into(),
            workload::count(obj, "/status/replicas").into(),
            workload::count(obj, "/status/readyReplicas").into(),
        ];
        let selector = obj.at("/spec/selector").unwrap_or(&Value::Null);
        let selector = LabelSelector::format_object(selector).into();
        workload::wide_row(obj, now, counts, Some(selector))
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn scale(&self) -> Option<ScalePaths> {
        Some(super::scale_paths())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn replica_sets_default_one_replica_and_print_their_counts() {
        let mut rs = json!({"metadata": {"name": "web-1", "creationTimestamp": "2026-05-28T20:16:40Z"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "a", "image": "nginx:1.27"},
                                                          {"name": "b", "image": "busybox"}]}}},
            "status": {"replicas": 5}});
        ReplicaSets.prepare_for_create(&mut rs);
        // SetDefaults_ReplicaSet: replicas 1; PrepareForCreate: an empty status, which Go
        // writes with its one non-omitempty field.
        assert_eq!(rs["spec"]["replicas"], 1);
        assert_eq!(rs["status"], json!({"replicas": 0}));
        assert_eq!(rs["spec"]["template"]["spec"]["restartPolicy"], "Always");
        assert!(ReplicaSets.validate(&rs).is_empty());
        rs["status"] = json!({"replicas": 2, "readyReplicas": 1});
        assert_eq!(
            ReplicaSets.cells(&rs, Time(1_780_000_000)),
            vec![
                json!("web-1"),
                json!(1),
                json!(2),
                json!(1),
                json!("10m"),
                json!("a,b"),
                json!("nginx:1.27,busybox"),
                json!("app=web")
            ]
        );
    }

    #[test]
    fn replica_sets_are_validated_in_upstream_words() {
        let rs = json!({"spec": {"replicas": -1, "selector": {},
            "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}});
        let mut rs = rs;
        ReplicaSets.set_defaults(&mut rs);
        assert_eq!(
            messages(&ReplicaSets.validate(&rs)),
            vec![
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.selector: Invalid value: {}: empty selector is invalid for deployment",
            ]
        );
        let old = json!({"spec": {"selector": {"matchLabels": {"app": "web"}}}});
        let new = json!({"spec": {"selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                         "spec": {"containers": [{"name": "a", "image": "x"}]}}}});
        let mut new = new;
        ReplicaSets.set_defaults(&mut new);
        assert_eq!(
            messages(&ReplicaSets.validate_update(&new, &old)),
            vec![
                r#"spec.selector: Invalid value: {"matchLabels":{"app":"db"}}: field is immutable"#
            ]
        );
    }
}
