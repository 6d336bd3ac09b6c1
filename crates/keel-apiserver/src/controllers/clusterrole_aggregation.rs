//! kube-controller-manager's `clusterrole-aggregation` controller
//! (`pkg/controller/clusterroleaggregation`): a ClusterRole with an `aggregationRule` gets
//! the rules of every other ClusterRole its selectors match (each selector's matches in
//! name order, a rule already taken not taken again), and keeps them as those roles come,
//! change and go. ClusterRoles are followed by an [`Informer`]; any change syncs every
//! aggregating role (as upstream enqueues them all), a failed sync is tried again a second
//! later, and a role whose rules are already right is not written.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::informer::Informer;
use crate::apimachinery::time::Time;
use crate::fieldmanager::FieldManager;
use crate::registry::rbac::roles::{ClusterRoles, aggregation_selectors};
use crate::registry::store::Registry;
use crate::registry::{Strategy, meta_str};
use crate::storage::Status;

/// How soon a failed sync is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// The field manager of the controller's writes.
const MANAGER: &str = "clusterrole-aggregation-controller";

/// The rules `role` aggregates from `roles` (all ClusterRoles, in name order); None when it
/// has no aggregation rule, or a selector does not parse.
pub fn aggregated_rules(role: &Value, roles: &[Arc<Value>]) -> Option<Vec<Value>> {
    let selectors = aggregation_selectors(role)?;
    let name = meta_str(role, "name");
    let empty = Map::new();
    let mut rules: Vec<Value> = Vec::new();
    for selector in selectors {
        for other in roles {
            let labels = other
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            if meta_str(other, "name") == name || !selector.matches(labels) {
                continue;
            }
            let other_rules = other.get("rules").and_then(Value::as_array);
            for rule in other_rules.into_iter().flatten() {
                if !rules.iter().any(|r| same_rule(r, rule)) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    Some(rules)
}

/// Whether two rules are the same as `equality.Semantic.DeepEqual` finds typed rules: an
/// empty list is no list.
fn same_rule(a: &Value, b: &Value) -> bool {
    let fields = [
        "verbs",
        "apiGroups",
        "resources",
        "resourceNames",
        "nonResourceURLs",
    ];
    fields.iter().all(|f| list(a.get(*f)) == list(b.get(*f)))
}

fn list(value: Option<&Value>) -> &[Value] {
    value
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Whether `role`'s rules are `rules` (none and an empty list alike).
fn has_rules(role: &Value, rules: &[Value]) -> bool {
    let stored = list(role.get("rules"));
    stored.len() == rules.len() && stored.iter().zip(rules).all(|(a, b)| same_rule(a, b))
}

/// Runs the controller until the process ends.
pub async fn run(registry: Arc<Registry>) {
    let (changed, mut changes) = mpsc::unbounded_channel();
    let roles = Informer::spawn(registry.clone(), &ClusterRoles, None, None, Some(changed));
    let mut failed = false;
    loop {
        match tokio::time::timeout(RETRY, changes.recv()).await {
            Ok(None) => return,
            Ok(Some(_)) => while changes.try_recv().is_ok() {},
            Err(_) if !failed => continue,
            Err(_) => {}
        }
        if !roles.has_synced() {
            failed = true;
            continue;
        }
        failed = false;
        let all = roles.list();
        for role in &all {
            let Some(rules) = aggregated_rules(role, &all) else {
                continue;
            };
            if has_rules(role, &rules) {
                continue;
            }
            if let Err(status) = write(&registry, meta_str(role, "name"), rules).await {
                tracing::warn!(
                    clusterrole = meta_str(role, "name"),
                    error = %status.message,
                    "aggregating the cluster role; will retry"
                );
                failed = true;
            }
        }
    }
}

/// Stores `rules` as the rules of the ClusterRole `name`.
async fn write(registry: &Registry, name: &str, rules: Vec<Value>) -> Result<(), Status> {
    let kind: &'static dyn Strategy = &ClusterRoles;
    let fields = FieldManager::new(kind, None, Time::now());
    let written = registry
        .update(kind, None, name, None, false, |current| {
            let current = current.cloned().unwrap_or_default();
            let mut new = current.clone();
            new["rules"] = Value::Array(rules.clone());
            fields.update(Some(&current), &mut new, MANAGER);
            Ok(new)
        })
        .await;
    match written {
        Ok(_) => Ok(()),
        Err(status) if status.code == 404 => Ok(()),
        Err(status) => Err(status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(name: &str, labels: Value, rules: Value) -> Arc<Value> {
        Arc::new(json!({"metadata": {"name": name, "labels": labels}, "rules": rules}))
    }

    #[test]
    fn matching_roles_rules_are_gathered_once_in_name_order() {
        let view = json!({"metadata": {"name": "view", "labels": {"aggregate-to-view": "true"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"aggregate-to-view": "true"}}]}});
        let pods = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        let crds =
            json!({"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]});
        let all = vec![
            role(
                "a-widgets",
                json!({"aggregate-to-view": "true"}),
                json!([crds.clone()]),
            ),
            role(
                "b-pods",
                json!({"aggregate-to-view": "true"}),
                json!([pods.clone(), {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": []}]),
            ),
            role(
                "other",
                json!({}),
                json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
            ),
            Arc::new(view.clone()),
        ];
        let rules = aggregated_rules(&view, &all).unwrap();
        assert_eq!(rules, vec![crds.clone(), pods.clone()]);
        let mut stored = view.clone();
        assert!(!has_rules(&stored, &rules));
        stored["rules"] = json!([crds, pods]);
        assert!(has_rules(&stored, &rules));
        // Nothing matched: no rules, and none stored is right.
        assert!(has_rules(
            &view,
            &aggregated_rules(&view, &all[2..3]).unwrap()
        ));
        assert!(aggregated_rules(&all[0], &all).is_none());
    }
}
