//! Tests of strategic merge patch: the directives, list merges and errors as apimachinery
//! applies and words them.
use super::order::go_stable_sort;
use super::*;
use serde_json::json;

fn pod() -> Schema {
    schema_for("", "Pod")
}

fn two_container_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "finalizers": ["a", "b"]},
        "spec": {
            "containers": [
                {"name": "a", "image": "busybox", "env": [{"name": "A", "value": "1"}]},
                {"name": "b", "image": "nginx:1", "ports": [{"containerPort": 80}]}
            ]
        }
    })
}

#[test]
fn kubectl_apply_changes_one_container_image() {
    let patch = json!({
        "metadata": {"annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{\"kind\":\"Pod\"}\n"
        }},
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"image": "nginx:2", "name": "b"}]
        }
    });
    let out = apply(&two_container_pod(), &patch, &pod()).unwrap();
    assert_eq!(
        out["spec"]["containers"],
        json!([
            {"name": "a", "image": "busybox", "env": [{"name": "A", "value": "1"}]},
            {"name": "b", "image": "nginx:2", "ports": [{"containerPort": 80}]}
        ])
    );
    assert_eq!(
        out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        "{\"kind\":\"Pod\"}\n"
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
}

#[test]
fn kubectl_apply_adds_an_env_var() {
    let patch = json!({"spec": {
        "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
        "containers": [{
            "$setElementOrder/env": [{"name": "A"}, {"name": "B"}],
            "env": [{"name": "B", "value": "2"}],
            "name": "a"
        }]
    }});
    let out = apply(&two_container_pod(), &patch, &pod()).unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    assert_eq!(out["spec"]["containers"][1]["name"], "b");
}

#[test]
fn kubectl_apply_deletes_a_container() {
    let patch = json!({"spec": {
        "$setElementOrder/containers": [{"name": "a"}],
        "containers": [{"$patch": "delete", "name": "b"}]
    }});
    let out = apply(&two_container_pod(), &patch, &pod()).unwrap();
    let names: Vec<&str> = out["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a"]);
}

#[test]
fn kubectl_apply_removes_an_env_var() {
    let original = json!({"spec": {"containers": [{"name": "a", "env": [
        {"name": "A", "value": "1"}, {"name": "B", "value": "2"}
    ]}]}});
    let patch = json!({"spec": {
        "$setElementOrder/containers": [{"name": "a"}],
        "containers": [{
            "$setElementOrder/env": [{"name": "A"}],
            "env": [{"$patch": "delete", "name": "B"}],
            "name": "a"
        }]
    }});
    let out = apply(&original, &patch, &pod()).unwrap();
    assert_eq!(
        out["spec"]["containers"],
        json!([{"name": "a", "env": [{"name": "A", "value": "1"}]}])
    );
}

#[test]
fn set_element_order_alone_reorders_the_live_list() {
    let patch = json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}});
    let out = apply(&two_container_pod(), &patch, &pod()).unwrap();
    assert_eq!(out["spec"]["containers"][0]["name"], "b");
    assert_eq!(out["spec"]["containers"][1]["name"], "a");
}

#[test]
fn merged_list_puts_new_items_in_patch_order_before_live_ones() {
    let original = json!({"spec": {"containers": [{"name": "a", "env": [
        {"name": "A", "value": "1"}, {"name": "B", "value": "2"}
    ]}]}});
    let patch = json!({"spec": {"containers": [{"name": "a", "env": [
        {"name": "C", "value": "3"}, {"name": "A", "value": "9"}
    ]}]}});
    let out = apply(&original, &patch, &pod()).unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([
            {"name": "C", "value": "3"},
            {"name": "A", "value": "9"},
            {"name": "B", "value": "2"}
        ])
    );
}

#[test]
fn configmap_data_change_with_null_deleting_a_key() {
    let original = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "annotations": {"keep": "1"}},
        "data": {"k1": "v1", "k2": "v2"}
    });
    let patch = json!({
        "data": {"k1": null, "k2": "v2b", "k3": "v3"},
        "metadata": {"annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{}\n"
        }}
    });
    let out = apply(&original, &patch, &schema_for("", "ConfigMap")).unwrap();
    assert_eq!(out["data"], json!({"k2": "v2b", "k3": "v3"}));
    assert_eq!(out["metadata"]["annotations"]["keep"], "1");
    assert_eq!(
        out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        "{}\n"
    );
}

#[test]
fn finalizers_merge_as_a_set_and_delete_from_primitive_list() {
    let schema = schema_for("", "ConfigMap");
    let original = json!({"metadata": {"name": "c", "finalizers": ["a", "b"]}});
    let out = apply(
        &original,
        &json!({"metadata": {"finalizers": ["b", "c"]}}),
        &schema,
    )
    .unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));

    let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
    let out = apply(&original, &patch, &schema).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["b"]));

    // What kubectl apply sends when "a" leaves and "c" joins the configuration.
    let patch = json!({"metadata": {
        "$deleteFromPrimitiveList/finalizers": ["a"],
        "$setElementOrder/finalizers": ["c", "b"],
        "finalizers": ["c"]
    }});
    let out = apply(&original, &patch, &schema).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["c", "b"]));
}

#[test]
fn non_merge_lists_are_replaced() {
    let original = json!({"spec": {"containers": [{"name": "a", "args": ["x", "y"]}]}});
    let patch = json!({"spec": {"containers": [{"name": "a", "args": ["z"]}]}});
    let out = apply(&original, &patch, &pod()).unwrap();
    assert_eq!(out["spec"]["containers"][0]["args"], json!(["z"]));
}

#[test]
fn patch_replace_on_a_list() {
    let patch = json!({"spec": {"containers": [
        {"name": "z", "image": "x"},
        {"$patch": "replace"}
    ]}});
    let out = apply(&two_container_pod(), &patch, &pod()).unwrap();
    assert_eq!(
        out["spec"]["containers"],
        json!([{"name": "z", "image": "x"}])
    );
}

#[test]
fn patch_replace_and_delete_on_maps() {
    let original = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"x": "1"}});
    let patch = json!({
        "metadata": {"labels": {"$patch": "replace", "c": "3"}},
        "data": {"$patch": "delete"}
    });
    let out = apply(&original, &patch, &schema_for("", "ConfigMap")).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"c": "3"}));
    assert_eq!(out["data"], json!({}));
}

#[test]
fn pod_status_conditions_merge_by_type() {
    let original = json!({"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}
    ]}});
    let patch = json!({"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": null},
        {"type": "Initialized", "status": "True"}
    ]}});
    let out = apply(&original, &patch, &pod()).unwrap();
    assert_eq!(
        out["status"]["conditions"],
        json!([
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True"},
            {"type": "Initialized", "status": "True"}
        ])
    );
    assert_eq!(out["status"]["phase"], "Pending");
}

#[test]
fn service_ports_merge_by_port() {
    let original = json!({"spec": {"ports": [
        {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
        {"name": "https", "port": 443, "protocol": "TCP"}
    ]}});
    let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}});
    let out = apply(&original, &patch, &schema_for("", "Service")).unwrap();
    assert_eq!(
        out["spec"]["ports"],
        json!([
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 9090},
            {"name": "https", "port": 443, "protocol": "TCP"}
        ])
    );
}

#[test]
fn node_addresses_merge_by_type_and_pod_cidrs_union() {
    let original = json!({
        "spec": {"podCIDRs": ["10.0.0.0/24"]},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.1.1.1"}]}
    });
    let patch = json!({
        "spec": {"podCIDRs": ["fd00::/64"]},
        "status": {"addresses": [
            {"type": "Hostname", "address": "n1"},
            {"type": "InternalIP", "address": "10.1.1.2"}
        ]}
    });
    let out = apply(&original, &patch, &schema_for("", "Node")).unwrap();
    // Go puts patch items missing from the live list first.
    assert_eq!(out["spec"]["podCIDRs"], json!(["fd00::/64", "10.0.0.0/24"]));
    assert_eq!(
        out["status"]["addresses"],
        json!([
            {"type": "Hostname", "address": "n1"},
            {"type": "InternalIP", "address": "10.1.1.2"}
        ])
    );
}

#[test]
fn retain_keys_clears_a_volume_source() {
    let original = json!({"spec": {"volumes": [
        {"name": "v", "configMap": {"name": "cm"}}
    ]}});
    let patch = json!({"spec": {"volumes": [
        {"$retainKeys": ["name", "secret"], "name": "v", "secret": {"secretName": "s"}}
    ]}});
    let out = apply(&original, &patch, &pod()).unwrap();
    assert_eq!(
        out["spec"]["volumes"],
        json!([{"name": "v", "secret": {"secretName": "s"}}])
    );

    let bad = json!({"spec": {"volumes": [
        {"$retainKeys": ["name"], "name": "v", "secret": {"secretName": "s"}}
    ]}});
    let err = apply(&original, &bad, &pod()).unwrap_err();
    assert_eq!(err, PatchError::BadPatchFormatForRetainKeys);
    assert_eq!(err.status_code(), 400);
}

#[test]
fn new_fields_drop_nulls_and_directives() {
    let original = json!({"metadata": {"name": "c"}});
    let patch = json!({"data": {"a": "1", "b": null}, "metadata": {"labels": {"x": null}}});
    let out = apply(&original, &patch, &schema_for("", "ConfigMap")).unwrap();
    assert_eq!(out["data"], json!({"a": "1"}));
    assert_eq!(out["metadata"]["labels"], json!({}));
    assert_eq!(
        apply(&original, &Value::Null, &Schema::default()).unwrap(),
        original
    );
}

#[test]
fn owner_references_merge_by_uid() {
    let original = json!({"metadata": {"ownerReferences": [
        {"uid": "1", "name": "a", "kind": "X", "apiVersion": "v1"}
    ]}});
    let patch = json!({"metadata": {"ownerReferences": [
        {"uid": "2", "name": "b", "kind": "X", "apiVersion": "v1"}
    ]}});
    let out = apply(
        &original,
        &patch,
        &schema_for("coordination.k8s.io", "Lease"),
    )
    .unwrap();
    assert_eq!(
        out["metadata"]["ownerReferences"].as_array().unwrap().len(),
        2
    );
}

#[test]
fn element_without_merge_key_is_refused_with_gos_message() {
    let patch = json!({"spec": {"containers": [{"image": "nginx"}]}});
    let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "map: map[image:nginx] does not contain declared merge key: name"
    );
    assert_eq!(err.status_code(), 500);
}

#[test]
fn unknown_and_misplaced_patch_directives() {
    let patch = json!({"spec": {"containers": [{"name": "a", "$patch": "foo"}]}});
    let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown patch type: foo in map: map[$patch:foo name:a]"
    );

    let patch = json!({"metadata": {"$patch": "merge"}});
    let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown patch type: merge in map: map[$patch:merge]"
    );

    let patch = json!({"spec": {"containers": [{"$patch": "merge"}]}});
    let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
    assert_eq!(err, PatchError::MergeListDirective);

    let patch = json!({"spec": {"containers": [{"$patch": "delete"}]}});
    let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "map: map[$patch:delete] does not contain declared merge key: name"
    );

    let patch = json!({"spec": {"containers": [{"name": "a", "$patch": 1}]}});
    let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown patch type: %!s(int64=1) in map: map[$patch:1 name:a]"
    );
}

#[test]
fn malformed_directive_keys_are_bad_requests() {
    let patch = json!({"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}});
    let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
    assert_eq!(err.to_string(), "invalid patch format of primitive list");
    assert_eq!(err.status_code(), 400);

    let patch = json!({"spec": {"$setElementOrder": [{"name": "a"}]}});
    let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
    assert_eq!(err, PatchError::BadPatchFormatForSetElementOrderList);

    let patch = json!({"spec": {"$setElementOrder/containers": {"name": "a"}}});
    let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "expected a []interface {}, but received a map[string]interface {}"
    );

    let patch = json!({"spec": {
        "$setElementOrder/containers": [{"name": "a"}],
        "containers": [{"name": "b", "image": "x"}]
    }});
    let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
    assert!(
        matches!(err, PatchError::SetElementOrderMismatch { .. }),
        "{err}"
    );

    let err = apply(&two_container_pod(), &json!([1]), &pod()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "json: cannot unmarshal array into Go value of type map[string]interface {}"
    );
    assert_eq!(err.status_code(), 400);
}

#[test]
fn lists_of_lists_and_mixed_lists_are_refused() {
    let original = json!({"metadata": {"finalizers": [["a"]]}});
    let patch = json!({"metadata": {"finalizers": [["b"]]}});
    let err = apply(&original, &patch, &pod()).unwrap_err();
    assert_eq!(err, PatchError::NoListOfLists);
    assert_eq!(err.status_code(), 422);

    let original = json!({"metadata": {"finalizers": ["a"]}});
    let patch = json!({"metadata": {"finalizers": [1]}});
    let err = apply(&original, &patch, &pod()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "list element types are not identical: [[a] [1]]"
    );
}

#[test]
fn go_stable_sort_matches_go_for_missing_items() {
    // Go's insertion sort moves items missing from the order list to the front.
    let mut d: Vec<(Option<usize>, Value)> = vec![
        (Some(1), json!("b")),
        (None, json!("x")),
        (Some(0), json!("a")),
    ];
    go_stable_sort(&mut d);
    let got: Vec<&Value> = d.iter().map(|(_, v)| v).collect();
    assert_eq!(got, [&json!("a"), &json!("x"), &json!("b")]);
    let mut big: Vec<(Option<usize>, Value)> = (0..50)
        .map(|i| (if i % 7 == 0 { None } else { Some(50 - i) }, json!(i)))
        .collect();
    go_stable_sort(&mut big);
    assert_eq!(big.len(), 50);
}
