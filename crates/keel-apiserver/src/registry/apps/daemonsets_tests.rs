//! DaemonSet defaults, validation and printing, against expectations written from
//! upstream's `SetDefaults_DaemonSet`, the template generation conversion and strategy,
//! `ValidateDaemonSet(Update)` and `printDaemonSet`.

use super::*;
use crate::registry::rules::messages;

fn agent() -> Value {
    json!({"metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"nodeSelector": {"zone": "b", "disk": "ssd"},
                                       "containers": [{"name": "agent", "image": "busybox:1.36"}]}}}})
}

#[test]
fn a_new_daemonset_gets_upstreams_defaults_and_template_generation_1() {
    let mut d = agent();
    DaemonSets.prepare_for_create(&mut d);
    // SetDefaults_DaemonSet: RollingUpdate, maxUnavailable 1 (an int), maxSurge 0,
    // revisionHistoryLimit 10; PrepareForCreate: templateGeneration 1, an empty status.
    assert_eq!(
        d["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        d["metadata"]["annotations"],
        json!({"deprecated.daemonset.template.generation": "1"})
    );
    assert_eq!(
        d["status"],
        json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
               "desiredNumberScheduled": 0, "numberReady": 0})
    );
    assert!(
        DaemonSets.validate(&d).is_empty(),
        "{:?}",
        DaemonSets.validate(&d)
    );
    let mut on_delete = agent();
    on_delete["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    DaemonSets.set_defaults(&mut on_delete);
    assert_eq!(
        on_delete["spec"]["updateStrategy"],
        json!({"type": "OnDelete"})
    );
}

#[test]
fn a_template_change_is_the_next_template_generation() {
    let mut old = agent();
    DaemonSets.prepare_for_create(&mut old);
    let mut new = old.clone();
    new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:1.37");
    DaemonSets.prepare_for_update(&mut new, &old);
    assert_eq!(
        new["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "2"
    );
    assert!(DaemonSets.validate_update(&new, &old).is_empty());
    // Sent without the annotation and with the same template: 0, decremented.
    let mut bare = old.clone();
    bare["metadata"] = json!({"name": "agent"});
    DaemonSets.prepare_for_update(&mut bare, &old);
    assert_eq!(
        messages(&DaemonSets.validate_update(&bare, &old)),
        vec!["spec.templateGeneration: Invalid value: 0: must not be decremented"]
    );
}

#[test]
fn daemonsets_are_validated_in_upstream_words() {
    let mut d = agent();
    d["spec"]["updateStrategy"] = json!({"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}});
    d["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(5);
    DaemonSets.set_defaults(&mut d);
    assert_eq!(
        messages(&DaemonSets.validate(&d)),
        vec![
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in \
             DaemonSet is not Supported",
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when \
             maxSurge is 0",
        ]
    );
    let mut d = agent();
    d["spec"]["updateStrategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 1}});
    DaemonSets.set_defaults(&mut d);
    assert_eq!(
        messages(&DaemonSets.validate(&d)),
        vec![
            "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when \
             maxUnavailable is non-zero"
        ]
    );
    let mut d = agent();
    d["spec"]["selector"] = json!({});
    d["spec"]["updateStrategy"] = json!({"type": "Surge"});
    DaemonSets.set_defaults(&mut d);
    assert_eq!(
        messages(&DaemonSets.validate(&d)),
        vec![
            "spec.selector: Invalid value: {}: empty selector is invalid for daemonset",
            "spec.updateStrategy: Unsupported value: {\"Type\":\"Surge\",\"RollingUpdate\":null}: \
             supported values: \"RollingUpdate\", \"OnDelete\"",
        ]
    );
}

#[test]
fn daemonsets_print_their_counts_and_node_selector() {
    let mut d = agent();
    DaemonSets.prepare_for_create(&mut d);
    d["metadata"]["creationTimestamp"] = json!("2026-05-28T20:16:40Z");
    d["status"] = json!({"desiredNumberScheduled": 3, "currentNumberScheduled": 2,
        "numberReady": 1, "updatedNumberScheduled": 2, "numberAvailable": 1});
    assert_eq!(
        DaemonSets.cells(&d, Time(1_780_000_000)),
        vec![
            json!("agent"),
            json!(3),
            json!(2),
            json!(1),
            json!(2),
            json!(1),
            json!("disk=ssd,zone=b"),
            json!("10m"),
            json!("agent"),
            json!("busybox:1.36"),
            json!("app=agent")
        ]
    );
    assert!(DaemonSets.scale().is_none());
}

#[test]
fn a_status_update_is_checked_as_validate_daemon_set_status_update() {
    let old = json!({"status": {"collisionCount": 1}});
    let new = json!({"status": {"numberMisscheduled": -2, "numberReady": 1}});
    assert_eq!(
        messages(&DaemonSets.validate_status_update(&new, &old)),
        [
            "status.numberMisscheduled: Invalid value: -2: must be greater than or equal to 0",
            "status.collisionCount: Invalid value: 0: cannot be decremented",
        ]
    );
}
