//! Deployment defaults, validation and printing, against expectations written from
//! upstream's `SetDefaults_Deployment`, `ValidateDeployment` and `printDeployment`.

use super::*;
use crate::registry::rules::messages;

/// What `kubectl create deployment web --image=nginx` sends.
fn created_by_kubectl() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "strategy": {},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx",
                                                       "resources": {}}]}}},
        "status": {}})
}

#[test]
fn a_new_deployment_gets_upstreams_defaults_and_an_empty_status() {
    let mut d = created_by_kubectl();
    d["status"] = json!({"replicas": 3});
    Deployments.prepare_for_create(&mut d);
    // SetDefaults_Deployment: strategy RollingUpdate with 25%/25%, revisionHistoryLimit 10,
    // progressDeadlineSeconds 600 (replicas was sent); SetDefaults_PodSpec and
    // SetDefaults_Container on the template; PrepareForCreate clears the status.
    assert_eq!(
        d["spec"],
        json!({"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx",
                            "imagePullPolicy": "Always", "resources": {},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File"}],
                         "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                         "dnsPolicy": "ClusterFirst", "securityContext": {},
                         "schedulerName": "default-scheduler"}}})
    );
    assert_eq!(d["status"], json!({}));
    assert!(
        Deployments.validate(&d).is_empty(),
        "{:?}",
        Deployments.validate(&d)
    );
}

#[test]
fn defaults_fill_only_what_is_missing() {
    // Replicas 1 when unset; a Recreate strategy gets no rollingUpdate; a given bound stays.
    let mut d = json!({"spec": {"strategy": {"type": "Recreate"}, "revisionHistoryLimit": 0}});
    Deployments.set_defaults(&mut d);
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
    assert_eq!(d["spec"]["revisionHistoryLimit"], 0);
    let mut d = json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": 2}}}});
    Deployments.set_defaults(&mut d);
    assert_eq!(
        d["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": "25%"}})
    );
    // A Recreate strategy's rollingUpdate is kept, and refused.
    let mut d = created_by_kubectl();
    d["spec"]["strategy"] = json!({"type": "Recreate", "rollingUpdate": {}});
    Deployments.set_defaults(&mut d);
    assert_eq!(d["spec"]["strategy"]["rollingUpdate"], json!({}));
    assert_eq!(
        messages(&Deployments.validate(&d)),
        vec![
            "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` \
             is 'Recreate'"
        ]
    );
}

#[test]
fn deployments_are_validated_in_upstream_words() {
    let mut d = created_by_kubectl();
    d["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    d["spec"]["minReadySeconds"] = json!(700);
    d["spec"]["strategy"] = json!({"rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}});
    Deployments.set_defaults(&mut d);
    assert_eq!(
        messages(&Deployments.validate(&d)),
        vec![
            "spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: \
             `selector` does not match template `labels`",
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when \
             `maxSurge` is 0",
            "spec.progressDeadlineSeconds: Invalid value: 600: must be greater than \
             minReadySeconds",
        ]
    );
    let mut d = created_by_kubectl();
    d["spec"]["selector"] = json!({});
    d["spec"]["replicas"] = json!(-2);
    d["spec"]["strategy"] = json!({"rollingUpdate": {"maxUnavailable": "150%"}});
    Deployments.set_defaults(&mut d);
    assert_eq!(
        messages(&Deployments.validate(&d)),
        vec![
            "spec.replicas: Invalid value: -2: must be greater than or equal to 0",
            "spec.selector: Invalid value: {}: empty selector is invalid for deployment",
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"150%\": must not be \
             greater than 100%",
        ]
    );
    let mut d = created_by_kubectl();
    d["spec"]["strategy"] = json!({"type": "Canary"});
    d["spec"].as_object_mut().unwrap().remove("selector");
    Deployments.set_defaults(&mut d);
    assert_eq!(
        messages(&Deployments.validate(&d)),
        vec![
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: \
             `selector` does not match template `labels`",
            "spec.strategy: Unsupported value: {\"Type\":\"Canary\",\"RollingUpdate\":null}: \
             supported values: \"Recreate\", \"RollingUpdate\"",
        ]
    );
}

#[test]
fn the_selector_is_immutable_and_annotations_bump_the_generation() {
    let mut old = created_by_kubectl();
    Deployments.prepare_for_create(&mut old);
    old["metadata"]["generation"] = json!(4);
    let mut new = old.clone();
    new["spec"]["selector"] = json!({"matchLabels": {"app": "web", "tier": "x"}});
    new["spec"]["template"]["metadata"]["labels"]["tier"] = json!("x");
    assert_eq!(
        messages(&Deployments.validate_update(&new, &old)),
        vec![
            r#"spec.selector: Invalid value: {"matchLabels":{"app":"web","tier":"x"}}: field is immutable"#
        ]
    );
    let mut annotated = old.clone();
    annotated["metadata"]["annotations"] = json!({"note": "x"});
    Deployments.prepare_for_update(&mut annotated, &old);
    assert_eq!(annotated["metadata"]["generation"], 5);
    let mut same = old.clone();
    Deployments.prepare_for_update(&mut same, &old);
    assert_eq!(same["metadata"]["generation"], 4);
}

#[test]
fn deployments_print_ready_up_to_date_and_available() {
    let mut d = created_by_kubectl();
    Deployments.prepare_for_create(&mut d);
    d["metadata"]["creationTimestamp"] = json!("2026-05-28T20:16:40Z");
    d["spec"]["replicas"] = json!(3);
    d["status"] = json!({"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 1});
    assert_eq!(
        Deployments.cells(&d, Time(1_780_000_000)),
        vec![
            json!("web"),
            json!("2/3"),
            json!(3),
            json!(1),
            json!("10m"),
            json!("nginx"),
            json!("nginx"),
            json!("app=web")
        ]
    );
    let names: Vec<(&str, i32)> = COLUMNS.iter().map(|c| (c.name, c.priority)).collect();
    assert_eq!(
        names,
        [
            ("Name", 0),
            ("Ready", 0),
            ("Up-to-date", 0),
            ("Available", 0),
            ("Age", 0),
            ("Containers", 1),
            ("Images", 1),
            ("Selector", 1)
        ]
    );
    assert_eq!(
        Deployments.scale().map(|s| s.label_selector),
        Some(Some(".spec.selector".to_string()))
    );
}

#[test]
fn a_status_update_keeps_the_labels_and_is_checked_as_validate_deployment_status_update() {
    let old = json!({"metadata": {"labels": {"app": "web"}}, "status": {"collisionCount": 2}});
    let mut new = json!({"metadata": {"labels": {"app": "other"}},
        "status": {"replicas": 1, "updatedReplicas": 2, "readyReplicas": 1,
            "availableReplicas": 2, "unavailableReplicas": -1, "collisionCount": 1}});
    Deployments.prepare_for_status_update(&mut new, &old);
    assert_eq!(new["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(
        messages(&Deployments.validate_status_update(&new, &old)),
        [
            "status.unavailableReplicas: Invalid value: -1: must be greater than or equal to 0",
            "status.updatedReplicas: Invalid value: 2: cannot be greater than status.replicas",
            "status.availableReplicas: Invalid value: 2: cannot be greater than status.replicas",
            "status.availableReplicas: Invalid value: 2: cannot be greater than readyReplicas",
            "status.collisionCount: Invalid value: 1: cannot be decremented",
        ]
    );
    // Spec rules are not a status update's: an invalid spec does not stop it.
    let bad_spec = json!({"spec": {"replicas": -1}, "status": {"replicas": 1}});
    assert!(
        Deployments
            .validate_status_update(&bad_spec, &bad_spec)
            .is_empty()
    );
    assert_eq!(
        Deployments.status_reset_fields(),
        &[&["spec"][..], &["metadata", "labels"][..]]
    );
}
