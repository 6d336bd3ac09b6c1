//! apps/v1 ControllerRevisions: NAME, CONTROLLER, REVISION, AGE, as `printControllerRevision`
//! (pkg/printers/internalversion/printers.go) shows them (the controller as
//! `<kind>.<group>/<name>` from the controlling owner reference). A revision's `data` is
//! required and may not change, its `revision` is non-negative (`ValidateControllerRevision`
//! and `ValidateControllerRevisionUpdate`, pkg/apis/apps/validation/validation.go; the
//! number itself may change: the controllers renumber a revision they roll back to).

use serde_json::Value;

use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy};
use crate::storage::FieldError;

/// The ControllerRevision strategy.
pub struct ControllerRevisions;

static INFO: ResourceInfo = ResourceInfo::new(
    "apps",
    "v1",
    "ControllerRevision",
    "controllerrevisions",
    "controllerrevision",
);

static COLUMNS: [Column; 4] = [
    NAME_COLUMN,
    Column::string("Controller", 0, "Controller of the object"),
    Column::string(
        "Revision",
        0,
        "Revision indicates the revision of the state represented by Data.",
    ),
    AGE_COLUMN,
];

/// `ValidateControllerRevision`'s own part.
fn validate_revision(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if obj.get("data").is_none_or(Value::is_null) {
        errors.push(FieldError::required("data", "data is mandatory"));
    }
    errors.extend(crate::registry::rules::non_negative(
        obj,
        "/revision",
        "revision",
    ));
    errors
}

/// The controlling owner as `formatResourceName` prints it: `<kind>.<group>/<name>`, the
/// kind and group lowercased (`statefulset.apps/web`), `<none>` without one.
fn controller(obj: &Value) -> String {
    let owners = obj
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array);
    let Some(owner) = owners
        .into_iter()
        .flatten()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
    else {
        return "<none>".into();
    };
    let text = |f: &str| owner.get(f).and_then(Value::as_str).unwrap_or("");
    let group = match text("apiVersion").split_once('/') {
        Some((group, _)) => group,
        None => "",
    };
    let kind = if group.is_empty() {
        text("kind").to_string()
    } else {
        format!("{}.{group}", text("kind"))
    };
    if kind.is_empty() {
        text("name").to_string()
    } else {
        format!("{}/{}", kind.to_lowercase(), text("name"))
    }
}

impl Strategy for ControllerRevisions {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// `revision` has no `omitempty`: Go writes it even when 0.
    fn set_defaults(&self, obj: &mut Value) {
        if let Some(o) = obj.as_object_mut() {
            o.entry("revision").or_insert(0.into());
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_revision(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = validate_revision(new);
        let data = new.get("data").unwrap_or(&Value::Null);
        if data != old.get("data").unwrap_or(&Value::Null) {
            errors.push(FieldError::invalid_printed(
                "data",
                data.to_string(),
                "field is immutable",
            ));
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        crate::registry::name_age_row(
            obj,
            now,
            [
                controller(obj).into(),
                super::workload::count(obj, "/revision").into(),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn revisions_show_their_controller_and_number() {
        let rev = json!({"metadata": {"name": "web-7d4b9c", "creationTimestamp": "2026-05-28T20:16:40Z",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "1"},
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "2",
                 "controller": true}]},
            "data": {"spec": {}}, "revision": 3});
        assert_eq!(
            ControllerRevisions.cells(&rev, Time(1_780_000_000)),
            vec![
                json!("web-7d4b9c"),
                json!("statefulset.apps/web"),
                json!(3),
                json!("10m")
            ]
        );
        let orphan = json!({"metadata": {"name": "x"}, "data": {}});
        assert_eq!(ControllerRevisions.cells(&orphan, Time(0))[1], "<none>");
    }

    #[test]
    fn data_is_required_and_immutable_and_the_revision_not_negative() {
        let mut bad = json!({"metadata": {"name": "x"}, "revision": -1});
        ControllerRevisions.set_defaults(&mut bad);
        assert_eq!(
            messages(&ControllerRevisions.validate(&bad)),
            vec![
                "data: Required value: data is mandatory",
                "revision: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
        let mut fresh = json!({"metadata": {"name": "x"}, "data": {"a": 1}});
        ControllerRevisions.set_defaults(&mut fresh);
        assert_eq!(fresh["revision"], 0);
        let old = json!({"data": {"a": 1}, "revision": 1});
        let renumbered = json!({"data": {"a": 1}, "revision": 4});
        assert!(
            ControllerRevisions
                .validate_update(&renumbered, &old)
                .is_empty()
        );
        let changed = json!({"data": {"a": 2}, "revision": 1});
        assert_eq!(
            messages(&ControllerRevisions.validate_update(&changed, &old)),
            vec![r#"data: Invalid value: {"a":2}: field is immutable"#]
        );
    }
}
