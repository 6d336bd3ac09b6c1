//! storage.k8s.io/v1 VolumeAttachments, cluster-scoped, with a `status` subresource:
//! `pkg/registry/storage/volumeattachment/strategy.go` (a new attachment's status is reset;
//! the spec is read-only after create), validation from
//! `pkg/apis/storage/validation/validation.go` (`ValidateVolumeAttachment` and
//! `ValidateVolumeAttachmentV1`), printed as `printVolumeAttachment` (NAME ATTACHER PV NODE
//! ATTACHED AGE).

use serde_json::{Value, json};

use super::csi_nodes::validate_csi_driver_name;
use super::fields::{present, str_at};
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::is_dns1123_subdomain;
use crate::registry::defaults::as_map;
use crate::registry::{
    AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, age, meta_str, status,
};
use crate::storage::FieldError;

/// The VolumeAttachment strategy.
pub struct VolumeAttachments;

static INFO: ResourceInfo = ResourceInfo {
    returns_deleted_object: true,
    namespaced: false,
    status: true,
    ..ResourceInfo::new(
        "storage.k8s.io",
        "v1",
        "VolumeAttachment",
        "volumeattachments",
        "volumeattachment",
    )
};

static COLUMNS: [Column; 6] = [
    NAME_COLUMN,
    Column {
        name: "Attacher",
        kind: "string",
        format: "name",
        description: "attacher indicates the name of the volume driver that MUST handle this \
            request. This is the name returned by GetPluginName().",
        priority: 0,
    },
    Column::string(
        "PV",
        0,
        "persistentVolumeName represents the name of the persistent volume to attach.",
    ),
    Column::string(
        "Node",
        0,
        "nodeName represents the node that the volume should be attached to.",
    ),
    Column {
        name: "Attached",
        kind: "boolean",
        format: "",
        description: "attached indicates the volume is successfully attached.",
        priority: 0,
    },
    AGE_COLUMN,
];

/// `maxAttachedVolumeMetadataSize` (256 kB).
const MAX_METADATA_BYTES: usize = 256 * 1024;
/// `maxVolumeErrorMessageSize`.
const MAX_ERROR_MESSAGE: usize = 1024;

fn validate_volume_error(obj: &Value, field: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(e) = present(obj, &format!("/status/{field}")) else {
        return errors;
    };
    let message = e.get("message").and_then(Value::as_str).unwrap_or("");
    if message.len() > MAX_ERROR_MESSAGE {
        // Upstream reports the metadata limit here, as it does.
        errors.push(FieldError::too_long(
            &format!("status.{field}.message"),
            MAX_METADATA_BYTES,
        ));
    }
    if let Some(code) = e.get("errorCode").and_then(Value::as_i64)
        && code < 0
    {
        errors.push(FieldError::invalid(
            &format!("status.{field}.errorCode"),
            code,
            "must be between 0 and 2147483647, inclusive",
        ));
    }
    errors
}

fn validate_attachment(obj: &Value) -> Vec<FieldError> {
    let attacher = str_at(obj, "/spec/attacher");
    let mut errors = Vec::new();
    if attacher.is_empty() {
        errors.push(FieldError::required("spec.attacher", ""));
    }
    let pv = present(obj, "/spec/source/persistentVolumeName");
    let inline = present(obj, "/spec/source/inlineVolumeSpec");
    const ONE_OF: &str = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
    match (pv, inline) {
        (None, None) => errors.push(FieldError::required("spec.source", ONE_OF)),
        (Some(_), Some(_)) => errors.push(FieldError::forbidden("spec.source", ONE_OF)),
        (Some(pv), None) if pv.as_str().unwrap_or("").is_empty() => {
            errors.push(FieldError::required(
                "spec.source.persistentVolumeName",
                "must specify non empty persistentVolumeName",
            ))
        }
        _ => {}
    }
    let node = str_at(obj, "/spec/nodeName");
    for problem in is_dns1123_subdomain(node) {
        errors.push(FieldError::invalid("spec.nodeName", node, &problem));
    }
    let metadata_size: usize = present(obj, "/status/attachmentMetadata")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or(0);
    if metadata_size > MAX_METADATA_BYTES {
        errors.push(FieldError::too_long(
            "status.attachmentMetadata",
            MAX_METADATA_BYTES,
        ));
    }
    errors.extend(validate_volume_error(obj, "attachError"));
    errors.extend(validate_volume_error(obj, "detachError"));
    // ValidateVolumeAttachmentV1.
    errors.extend(validate_csi_driver_name(attacher, "spec.attacher"));
    if let Some(pv) = pv.and_then(Value::as_str) {
        for problem in is_dns1123_subdomain(pv) {
            errors.push(FieldError::invalid(
                "spec.source.persistentVolumeName",
                pv,
                &problem,
            ));
        }
    }
    errors
}

impl Strategy for VolumeAttachments {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        as_map(obj).insert("status".into(), json!({"attached": false}));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_attachment(obj)
    }

    /// `volumeAttachmentStatusStrategy.PrepareForUpdate`: `metav1.ResetObjectMetaForStatus`
    /// (a status update is validated as any update).
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        status::reset_meta(new, old);
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = validate_attachment(new);
        let spec = present(new, "/spec");
        if spec != present(old, "/spec") {
            errors.push(FieldError::invalid(
                "spec",
                spec.cloned().unwrap_or(Value::Null),
                "field is immutable",
            ));
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        vec![
            Value::from(meta_str(obj, "name")),
            Value::from(str_at(obj, "/spec/attacher")),
            Value::from(str_at(obj, "/spec/source/persistentVolumeName")),
            Value::from(str_at(obj, "/spec/nodeName")),
            Value::from(
                present(obj, "/status/attached")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            ),
            age(obj, now),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn status_is_reset_spec_is_read_only_and_rows_print() {
        let mut va = json!({"metadata": {"name": "csi-1", "creationTimestamp": "2026-05-28T20:16:40Z"},
            "spec": {"attacher": "csi.example.com", "nodeName": "node-1",
                "source": {"persistentVolumeName": "pv-1"}},
            "status": {"attached": true}});
        VolumeAttachments.prepare_for_create(&mut va);
        assert_eq!(va["status"], json!({"attached": false}));
        assert!(VolumeAttachments.validate(&va).is_empty());
        let mut moved = va.clone();
        moved["spec"]["nodeName"] = json!("node-2");
        assert_eq!(
            messages(&VolumeAttachments.validate_update(&moved, &va)),
            vec![
                "spec: Invalid value: {\"attacher\":\"csi.example.com\",\"nodeName\":\"node-2\",\"source\":{\"persistentVolumeName\":\"pv-1\"}}: field is immutable"
            ]
        );
        assert_eq!(
            VolumeAttachments.cells(&va, Time(1_780_000_000)),
            vec![
                json!("csi-1"),
                json!("csi.example.com"),
                json!("pv-1"),
                json!("node-1"),
                json!(false),
                json!("10m")
            ]
        );
        let bad = json!({"spec": {"attacher": "", "nodeName": "", "source": {}}});
        assert_eq!(
            messages(&VolumeAttachments.validate(&bad))[..2],
            [
                "spec.attacher: Required value",
                "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
            ]
        );
    }
}
