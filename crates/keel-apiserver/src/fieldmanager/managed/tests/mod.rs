//! The field manager against what kube-apiserver writes: the helpers every test shares, and
//! the entries of creates and updates, their FieldsV1, resets and subresources. Applies are
//! [`apply`]'s, the renewal shortcut [`renewal`]'s.

mod apply;
mod renewal;

use serde_json::{Value, json};

use super::*;
use crate::json_pointer::At;
use crate::registry::configmaps::ConfigMaps;
use crate::registry::pods::Pods;
use crate::storage::Status;

const T1: Time = Time(1_700_000_000);
const T2: Time = Time(1_700_000_100);
const T3: Time = Time(1_700_000_200);

fn cm(data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "d"},
        "data": data,
    })
}

/// A stored object: what the registry adds to a created one.
fn stored(mut obj: Value) -> Value {
    let meta = meta::metadata(&mut obj);
    meta.insert("uid".into(), "u1".into());
    meta.insert("resourceVersion".into(), "5".into());
    meta.insert("creationTimestamp".into(), T1.rfc3339().into());
    obj
}

fn entries(obj: &Value) -> Vec<Value> {
    obj.at("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn entry<'a>(obj: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    obj.at("/metadata/managedFields")?
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
}

fn fields(obj: &Value, manager: &str, operation: &str) -> Value {
    entry(obj, manager, operation)
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

fn created(kind: &dyn Strategy, mut obj: Value, manager: &str) -> Value {
    FieldManager::new(kind, None, T1).update(None, &mut obj, manager);
    stored(obj)
}

fn updated(kind: &dyn Strategy, live: &Value, mut new: Value, manager: &str, at: Time) -> Value {
    FieldManager::new(kind, None, at).update(Some(live), &mut new, manager);
    new
}

fn applied(
    kind: &dyn Strategy,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    at: Time,
) -> Result<Value, ApplyError> {
    FieldManager::new(kind, None, at)
        .apply(live, config, manager, false)
        .map(|o| match live {
            Some(_) => o,
            None => stored(o),
        })
}

/// `data` applied to the ConfigMap `live` (None: a new one) by `manager` at `at`.
fn apply_cm(live: Option<&Value>, data: Value, manager: &str, at: Time) -> Value {
    applied(&ConfigMaps, live, &cm(data), manager, at).unwrap()
}

/// A Pod with one container and a status, created by `kubectl-create`.
fn pending_pod() -> Value {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Pending"},
    });
    created(&Pods, pod, "kubectl-create")
}

/// The Status an apply is refused with.
fn refused(
    kind: &dyn Strategy,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    at: Time,
) -> Status {
    applied(kind, live, config, manager, at)
        .unwrap_err()
        .status()
}

/// The Status an apply of `data` to the ConfigMap `live` is refused with.
fn refused_cm(live: Option<&Value>, data: Value, manager: &str, at: Time) -> Status {
    refused(&ConfigMaps, live, &cm(data), manager, at)
}

/// The ConfigMap `live` updated to `data` by `manager` at `at`, as stored.
fn edit_cm(live: &Value, data: Value, manager: &str, at: Time) -> Value {
    stored(updated(&ConfigMaps, live, cm(data), manager, at))
}

#[test]
fn kubectl_create_configmap_records_what_upstream_records() {
    let obj = created(&ConfigMaps, cm(json!({"a": "x"})), "kubectl-create");
    assert_eq!(
        entries(&obj),
        [json!({
            "manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
            "time": T1.rfc3339(), "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}, "f:a": {}}},
        })]
    );
    let set = Set::from_fields_v1(&fields(&obj, "kubectl-create", "Update")).unwrap();
    assert_eq!(set.to_fields_v1_string(), r#"{"f:data":{".":{},"f:a":{}}}"#);
}

#[test]
fn kubectl_run_records_the_containers_as_upstream_does() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "nginx", "namespace": "d", "labels": {"run": "nginx"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
    });
    let obj = created(&Pods, pod, "kubectl-run");
    assert_eq!(
        fields(&obj, "kubectl-run", "Update"),
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:run": {}}},
            "f:spec": {
                "f:containers": {"k:{\"name\":\"nginx\"}": {
                    ".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                    "f:resources": {}, "f:terminationMessagePath": {},
                    "f:terminationMessagePolicy": {}
                }},
                "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {},
                "f:schedulerName": {}, "f:securityContext": {},
                "f:terminationGracePeriodSeconds": {}
            }
        })
    );
}

#[test]
fn an_update_takes_what_it_changes_and_entries_sort_as_upstream_sorts_them() {
    let obj = created(
        &ConfigMaps,
        cm(json!({"a": "x", "b": "y"})),
        "kubectl-create",
    );
    let edited = updated(
        &ConfigMaps,
        &obj,
        cm(json!({"a": "z", "b": "y"})),
        "kubectl-edit",
        T2,
    );
    assert_eq!(
        fields(&edited, "kubectl-create", "Update"),
        json!({"f:data": {".": {}, "f:b": {}}})
    );
    assert_eq!(
        fields(&edited, "kubectl-edit", "Update"),
        json!({"f:data": {"f:a": {}}})
    );
    let managers: Vec<Value> = entries(&edited)
        .iter()
        .map(|e| e["manager"].clone())
        .collect();
    assert_eq!(managers, [json!("kubectl-create"), json!("kubectl-edit")]);
    // An update that changes nothing keeps every entry and time.
    let again = updated(
        &ConfigMaps,
        &stored(edited.clone()),
        edited.clone(),
        "kubectl-edit",
        T3,
    );
    assert_eq!(entries(&again), entries(&edited));
    // Removing a key takes it from its owner; an owner left with nothing goes.
    let removed = updated(
        &ConfigMaps,
        &stored(edited),
        cm(json!({"b": "y"})),
        "kubectl-patch",
        T3,
    );
    assert!(entry(&removed, "kubectl-edit", "Update").is_none());
    assert!(
        entry(&removed, "kubectl-patch", "Update").is_none(),
        "it only removed"
    );
}

#[test]
fn clients_may_reset_entries_but_not_forge_broken_ones() {
    let obj = created(&ConfigMaps, cm(json!({"a": "x"})), "kubectl-create");
    for reset in [json!([]), json!([{}])] {
        let mut new = obj.clone();
        new["metadata"]["managedFields"] = reset;
        let after = updated(&ConfigMaps, &obj, new, "m", T2);
        assert!(after["metadata"].get("managedFields").is_none(), "{after}");
        // An object without entries starts none on update.
        let later = updated(&ConfigMaps, &stored(after), cm(json!({"a": "y"})), "m", T3);
        assert!(later["metadata"].get("managedFields").is_none());
    }
    let mut forged = obj.clone();
    forged["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Steal"}]);
    let kept = updated(&ConfigMaps, &obj, forged, "m", T2);
    assert_eq!(entries(&kept), entries(&obj));
    let mut rewritten = obj.clone();
    rewritten["metadata"]["managedFields"] = json!([{
        "manager": "other", "operation": "Apply", "apiVersion": "v1",
        "time": "2019-03-30T15:00:00.000Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {"f:a": {}}}
    }]);
    let honoured = updated(&ConfigMaps, &obj, rewritten, "m", T2);
    assert_eq!(
        entries(&honoured),
        [json!({
            "manager": "other", "operation": "Apply", "apiVersion": "v1",
            "time": "2019-03-30T15:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}}
        })]
    );
}

#[test]
fn a_subresource_keeps_the_stored_entries_and_owns_only_its_part() {
    let obj = pending_pod();
    assert!(
        fields(&obj, "kubectl-create", "Update")
            .get("f:status")
            .is_none()
    );
    let mut new = obj.clone();
    new["status"]["phase"] = json!("Running");
    new["spec"]["nodeName"] = json!("n1");
    new["metadata"]["managedFields"] = json!([]);
    let mut status = new.clone();
    FieldManager::new(&Pods, Some("status"), T2).update(Some(&obj), &mut status, "kubelet");
    let kubelet = entry(&status, "kubelet", "Update").unwrap();
    assert_eq!(kubelet["subresource"], "status");
    assert_eq!(kubelet["fieldsV1"], json!({"f:status": {"f:phase": {}}}));
    assert!(entry(&status, "kubectl-create", "Update").is_some());
}

#[test]
fn more_than_ten_updaters_merge_the_oldest() {
    let mut obj = created(&ConfigMaps, cm(json!({"k0": "v"})), "m0");
    for i in 1..=11 {
        let mut new = obj.clone();
        new["data"][format!("k{i}")] = json!("v");
        obj = stored(updated(
            &ConfigMaps,
            &obj,
            new,
            &format!("m{i}"),
            Time(T1.0 + i),
        ));
    }
    let managers: Vec<String> = entries(&obj)
        .iter()
        .map(|e| e["manager"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(managers.len(), 10);
    assert!(
        managers.contains(&"ancient-changes".to_string()),
        "{managers:?}"
    );
    assert!(!managers.contains(&"m0".to_string()));
    assert_eq!(
        fields(&obj, "ancient-changes", "Update"),
        json!({"f:data": {".": {}, "f:k0": {}, "f:k1": {}, "f:k2": {}}})
    );
}
