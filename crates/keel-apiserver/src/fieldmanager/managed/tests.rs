//! The field manager against what kube-apiserver writes: entries of creates and updates,
//! their FieldsV1, resets, applies with their merges, prunes and conflicts, the
//! client-side apply migration, and two properties of apply (it is idempotent, and a field
//! dropped from the configuration goes when no one else owns it).

use proptest::prelude::{Strategy as _, prop, prop_assert, prop_assert_eq, proptest};
use serde_json::{Value, json};

use super::*;
use crate::fieldmanager::entries::{is_print, manager_from_user_agent, validate};
use crate::json_pointer::At;
use crate::registry::configmaps::ConfigMaps;
use crate::registry::pods::Pods;
use crate::registry::services::Services;

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
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Pending"},
    });
    let obj = created(&Pods, pod, "kubectl-create");
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
fn apply_creates_and_applying_twice_changes_nothing() {
    let config = cm(json!({"a": "x"}));
    let obj = applied(&ConfigMaps, None, &config, "kubectl", T1).unwrap();
    assert_eq!(obj["data"], json!({"a": "x"}));
    assert_eq!(
        entries(&obj),
        [json!({
            "manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
            "time": T1.rfc3339(), "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}},
        })]
    );
    let again = applied(&ConfigMaps, Some(&obj), &config, "kubectl", T2).unwrap();
    assert_eq!(again, obj);
}

#[test]
fn conflicts_are_refused_worded_as_upstream_words_them_and_forced() {
    let obj = applied(
        &ConfigMaps,
        None,
        &cm(json!({"a": "x", "b": "y"})),
        "kubectl",
        T1,
    )
    .unwrap();
    let edited = stored(updated(
        &ConfigMaps,
        &obj,
        cm(json!({"a": "z", "b": "y"})),
        "kubectl-edit",
        T2,
    ));
    let e = applied(
        &ConfigMaps,
        Some(&edited),
        &cm(json!({"a": "x", "b": "y"})),
        "kubectl",
        T3,
    )
    .unwrap_err();
    let status = serde_json::to_value(e.status()).unwrap();
    assert_eq!(
        status,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.a",
            "reason": "Conflict",
            "details": {"causes": [{
                "reason": "FieldManagerConflict",
                "message": "conflict with \"kubectl-edit\" using v1",
                "field": ".data.a"
            }]},
            "code": 409
        })
    );
    // The same value shares the field instead.
    let shared = applied(
        &ConfigMaps,
        Some(&edited),
        &cm(json!({"a": "z", "b": "y"})),
        "kubectl",
        T3,
    )
    .unwrap();
    assert!(
        fields(&shared, "kubectl-edit", "Update")["f:data"]
            .get("f:a")
            .is_some()
    );
    assert!(
        fields(&shared, "kubectl", "Apply")["f:data"]
            .get("f:a")
            .is_some()
    );
    // Forcing takes it.
    let forced = FieldManager::new(&ConfigMaps, None, T3)
        .apply(
            Some(&edited),
            &cm(json!({"a": "x", "b": "y"})),
            "kubectl",
            true,
        )
        .unwrap();
    assert_eq!(forced["data"]["a"], "x");
    assert!(entry(&forced, "kubectl-edit", "Update").is_none());
    // Several conflicts, several managers.
    let two = stored(updated(
        &ConfigMaps,
        &edited,
        cm(json!({"a": "z", "b": "w"})),
        "other",
        T3,
    ));
    let e = applied(
        &ConfigMaps,
        Some(&two),
        &cm(json!({"a": "1", "b": "2"})),
        "kubectl",
        T3,
    )
    .unwrap_err()
    .status();
    assert_eq!(
        e.message,
        "Apply failed with 2 conflicts: conflicts with \"kubectl-edit\" using v1:\n- .data.a\nconflicts with \"other\" using v1:\n- .data.b"
    );
    assert_eq!(e.details.unwrap().causes.len(), 2);
}

#[test]
fn dropping_a_field_from_the_configuration_removes_it_unless_someone_else_owns_it() {
    let obj = applied(
        &ConfigMaps,
        None,
        &cm(json!({"a": "x", "b": "y"})),
        "m1",
        T1,
    )
    .unwrap();
    let pruned = applied(&ConfigMaps, Some(&obj), &cm(json!({"a": "x"})), "m1", T2).unwrap();
    assert_eq!(pruned["data"], json!({"a": "x"}));
    let shared =
        stored(applied(&ConfigMaps, Some(&obj), &cm(json!({"b": "y"})), "m2", T2).unwrap());
    let kept = applied(&ConfigMaps, Some(&shared), &cm(json!({"a": "x"})), "m1", T3).unwrap();
    assert_eq!(kept["data"], json!({"a": "x", "b": "y"}));
    assert_eq!(fields(&kept, "m2", "Apply"), json!({"f:data": {"f:b": {}}}));
}

fn pod(containers: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"},
        "spec": {"containers": containers},
    })
}

#[test]
fn lists_merge_by_their_list_type() {
    let first = pod(json!([
        {"name": "a", "image": "i1", "ports": [{"containerPort": 80}], "env": [{"name": "E", "value": "1"}]},
    ]));
    let obj = applied(&Pods, None, &first, "m1", T1).unwrap();
    let c = "k:{\"name\":\"a\"}";
    let port = "k:{\"containerPort\":80,\"protocol\":\"TCP\"}";
    let owned = fields(&obj, "m1", "Apply");
    assert!(
        owned["f:spec"]["f:containers"][c]["f:ports"][port].is_object(),
        "{owned}"
    );
    assert!(
        owned["f:spec"]["f:containers"][c]["f:env"]["k:{\"name\":\"E\"}"]["f:value"].is_object()
    );
    // A second applier adds a container, a port and a finalizer: all kept side by side.
    let second = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "d", "finalizers": ["x/y"], "labels": {"l": "1"}},
        "spec": {"containers": [
            {"name": "a", "ports": [{"containerPort": 90, "protocol": "UDP"}]},
            {"name": "b", "image": "i2"},
        ]},
    });
    let both = stored(applied(&Pods, Some(&obj), &second, "m2", T2).unwrap());
    let cs = both["spec"]["containers"].as_array().unwrap();
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[0]["image"], "i1");
    assert_eq!(cs[0]["ports"].as_array().unwrap().len(), 2);
    assert_eq!(both["metadata"]["finalizers"], json!(["x/y"]));
    // m1 drops its env: gone; m2's container and port stay.
    let third = pod(json!([{"name": "a", "image": "i1", "ports": [{"containerPort": 80}]}]));
    let after = applied(&Pods, Some(&both), &third, "m1", T3).unwrap();
    let cs = after["spec"]["containers"].as_array().unwrap();
    assert!(cs[0].get("env").is_none(), "{after}");
    assert_eq!(cs.len(), 2);
    assert_eq!(after["metadata"]["labels"], json!({"l": "1"}));
    // Atomic lists are replaced.
    let args = pod(json!([{"name": "a", "image": "i1", "args": ["x", "y"]}]));
    let with_args = stored(applied(&Pods, Some(&after), &args, "m1", T3).unwrap());
    let fewer = pod(json!([{"name": "a", "image": "i1", "args": ["z"]}]));
    let replaced = applied(&Pods, Some(&with_args), &fewer, "m1", T3).unwrap();
    assert_eq!(replaced["spec"]["containers"][0]["args"], json!(["z"]));
}

#[test]
fn service_ports_are_keyed_by_port_and_protocol() {
    let svc = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"},
        "spec": {"ports": [{"port": 80}, {"port": 80, "protocol": "UDP"}]},
    });
    let obj = applied(&Services, None, &svc, "m", T1).unwrap();
    let ports = &fields(&obj, "m", "Apply")["f:spec"]["f:ports"];
    assert!(
        ports["k:{\"port\":80,\"protocol\":\"TCP\"}"].is_object(),
        "{ports}"
    );
    assert!(ports["k:{\"port\":80,\"protocol\":\"UDP\"}"].is_object());
    let dup = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "d"},
        "spec": {"ports": [{"port": 80}, {"port": 80, "protocol": "TCP"}]},
    });
    let e = applied(&Services, None, &dup, "m", T1)
        .unwrap_err()
        .status();
    assert_eq!(e.code, 500);
    assert_eq!(
        e.message,
        "failed to create typed patch object (d/s; /v1, Kind=Service): .spec.ports: duplicate entries for key [port=80,protocol=\"TCP\"]"
    );
}

#[test]
fn an_apply_to_status_owns_only_the_status() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Pending"},
    });
    let obj = created(&Pods, pod, "kubectl-create");
    let config = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    });
    let out = FieldManager::new(&Pods, Some("status"), T2)
        .apply(Some(&obj), &config, "kubelet", false)
        .unwrap();
    let kubelet = entry(&out, "kubelet", "Apply").unwrap();
    assert_eq!(kubelet["subresource"], "status");
    assert_eq!(
        kubelet["fieldsV1"],
        json!({"f:status": {
            "f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}},
            "f:phase": {}
        }})
    );
    // On the main resource, status is nobody's.
    let main = FieldManager::new(&Pods, None, T2)
        .apply(Some(&obj), &config, "other", false)
        .unwrap();
    assert!(fields(&main, "other", "Apply").get("f:status").is_none());
}

#[test]
fn applies_refuse_other_types_and_sent_entries() {
    let mut other = cm(json!({}));
    other["apiVersion"] = json!("v2");
    let e = applied(&ConfigMaps, None, &other, "m", T1)
        .unwrap_err()
        .status();
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "invalid object type: /v2, Kind=ConfigMap")
    );
    let e = applied(&ConfigMaps, None, &json!({}), "m", T1)
        .unwrap_err()
        .status();
    assert_eq!(e.message, "invalid object type: /, Kind=");
    let mut sent = cm(json!({}));
    sent["metadata"]["managedFields"] = json!([]);
    let e = applied(&ConfigMaps, None, &sent, "m", T1)
        .unwrap_err()
        .status();
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "metadata.managedFields must be nil")
    );
}

#[test]
fn an_object_without_entries_gives_its_fields_to_before_first_apply() {
    let bare = stored(cm(json!({"a": "x"})));
    let e = applied(&ConfigMaps, Some(&bare), &cm(json!({"a": "y"})), "m", T2)
        .unwrap_err()
        .status();
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.a"
    );
}

#[test]
fn kubectl_server_side_apply_takes_over_what_client_side_apply_set() {
    let mut config = cm(json!({"a": "x"}));
    let annotation = serde_json::to_string(&config).unwrap();
    config["metadata"]["annotations"] = json!({LAST_APPLIED: annotation});
    let obj = created(&ConfigMaps, config, "kubectl-client-side-apply");
    let changed = cm(json!({"a": "y"}));
    let other = applied(&ConfigMaps, Some(&obj), &changed, "my-manager", T2).unwrap_err();
    assert!(matches!(other, ApplyError::Conflicts(_)));
    let migrated = applied(&ConfigMaps, Some(&obj), &changed, "kubectl", T2).unwrap();
    assert_eq!(migrated["data"]["a"], "y");
    let annotation = migrated["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .unwrap();
    assert_eq!(
        annotation,
        "{\"apiVersion\":\"v1\",\"data\":{\"a\":\"y\"},\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\",\"namespace\":\"d\"}}\n"
    );
    // A field whose value the annotation does not have is still a conflict.
    let edited = stored(updated(
        &ConfigMaps,
        &obj,
        {
            let mut e = obj.clone();
            e["data"]["b"] = json!("z");
            e
        },
        "kubectl-edit",
        T2,
    ));
    let e = applied(
        &ConfigMaps,
        Some(&edited),
        &cm(json!({"a": "x", "b": "q"})),
        "kubectl",
        T3,
    )
    .unwrap_err()
    .status();
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.b"
    );
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

#[test]
fn entry_validation_and_managers_from_user_agents() {
    let long = json!({"metadata": {"managedFields": [{
        "manager": "m".repeat(129), "operation": "Apply", "fieldsType": "FieldsV2"
    }]}});
    let errors: Vec<String> = validate(&long).iter().map(|e| e.to_string()).collect();
    assert_eq!(
        errors,
        [
            "metadata.managedFields[0].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
            "metadata.managedFields[0].manager: Too long: may not be more than 128 bytes",
        ]
    );
    assert_eq!(
        manager_from_user_agent("kubectl/v1.32.0 (linux/amd64)"),
        "kubectl"
    );
    assert_eq!(manager_from_user_agent("a\u{1}b/c"), "ab");
    assert!(!is_print('\u{200b}'));
    assert!(is_print('é'));
}

/// A configuration: some data keys and labels, each with one of a few values (none: the
/// configuration leaves the map out).
fn config_strategy() -> impl proptest::strategy::Strategy<Value = Value> {
    let keys = prop::collection::btree_map("[a-e]", "[xyz]", 0..5);
    let labels = prop::collection::btree_map("[p-s]", "[xyz]", 0..3);
    (keys, labels).prop_map(|(data, labels)| {
        let mut c = cm(json!(data));
        if data.is_empty() {
            c.as_object_mut().map(|o| o.remove("data"));
        }
        if !labels.is_empty() {
            c["metadata"]["labels"] = json!(labels);
        }
        c
    })
}

proptest! {
    #[test]
    fn applying_is_idempotent_and_drops_what_only_the_applier_had(
        first in config_strategy(),
        second in config_strategy(),
        other in config_strategy(),
    ) {
        let fm = FieldManager::new(&ConfigMaps, None, T1);
        let obj = stored(fm.apply(None, &first, "m1", false).unwrap());
        // Applying the same configuration again writes nothing.
        let again = FieldManager::new(&ConfigMaps, None, T2).apply(Some(&obj), &first, "m1", false).unwrap();
        prop_assert_eq!(&again, &obj);
        // A second manager applies its own; then m1 applies another configuration.
        let shared = stored(FieldManager::new(&ConfigMaps, None, T2)
            .apply(Some(&obj), &other, "m2", true).unwrap());
        let next = FieldManager::new(&ConfigMaps, None, T3)
            .apply(Some(&shared), &second, "m1", true).unwrap();
        let data = |v: &Value| v.get("data").and_then(Value::as_object).cloned().unwrap_or_default();
        let (d1, d2, dother, dnext) = (data(&first), data(&second), data(&other), data(&next));
        for (k, v) in &d2 {
            prop_assert_eq!(dnext.get(k), Some(v), "applied keys take the applied value");
        }
        for k in d1.keys() {
            if !d2.contains_key(k) && !dother.contains_key(k) {
                prop_assert!(!dnext.contains_key(k), "{} only m1 had, and dropped", k);
            }
            if !d2.contains_key(k) && dother.contains_key(k) {
                prop_assert!(dnext.contains_key(k), "{} m2 owns too", k);
            }
        }
        // Idempotent again, with two managers.
        let settled = stored(next);
        let same = FieldManager::new(&ConfigMaps, None, T3)
            .apply(Some(&settled), &second, "m1", false).unwrap();
        prop_assert_eq!(same, settled);
    }
}

/// The general way to an update's entries, for comparing the renewal shortcut with it.
fn updated_the_long_way(kind: &dyn Strategy, live: &Value, mut new: Value, manager: &str) -> Value {
    let fm = FieldManager::new(kind, None, T2);
    fm.kind.set_defaults(&mut new);
    fm.try_update(Some(live), &mut new, manager).unwrap();
    new
}

#[test]
fn a_renewal_stamps_the_entry_as_the_general_update_would() {
    use crate::registry::leases::Leases;
    let lease = |spec: Value| {
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "n1", "namespace": "kube-node-lease",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u9"}]},
            "spec": spec,
        })
    };
    let live = created(
        &Leases,
        lease(
            json!({"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2024-01-01T00:00:00.000000Z"}),
        ),
        "kubelet",
    );
    let with_entries = |mut obj: Value, entries: Option<&Value>| {
        let meta = meta::metadata(&mut obj);
        for f in ["uid", "resourceVersion", "creationTimestamp"] {
            meta.insert(f.into(), live["metadata"][f].clone());
        }
        if let Some(e) = entries {
            meta.insert("managedFields".into(), e.clone());
        }
        obj
    };
    let stored = &live["metadata"]["managedFields"];
    let renewed = json!({"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2024-01-01T00:00:10.000000Z"});
    let cases = [
        // The shortcut's case: entries sent back, or left out.
        (
            "kubelet",
            with_entries(lease(renewed.clone()), Some(stored)),
            true,
        ),
        ("kubelet", with_entries(lease(renewed.clone()), None), true),
        // Another manager, a new field, a removed field, changed entries, nothing changed.
        (
            "other",
            with_entries(lease(renewed.clone()), Some(stored)),
            false,
        ),
        (
            "kubelet",
            with_entries(
                lease(json!({"holderIdentity": "n1", "leaseDurationSeconds": 40,
            "renewTime": "2024-01-01T00:00:10.000000Z", "leaseTransitions": 1})),
                Some(stored),
            ),
            false,
        ),
        (
            "kubelet",
            with_entries(
                lease(json!({"holderIdentity": "n1",
            "renewTime": "2024-01-01T00:00:10.000000Z"})),
                Some(stored),
            ),
            false,
        ),
        (
            "kubelet",
            with_entries(
                lease(renewed.clone()),
                Some(&json!([{"manager": "x", "operation": "Update",
            "apiVersion": "coordination.k8s.io/v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}])),
            ),
            false,
        ),
        (
            "kubelet",
            with_entries(
                lease(json!({"holderIdentity": "n1", "leaseDurationSeconds": 40,
            "renewTime": "2024-01-01T00:00:00.000000Z"})),
                Some(stored),
            ),
            false,
        ),
    ];
    for (i, (manager, new, shortcut)) in cases.into_iter().enumerate() {
        assert_renewal(&live, manager, new, shortcut, i);
    }
    // Entries written some other way than the field manager writes them go the general way.
    for (i, fields_v1) in [
        json!({"f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}, "f:renewTime": {".": {}}}}),
        json!({"f:metadata": {"f:labels": []}, "f:spec": {"f:renewTime": {}}}),
        json!({"f:spec": {"f:leaseDurationSeconds": {"x:y": {}}, "f:renewTime": {}}}),
    ]
    .into_iter()
    .enumerate()
    {
        let mut odd = live.clone();
        odd["metadata"]["managedFields"][0]["fieldsV1"] = fields_v1;
        let stored = odd["metadata"]["managedFields"].clone();
        let new = with_entries(lease(renewed.clone()), Some(&stored));
        assert_renewal(&odd, "kubelet", new, false, 100 + i);
    }
}

/// Checks that the renewal shortcut takes the Lease update (`shortcut`) or not, and that the
/// update gives what the general way gives.
fn assert_renewal(live: &Value, manager: &str, new: Value, shortcut: bool, case: usize) {
    use crate::registry::leases::Leases;
    let fm = FieldManager::new(&Leases, None, T2);
    let mut defaulted = new.clone();
    Leases.set_defaults(&mut defaulted);
    let taken = fm.renewed_entries(live, &defaulted, manager).is_some();
    assert_eq!(taken, shortcut, "case {case}");
    let long = updated_the_long_way(&Leases, live, new.clone(), manager);
    assert_eq!(
        updated(&Leases, live, new, manager, T2),
        long,
        "case {case}"
    );
    if shortcut {
        assert_eq!(entries(&long)[0]["time"], T2.rfc3339(), "case {case}");
    }
}
