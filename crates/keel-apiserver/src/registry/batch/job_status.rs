//! A Job's `status` subresource as `ValidateJobUpdateStatus`
//! (pkg/apis/batch/validation/validation.go) checks it with the options the job strategy
//! gives it while `JobManagedBy` is on (`getStatusValidationOptions`,
//! pkg/registry/batch/job/strategy.go): counts not negative, uncounted pods named once, and
//! the rules on terminal conditions, start and completion times, active, ready and
//! terminating pods, uncounted pods of a finished job, completed and failed indexes, the
//! `SuccessCriteriaMet` condition and the counters, each applied when a field it reads
//! changed (but for those upstream applies to every update).

use serde_json::Value;

use super::job_indexes;
use crate::json_pointer::At;
use crate::registry::status::{items, non_negative_counts};
use crate::registry::text;
use crate::storage::FieldError;

/// Whether `job` has the condition `kind` with status `True`.
fn condition(job: &Value, kind: &str) -> bool {
    items(job, "/status/conditions")
        .iter()
        .any(|c| text(c, "/type") == kind && text(c, "/status") == "True")
}

/// Whether the job is complete or failed (`IsJobFinished`).
fn finished(job: &Value) -> bool {
    condition(job, "Complete") || condition(job, "Failed")
}

/// The value at `pointer`, null when unset.
fn at(job: &Value, pointer: &str) -> Value {
    job.at(pointer).cloned().unwrap_or(Value::Null)
}

/// The integer at `pointer`, 0 when unset.
fn int(job: &Value, pointer: &str) -> i64 {
    job.at(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// `ValidateJobStatusUpdate` (and `validateJobStatus`).
pub fn validate(new: &Value, old: &Value) -> Vec<FieldError> {
    let changed = |pointer: &str| at(new, pointer) != at(old, pointer);
    let complete_changed = condition(new, "Complete") != condition(old, "Complete");
    let failed_changed = condition(new, "Failed") != condition(old, "Failed");
    let target_changed = condition(new, "FailureTarget") != condition(old, "FailureTarget");
    let finished_changed = finished(new) != finished(old);
    let (start_changed, completion_changed) = (
        changed("/status/startTime"),
        changed("/status/completionTime"),
    );
    let active_changed = changed("/status/active");

    let mut errors = non_negative_counts(
        new,
        &["active", "succeeded", "failed", "ready", "terminating"],
    );
    errors.extend(uncounted(new));
    let (complete, failed) = (condition(new, "Complete"), condition(new, "Failed"));
    let omitted = |detail: &str| FieldError::invalid_omitted("status.conditions", detail);
    if (complete_changed || failed_changed) && complete && failed {
        errors.push(omitted(
            "cannot set Complete=True and Failed=true conditions",
        ));
    }
    if (complete_changed || target_changed) && complete && condition(new, "FailureTarget") {
        errors.push(omitted(
            "cannot set Complete=True and FailureTarget=true conditions",
        ));
    }
    let completion = at(new, "/status/completionTime");
    let start = at(new, "/status/startTime");
    if complete_changed || completion_changed {
        if !completion.is_null() && !complete {
            errors.push(FieldError::invalid(
                "status.completionTime",
                completion.clone(),
                "cannot set completionTime when there is no Complete=True condition",
            ));
        }
        if completion.is_null() && complete {
            errors.push(FieldError::required(
                "status.completionTime",
                "completionTime is required for Complete jobs",
            ));
        }
    }
    if (start_changed || completion_changed)
        && let (Some(s), Some(c)) = (start.as_str(), completion.as_str())
        && before(c, s)
    {
        errors.push(FieldError::invalid(
            "status.completionTime",
            completion.clone(),
            "completionTime cannot be set before startTime",
        ));
    }
    let is_finished = finished(new);
    if (finished_changed || active_changed) && int(new, "/status/active") > 0 && is_finished {
        errors.push(FieldError::invalid(
            "status.active",
            int(new, "/status/active"),
            "active>0 is invalid for finished job",
        ));
    }
    // A suspended Job of no completions completes without ever starting.
    let suspended = new.at("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let zero_completions = new.at("/spec/completions").and_then(Value::as_i64) == Some(0);
    if (finished_changed || start_changed)
        && !(suspended && zero_completions)
        && start.is_null()
        && is_finished
    {
        errors.push(FieldError::required(
            "status.startTime",
            "startTime is required for finished job",
        ));
    }
    if (finished_changed || changed("/status/uncountedTerminatedPods"))
        && is_finished
        && !(items(new, "/status/uncountedTerminatedPods/succeeded").is_empty()
            && items(new, "/status/uncountedTerminatedPods/failed").is_empty())
    {
        errors.push(FieldError::invalid_printed(
            "status.uncountedTerminatedPods",
            uncounted_printed(new),
            "uncountedTerminatedPods needs to be empty for finished job",
        ));
    }
    errors.extend(indexes(new, old));
    let terminating = int(new, "/status/terminating");
    if (finished_changed || changed("/status/terminating")) && terminating > 0 && is_finished {
        errors.push(FieldError::invalid(
            "status.terminating",
            terminating,
            "terminating>0 is invalid for finished job",
        ));
    }
    let ready = new.at("/status/ready").and_then(Value::as_i64);
    if (changed("/status/ready") || active_changed)
        && let Some(ready) = ready
        && ready > int(new, "/status/active")
    {
        errors.push(FieldError::invalid(
            "status.ready",
            ready,
            "cannot set more ready pods than active",
        ));
    }
    errors.extend(success_criteria(new));
    errors.extend(transitions(new, old));
    let met = |job: &Value| condition(job, "SuccessCriteriaMet");
    if met(old) && !met(new) {
        errors.push(omitted(
            "cannot disable the SuccessCriteriaMet=True condition",
        ));
    }
    if condition(old, "Complete") && !met(old) && met(new) {
        errors.push(omitted(
            "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
        ));
    }
    errors
}

/// The uncounted terminated pods as upstream prints the internal struct in an error.
fn uncounted_printed(job: &Value) -> String {
    let list = |name: &str| {
        job.at(&format!("/status/uncountedTerminatedPods/{name}"))
            .filter(|v| v.is_array())
            .map_or("null".to_string(), Value::to_string)
    };
    format!(
        "{{\"Succeeded\":{},\"Failed\":{}}}",
        list("succeeded"),
        list("failed")
    )
}

/// The rules on `status.completedIndexes` and `status.failedIndexes`, each applied when a
/// list it reads changed: their format, completed indexes only for an Indexed Job, failed
/// indexes only with `backoffLimitPerIndex`, and no index in both.
fn indexes(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let completed = text(new, "/status/completedIndexes");
    let failed = new.at("/status/failedIndexes").and_then(Value::as_str);
    let completed_changed = completed != text(old, "/status/completedIndexes");
    let failed_changed = at(new, "/status/failedIndexes") != at(old, "/status/failedIndexes");
    let completions = new.at("/spec/completions").and_then(Value::as_i64);
    let per_index = !at(new, "/spec/backoffLimitPerIndex").is_null();
    if completed_changed
        && let Some(completions) = completions
        && let Err(why) = job_indexes::validate_format(completed, completions)
    {
        errors.push(FieldError::invalid(
            "status.completedIndexes",
            completed,
            &format!("error parsing completedIndexes: {why}"),
        ));
    }
    if failed_changed
        && per_index
        && let (Some(completions), Some(failed)) = (completions, failed)
        && let Err(why) = job_indexes::validate_format(failed, completions)
    {
        errors.push(FieldError::invalid(
            "status.failedIndexes",
            failed,
            &format!("error parsing failedIndexes: {why}"),
        ));
    }
    if completed_changed && !completed.is_empty() && text(new, "/spec/completionMode") != "Indexed"
    {
        errors.push(FieldError::invalid(
            "status.completedIndexes",
            completed,
            "cannot set non-empty completedIndexes when non-indexed completion mode",
        ));
    }
    if failed_changed
        && !per_index
        && let Some(failed) = failed
    {
        errors.push(FieldError::invalid(
            "status.failedIndexes",
            failed,
            "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
        ));
    }
    if (failed_changed || completed_changed)
        && let (Some(completions), Some(failed)) = (completions, failed)
        && let Some(why) = job_indexes::overlap(completed, failed, completions)
    {
        errors.push(FieldError::invalid("status.failedIndexes", failed, &why));
    }
    errors
}

/// The rules on the `SuccessCriteriaMet` condition that hold whatever changed (the job
/// strategy allows it beyond Indexed Jobs with a success policy): not beside `Failed` or
/// `FailureTarget`, and required before `Complete` when the Job has a success policy.
fn success_criteria(job: &Value) -> Vec<FieldError> {
    let omitted = |detail: &str| FieldError::invalid_omitted("status.conditions", detail);
    let met = condition(job, "SuccessCriteriaMet");
    let mut errors = Vec::new();
    if met && condition(job, "Failed") {
        errors.push(omitted(
            "cannot set SuccessCriteriaMet=True and Failed=true conditions",
        ));
    }
    if met && condition(job, "FailureTarget") {
        errors.push(omitted(
            "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
        ));
    }
    if !at(job, "/spec/successPolicy").is_null() && !met && condition(job, "Complete") {
        errors.push(omitted(
            "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
        ));
    }
    errors
}

/// `ValidateJobStatusUpdate`'s own rules: terminal conditions stay, the counters do not go
/// down (succeeded may for an indexed job whose completions equal its parallelism), a
/// completion time is not changed and a start time not removed from a running job.
fn transitions(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for kind in ["Failed", "Complete", "FailureTarget"] {
        if condition(old, kind) && !condition(new, kind) {
            errors.push(FieldError::invalid_omitted(
                "status.conditions",
                &format!("cannot disable the terminal {kind}=True condition"),
            ));
        }
    }
    if int(new, "/status/failed") < int(old, "/status/failed") {
        errors.push(FieldError::invalid(
            "status.failed",
            int(new, "/status/failed"),
            "cannot decrease the failed counter",
        ));
    }
    let indexed = text(new, "/spec/completionMode") == "Indexed";
    let scalable = indexed && at(new, "/spec/completions") == at(new, "/spec/parallelism");
    if !scalable && int(new, "/status/succeeded") < int(old, "/status/succeeded") {
        errors.push(FieldError::invalid(
            "status.succeeded",
            int(new, "/status/succeeded"),
            "cannot decrease the succeeded counter",
        ));
    }
    let (completion, was) = (
        at(new, "/status/completionTime"),
        at(old, "/status/completionTime"),
    );
    if !completion.is_null() && !was.is_null() && completion != was {
        errors.push(FieldError::invalid(
            "status.completionTime",
            completion,
            "completionTime cannot be mutated",
        ));
    }
    let started = at(old, "/status/startTime");
    let suspended = new.at("/spec/suspend").and_then(Value::as_bool) == Some(true);
    if !started.is_null() && started != at(new, "/status/startTime") && !suspended {
        errors.push(FieldError::required(
            "status.startTime",
            "startTime cannot be removed for unsuspended job",
        ));
    }
    errors
}

/// Whether the RFC 3339 time `a` is before `b` (both as the API writes them, UTC seconds).
fn before(a: &str, b: &str) -> bool {
    use crate::apimachinery::time::Time;
    match (Time::parse(a), Time::parse(b)) {
        (Some(a), Some(b)) => a.0 < b.0,
        _ => false,
    }
}

/// `uncountedTerminatedPods`: each uid set and listed once over both lists.
fn uncounted(job: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for list in ["succeeded", "failed"] {
        let uids = items(job, &format!("/status/uncountedTerminatedPods/{list}"));
        for (i, uid) in uids.iter().enumerate() {
            let at = format!("status.uncountedTerminatedPods.{list}[{i}]");
            let uid = uid.as_str().unwrap_or("");
            if uid.is_empty() {
                errors.push(FieldError::invalid(&at, uid, "must not be empty"));
            } else if seen.contains(&uid) {
                errors.push(FieldError::duplicate(&at, uid));
            } else {
                seen.push(uid);
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    fn job(status: Value) -> Value {
        json!({"spec": {"completions": 1, "parallelism": 1}, "status": status})
    }

    #[test]
    fn counts_and_times_are_checked_as_validate_job_status_update_checks_them() {
        let old = job(json!({"startTime": "2024-01-02T00:00:00Z", "succeeded": 1, "failed": 2}));
        let new = job(
            json!({"startTime": "2024-01-02T00:00:00Z", "active": -1, "failed": 1,
            "succeeded": 1, "completionTime": "2024-01-01T00:00:00Z",
            "conditions": [{"type": "Complete", "status": "True"}],
            "uncountedTerminatedPods": {"succeeded": ["a", ""], "failed": ["a"]}}),
        );
        assert_eq!(
            messages(&validate(&new, &old)),
            [
                "status.active: Invalid value: -1: must be greater than or equal to 0",
                "status.uncountedTerminatedPods.succeeded[1]: Invalid value: \"\": must not be \
                 empty",
                "status.uncountedTerminatedPods.failed[0]: Duplicate value: \"a\"",
                "status.completionTime: Invalid value: \"2024-01-01T00:00:00Z\": completionTime \
                 cannot be set before startTime",
                "status.uncountedTerminatedPods: Invalid value: \
                 {\"Succeeded\":[\"a\",\"\"],\"Failed\":[\"a\"]}: uncountedTerminatedPods needs \
                 to be empty for finished job",
                "status.failed: Invalid value: 1: cannot decrease the failed counter",
            ]
        );
    }

    #[test]
    fn terminal_conditions_need_their_times_and_stay() {
        let old = job(json!({"conditions": [{"type": "Failed", "status": "True"}],
            "startTime": "2024-01-01T00:00:00Z"}));
        let new = job(json!({"active": 1, "ready": 2,
            "conditions": [{"type": "Complete", "status": "True"}]}));
        assert_eq!(
            messages(&validate(&new, &old)),
            [
                "status.completionTime: Required value: completionTime is required for Complete \
                 jobs",
                "status.active: Invalid value: 1: active>0 is invalid for finished job",
                "status.startTime: Required value: startTime is required for finished job",
                "status.ready: Invalid value: 2: cannot set more ready pods than active",
                "status.conditions: Invalid value: cannot disable the terminal Failed=True \
                 condition",
                "status.startTime: Required value: startTime cannot be removed for unsuspended \
                 job",
            ]
        );
    }

    /// `validateJobStatus`'s index rules (applied when a list changed), the terminating
    /// pods of a finished job and the `SuccessCriteriaMet` rules.
    #[test]
    fn indexes_terminating_pods_and_success_criteria_are_checked() {
        let indexed = |status: Value| {
            json!({"spec": {"completions": 5, "parallelism": 5, "completionMode": "Indexed",
                "backoffLimitPerIndex": 1}, "status": status})
        };
        let old = indexed(json!({"startTime": "2024-01-01T00:00:00Z"}));
        let new = indexed(json!({"startTime": "2024-01-01T00:00:00Z",
            "completedIndexes": "0-2,7", "failedIndexes": "2,4"}));
        assert_eq!(
            messages(&validate(&new, &old)),
            [
                "status.completedIndexes: Invalid value: \"0-2,7\": error parsing \
                 completedIndexes: too large index: \"7\"",
                "status.failedIndexes: Invalid value: \"2,4\": failedIndexes and \
                 completedIndexes overlap at index: 2",
            ]
        );
        // Unchanged lists are not looked at again.
        assert!(validate(&new, &new).is_empty());

        let plain = json!({"spec": {"completions": 3}, "status": {
            "startTime": "2024-01-01T00:00:00Z", "completedIndexes": "1", "failedIndexes": "0"}});
        assert_eq!(
            messages(&validate(
                &plain,
                &job(json!({"startTime": "2024-01-01T00:00:00Z"}))
            )),
            [
                "status.completedIndexes: Invalid value: \"1\": cannot set non-empty \
                 completedIndexes when non-indexed completion mode",
                "status.failedIndexes: Invalid value: \"0\": cannot set non-null failedIndexes \
                 when backoffLimitPerIndex is null",
            ]
        );

        let old = job(json!({"startTime": "2024-01-01T00:00:00Z",
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}));
        let new = job(
            json!({"startTime": "2024-01-01T00:00:00Z", "terminating": 1,
            "conditions": [{"type": "Failed", "status": "True"}]}),
        );
        assert_eq!(
            messages(&validate(&new, &old)),
            [
                "status.terminating: Invalid value: 1: terminating>0 is invalid for finished job",
                "status.conditions: Invalid value: cannot disable the SuccessCriteriaMet=True \
                 condition",
            ]
        );
        let mut both = new.clone();
        both["status"]["terminating"] = json!(0);
        both["status"]["conditions"] = json!([{"type": "Failed", "status": "True"},
            {"type": "SuccessCriteriaMet", "status": "True"}]);
        assert_eq!(
            messages(&validate(&both, &old)),
            [
                "status.conditions: Invalid value: cannot set SuccessCriteriaMet=True and \
              Failed=true conditions"
            ]
        );
    }

    /// A suspended Job of no completions may complete without a start time (1.34).
    #[test]
    fn a_suspended_job_of_no_completions_completes_without_starting() {
        let old = json!({"spec": {"completions": 0, "parallelism": 0, "suspend": true},
            "status": {}});
        let mut new = old.clone();
        new["status"] = json!({"completionTime": "2024-01-01T00:00:00Z",
            "conditions": [{"type": "Complete", "status": "True"}]});
        assert!(
            validate(&new, &old).is_empty(),
            "{:?}",
            messages(&validate(&new, &old))
        );
        new["spec"]["suspend"] = json!(false);
        assert_eq!(
            messages(&validate(&new, &old)),
            ["status.startTime: Required value: startTime is required for finished job"]
        );
    }
}
