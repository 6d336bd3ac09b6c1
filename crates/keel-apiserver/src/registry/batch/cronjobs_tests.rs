//! Tests of the CronJob strategy: expected objects written from upstream's
//! `SetDefaults_CronJob` and the pod spec's defaults, and messages from
//! `pkg/apis/batch/validation/validation.go` and robfig/cron.

use super::*;
use crate::registry::rules::messages;

/// What `kubectl create cronjob tick --image=busybox --schedule="*/5 * * * *" -- date`
/// sends.
fn created_by_kubectl() -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "tick", "namespace": "default"},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"metadata": {"name": "tick"},
            "spec": {"template": {"metadata": {}, "spec": {
                "containers": [{"name": "tick", "image": "busybox", "command": ["date"],
                                "resources": {}}],
                "restartPolicy": "OnFailure"}}}}},
        "status": {}})
}

#[test]
fn a_new_cronjob_gets_upstreams_defaults() {
    let mut cj = created_by_kubectl();
    CronJobs.prepare_for_create(&mut cj);
    // SetDefaults_CronJob; the job template's spec gets no Job defaults (SetDefaults_Job is
    // the Job's), only its pod template's (SetDefaults_PodSpec, SetDefaults_Container).
    assert_eq!(
        cj,
        json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "tick", "namespace": "default"},
            "spec": {"schedule": "*/5 * * * *", "concurrencyPolicy": "Allow",
                "suspend": false, "successfulJobsHistoryLimit": 3,
                "failedJobsHistoryLimit": 1,
                "jobTemplate": {"metadata": {"name": "tick"}, "spec": {"template": {
                    "metadata": {}, "spec": {
                        "containers": [{"name": "tick", "image": "busybox",
                            "command": ["date"], "imagePullPolicy": "Always",
                            "resources": {}, "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File"}],
                        "dnsPolicy": "ClusterFirst", "restartPolicy": "OnFailure",
                        "schedulerName": "default-scheduler", "securityContext": {},
                        "terminationGracePeriodSeconds": 30}}}}},
            "status": {}})
    );
    assert!(CronJobs.validate(&cj).is_empty());
}

#[test]
fn schedules_time_zones_and_templates_are_validated_in_upstream_words() {
    let check = |edit: &dyn Fn(&mut Value)| {
        let mut cj = created_by_kubectl();
        edit(&mut cj);
        CronJobs.prepare_for_create(&mut cj);
        messages(&CronJobs.validate(&cj))
    };
    assert_eq!(
        check(&|cj| cj["spec"]["schedule"] = json!("bad")),
        vec!["spec.schedule: Invalid value: \"bad\": expected exactly 5 fields, found 1: [bad]"]
    );
    assert_eq!(
        check(&|cj| cj["spec"]["schedule"] = json!("")),
        vec!["spec.schedule: Required value"]
    );
    assert_eq!(
        check(&|cj| cj["spec"]["schedule"] = json!("TZ=UTC 0 * * * *")),
        vec![
            "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in \
             schedule, use timeZone field instead"
        ]
    );
    assert!(check(&|cj| cj["spec"]["schedule"] = json!("@hourly")).is_empty());
    assert!(check(&|cj| cj["spec"]["timeZone"] = json!("Europe/Berlin")).is_empty());
    assert_eq!(
        check(&|cj| cj["spec"]["timeZone"] = json!("Mars/Olympus_Mons")),
        vec![
            "spec.timeZone: Invalid value: \"Mars/Olympus_Mons\": unknown time zone \
             Mars/Olympus_Mons"
        ]
    );
    assert_eq!(
        check(&|cj| cj["spec"]["timeZone"] = json!("America/Very_Long_Zone_Name")),
        vec![
            "spec.timeZone: Invalid value: \"America/Very_Long_Zone_Name\": unknown time zone \
             America/Very_Long_Zone_Name"
        ]
    );
    assert_eq!(
        check(&|cj| cj["spec"]["timeZone"] = json!("local")),
        vec![
            "spec.timeZone: Invalid value: \"local\": timeZone must be an explicit time zone \
             as defined in https://www.iana.org/time-zones",
            "spec.timeZone: Invalid value: \"local\": unknown time zone local",
        ]
    );
    assert_eq!(
        check(&|cj| cj["spec"]["timeZone"] = json!("")),
        vec!["spec.timeZone: Invalid value: \"\": timeZone must be nil or non-empty string"]
    );
    assert_eq!(
        check(&|cj| {
            cj["spec"]["startingDeadlineSeconds"] = json!(-5);
            cj["spec"]["concurrencyPolicy"] = json!("Sometimes");
            cj["spec"]["jobTemplate"]["spec"]["selector"] = json!({"matchLabels": {"a": "b"}});
            cj["spec"]["jobTemplate"]["spec"]["manualSelector"] = json!(true);
            cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] =
                json!("Always");
            cj["spec"]["failedJobsHistoryLimit"] = json!(-1);
            cj["metadata"]["name"] = json!("x".repeat(53));
        }),
        vec![
            "spec.startingDeadlineSeconds: Invalid value: -5: must be greater than or equal to 0",
            "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \
             \"Allow\", \"Forbid\", \"Replace\"",
            "spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \
             \"OnFailure\", \"Never\"",
            "spec.jobTemplate.spec.selector: Invalid value: {\"matchLabels\":{\"a\":\"b\"}}: \
             `selector` will be auto-generated",
            "spec.jobTemplate.spec.manualSelector: Unsupported value: true: supported values: \
             \"nil\", \"false\"",
            "spec.failedJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
            &format!(
                "metadata.name: Invalid value: \"{}\": must be no more than 52 characters",
                "x".repeat(53)
            ),
        ]
    );
}

#[test]
fn updates_may_keep_a_stored_tz_and_skip_the_name_limit() {
    let mut old = created_by_kubectl();
    old["metadata"]["name"] = json!("y".repeat(60));
    old["spec"]["schedule"] = json!("CRON_TZ=UTC 0 * * * *");
    CronJobs.set_defaults(&mut old);
    assert!(CronJobs.validate_update(&old, &old).is_empty());
    let mut new = old.clone();
    new["spec"]["timeZone"] = json!("UTC");
    assert_eq!(
        messages(&CronJobs.validate_update(&new, &old)),
        vec![
            "spec.schedule: Invalid value: \"CRON_TZ=UTC 0 * * * *\": cannot use both timeZone \
             field and TZ or CRON_TZ in schedule"
        ]
    );
}

#[test]
fn cronjobs_print_as_print_cronjob_does() {
    let now = Time::parse("2026-05-28T20:30:00Z").unwrap();
    let mut cj = created_by_kubectl();
    CronJobs.prepare_for_create(&mut cj);
    cj["metadata"]["creationTimestamp"] = json!("2026-05-28T18:30:00Z");
    assert_eq!(
        CronJobs.cells(&cj, now),
        vec![
            json!("tick"),
            json!("*/5 * * * *"),
            json!("<none>"),
            json!("False"),
            json!(0),
            json!("<none>"),
            json!("120m"),
            json!("tick"),
            json!("busybox"),
            json!("<none>"),
        ]
    );
    cj["spec"]["timeZone"] = json!("Etc/UTC");
    cj["spec"]["suspend"] = json!(true);
    cj["status"] = json!({"active": [{"name": "tick-1"}],
        "lastScheduleTime": "2026-05-28T20:25:00Z"});
    assert_eq!(
        CronJobs.cells(&cj, now)[2..6],
        [json!("Etc/UTC"), json!("True"), json!(1), json!("5m")]
    );
}
