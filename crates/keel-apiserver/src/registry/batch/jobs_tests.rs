//! Tests of the Job strategy: expected objects written from upstream's `SetDefaults_Job`,
//! `SetDefaults_PodSpec`/`SetDefaults_Container` and `generateSelector`, and messages from
//! `pkg/apis/batch/validation/validation.go`.

use super::*;
use crate::registry::rules::messages;

const UID: &str = "2f8a6a2e-1a34-4b1e-9a43-3c9a6c8d7e10";

/// What `kubectl create job pi --image=perl -- perl -e 1` sends, as the store has it before
/// the strategy runs (`meta::prepare_create` gave it a uid).
fn created_by_kubectl() -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "pi", "namespace": "default", "uid": UID},
        "spec": {"template": {"metadata": {}, "spec": {
            "containers": [{"name": "pi", "image": "perl", "command": ["perl", "-e", "1"],
                            "resources": {}}],
            "restartPolicy": "Never"}}},
        "status": {}})
}

#[test]
fn a_new_job_gets_upstreams_defaults_and_generated_selector() {
    let mut job = created_by_kubectl();
    Jobs.prepare_for_create(&mut job);
    let labels = json!({"batch.kubernetes.io/controller-uid": UID,
        "batch.kubernetes.io/job-name": "pi", "controller-uid": UID, "job-name": "pi"});
    // SetDefaults_Job: completions and parallelism 1, backoffLimit 6, NonIndexed, not
    // suspended, TerminatingOrFailed (no podFailurePolicy), manualSelector false, and the
    // Job's labels from the template's (which generateSelector filled in).
    // SetDefaults_PodSpec and SetDefaults_Container for the template.
    assert_eq!(
        job,
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "pi", "namespace": "default", "uid": UID,
                         "labels": labels.clone()},
            "spec": {
                "backoffLimit": 6, "completionMode": "NonIndexed", "completions": 1,
                "manualSelector": false, "parallelism": 1,
                "podReplacementPolicy": "TerminatingOrFailed",
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}},
                "suspend": false,
                "template": {"metadata": {"labels": labels}, "spec": {
                    "containers": [{"name": "pi", "image": "perl",
                        "command": ["perl", "-e", "1"], "imagePullPolicy": "Always",
                        "resources": {}, "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File"}],
                    "dnsPolicy": "ClusterFirst", "restartPolicy": "Never",
                    "schedulerName": "default-scheduler", "securityContext": {},
                    "terminationGracePeriodSeconds": 30}}},
            "status": {}})
    );
    assert!(Jobs.validate(&job).is_empty(), "{:?}", Jobs.validate(&job));
}

#[test]
fn defaults_follow_the_fields_set() {
    let spec = |spec: Value| {
        let mut job = json!({"metadata": {"labels": {"own": "x"}}, "spec": spec});
        set_defaults(&mut job);
        job
    };
    // Only completions: parallelism 1. Only parallelism: completions stay unset.
    assert_eq!(spec(json!({"completions": 5}))["spec"]["parallelism"], 1);
    let only_parallelism = spec(json!({"parallelism": 3}));
    assert!(only_parallelism["spec"].get("completions").is_none());
    // A backoff limit per index makes the default backoff limit MaxInt32; a failure policy
    // makes pods replaced only once Failed, and its patterns' status True.
    let per_index = spec(
        json!({"backoffLimitPerIndex": 1, "completionMode": "Indexed",
        "completions": 3, "podFailurePolicy": {"rules": [{"action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget"}]}]}}),
    );
    assert_eq!(per_index["spec"]["backoffLimit"], 2147483647);
    assert_eq!(per_index["spec"]["completionMode"], "Indexed");
    assert_eq!(per_index["spec"]["podReplacementPolicy"], "Failed");
    assert_eq!(
        per_index["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
        "True"
    );
    // Labels already set are kept; set fields are not overwritten.
    let set = spec(
        json!({"suspend": true, "manualSelector": true, "backoffLimit": 0,
        "template": {"metadata": {"labels": {"app": "a"}}}}),
    );
    assert_eq!(set["metadata"]["labels"], json!({"own": "x"}));
    assert_eq!(set["spec"]["suspend"], true);
    assert_eq!(set["spec"]["manualSelector"], true);
    assert_eq!(set["spec"]["backoffLimit"], 0);
}

#[test]
fn a_manual_selector_is_not_generated_and_must_match() {
    let mut job = created_by_kubectl();
    job["spec"]["manualSelector"] = json!(true);
    job["spec"]["template"]["metadata"]["labels"] = json!({"app": "pi"});
    Jobs.prepare_for_create(&mut job);
    assert!(job["spec"].get("selector").is_none());
    assert_eq!(job["metadata"]["labels"], json!({"app": "pi"}));
    assert_eq!(
        messages(&Jobs.validate(&job)),
        vec![
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: {\"app\":\"pi\"}: `selector` does \
             not match template `labels`",
        ]
    );
    job["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
    assert_eq!(
        messages(&Jobs.validate(&job)),
        vec![
            "spec.template.metadata.labels: Invalid value: {\"app\":\"pi\"}: `selector` does \
             not match template `labels`"
        ]
    );
}

#[test]
fn generated_labels_and_restart_policies_are_checked_in_upstream_words() {
    let mut job = created_by_kubectl();
    job["spec"]["template"]["metadata"]["labels"] = json!({"job-name": "other"});
    job["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    Jobs.prepare_for_create(&mut job);
    assert_eq!(
        messages(&Jobs.validate(&job)),
        vec![
            format!(
                "spec.template.metadata.labels[job-name]: Invalid value: \
                 {{\"batch.kubernetes.io/controller-uid\":\"{UID}\",\
                 \"batch.kubernetes.io/job-name\":\"pi\",\"controller-uid\":\"{UID}\",\
                 \"job-name\":\"other\"}}: must be 'pi'"
            ),
            // The selector names the uid only, so it still matches the template.
            "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \
             \"Never\""
                .to_string(),
        ]
    );
}

#[test]
fn an_indexed_job_needs_pod_host_names_that_are_labels() {
    let mut job = created_by_kubectl();
    job["metadata"]["name"] = json!("a".repeat(62));
    job["spec"]["completionMode"] = json!("Indexed");
    job["spec"]["completions"] = json!(10);
    Jobs.prepare_for_create(&mut job);
    let errors = messages(&Jobs.validate(&job));
    assert!(
        errors.iter().any(|e| e.ends_with(&format!(
            "will not able to create pod with invalid DNS label: {}-9",
            "a".repeat(62)
        ))),
        "{errors:#?}"
    );
}

#[test]
fn updates_keep_the_selector_template_and_modes() {
    let mut old = created_by_kubectl();
    Jobs.prepare_for_create(&mut old);
    assert!(Jobs.validate_update(&old, &old).is_empty());
    let mut new = old.clone();
    new["spec"]["completions"] = json!(2);
    new["spec"]["selector"]["matchLabels"]["extra"] = json!("x");
    new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:5");
    new["spec"]["completionMode"] = json!("Indexed");
    let errors = messages(&Jobs.validate_update(&new, &old));
    assert!(errors.contains(&format!(
        "spec.selector: Invalid value: {{\"matchLabels\":{{\"batch.kubernetes.io/controller-uid\":\
         \"{UID}\",\"extra\":\"x\"}}}}: field is immutable"
    )));
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("spec.template: Invalid value: {")
                && e.ends_with(": field is immutable")),
        "{errors:#?}"
    );
    assert!(errors.contains(
        &"spec.completionMode: Invalid value: \"Indexed\": field is immutable".to_string()
    ));
    // Indexed now, so completions may change only with parallelism.
    assert!(errors.contains(
        &"spec.completions: Invalid value: 2: can only be modified in tandem with spec.parallelism"
            .to_string()
    ));
    // A non-indexed Job's completions are immutable.
    let mut more = old.clone();
    more["spec"]["completions"] = json!(3);
    assert_eq!(
        messages(&Jobs.validate_update(&more, &old)),
        vec!["spec.completions: Invalid value: 3: field is immutable"]
    );
    // Parallelism may change; a suspended Job that never started may get a node selector.
    let mut scaled = old.clone();
    scaled["spec"]["parallelism"] = json!(4);
    assert!(Jobs.validate_update(&scaled, &old).is_empty());
    let mut suspended = old.clone();
    suspended["spec"]["suspend"] = json!(true);
    let mut placed = suspended.clone();
    placed["spec"]["template"]["spec"]["nodeSelector"] = json!({"disk": "ssd"});
    assert!(Jobs.validate_update(&placed, &suspended).is_empty());
    let mut placed_running = old.clone();
    placed_running["spec"]["template"]["spec"]["nodeSelector"] = json!({"disk": "ssd"});
    assert_eq!(Jobs.validate_update(&placed_running, &old).len(), 1);
}

#[test]
fn jobs_print_as_print_job_does() {
    let now = Time::parse("2026-05-28T20:30:00Z").unwrap();
    let mut job = created_by_kubectl();
    Jobs.prepare_for_create(&mut job);
    job["metadata"]["creationTimestamp"] = json!("2026-05-28T20:20:00Z");
    job["status"] = json!({"startTime": "2026-05-28T20:20:00Z",
        "completionTime": "2026-05-28T20:20:07Z", "succeeded": 1,
        "conditions": [{"type": "Complete", "status": "True"}]});
    assert_eq!(
        Jobs.cells(&job, now),
        vec![
            json!("pi"),
            json!("Complete"),
            json!("1/1"),
            json!("7s"),
            json!("10m"),
            json!("pi"),
            json!("perl"),
            json!(format!("batch.kubernetes.io/controller-uid={UID}")),
        ]
    );
    job["status"] = json!({"startTime": "2026-05-28T20:25:00Z"});
    job["spec"].as_object_mut().unwrap().remove("completions");
    job["spec"]["parallelism"] = json!(3);
    let cells = Jobs.cells(&job, now);
    assert_eq!(
        cells[1..4],
        [json!("Running"), json!("0/1 of 3"), json!("5m")]
    );
    job["status"] = json!({"conditions": [{"type": "Suspended", "status": "True"}]});
    assert_eq!(
        Jobs.cells(&job, now)[1..4],
        [json!("Suspended"), json!("0/1 of 3"), json!("")]
    );
    assert_eq!(Jobs.field(&job, "status.successful"), "0");
}
