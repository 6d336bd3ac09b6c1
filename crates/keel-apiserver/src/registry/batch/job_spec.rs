//! What a Job's spec and a CronJob's job template share: `validateJobSpec` of
//! `pkg/apis/batch/validation/validation.go` (counts, completion mode, backoff limits per
//! index, `managedBy`, the pod failure, success and replacement policies, the pod template
//! and its restart policy), and the defaults both get (`SetDefaults_Job`'s part that is not
//! the Job's own, `SetDefaults_PodFailurePolicyOnPodConditionsPattern`).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::apimachinery::validation::is_qualified_name;
use crate::json_pointer::At;
use crate::registry::printing::invalid_without_value;
use crate::registry::{rules, template};
use crate::storage::FieldError;

/// `maxParallelismForIndexedJob`.
const MAX_PARALLELISM_INDEXED: i64 = 100_000;
/// `maxFailedIndexesForIndexedJob`.
const MAX_FAILED_INDEXES: i64 = 100_000;
/// `completionsSoftLimit`.
const COMPLETIONS_SOFT_LIMIT: i64 = 100_000;
/// `parallelismLimitForHighCompletions` and `maxFailedIndexesLimitForHighCompletions`.
const HIGH_COMPLETIONS_LIMIT: i64 = 10_000;
/// `maxPodFailurePolicyRules`, `maxPodFailurePolicyOnPodConditionsPatterns` and
/// `maxSuccessPolicyRule`.
const MAX_RULES: usize = 20;
/// `maxPodFailurePolicyOnExitCodesValues`.
const MAX_EXIT_CODES: usize = 255;
/// `maxManagedByLength`.
const MAX_MANAGED_BY: usize = 63;
/// `supportedPodFailurePolicyActions`, sorted as `sets.List` sorts them.
const ACTIONS: [&str; 4] = ["Count", "FailIndex", "FailJob", "Ignore"];
/// `supportedPodFailurePolicyOnExitCodesOperator`.
const OPERATORS: [&str; 2] = ["In", "NotIn"];
/// `supportedPodFailurePolicyOnPodConditionsStatus`.
const STATUSES: [&str; 3] = ["False", "True", "Unknown"];
/// `supportedPodReplacementPolicy`.
const REPLACEMENT_POLICIES: [&str; 2] = ["Failed", "TerminatingOrFailed"];

/// The integer at `field` of `spec`, if set.
pub fn int(spec: &Value, field: &str) -> Option<i64> {
    spec.get(field).and_then(Value::as_i64)
}

/// `ValidateNonnegativeField` of `spec.<field>` at `<path>.<field>`, if it is set.
pub fn non_negative(spec: &Value, field: &str, path: &str) -> Option<FieldError> {
    rules::non_negative(spec, &format!("/{field}"), &format!("{path}.{field}"))
}

/// Makes the objects on the way to `pointer` (`/spec/template`) in `obj`, as a Go struct
/// field that is not a pointer is always there.
pub fn ensure_object(obj: &mut Value, pointer: &str) {
    let mut here = obj;
    for step in pointer.split('/').filter(|s| !s.is_empty()) {
        let Some(map) = here.as_object_mut() else {
            return;
        };
        let next = map.entry(step).or_insert_with(|| json!({}));
        if next.is_null() {
            *next = json!({});
        }
        here = next;
    }
}

/// The defaults of the JobSpec at `pointer` that a CronJob's template gets too: the pod
/// template's and each pod condition pattern's status (`True`).
pub fn template_defaults(obj: &mut Value, pointer: &str) {
    let template = format!("{pointer}/template");
    ensure_object(obj, &template);
    template::set_defaults(obj, &template);
    let rules = obj
        .at_mut(&format!("{pointer}/podFailurePolicy/rules"))
        .and_then(Value::as_array_mut);
    for rule in rules.into_iter().flatten() {
        let patterns = rule
            .get_mut("onPodConditions")
            .and_then(Value::as_array_mut);
        for pattern in patterns
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            if pattern
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                pattern.insert("status".into(), json!("True"));
            }
        }
    }
}

/// A Go `%q` of a list of strings (`["a" "b"]`), as `fmt.Sprintf("valid values: %q", ...)`
/// prints one.
fn quoted_list(values: &[&str]) -> String {
    let items: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
    format!("[{}]", items.join(" "))
}

/// `validateJobSpec` of `spec` at `path` (`spec`, or `spec.jobTemplate.spec`).
pub fn validate_job_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for field in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
    ] {
        errors.extend(non_negative(spec, field, path));
    }
    let per_index = int(spec, "backoffLimitPerIndex");
    let max_failed = int(spec, "maxFailedIndexes");
    if max_failed.is_some() {
        errors.extend(non_negative(spec, "maxFailedIndexes", path));
        if per_index.is_none() {
            errors.push(FieldError::required(
                &format!("{path}.backoffLimitPerIndex"),
                "when maxFailedIndexes is specified",
            ));
        }
    }
    if let Some(managed_by) = spec.get("managedBy").and_then(Value::as_str) {
        errors.extend(rules::domain_prefixed_path(
            &format!("{path}.managedBy"),
            managed_by,
        ));
        if managed_by.len() > MAX_MANAGED_BY {
            errors.push(FieldError::too_long(
                &format!("{path}.managedBy"),
                MAX_MANAGED_BY,
            ));
        }
    }
    let mode = spec.get("completionMode").and_then(Value::as_str);
    let completions = int(spec, "completions");
    let parallelism = int(spec, "parallelism");
    if let Some(mode) = mode {
        if mode != "NonIndexed" && mode != "Indexed" {
            errors.push(FieldError::not_supported(
                &format!("{path}.completionMode"),
                mode,
                &["NonIndexed", "Indexed"],
            ));
        }
        if mode == "Indexed" {
            errors.extend(indexed_rules(
                path,
                completions,
                parallelism,
                per_index,
                max_failed,
            ));
        }
    }
    if mode.is_none_or(|m| m == "NonIndexed") {
        for (field, value) in [
            ("backoffLimitPerIndex", per_index),
            ("maxFailedIndexes", max_failed),
        ] {
            if let Some(v) = value {
                errors.push(FieldError::invalid(
                    &format!("{path}.{field}"),
                    v,
                    "requires indexed completion mode",
                ));
            }
        }
    }
    let failure_policy = spec.get("podFailurePolicy").filter(|p| !p.is_null());
    if let Some(policy) = failure_policy {
        errors.extend(pod_failure_policy(
            spec,
            policy,
            &format!("{path}.podFailurePolicy"),
        ));
    }
    if let Some(policy) = spec.get("successPolicy").filter(|p| !p.is_null()) {
        let at = format!("{path}.successPolicy");
        if mode != Some("Indexed") {
            errors.push(FieldError::invalid(
                &at,
                policy.clone(),
                "requires indexed completion mode",
            ));
        } else {
            errors.extend(success_policy(policy, completions.unwrap_or(0), &at));
        }
    }
    if let Some(replacement) = spec.get("podReplacementPolicy").and_then(Value::as_str) {
        let at = format!("{path}.podReplacementPolicy");
        if failure_policy.is_some() {
            if replacement != "Failed" {
                errors.push(FieldError::not_supported(&at, replacement, &["Failed"]));
            }
        } else if !REPLACEMENT_POLICIES.contains(&replacement) {
            errors.push(FieldError::not_supported(
                &at,
                replacement,
                &REPLACEMENT_POLICIES,
            ));
        }
    }
    let empty = json!({});
    let pod_template = spec.get("template").unwrap_or(&empty);
    errors.extend(template::validate(
        pod_template,
        &format!("{path}.template"),
    ));
    let restart_at = format!("{path}.template.spec.restartPolicy");
    let restart = pod_template
        .at("/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("");
    if restart == "Always" || restart.is_empty() {
        errors.push(FieldError::required(
            &restart_at,
            "valid values: \"OnFailure\", \"Never\"",
        ));
    } else if restart != "OnFailure" && restart != "Never" {
        errors.push(FieldError::not_supported(
            &restart_at,
            restart,
            &["OnFailure", "Never"],
        ));
    } else if failure_policy.is_some() && restart != "Never" {
        errors.push(FieldError::invalid(
            &restart_at,
            restart,
            "only \"Never\" is supported when podFailurePolicy is specified",
        ));
    }
    errors
}

/// The rules of an Indexed Job's counts.
fn indexed_rules(
    path: &str,
    completions: Option<i64>,
    parallelism: Option<i64>,
    per_index: Option<i64>,
    max_failed: Option<i64>,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if completions.is_none() {
        errors.push(FieldError::required(
            &format!("{path}.completions"),
            "when completion mode is Indexed",
        ));
    }
    if let Some(p) = parallelism.filter(|p| *p > MAX_PARALLELISM_INDEXED) {
        errors.push(FieldError::invalid(
            &format!("{path}.parallelism"),
            p,
            &format!(
                "must be less than or equal to {MAX_PARALLELISM_INDEXED} when completion mode is Indexed"
            ),
        ));
    }
    let failed_at = format!("{path}.maxFailedIndexes");
    if let (Some(c), Some(m)) = (completions, max_failed)
        && m > c
    {
        errors.push(FieldError::invalid(
            &failed_at,
            m,
            "must be less than or equal to completions",
        ));
    }
    if let Some(m) = max_failed.filter(|m| *m > MAX_FAILED_INDEXES) {
        errors.push(FieldError::invalid(
            &failed_at,
            m,
            &format!("must be less than or equal to {MAX_FAILED_INDEXES}"),
        ));
    }
    if completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT) && per_index.is_some() {
        let above = format!(
            "when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
        );
        if max_failed.is_none() {
            errors.push(FieldError::required(
                &failed_at,
                &format!("must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"),
            ));
        }
        if let Some(p) = parallelism.filter(|p| *p > HIGH_COMPLETIONS_LIMIT) {
            errors.push(FieldError::invalid(
                &format!("{path}.parallelism"),
                p,
                &format!("must be less than or equal to {HIGH_COMPLETIONS_LIMIT} {above}"),
            ));
        }
        if let Some(m) = max_failed.filter(|m| *m > HIGH_COMPLETIONS_LIMIT) {
            errors.push(FieldError::invalid(
                &failed_at,
                m,
                &format!("must be less than or equal to {HIGH_COMPLETIONS_LIMIT} {above}"),
            ));
        }
    }
    errors
}

/// `validatePodFailurePolicy` of `policy` at `path`.
fn pod_failure_policy(spec: &Value, policy: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let rules_at = format!("{path}.rules");
    let rules = policy.get("rules").and_then(Value::as_array);
    let rules: Vec<&Value> = rules.into_iter().flatten().collect();
    if rules.len() > MAX_RULES {
        errors.push(FieldError::too_many(&rules_at, rules.len(), MAX_RULES));
    }
    let containers: BTreeSet<&str> = ["/template/spec/containers", "/template/spec/initContainers"]
        .iter()
        .filter_map(|p| spec.at(p).and_then(Value::as_array))
        .flatten()
        .map(|c| c.get("name").and_then(Value::as_str).unwrap_or(""))
        .collect();
    let per_index = spec
        .get("backoffLimitPerIndex")
        .is_some_and(|v| !v.is_null());
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("{rules_at}[{i}]");
        let action_at = format!("{at}.action");
        let action = rule.get("action").and_then(Value::as_str).unwrap_or("");
        if action.is_empty() {
            errors.push(FieldError::required(
                &action_at,
                &format!("valid values: {}", quoted_list(&ACTIONS)),
            ));
        } else if action == "FailIndex" {
            if !per_index {
                errors.push(FieldError::invalid(
                    &action_at,
                    action,
                    "requires the backoffLimitPerIndex to be set",
                ));
            }
        } else if !ACTIONS.contains(&action) {
            errors.push(FieldError::not_supported(&action_at, action, &ACTIONS));
        }
        let exit_codes = rule.get("onExitCodes").filter(|v| !v.is_null());
        if let Some(codes) = exit_codes {
            errors.extend(on_exit_codes(
                codes,
                &format!("{at}.onExitCodes"),
                &containers,
            ));
        }
        let patterns = rule.get("onPodConditions").and_then(Value::as_array);
        let patterns: Vec<&Value> = patterns.into_iter().flatten().collect();
        if !patterns.is_empty() {
            errors.extend(on_pod_conditions(
                &patterns,
                &format!("{at}.onPodConditions"),
            ));
        }
        if exit_codes.is_some() && !patterns.is_empty() {
            errors.push(invalid_without_value(
                &at,
                "specifying both OnExitCodes and OnPodConditions is not supported",
            ));
        }
        if exit_codes.is_none() && patterns.is_empty() {
            errors.push(invalid_without_value(
                &at,
                "specifying one of OnExitCodes and OnPodConditions is required",
            ));
        }
    }
    errors
}

/// `validatePodFailurePolicyRuleOnPodConditions`.
fn on_pod_conditions(patterns: &[&Value], path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if patterns.len() > MAX_RULES {
        errors.push(FieldError::too_many(path, patterns.len(), MAX_RULES));
    }
    for (j, pattern) in patterns.iter().enumerate() {
        let at = format!("{path}[{j}]");
        let kind = pattern.get("type").and_then(Value::as_str).unwrap_or("");
        for problem in is_qualified_name(kind) {
            errors.push(FieldError::invalid(&format!("{at}.type"), kind, &problem));
        }
        let status = pattern.get("status").and_then(Value::as_str).unwrap_or("");
        let status_at = format!("{at}.status");
        if status.is_empty() {
            errors.push(FieldError::required(
                &status_at,
                &format!("valid values: {}", quoted_list(&STATUSES)),
            ));
        } else if !STATUSES.contains(&status) {
            errors.push(FieldError::not_supported(&status_at, status, &STATUSES));
        }
    }
    errors
}

/// `validatePodFailurePolicyRuleOnExitCodes`.
fn on_exit_codes(codes: &Value, path: &str, containers: &BTreeSet<&str>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let operator = codes.get("operator").and_then(Value::as_str).unwrap_or("");
    let operator_at = format!("{path}.operator");
    if operator.is_empty() {
        errors.push(FieldError::required(
            &operator_at,
            &format!("valid values: {}", quoted_list(&OPERATORS)),
        ));
    } else if !OPERATORS.contains(&operator) {
        errors.push(FieldError::not_supported(
            &operator_at,
            operator,
            &OPERATORS,
        ));
    }
    if let Some(name) = codes.get("containerName").and_then(Value::as_str)
        && !containers.contains(name)
    {
        errors.push(FieldError::invalid(
            &format!("{path}.containerName"),
            name,
            "must be one of the container or initContainer names in the pod template",
        ));
    }
    let values_at = format!("{path}.values");
    let values: Vec<i64> = codes
        .get("values")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    let shown = || match codes.get("values") {
        Some(Value::Array(l)) => Value::Array(l.clone()),
        _ => Value::Null,
    };
    if values.is_empty() {
        errors.push(FieldError::invalid(
            &values_at,
            shown(),
            "at least one value is required",
        ));
    } else if values.len() > MAX_EXIT_CODES {
        errors.push(FieldError::too_many(
            &values_at,
            values.len(),
            MAX_EXIT_CODES,
        ));
    }
    let mut seen = BTreeSet::new();
    for (j, v) in values.iter().enumerate() {
        let at = format!("{values_at}[{j}]");
        if operator == "In" && *v == 0 {
            errors.push(FieldError::invalid(
                &at,
                *v,
                "must not be 0 for the In operator",
            ));
        }
        if !seen.insert(*v) {
            errors.push(FieldError::duplicate(&at, *v));
        }
    }
    if values.windows(2).any(|w| w[0] > w[1]) {
        errors.push(FieldError::invalid(&values_at, shown(), "must be ordered"));
    }
    errors
}

/// `validateSuccessPolicy` (its rules' counts; `succeededIndexes` is not parsed).
fn success_policy(policy: &Value, completions: i64, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let rules_at = format!("{path}.rules");
    let rules = policy.get("rules").and_then(Value::as_array);
    let rules: Vec<&Value> = rules.into_iter().flatten().collect();
    if rules.is_empty() {
        errors.push(FieldError::required(
            &rules_at,
            "at least one rules must be specified when the successPolicy is specified",
        ));
    }
    if rules.len() > MAX_RULES {
        errors.push(FieldError::too_many(&rules_at, rules.len(), MAX_RULES));
    }
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("{rules_at}[{i}]");
        let count = int(rule, "succeededCount");
        if count.is_none() && rule.get("succeededIndexes").is_none_or(Value::is_null) {
            errors.push(FieldError::required(
                &at,
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
        if let Some(c) = count {
            errors.extend(non_negative(rule, "succeededCount", &at));
            if c > completions {
                errors.push(FieldError::invalid(
                    &format!("{at}.succeededCount"),
                    c,
                    &format!(
                        "must be less than or equal to {completions} (the number of specified completions)"
                    ),
                ));
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    fn valid_spec() -> Value {
        let mut job = json!({"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}});
        template_defaults(&mut job, "/spec");
        job["spec"].take()
    }

    #[test]
    fn counts_modes_and_restart_policies_are_validated_in_upstream_words() {
        assert!(validate_job_spec(&valid_spec(), "spec").is_empty());
        let mut spec = valid_spec();
        spec["parallelism"] = json!(-1);
        spec["backoffLimit"] = json!(-2);
        spec["maxFailedIndexes"] = json!(1);
        spec["completionMode"] = json!("Sometimes");
        spec["podReplacementPolicy"] = json!("Always");
        spec["template"]["spec"]["restartPolicy"] = json!("Always");
        assert_eq!(
            messages(&validate_job_spec(&spec, "spec")),
            vec![
                "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
                "spec.backoffLimit: Invalid value: -2: must be greater than or equal to 0",
                "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
                "spec.completionMode: Unsupported value: \"Sometimes\": supported values: \
                 \"NonIndexed\", \"Indexed\"",
                "spec.podReplacementPolicy: Unsupported value: \"Always\": supported values: \
                 \"Failed\", \"TerminatingOrFailed\"",
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \
                 \"Never\"",
            ]
        );
        let mut indexed = valid_spec();
        indexed["completionMode"] = json!("Indexed");
        indexed["parallelism"] = json!(100_001);
        assert_eq!(
            messages(&validate_job_spec(&indexed, "spec")),
            vec![
                "spec.completions: Required value: when completion mode is Indexed",
                "spec.parallelism: Invalid value: 100001: must be less than or equal to 100000 \
                 when completion mode is Indexed",
            ]
        );
        let mut nonindexed = valid_spec();
        nonindexed["backoffLimitPerIndex"] = json!(1);
        assert_eq!(
            messages(&validate_job_spec(&nonindexed, "spec")),
            vec!["spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"]
        );
    }

    #[test]
    fn pod_failure_policies_are_validated_in_upstream_words() {
        let mut job = json!({"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "busybox"}]}},
            "podReplacementPolicy": "TerminatingOrFailed",
            "podFailurePolicy": {"rules": [
                {"action": "Explode", "onExitCodes": {"operator": "In", "values": [3, 0, 3]},
                 "onPodConditions": [{"type": "DisruptionTarget"}]},
                {"action": "FailIndex"},
                {"action": "", "onExitCodes": {"operator": "Maybe", "containerName": "x",
                 "values": []}}]}}});
        template_defaults(&mut job, "/spec");
        // The pattern's status was defaulted to True.
        assert_eq!(
            job["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
            "True"
        );
        assert_eq!(
            messages(&validate_job_spec(&job["spec"], "spec")),
            vec![
                "spec.podFailurePolicy.rules[0].action: Unsupported value: \"Explode\": \
                 supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Invalid value: 0: must \
                 not be 0 for the In operator",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 3",
                "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [3,0,3]: \
                 must be ordered",
                "spec.podFailurePolicy.rules[0]: Invalid value: specifying both OnExitCodes and \
                 OnPodConditions is not supported",
                "spec.podFailurePolicy.rules[1].action: Invalid value: \"FailIndex\": requires \
                 the backoffLimitPerIndex to be set",
                "spec.podFailurePolicy.rules[1]: Invalid value: specifying one of OnExitCodes \
                 and OnPodConditions is required",
                "spec.podFailurePolicy.rules[2].action: Required value: valid values: \
                 [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]",
                "spec.podFailurePolicy.rules[2].onExitCodes.operator: Unsupported value: \
                 \"Maybe\": supported values: \"In\", \"NotIn\"",
                "spec.podFailurePolicy.rules[2].onExitCodes.containerName: Invalid value: \"x\": \
                 must be one of the container or initContainer names in the pod template",
                "spec.podFailurePolicy.rules[2].onExitCodes.values: Invalid value: []: at least \
                 one value is required",
                "spec.podReplacementPolicy: Unsupported value: \"TerminatingOrFailed\": \
                 supported values: \"Failed\"",
                "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" \
                 is supported when podFailurePolicy is specified",
            ]
        );
    }

    #[test]
    fn managed_by_must_be_a_domain_prefixed_path() {
        let mut spec = valid_spec();
        spec["managedBy"] = json!("no-slash");
        assert_eq!(
            messages(&validate_job_spec(&spec, "spec")),
            vec![
                "spec.managedBy: Invalid value: \"no-slash\": must be a domain-prefixed path \
                 (such as \"acme.io/foo\")"
            ]
        );
        spec["managedBy"] = json!("kueue.x-k8s.io/multikueue");
        assert!(validate_job_spec(&spec, "spec").is_empty());
    }
}
