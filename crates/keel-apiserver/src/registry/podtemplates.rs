//! core/v1 PodTemplates: NAME, CONTAINERS, IMAGES, POD LABELS (`printPodTemplate`, which has
//! no age). The template gets the pod spec's defaults (`SetDefaults_PodSpec`, not the pod's
//! own) and is validated as `ValidatePodTemplate` validates it
//! (`pkg/apis/core/validation/validation.go`); its generation counts template changes, as
//! `pkg/registry/core/podtemplate/strategy.go` has it.

use serde_json::Value;

use super::batch::job_spec::ensure_object;
use super::printing::container_cells;
use super::services::format_labels;
use super::{Column, NAME_COLUMN, ResourceInfo, Strategy, meta_str, template};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::storage::FieldError;

/// The PodTemplate strategy.
pub struct PodTemplates;

static INFO: ResourceInfo = ResourceInfo {
    // The store's `ReturnDeletedObject: true` (its `storage/storage.go`).
    returns_deleted_object: true,
    ..ResourceInfo::new("", "v1", "PodTemplate", "podtemplates", "podtemplate")
};

static COLUMNS: [Column; 4] = [
    NAME_COLUMN,
    Column::string("Containers", 0, "Names of each container in the template."),
    Column::string(
        "Images",
        0,
        "Images referenced by each container in the template.",
    ),
    Column::string("Pod Labels", 0, "The labels for the pod template."),
];

impl Strategy for PodTemplates {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        ensure_object(obj, "/template");
        template::set_defaults(obj, "/template");
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let empty = Value::Object(Default::default());
        template::validate(obj.get("template").unwrap_or(&empty), "template")
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, _now: Time) -> Vec<Value> {
        let (names, images) = container_cells(obj, "/template/spec");
        let labels = obj
            .at("/template/metadata/labels")
            .and_then(Value::as_object);
        vec![
            Value::from(meta_str(obj, "name")),
            Value::from(names),
            Value::from(images),
            Value::from(format_labels(labels)),
        ]
    }

    fn tracks_generation(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn templates_get_pod_spec_defaults_are_validated_and_printed() {
        let mut pt = json!({"metadata": {"name": "base"}, "template": {
            "metadata": {"labels": {"app": "web", "tier": "front"}},
            "spec": {"containers": [{"name": "a", "image": "nginx"},
                                    {"name": "b", "image": "busybox:1.36"}]}}});
        PodTemplates.prepare_for_create(&mut pt);
        // SetDefaults_PodSpec and SetDefaults_Container (pkg/apis/core/v1/defaults.go).
        assert_eq!(
            pt["template"]["spec"],
            json!({"containers": [
                    {"name": "a", "image": "nginx", "imagePullPolicy": "Always",
                     "resources": {}, "terminationMessagePath": "/dev/termination-log",
                     "terminationMessagePolicy": "File"},
                    {"name": "b", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent",
                     "resources": {}, "terminationMessagePath": "/dev/termination-log",
                     "terminationMessagePolicy": "File"}],
                "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
                "schedulerName": "default-scheduler", "securityContext": {},
                "terminationGracePeriodSeconds": 30})
        );
        assert!(PodTemplates.validate(&pt).is_empty());
        assert_eq!(
            PodTemplates.cells(&pt, Time(0)),
            vec![
                json!("base"),
                json!("a,b"),
                json!("nginx,busybox:1.36"),
                json!("app=web,tier=front"),
            ]
        );
        let mut bad = json!({"metadata": {"name": "bad"}, "template": {"spec": {}}});
        PodTemplates.prepare_for_create(&mut bad);
        assert_eq!(
            messages(&PodTemplates.validate(&bad)),
            vec!["template.spec.containers: Required value"]
        );
        assert_eq!(PodTemplates.cells(&bad, Time(0))[3], json!("<none>"));
        assert!(PodTemplates.returns_deleted_object());
    }
}
