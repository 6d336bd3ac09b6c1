//! The status conditions the namespace controller keeps on a namespace being deleted, as
//! kube-controller-manager's `pkg/controller/namespace/deletion/status_condition_utils.go`:
//! five condition types, each `False` with its "ok" reason and message when nothing is
//! wrong and `True` with what went wrong (resources or finalizers remaining, content that
//! could not be deleted). Each pass over the namespace's content makes a fresh set; it is
//! merged into the namespace's `status.conditions` in place, a condition's
//! `lastTransitionTime` moving only when its status changes.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::apimachinery::time::Time;

/// The condition types the controller maintains, in upstream's order, each with its reason
/// and message when nothing is wrong.
const CONDITION_TYPES: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// What one pass over a namespace's content found (upstream's `allGVRDeletionMetadata`).
#[derive(Debug, Default)]
pub struct ContentTotals {
    /// Objects left, by `resource.group` (`configmaps.` for a core kind).
    pub remaining: BTreeMap<String, usize>,
    /// Objects left, by each finalizer they carry.
    pub finalizers: BTreeMap<String, usize>,
}

/// The conditions one pass makes (upstream's `namespaceConditionUpdater`).
#[derive(Debug, Default)]
pub struct ConditionUpdater {
    conditions: Vec<Value>,
    delete_errors: Vec<String>,
}

impl ConditionUpdater {
    /// Records that the content of one resource could not be deleted.
    pub fn delete_content_error(&mut self, message: String) {
        self.delete_errors.push(message);
    }

    /// Records what is left (upstream's `ProcessContentTotals`).
    pub fn content_totals(&mut self, totals: &ContentTotals, now: Time) {
        let rules = [
            (
                &totals.remaining,
                "NamespaceContentRemaining",
                "SomeResourcesRemain",
                "Some resources are remaining: ",
                "has",
            ),
            (
                &totals.finalizers,
                "NamespaceFinalizersRemaining",
                "SomeFinalizersRemain",
                "Some content in the namespace has finalizers remaining: ",
                "in",
            ),
        ];
        for (counts, kind, reason, prefix, word) in rules {
            if counts.is_empty() {
                continue;
            }
            // Sorted for stable updates, as upstream sorts them.
            let mut parts: Vec<String> = counts
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(what, n)| format!("{what} {word} {n} resource instances"))
                .collect();
            parts.sort();
            let message = format!("{prefix}{}", parts.join(", "));
            self.conditions.push(failed(kind, reason, message, now));
        }
    }

    /// Merges the pass's conditions into `status` (the namespace's `status` object); true
    /// when anything changed (upstream's `Update` and `updateConditions`).
    pub fn update(&self, status: &mut Value, now: Time) -> bool {
        let mut conditions = self.conditions.clone();
        if !self.delete_errors.is_empty() {
            let mut messages = self.delete_errors.clone();
            messages.sort();
            conditions.push(failed(
                "NamespaceDeletionContentFailure",
                "ContentDeletionFailed",
                format!(
                    "Failed to delete all resource types, {} remaining: {}",
                    messages.len(),
                    messages.join(", ")
                ),
                now,
            ));
        }
        if !status.is_object() {
            *status = json!({});
        }
        let existing = status
            .as_object_mut()
            .expect("an object")
            .entry("conditions")
            .or_insert_with(|| json!([]));
        if !existing.is_array() {
            *existing = json!([]);
        }
        let existing = existing.as_array_mut().expect("an array");
        let mut changed = false;
        for (kind, reason, message) in CONDITION_TYPES {
            let new = conditions
                .iter()
                .find(|c| c["type"] == kind)
                .cloned()
                .unwrap_or_else(|| condition(kind, "False", reason, message.to_string(), now));
            match existing.iter_mut().find(|c| c["type"] == kind) {
                None => {
                    existing.push(new);
                    changed = true;
                }
                Some(old) => {
                    let differs =
                        |field: &str| old.get(field).unwrap_or(&Value::Null) != &new[field];
                    if differs("status") || differs("reason") || differs("message") {
                        if differs("status") {
                            old["lastTransitionTime"] = now.rfc3339().into();
                        }
                        for field in ["status", "reason", "message"] {
                            old[field] = new[field].clone();
                        }
                        changed = true;
                    }
                }
            }
        }
        changed
    }
}

/// A condition saying something went wrong.
fn failed(kind: &str, reason: &str, message: String, now: Time) -> Value {
    condition(kind, "True", reason, message, now)
}

fn condition(kind: &str, status: &str, reason: &str, message: String, now: Time) -> Value {
    json!({
        "type": kind,
        "status": status,
        "lastTransitionTime": now.rfc3339(),
        "reason": reason,
        "message": message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(seconds)
    }

    fn find<'a>(status: &'a Value, kind: &str) -> &'a Value {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .unwrap()
    }

    /// The status, reason and message of the condition `kind`.
    fn said(status: &Value, kind: &str) -> [String; 3] {
        let c = find(status, kind);
        ["status", "reason", "message"].map(|f| c[f].as_str().unwrap_or_default().to_string())
    }

    #[test]
    fn remaining_content_and_finalizers_are_named_sorted_then_cleared_in_place() {
        let mut totals = ContentTotals::default();
        totals.remaining.insert("configmaps.".into(), 1);
        totals.remaining.insert("widgets.example.com".into(), 2);
        totals.finalizers.insert("example.com/x".into(), 3);
        let mut updater = ConditionUpdater::default();
        updater.content_totals(&totals, at(10));
        let mut status = json!({"phase": "Terminating"});
        assert!(updater.update(&mut status, at(10)));
        assert_eq!(status["conditions"].as_array().unwrap().len(), 5);
        assert_eq!(
            said(&status, "NamespaceContentRemaining"),
            [
                "True",
                "SomeResourcesRemain",
                "Some resources are remaining: configmaps. has 1 resource instances, \
                 widgets.example.com has 2 resource instances"
            ]
        );
        assert_eq!(
            said(&status, "NamespaceFinalizersRemaining"),
            [
                "True",
                "SomeFinalizersRemain",
                "Some content in the namespace has finalizers remaining: example.com/x in 3 \
                 resource instances"
            ]
        );
        assert_eq!(
            said(&status, "NamespaceDeletionDiscoveryFailure"),
            [
                "False",
                "ResourcesDiscovered",
                "All resources successfully discovered"
            ]
        );
        let first = at(10).rfc3339();

        // The same findings again: nothing changes.
        let mut again = ConditionUpdater::default();
        again.content_totals(&totals, at(20));
        assert!(!again.update(&mut status, at(20)));

        // A count changes: the message moves, the transition time does not.
        totals.remaining.insert("configmaps.".into(), 2);
        let mut fewer = ConditionUpdater::default();
        fewer.content_totals(&totals, at(30));
        assert!(fewer.update(&mut status, at(30)));
        let content = find(&status, "NamespaceContentRemaining");
        let message = content["message"].as_str().unwrap();
        assert!(message.contains("configmaps. has 2"), "{message}");
        assert_eq!(content["lastTransitionTime"], first.as_str());

        // Everything gone: the ok variants, the transition time moved, nothing duplicated.
        let empty = ConditionUpdater::default();
        assert!(empty.update(&mut status, at(40)));
        assert_eq!(status["conditions"].as_array().unwrap().len(), 5);
        assert_eq!(
            said(&status, "NamespaceContentRemaining"),
            [
                "False",
                "ContentRemoved",
                "All content successfully removed"
            ]
        );
        assert_eq!(
            find(&status, "NamespaceContentRemaining")["lastTransitionTime"],
            at(40).rfc3339().as_str()
        );
        assert_eq!(
            said(&status, "NamespaceFinalizersRemaining"),
            [
                "False",
                "ContentHasNoFinalizers",
                "All content-preserving finalizers finished"
            ]
        );
        let discovery = find(&status, "NamespaceDeletionDiscoveryFailure");
        assert_eq!(discovery["lastTransitionTime"], first.as_str());
    }

    #[test]
    fn delete_errors_are_sorted_and_counted() {
        let mut updater = ConditionUpdater::default();
        updater.delete_content_error("b failed".into());
        updater.delete_content_error("a failed".into());
        let mut status = json!({});
        assert!(updater.update(&mut status, at(1)));
        assert_eq!(
            said(&status, "NamespaceDeletionContentFailure"),
            [
                "True",
                "ContentDeletionFailed",
                "Failed to delete all resource types, 2 remaining: a failed, b failed"
            ]
        );
    }
}
