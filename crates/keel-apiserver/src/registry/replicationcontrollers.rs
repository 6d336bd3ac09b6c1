//! core/v1 ReplicationControllers: NAME, DESIRED, CURRENT, READY, AGE and, wide, CONTAINERS,
//! IMAGES, SELECTOR (`printReplicationController`). Defaults as
//! `SetDefaults_ReplicationController` (`pkg/apis/core/v1/defaults.go`) sets them: one
//! replica, and the selector and labels from the template's labels; the template's pod spec
//! defaults. A new RC gets an empty status (`replicas: 0`) and generation 1
//! (`pkg/registry/core/replicationcontroller/strategy.go`); `ValidateReplicationController`
//! (`pkg/apis/core/validation/validation.go`): a non-empty selector that matches the
//! template, non-negative counts, a template restarting `Always`. It has `status` and
//! `scale` subresources.

use serde_json::{Map, Value, json};

use super::batch::job_spec::non_negative;
use super::printing::{CONTAINERS_COLUMN, IMAGES_COLUMN, container_cells, json_text};
use super::services::format_labels;
use super::{
    AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, ScalePaths, Strategy, meta, meta_str, status,
};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::registry::defaults::default_value;
use crate::storage::FieldError;

/// The ReplicationController strategy.
pub struct ReplicationControllers;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["rc"],
    categories: &["all"],
    status: true,
    ..ResourceInfo::new(
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        "replicationcontroller",
    )
};

/// A column of integers.
const fn integer(name: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind: "integer",
        format: "",
        description,
        priority: 0,
    }
}

static COLUMNS: [Column; 8] = [
    NAME_COLUMN,
    integer(
        "Desired",
        "Replicas is the number of desired replicas. This is a pointer to distinguish between \
         explicit zero and unspecified. Defaults to 1. More info: \
         https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
    ),
    integer(
        "Current",
        "Replicas is the most recently observed number of replicas. More info: \
         https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
    ),
    integer(
        "Ready",
        "The number of ready replicas for this replication controller.",
    ),
    AGE_COLUMN,
    CONTAINERS_COLUMN,
    IMAGES_COLUMN,
    Column::string(
        "Selector",
        1,
        "Selector is a label query over pods that should match the Replicas count. If Selector \
         is empty, it is defaulted to the labels present on the Pod template. Label keys and \
         values that must match in order to be controlled by this replication controller, if \
         empty defaulted to labels on Pod template. More info: \
         https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
];

/// `SetDefaults_ReplicationController` and the template's pod spec defaults.
fn set_defaults(obj: &mut Value) {
    let labels = obj
        .at("/spec/template/metadata/labels")
        .filter(|l| l.is_object())
        .cloned();
    if let Some(labels) = labels {
        let empty = |v: Option<&Value>| v.and_then(Value::as_object).is_none_or(Map::is_empty);
        if empty(obj.at("/spec/selector"))
            && let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.insert("selector".into(), labels.clone());
        }
        if empty(obj.at("/metadata/labels")) {
            meta::metadata(obj).insert("labels".into(), labels);
        }
    }
    if let Some(o) = obj.as_object_mut() {
        let spec = o.entry("spec").or_insert_with(|| json!({}));
        if let Some(spec) = spec.as_object_mut() {
            default_value(spec, "replicas", json!(1));
        }
    }
    super::template::set_defaults(obj, "/spec/template");
}

/// `ValidatePodTemplateSpecForRC`: present, matched by a non-empty selector, valid,
/// restarting `Always`, without an active deadline, and (with more than one replica) its GCE
/// persistent disks read-only.
fn validate_template(spec: &Value) -> Vec<FieldError> {
    let path = "spec.template";
    let Some(template) = spec.get("template").filter(|t| !t.is_null()) else {
        return vec![FieldError::required(path, "")];
    };
    let mut errors = Vec::new();
    let selector = spec.get("selector").and_then(Value::as_object);
    let labels = template.at("/metadata/labels").and_then(Value::as_object);
    if let Some(selector) = selector.filter(|s| !s.is_empty()) {
        let matches = selector
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
        if !matches {
            errors.push(FieldError::invalid_printed(
                &format!("{path}.metadata.labels"),
                json_text(template.at("/metadata/labels")),
                "`selector` does not match template `labels`",
            ));
        }
    }
    errors.extend(super::template::validate(template, path));
    if spec.get("replicas").and_then(Value::as_i64).unwrap_or(0) > 1 {
        let volumes = template.at("/spec/volumes").and_then(Value::as_array);
        for (i, v) in volumes.into_iter().flatten().enumerate() {
            if let Some(pd) = v.get("gcePersistentDisk")
                && pd.get("readOnly").and_then(Value::as_bool) != Some(true)
            {
                errors.push(FieldError::invalid(
                    &format!("{path}.spec.volumes[{i}].gcePersistentDisk.readOnly"),
                    false,
                    "must be true for replicated pods > 1; GCE PD can only be mounted on \
                     multiple machines if it is read-only",
                ));
            }
        }
    }
    errors.extend(super::template::always_restarting(
        template,
        path,
        "ReplicationController",
    ));
    errors
}

/// `ValidateReplicationControllerSpec`.
fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let mut errors: Vec<FieldError> = non_negative(&spec, "minReadySeconds", "spec")
        .into_iter()
        .collect();
    if spec
        .get("selector")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
    {
        errors.push(FieldError::required("spec.selector", ""));
    }
    errors.extend(non_negative(&spec, "replicas", "spec"));
    errors.extend(validate_template(&spec));
    errors
}

impl Strategy for ReplicationControllers {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// Replicas from `.spec.replicas` and `.status.replicas`; the selector (a plain label
    /// map) shown as `labels.SelectorFromSet` prints it.
    fn scale(&self) -> Option<ScalePaths> {
        Some(ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".spec.selector".into()),
        })
    }

    fn set_defaults(&self, obj: &mut Value) {
        set_defaults(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        set_defaults(obj);
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({"replicas": 0}));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj)
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errors = validate_spec(new);
        errors.extend(status::replica_set_status(new));
        errors
    }

    /// `ValidateReplicationControllerStatusUpdate`.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        status::replica_set_status(new)
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let count = |p: &str| obj.at(p).and_then(Value::as_i64).unwrap_or(0);
        let (names, images) = container_cells(obj, "/spec/template/spec");
        let selector = obj.at("/spec/selector").and_then(Value::as_object);
        vec![
            Value::from(meta_str(obj, "name")),
            Value::from(count("/spec/replicas")),
            Value::from(count("/status/replicas")),
            Value::from(count("/status/readyReplicas")),
            super::age(obj, now),
            Value::from(names),
            Value::from(images),
            Value::from(format_labels(selector)),
        ]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.replicas"]
    }

    fn field(&self, obj: &Value, field: &str) -> String {
        match field {
            "status.replicas" => {
                let n = obj.at("/status/replicas").and_then(Value::as_i64);
                n.unwrap_or(0).to_string()
            }
            _ => String::new(),
        }
    }

    /// `DefaultGarbageCollectionPolicy` (pkg/registry/core/replicationcontroller/strategy.go): a delete that names no policy
    /// orphans what the ReplicationController owns, as before the garbage collector existed.
    fn default_propagation(&self) -> crate::registry::store::Propagation {
        crate::registry::store::Propagation::Orphan
    }

    fn tracks_generation(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    /// An RC as `kubectl apply` sends one, with only its template's labels.
    fn applied() -> Value {
        json!({"apiVersion": "v1", "kind": "ReplicationController",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}})
    }

    #[test]
    fn a_new_rc_gets_upstreams_defaults() {
        let mut rc = applied();
        ReplicationControllers.prepare_for_create(&mut rc);
        // SetDefaults_ReplicationController: replicas 1, selector and labels from the
        // template's labels; SetDefaults_PodSpec and SetDefaults_Container for the template
        // (image tagged, so IfNotPresent); an empty status (replicas has no omitempty).
        assert_eq!(
            rc,
            json!({"apiVersion": "v1", "kind": "ReplicationController",
                "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
                "spec": {"replicas": 1, "selector": {"app": "web"},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                        "containers": [{"name": "nginx", "image": "nginx:1.27",
                            "imagePullPolicy": "IfNotPresent", "resources": {},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File"}],
                        "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
                        "schedulerName": "default-scheduler", "securityContext": {},
                        "terminationGracePeriodSeconds": 30}}},
                "status": {"replicas": 0}})
        );
        assert!(ReplicationControllers.validate(&rc).is_empty());
        // Set fields are kept.
        let mut own = applied();
        own["metadata"]["labels"] = json!({"tier": "front"});
        own["spec"]["selector"] = json!({"app": "web"});
        own["spec"]["replicas"] = json!(0);
        ReplicationControllers.set_defaults(&mut own);
        assert_eq!(own["metadata"]["labels"], json!({"tier": "front"}));
        assert_eq!(own["spec"]["replicas"], 0);
    }

    #[test]
    fn rcs_are_validated_in_upstream_words() {
        let mut rc = applied();
        rc["spec"]["selector"] = json!({"app": "db"});
        rc["spec"]["replicas"] = json!(-1);
        rc["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        rc["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(10);
        ReplicationControllers.prepare_for_create(&mut rc);
        assert_eq!(
            messages(&ReplicationControllers.validate(&rc)),
            vec![
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                "spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` \
                 does not match template `labels`",
                "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported \
                 values: \"Always\"",
                "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in \
                 ReplicationController is not Supported",
            ]
        );
        let bare = json!({"metadata": {"name": "x"}, "spec": {}});
        assert_eq!(
            messages(&ReplicationControllers.validate(&bare)),
            vec![
                "spec.selector: Required value",
                "spec.template: Required value"
            ]
        );
        let mut status = applied();
        ReplicationControllers.prepare_for_create(&mut status);
        status["status"] = json!({"replicas": 1, "readyReplicas": 2, "availableReplicas": 3});
        assert_eq!(
            messages(&ReplicationControllers.validate_update(&status, &status)),
            vec![
                "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
                "status.availableReplicas: Invalid value: 3: cannot be greater than \
                 status.replicas",
                "status.availableReplicas: Invalid value: 3: cannot be greater than \
                 readyReplicas",
            ]
        );
    }

    #[test]
    fn rcs_print_as_print_replication_controller_does() {
        let mut rc = applied();
        ReplicationControllers.prepare_for_create(&mut rc);
        rc["metadata"]["creationTimestamp"] = json!("2026-05-28T20:29:00Z");
        rc["status"]["readyReplicas"] = json!(0);
        assert_eq!(
            ReplicationControllers.cells(&rc, Time::parse("2026-05-28T20:30:00Z").unwrap()),
            vec![
                json!("web"),
                json!(1),
                json!(0),
                json!(0),
                json!("60s"),
                json!("nginx"),
                json!("nginx:1.27"),
                json!("app=web"),
            ]
        );
        assert_eq!(ReplicationControllers.field(&rc, "status.replicas"), "0");
        let scale = ReplicationControllers.scale().unwrap();
        assert_eq!(scale.spec_replicas, ".spec.replicas");
    }
}
