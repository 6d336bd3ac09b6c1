//! events.k8s.io/v1 Events, stored as core/v1 Events in the same etcd resource (`events`),
//! as kube-apiserver stores them, so each version reads what the other wrote; printed alike. The two versions name the same fields differently
//! ([`to_core`], [`from_core`]):
//!
//! | events.k8s.io/v1           | core/v1              |
//! |----------------------------|----------------------|
//! | `regarding`                | `involvedObject`     |
//! | `note`                     | `message`            |
//! | `reportingController`      | `reportingComponent` |
//! | `deprecatedSource`         | `source`             |
//! | `deprecatedFirstTimestamp` | `firstTimestamp`     |
//! | `deprecatedLastTimestamp`  | `lastTimestamp`      |
//! | `deprecatedCount`          | `count`              |
//!
//! and alike: `metadata`, `eventTime`, `series` (`count`, `lastObservedTime`),
//! `reportingInstance`, `action`, `reason`, `related`, `type`. Field selectors name the
//! events.k8s.io spellings (`regarding.name`, `reportingController`; not `source`).

use serde_json::{Map, Value};

use super::events::{COLUMNS, event_cells, validate_event, validate_series};
use super::{Column, ResourceInfo, Strategy};
use crate::apimachinery::time::Time;
use crate::storage::FieldError;

/// The events.k8s.io/v1 Event strategy (objects in the events.k8s.io/v1 shape).
pub struct EventsK8sIo;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["ev"],
    ..ResourceInfo::new("events.k8s.io", "v1", "Event", "events", "event")
};

/// events.k8s.io/v1 field, core/v1 field.
const RENAMED: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn convert(v: &Value, api_version: &str, to_core: bool) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::from(api_version));
    out.insert("kind".into(), Value::from("Event"));
    for (k, value) in v.as_object().into_iter().flatten() {
        if k == "apiVersion" || k == "kind" || value.is_null() {
            continue;
        }
        let renamed = RENAMED.iter().find_map(|(events, core)| {
            if to_core {
                (k == events).then_some(*core)
            } else {
                (k == core).then_some(*events)
            }
        });
        out.insert(renamed.unwrap_or(k).to_string(), value.clone());
    }
    Value::Object(out)
}

/// An events.k8s.io/v1 Event as core/v1 writes it (absent and null fields stay absent).
pub fn to_core(v: &Value) -> Value {
    convert(v, "v1", true)
}

/// A core/v1 Event as events.k8s.io/v1 writes it (absent and null fields stay absent).
pub fn from_core(v: &Value) -> Value {
    convert(v, "events.k8s.io/v1", false)
}

impl Strategy for EventsK8sIo {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn storage_resource(&self) -> (&'static str, &'static str) {
        ("", "events")
    }

    fn to_storage(&self, obj: Value) -> Value {
        to_core(&obj)
    }

    fn to_served(&self, obj: Value) -> Value {
        from_core(&obj)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_event(&to_core(obj), true)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let (new_core, old_core) = (to_core(new), to_core(old));
        let mut errors = validate_event(&new_core, false);
        if new_core.get("series") != old_core.get("series") {
            errors.extend(validate_series(&new_core));
        }
        for (field, path) in [
            ("involvedObject", "involvedObject"),
            ("reason", "reason"),
            ("message", "note"),
            ("source", "source"),
            ("firstTimestamp", "firstTimestamp"),
            ("lastTimestamp", "lastTimestamp"),
            ("count", "count"),
            ("type", "type"),
            ("action", "action"),
            ("reportingComponent", "reportingController"),
            ("reportingInstance", "reportingInstance"),
        ] {
            let (n, o) = (new_core.get(field), old_core.get(field));
            if n != o {
                let shown = n.cloned().unwrap_or(Value::from(""));
                errors.push(FieldError::invalid(path, shown, "field is immutable"));
            }
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        event_cells(&to_core(obj), now)
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ]
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

    fn sample() -> Value {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "default"},
            "eventTime": "2026-05-28T20:26:30.000000Z", "reportingController": "kubelet",
            "reportingInstance": "worker-1", "action": "Pulling", "reason": "Pulling",
            "regarding": {"kind": "Pod", "name": "web", "namespace": "default"},
            "note": "Pulling image \"nginx\"", "type": "Normal",
            "deprecatedSource": {"component": "kubelet"}, "deprecatedCount": 1,
            "deprecatedFirstTimestamp": null})
    }

    #[test]
    fn versions_convert_both_ways() {
        let core = to_core(&sample());
        assert_eq!(
            core,
            json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": "web.1", "namespace": "default"},
                "eventTime": "2026-05-28T20:26:30.000000Z", "reportingComponent": "kubelet",
                "reportingInstance": "worker-1", "action": "Pulling", "reason": "Pulling",
                "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
                "message": "Pulling image \"nginx\"", "type": "Normal",
                "source": {"component": "kubelet"}, "count": 1})
        );
        let mut back = sample();
        if let Some(o) = back.as_object_mut() {
            o.remove("deprecatedFirstTimestamp");
        }
        assert_eq!(from_core(&core), back);
    }

    #[test]
    fn cells_fields_and_strict_validation() {
        let ev = sample();
        let cells = EventsK8sIo.cells(&ev, Time(1_780_000_000));
        assert_eq!(cells[0], json!("10s"));
        assert_eq!(cells[3], json!("pod/web"));
        assert_eq!(cells[6], json!("Pulling image \"nginx\""));
        assert_eq!(EventsK8sIo.field(&ev, "regarding.name"), "web");
        assert_eq!(EventsK8sIo.field(&ev, "reportingController"), "kubelet");
        let errors = messages(&EventsK8sIo.validate(&ev));
        assert_eq!(
            errors,
            vec![
                "count: Invalid value: \"\": needs to be unset",
                "source: Invalid value: \"\": needs to be unset",
            ]
        );
        let mut changed = ev.clone();
        changed["note"] = json!("other");
        let errors = messages(&EventsK8sIo.validate_update(&changed, &ev));
        assert_eq!(
            errors,
            vec!["note: Invalid value: \"other\": field is immutable"]
        );
        let mut no_controller = ev.clone();
        if let Some(o) = no_controller.as_object_mut() {
            o.remove("reportingController");
        }
        let errors = messages(&EventsK8sIo.validate(&no_controller));
        assert_eq!(errors[0], "reportingController: Required value");
    }
}
