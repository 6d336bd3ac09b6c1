//! A Job's `status` subresource as `ValidateJobUpdateStatus`
//! (pkg/apis/batch/validation/validation.go) checks it with the options the job strategy
//! gives it while `JobManagedBy` is on (`getStatusValidationOptions`,
//! pkg/registry/batch/job/strategy.go): counts not negative, uncounted pods named once, and
//! the rules on terminal conditions, start and completion times, active and ready pods and
//! the counters, each applied when a field it reads changed.

use serde_json::Value;

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
    if (finished_changed || start_changed) && start.is_null() && is_finished {
        errors.push(FieldError::required(
            "status.startTime",
            "startTime is required for finished job",
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
    errors.extend(transitions(new, old));
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
}
