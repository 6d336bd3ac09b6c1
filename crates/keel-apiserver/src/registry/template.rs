//! The pod template of a workload (`PodTemplateSpec`: a PodTemplate's, a
//! ReplicationController's, a Deployment's, a Job's, ...): its defaults, which are a pod
//! spec's without the pod's own (kube's `SetDefaults_PodSpec` runs on templates,
//! `SetDefaults_Pod` does not), and its validation as `ValidatePodTemplateSpec` and
//! `ValidatePodTemplateSpecForReplicaSet` word it.

use serde_json::{Value, json};

use super::pods::defaults::pod_spec_defaults;
use super::pods::validation::validate_pod_spec;
use super::selector::LabelSelector;
use crate::json_pointer::At;
use crate::registry::meta::validate_labels;
use crate::storage::FieldError;

/// Sets the defaults of the template at `pointer` in `obj` (`/spec/template`), if there is
/// one.
pub fn set_defaults(obj: &mut Value, pointer: &str) {
    let Some(template) = obj.at_mut(pointer).and_then(Value::as_object_mut) else {
        return;
    };
    let spec = template.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        pod_spec_defaults(spec);
    }
}

/// `ValidatePodTemplateSpec` of the template at `path` (`spec.template`): its labels (at
/// `<path>.labels`, as upstream names them), annotations and pod spec.
pub fn validate(template: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(labels) = template.at("/metadata/labels") {
        errors.extend(validate_labels(labels, &format!("{path}.labels")));
    }
    let spec = template.get("spec").unwrap_or(&Value::Null);
    errors.extend(validate_pod_spec(spec, &format!("{path}.spec")));
    if spec
        .get("ephemeralContainers")
        .and_then(Value::as_array)
        .is_some_and(|l| !l.is_empty())
    {
        errors.push(FieldError::forbidden(
            &format!("{path}.spec.ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
    errors
}

/// Whether the template's labels satisfy `selector` (a `metav1.LabelSelector` object); a
/// selector that does not read matches nothing.
pub fn selector_matches(selector: &Value, template: &Value) -> bool {
    let Ok(selector) = LabelSelector::from_object(selector) else {
        return false;
    };
    let empty = serde_json::Map::new();
    let labels = template
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    selector.matches(labels)
}

/// `<path>.metadata.labels: Invalid value: <labels>: `selector` does not match template
/// `labels``: the error of a template at `path` whose labels the selector does not match
/// (Kubernetes 1.34 prints a map's value as JSON, `field.Error`'s json.Marshal).
pub fn labels_mismatch(template: &Value, path: &str) -> FieldError {
    let labels = template.at("/metadata/labels").and_then(Value::as_object);
    FieldError::invalid(
        &format!("{path}.metadata.labels"),
        labels.cloned().map_or(Value::Null, Value::Object),
        "`selector` does not match template `labels`",
    )
}

/// `ValidatePodTemplateSpecForReplicaSet` (what ReplicaSets, Deployments, StatefulSets and
/// DaemonSets ask of their template at `path`): present, matched by a non-empty
/// `selector`, valid, restarting `Always` and without an active deadline.
pub fn validate_for_replicas(
    template: Option<&Value>,
    selector: &Value,
    path: &str,
) -> Vec<FieldError> {
    let Some(template) = template.filter(|t| !t.is_null()) else {
        return vec![FieldError::required(path, "")];
    };
    let mut errors = Vec::new();
    let selects_something = LabelSelector::from_object(selector).is_ok_and(|s| !s.is_empty());
    if selects_something && !selector_matches(selector, template) {
        errors.push(labels_mismatch(template, path));
    }
    errors.extend(validate(template, path));
    errors.extend(always_restarting(template, path, "ReplicaSet"));
    errors
}

/// The restart policy and active deadline a replicated pod template at `path` may have
/// (`Always`, none), with `<kind>` in the deadline's words.
pub fn always_restarting(template: &Value, path: &str, kind: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let restart = template
        .at("/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("");
    if restart != "Always" {
        errors.push(FieldError::not_supported(
            &format!("{path}.spec.restartPolicy"),
            restart,
            &["Always"],
        ));
    }
    if template
        .at("/spec/activeDeadlineSeconds")
        .is_some_and(|d| !d.is_null())
    {
        errors.push(FieldError::forbidden(
            &format!("{path}.spec.activeDeadlineSeconds"),
            &format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn templates_get_pod_spec_defaults_but_not_the_pods_own() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "nginx", "resources": {"limits": {"cpu": "1"}}}]}}}});
        set_defaults(&mut d, "/spec/template");
        // From SetDefaults_PodSpec and SetDefaults_Container (pkg/apis/core/v1/defaults.go);
        // requests from limits and enableServiceLinks are SetDefaults_Pod's, which templates
        // do not get.
        assert_eq!(
            d["spec"]["template"]["spec"],
            json!({"containers": [{"name": "web", "image": "nginx",
                "imagePullPolicy": "Always", "resources": {"limits": {"cpu": "1"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"}],
              "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
              "schedulerName": "default-scheduler", "securityContext": {},
              "terminationGracePeriodSeconds": 30})
        );
    }

    #[test]
    fn volume_sources_get_their_defaults() {
        let mut d = json!({"t": {"spec": {"containers": [], "volumes": [
            {"name": "h", "hostPath": {"path": "/x"}},
            {"name": "p", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}},
            {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
            {"name": "i", "iscsi": {"targetPortal": "t", "iqn": "q", "lun": 0}}]}}});
        set_defaults(&mut d, "/t");
        // From SetDefaults_HostPathVolumeSource, _ProjectedVolumeSource,
        // _ServiceAccountTokenProjection, _ObjectFieldSelector, _PersistentVolumeClaimSpec and
        // _ISCSIVolumeSource (pkg/apis/core/v1/defaults.go).
        assert_eq!(
            d["t"]["spec"]["volumes"],
            json!([
                {"name": "h", "hostPath": {"path": "/x", "type": ""}},
                {"name": "p", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                    {"downwardAPI": {"items": [{"path": "n",
                        "fieldRef": {"fieldPath": "metadata.name", "apiVersion": "v1"}}]}}]}},
                {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {
                    "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"}}}},
                {"name": "i", "iscsi": {"targetPortal": "t", "iqn": "q", "lun": 0,
                    "iscsiInterface": "default"}},
            ])
        );
    }

    #[test]
    fn replica_templates_are_validated_in_upstream_words() {
        let selector = json!({"matchLabels": {"app": "web"}});
        let mut template = json!({"metadata": {"labels": {"app": "db"}},
            "spec": {"restartPolicy": "OnFailure", "activeDeadlineSeconds": 5,
                     "containers": [{"name": "c", "image": "x"}]}});
        let mut holder = json!({"t": template.clone()});
        set_defaults(&mut holder, "/t");
        template = holder["t"].take();
        assert_eq!(
            messages(&validate_for_replicas(
                Some(&template),
                &selector,
                "spec.template"
            )),
            vec![
                "spec.template.metadata.labels: Invalid value: {\"app\":\"db\"}: \
                 `selector` does not match template `labels`",
                "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported \
                 values: \"Always\"",
                "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in \
                 ReplicaSet is not Supported",
            ]
        );
        assert_eq!(
            messages(&validate_for_replicas(None, &selector, "spec.template")),
            vec!["spec.template: Required value"]
        );
    }
}
