//! Applies against what kube-apiserver writes: their entries, merges by list type, prunes
//! and conflicts, the client-side apply migration, and two properties (an apply is
//! idempotent, and a field dropped from the configuration goes when no one else owns it).

use proptest::prelude::{Strategy as _, prop, prop_assert, prop_assert_eq, proptest};

use super::*;
use crate::registry::services::Services;

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
    let obj = apply_cm(None, json!({"a": "x", "b": "y"}), "kubectl", T1);
    let edited = edit_cm(&obj, json!({"a": "z", "b": "y"}), "kubectl-edit", T2);
    let e = refused_cm(Some(&edited), json!({"a": "x", "b": "y"}), "kubectl", T3);
    let status = serde_json::to_value(e).unwrap();
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
    let shared = apply_cm(Some(&edited), json!({"a": "z", "b": "y"}), "kubectl", T3);
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
    let two = edit_cm(&edited, json!({"a": "z", "b": "w"}), "other", T3);
    let e = refused_cm(Some(&two), json!({"a": "1", "b": "2"}), "kubectl", T3);
    assert_eq!(
        e.message,
        "Apply failed with 2 conflicts: conflicts with \"kubectl-edit\" using v1:\n- .data.a\nconflicts with \"other\" using v1:\n- .data.b"
    );
    assert_eq!(e.details.unwrap().causes.len(), 2);
}

#[test]
fn dropping_a_field_from_the_configuration_removes_it_unless_someone_else_owns_it() {
    let obj = apply_cm(None, json!({"a": "x", "b": "y"}), "m1", T1);
    let pruned = apply_cm(Some(&obj), json!({"a": "x"}), "m1", T2);
    assert_eq!(pruned["data"], json!({"a": "x"}));
    let shared = stored(apply_cm(Some(&obj), json!({"b": "y"}), "m2", T2));
    let kept = apply_cm(Some(&shared), json!({"a": "x"}), "m1", T3);
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
    let e = refused(&Services, None, &dup, "m", T1);
    assert_eq!(e.code, 500);
    assert_eq!(
        e.message,
        "failed to create typed patch object (d/s; /v1, Kind=Service): .spec.ports: duplicate entries for key [port=80,protocol=\"TCP\"]"
    );
}

#[test]
fn an_apply_to_status_owns_only_the_status() {
    let obj = pending_pod();
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
    let e = refused(&ConfigMaps, None, &other, "m", T1);
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "invalid object type: /v2, Kind=ConfigMap")
    );
    let e = refused(&ConfigMaps, None, &json!({}), "m", T1);
    assert_eq!(e.message, "invalid object type: /, Kind=");
    let mut sent = cm(json!({}));
    sent["metadata"]["managedFields"] = json!([]);
    let e = refused(&ConfigMaps, None, &sent, "m", T1);
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "metadata.managedFields must be nil")
    );
}

#[test]
fn an_object_without_entries_gives_its_fields_to_before_first_apply() {
    let bare = stored(cm(json!({"a": "x"})));
    let e = refused_cm(Some(&bare), json!({"a": "y"}), "m", T2);
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
    let e = refused_cm(Some(&edited), json!({"a": "x", "b": "q"}), "kubectl", T3);
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.b"
    );
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
