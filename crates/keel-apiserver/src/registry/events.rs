//! core/v1 Events: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE and, wide, SUBOBJECT, SOURCE,
//! FIRST SEEN, COUNT, NAME (kube's event printer; the table starts with LAST SEEN, not
//! NAME). An update of a missing event creates it. Validation is kube's legacy event
//! validation, and for events.k8s.io also its strict one ([`validate_event`]).

use serde_json::Value;

use super::text;
use super::{Column, NAME_COLUMN, ResourceInfo, Strategy};
use crate::apimachinery::time::{Time, human_duration_secs};
use crate::json_pointer::At;
use crate::storage::FieldError;

/// The core/v1 Event strategy.
pub struct Events;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["ev"],
    ..ResourceInfo::new("", "v1", "Event", "events", "event")
};

/// The event table's columns (shared with events.k8s.io, which kube prints alike).
pub static COLUMNS: [Column; 10] = [
    Column::string(
        "Last Seen",
        0,
        "The time at which the most recent occurrence of this event was recorded.",
    ),
    Column::string(
        "Type",
        0,
        "Type of this event (Normal, Warning), new types could be added in the future",
    ),
    Column::string(
        "Reason",
        0,
        "This should be a short, machine understandable string that gives the reason for the \
         transition into the object's current status.",
    ),
    Column::string("Object", 0, "The object that this event is about."),
    Column::string(
        "Subobject",
        1,
        "If referring to a piece of an object instead of an entire object, this string should \
         contain a valid JSON/Go field access statement, such as \
         desiredState.manifest.containers[2]. For example, if the object reference is to a \
         container within a pod, this would take on a value like: \"spec.containers{name}\" \
         (where \"name\" refers to the name of the container that triggered the event) or if no \
         container name is specified \"spec.containers[2]\" (container with index 2 in this \
         pod). This syntax is chosen only to have some well-defined way of referencing a part \
         of an object.",
    ),
    Column::string(
        "Source",
        1,
        "The component reporting this event. Should be a short machine understandable string.",
    ),
    Column::string(
        "Message",
        0,
        "A human-readable description of the status of this operation.",
    ),
    Column::string(
        "First Seen",
        1,
        "The time at which the event was first recorded. (Time of server receipt is in \
         TypeMeta.)",
    ),
    Column::string("Count", 1, "The number of times this event has occurred."),
    Column {
        priority: 1,
        ..NAME_COLUMN
    },
];

fn since(obj: &Value, pointer: &str, now: Time) -> Option<String> {
    Time::parse(text(obj, pointer)).map(|t| human_duration_secs(now.seconds_since(t)))
}

/// `printEvent` of kube's printers, for a core/v1 Event.
pub fn event_cells(obj: &Value, now: Time) -> Vec<Value> {
    let first = since(obj, "/firstTimestamp", now)
        .or_else(|| since(obj, "/eventTime", now))
        .unwrap_or_else(|| "<unknown>".into());
    let mut last = since(obj, "/lastTimestamp", now).unwrap_or_else(|| first.clone());
    let mut count = obj.get("count").and_then(Value::as_i64).unwrap_or(0);
    match obj.get("series").filter(|s| s.is_object()) {
        Some(series) => {
            last = since(series, "/lastObservedTime", now).unwrap_or_else(|| "<unknown>".into());
            count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
        }
        None if count == 0 => count = 1,
        None => {}
    }
    let kind = text(obj, "/involvedObject/kind").to_lowercase();
    let name = text(obj, "/involvedObject/name");
    let target = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };
    let first_non_empty = |a: &'static str, b: &'static str| {
        let a = text(obj, a);
        if a.is_empty() { text(obj, b) } else { a }
    };
    let component = first_non_empty("/source/component", "/reportingComponent");
    let instance = first_non_empty("/source/host", "/reportingInstance");
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        Value::from(last),
        Value::from(text(obj, "/type")),
        Value::from(text(obj, "/reason")),
        Value::from(target),
        Value::from(text(obj, "/involvedObject/fieldPath")),
        Value::from(source),
        Value::from(text(obj, "/message").trim()),
        Value::from(first),
        Value::from(count),
        Value::from(super::meta_str(obj, "name")),
    ]
}

/// The most characters `reportingInstance`, `action` and `reason` may have.
const LENGTH_LIMIT: usize = 128;
/// The most characters a message (events.k8s.io `note`) may have.
const NOTE_LENGTH_LIMIT: usize = 1024;

fn set(obj: &Value, pointer: &str) -> bool {
    obj.at(pointer).is_some_and(|v| match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    })
}

/// kube's event validation of a core/v1-shaped event `obj`: the legacy rules every event
/// passes, and with `strict` (a write through events.k8s.io/v1) the stricter ones, whose
/// errors name `reportingController` instead of `reportingComponent`.
pub fn validate_event(obj: &Value, strict: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let reporting = if strict {
        "reportingController"
    } else {
        "reportingComponent"
    };
    let namespace = super::meta_str(obj, "namespace");
    let involved_ns = text(obj, "/involvedObject/namespace");
    let mismatch = || {
        FieldError::invalid(
            "involvedObject.namespace",
            involved_ns,
            "does not match event.namespace",
        )
    };
    if !set(obj, "/eventTime") {
        if involved_ns.is_empty() {
            if !namespace.is_empty() && namespace != "default" {
                errors.push(mismatch());
            }
        } else if namespace != involved_ns {
            errors.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            errors.push(mismatch());
        }
        if text(obj, "/reportingComponent").is_empty() {
            errors.push(FieldError::required(reporting, ""));
        }
        let instance = text(obj, "/reportingInstance");
        if instance.is_empty() {
            errors.push(FieldError::required("reportingInstance", ""));
        }
        let too_long = |field: &str, limit: usize| {
            FieldError::invalid(field, "", &format!("can have at most {limit} characters"))
        };
        if instance.chars().count() > LENGTH_LIMIT {
            errors.push(too_long("reportingInstance", LENGTH_LIMIT));
        }
        let action = text(obj, "/action");
        if action.is_empty() {
            errors.push(FieldError::required("action", ""));
        }
        if action.chars().count() > LENGTH_LIMIT {
            errors.push(too_long("action", LENGTH_LIMIT));
        }
        let reason = text(obj, "/reason");
        if reason.is_empty() {
            errors.push(FieldError::required("reason", ""));
        }
        if reason.chars().count() > LENGTH_LIMIT {
            errors.push(too_long("reason", LENGTH_LIMIT));
        }
        if text(obj, "/message").chars().count() > NOTE_LENGTH_LIMIT {
            errors.push(too_long("message", NOTE_LENGTH_LIMIT));
        }
    }
    if !strict {
        return errors;
    }
    errors.extend(validate_series(obj));
    if !set(obj, "/eventTime") {
        errors.push(FieldError::required("eventTime", ""));
    }
    let kind = text(obj, "/type");
    if kind != "Normal" && kind != "Warning" {
        errors.push(FieldError::invalid(
            "type",
            "",
            &format!("has invalid value: {kind}"),
        ));
    }
    for field in ["firstTimestamp", "lastTimestamp"] {
        if set(obj, &format!("/{field}")) {
            errors.push(FieldError::invalid(field, "", "needs to be unset"));
        }
    }
    if obj.get("count").and_then(Value::as_i64).unwrap_or(0) != 0 {
        errors.push(FieldError::invalid("count", "", "needs to be unset"));
    }
    if set(obj, "/source/component") || set(obj, "/source/host") {
        errors.push(FieldError::invalid("source", "", "needs to be unset"));
    }
    errors
}

/// `validateV1EventSeries`.
pub fn validate_series(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(series) = obj.get("series").filter(|s| s.is_object()) {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            errors.push(FieldError::invalid(
                "series.count",
                "",
                "should be at least 2",
            ));
        }
        if !set(series, "/lastObservedTime") {
            errors.push(FieldError::required("series.lastObservedTime", ""));
        }
    }
    errors
}

impl Strategy for Events {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_event(obj, false)
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        event_cells(obj, now)
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]
    }

    fn field(&self, obj: &Value, field: &str) -> String {
        match field {
            "source" => {
                let component = text(obj, "/source/component");
                if component.is_empty() {
                    text(obj, "/reportingComponent").into()
                } else {
                    component.into()
                }
            }
            _ => super::field_text(obj, field),
        }
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn cells_are_printed_as_print_event_prints_them() {
        let now = Time(1_780_000_000);
        let ev = json!({"metadata": {"name": "web.17f", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default",
                "fieldPath": "spec.containers{app}"},
            "reason": "BackOff", "type": "Warning", "message": " Back-off restarting failed container \n",
            "source": {"component": "kubelet", "host": "worker-1"},
            "firstTimestamp": "2026-05-28T19:26:40Z", "lastTimestamp": "2026-05-28T20:24:40Z",
            "count": 12});
        assert_eq!(
            Events.cells(&ev, now),
            vec![
                json!("2m"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/web"),
                json!("spec.containers{app}"),
                json!("kubelet, worker-1"),
                json!("Back-off restarting failed container"),
                json!("60m"),
                json!(12),
                json!("web.17f"),
            ]
        );
        let new_style = json!({"metadata": {"name": "n"}, "involvedObject": {"kind": "Node"},
            "eventTime": "2026-05-28T20:26:10.123456Z", "reportingComponent": "kubelet",
            "reportingInstance": "worker-2",
            "series": {"count": 3, "lastObservedTime": "2026-05-28T20:26:35.000001Z"}});
        let cells = Events.cells(&new_style, now);
        assert_eq!(cells[0], json!("5s"));
        assert_eq!(cells[3], json!("node"));
        assert_eq!(cells[5], json!("kubelet, worker-2"));
        assert_eq!(cells[7], json!("30s"));
        assert_eq!(cells[8], json!(3));
        let bare = json!({"metadata": {"name": "b"}});
        let cells = Events.cells(&bare, now);
        assert_eq!(
            (cells[0].clone(), cells[8].clone()),
            (json!("<unknown>"), json!(1))
        );
        assert_eq!(Events.field(&new_style, "source"), "kubelet");
        assert_eq!(Events.field(&ev, "involvedObject.name"), "web");
    }

    #[test]
    fn events_are_validated_as_kube_validates_them() {
        let ok = json!({"metadata": {"namespace": "default"}, "involvedObject": {"namespace": "default"}});
        assert!(Events.validate(&ok).is_empty());
        let other = json!({"metadata": {"namespace": "a"}, "involvedObject": {"namespace": "b"}});
        assert_eq!(
            messages(&Events.validate(&other)),
            vec!["involvedObject.namespace: Invalid value: \"b\": does not match event.namespace"]
        );
        let new_style = json!({"metadata": {"namespace": "a"}, "involvedObject": {"namespace": "a"},
            "eventTime": "2026-05-28T20:26:10.000000Z", "reason": "x".repeat(129)});
        assert_eq!(
            messages(&Events.validate(&new_style)),
            vec![
                "reportingComponent: Required value",
                "reportingInstance: Required value",
                "action: Required value",
                "reason: Invalid value: \"\": can have at most 128 characters",
            ]
        );
        let strict = json!({"metadata": {"namespace": "a"}, "involvedObject": {"namespace": "a"},
            "reportingComponent": "c", "reportingInstance": "i", "action": "A", "reason": "R",
            "type": "Odd", "count": 2, "firstTimestamp": "2026-05-28T20:26:10Z",
            "series": {"count": 1}});
        assert_eq!(
            messages(&validate_event(&strict, true)),
            vec![
                "series.count: Invalid value: \"\": should be at least 2",
                "series.lastObservedTime: Required value",
                "eventTime: Required value",
                "type: Invalid value: \"\": has invalid value: Odd",
                "firstTimestamp: Invalid value: \"\": needs to be unset",
                "count: Invalid value: \"\": needs to be unset",
            ]
        );
    }
}
