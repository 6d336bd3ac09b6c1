//! How kube-apiserver brings a stored bootstrap role or binding up to date
//! (`pkg/registry/rbac/reconciliation/reconcile_role.go`, `reconcile_rolebindings.go`), in
//! the union mode its `rbac/bootstrap-roles` hook uses: expected labels and annotations are
//! added (a stored value wins), missing rules are added as the simple rules
//! `validation.Covers` finds uncovered (one verb, group, resource, name or URL each), missing
//! aggregation selectors are added, missing subjects are added; nothing extra is removed. A
//! binding whose roleRef differs is recreated. An object annotated
//! `rbac.authorization.kubernetes.io/autoupdate: "false"` is protected: left alone.

use serde_json::{Map, Value};

/// What reconciling one object comes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    /// It is missing: create the expected object.
    Create,
    /// Store this object in its place.
    Update(Value),
    /// Its roleRef differs: delete it and create the expected object.
    Recreate,
    /// Nothing to do.
    None,
}

/// The result of reconciling one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconciled {
    /// What to do (unless protected).
    pub operation: Operation,
    /// The object carries `autoupdate: "false"`: nothing is done whatever the operation.
    pub protected: bool,
    /// The rules (simple rules) or subjects missing from the stored object.
    pub missing: Vec<Value>,
}

/// The annotation whose "false" protects an object.
const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";

fn protected(existing: &Value) -> bool {
    existing
        .pointer(&format!(
            "/metadata/annotations/{}",
            AUTOUPDATE.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        == Some("false")
}

fn strings(value: Option<&Value>) -> Vec<&str> {
    value
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `merge(expected, existing)` of one metadata map into `obj`: expected keys are added, a
/// stored value wins. Whether anything changed.
fn merge_metadata(obj: &mut Value, expected: &Value, field: &str) -> bool {
    let Some(wanted) = expected.pointer(&format!("/metadata/{field}")) else {
        return false;
    };
    let Some(wanted) = wanted.as_object().filter(|m| !m.is_empty()) else {
        return false;
    };
    let metadata = obj.as_object_mut().map(|o| {
        o.entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()))
    });
    let Some(Value::Object(metadata)) = metadata else {
        return false;
    };
    let map = metadata
        .entry(field)
        .or_insert_with(|| Value::Object(Map::new()));
    if !map.is_object() {
        *map = Value::Object(Map::new());
    }
    let map = map.as_object_mut().expect("an object");
    let mut changed = false;
    for (key, value) in wanted {
        if !map.contains_key(key) {
            map.insert(key.clone(), value.clone());
            changed = true;
        }
    }
    changed
}

/// `BreakdownRule`: one rule per group, resource, verb (and name), then per URL and verb.
pub fn breakdown(rule: &Value) -> Vec<Value> {
    let one = |s: &str| Value::Array(vec![Value::String(s.into())]);
    let names = strings(rule.get("resourceNames"));
    let verbs = strings(rule.get("verbs"));
    let mut out = Vec::new();
    for group in strings(rule.get("apiGroups")) {
        for resource in strings(rule.get("resources")) {
            for verb in &verbs {
                let mut simple = Map::new();
                simple.insert("apiGroups".into(), one(group));
                simple.insert("resources".into(), one(resource));
                simple.insert("verbs".into(), one(verb));
                if names.is_empty() {
                    out.push(Value::Object(simple));
                } else {
                    for name in &names {
                        let mut named = simple.clone();
                        named.insert("resourceNames".into(), one(name));
                        out.push(Value::Object(named));
                    }
                }
            }
        }
    }
    for url in strings(rule.get("nonResourceURLs")) {
        for verb in &verbs {
            let mut simple = Map::new();
            simple.insert("nonResourceURLs".into(), one(url));
            simple.insert("verbs".into(), one(verb));
            out.push(Value::Object(simple));
        }
    }
    out
}

fn has_all(set: &[&str], contains: &[&str]) -> bool {
    contains.iter().all(|c| set.contains(c))
}

/// `resourceCoversAll`: `*`, an exact match, or `*/<subresource>`.
fn resources_cover(set: &[&str], covers: &[&str]) -> bool {
    if set.contains(&"*") || has_all(set, covers) {
        return true;
    }
    covers.iter().all(|path| {
        set.contains(path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| set.contains(&format!("*/{sub}").as_str()))
    })
}

/// `nonResourceURLCovers`: equal, or the owner ends in `*` and is a prefix.
fn url_covers(owner: &str, sub: &str) -> bool {
    owner == sub || owner.strip_suffix('*').is_some_and(|p| sub.starts_with(p))
}

/// `ruleCovers`: whether `owner` allows all `sub` allows.
pub fn rule_covers(owner: &Value, sub: &Value) -> bool {
    fn field<'a>(rule: &'a Value, f: &str) -> Vec<&'a str> {
        strings(rule.get(f))
    }
    let (owner_verbs, sub_verbs) = (field(owner, "verbs"), field(sub, "verbs"));
    let (owner_groups, sub_groups) = (field(owner, "apiGroups"), field(sub, "apiGroups"));
    let (owner_names, sub_names) = (field(owner, "resourceNames"), field(sub, "resourceNames"));
    let owner_urls = field(owner, "nonResourceURLs");
    let verbs = owner_verbs.contains(&"*") || has_all(&owner_verbs, &sub_verbs);
    let groups = owner_groups.contains(&"*") || has_all(&owner_groups, &sub_groups);
    let resources = resources_cover(&field(owner, "resources"), &field(sub, "resources"));
    let urls = field(sub, "nonResourceURLs")
        .iter()
        .all(|path| owner_urls.iter().any(|o| url_covers(o, path)));
    let names = if sub_names.is_empty() {
        owner_names.is_empty()
    } else {
        owner_names.is_empty() || has_all(&owner_names, &sub_names)
    };
    verbs && groups && resources && names && urls
}

/// `validation.Covers`: the simple rules of `servant` that no rule of `owner` covers.
pub fn uncovered(owner: &[Value], servant: &[Value]) -> Vec<Value> {
    servant
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect()
}

fn list(obj: &Value, field: &str) -> Vec<Value> {
    obj.get(field)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The selectors of `obj.aggregationRule` (None: not aggregated).
fn selectors(obj: &Value) -> Option<Vec<Value>> {
    let rule = obj.get("aggregationRule").filter(|r| !r.is_null())?;
    Some(list(rule, "clusterRoleSelectors"))
}

/// `computeReconciledRole` in union mode: `existing` (stored) against `expected`.
pub fn role(existing: &Value, expected: &Value) -> Reconciled {
    let mut role = existing.clone();
    let mut changed = merge_metadata(&mut role, expected, "annotations");
    changed |= merge_metadata(&mut role, expected, "labels");
    let missing = uncovered(&list(existing, "rules"), &list(expected, "rules"));
    if !missing.is_empty() {
        let mut rules = list(existing, "rules");
        rules.extend(missing.iter().cloned());
        role["rules"] = Value::Array(rules);
        changed = true;
    }
    match (selectors(expected), selectors(existing)) {
        (None, Some(_)) => {
            // Not expected to aggregate at all: the aggregation goes.
            role.as_object_mut().map(|o| o.remove("aggregationRule"));
            changed = true;
        }
        (Some(wanted), stored) => {
            let stored = stored.unwrap_or_default();
            let absent: Vec<Value> = wanted.into_iter().filter(|s| !stored.contains(s)).collect();
            if !absent.is_empty() {
                let mut all = stored;
                all.extend(absent);
                role["aggregationRule"] = serde_json::json!({"clusterRoleSelectors": all});
                changed = true;
            }
        }
        (None, None) => {}
    }
    Reconciled {
        operation: if changed {
            Operation::Update(role)
        } else {
            Operation::None
        },
        protected: protected(existing),
        missing,
    }
}

/// `computeReconciledRoleBinding` in union mode: `existing` (stored) against `expected`.
pub fn binding(existing: &Value, expected: &Value) -> Reconciled {
    let protected = protected(existing);
    if existing.get("roleRef") != expected.get("roleRef") {
        return Reconciled {
            operation: Operation::Recreate,
            protected,
            missing: Vec::new(),
        };
    }
    let mut binding = existing.clone();
    let mut changed = merge_metadata(&mut binding, expected, "annotations");
    changed |= merge_metadata(&mut binding, expected, "labels");
    let stored = list(existing, "subjects");
    let missing: Vec<Value> = list(expected, "subjects")
        .into_iter()
        .filter(|s| !stored.contains(s))
        .collect();
    if !missing.is_empty() {
        let mut subjects = stored;
        subjects.extend(missing.iter().cloned());
        binding["subjects"] = Value::Array(subjects);
        changed = true;
    }
    Reconciled {
        operation: if changed {
            Operation::Update(binding)
        } else {
            Operation::None
        },
        protected,
        missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
        json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
    }

    fn role_with(annotations: Value, labels: Value, rules: Value) -> Value {
        json!({"metadata": {"name": "r", "annotations": annotations, "labels": labels},
            "rules": rules})
    }

    fn updated(r: &Reconciled) -> &Value {
        match &r.operation {
            Operation::Update(v) => v,
            other => panic!("expected an update, got {other:?}"),
        }
    }

    // reconcile_role_test.go: TestComputeReconciledRoleRules, union cases.
    #[test]
    fn rules_are_unioned_never_removed() {
        let a = rule(&["get"], &[""], &["pods"]);
        let b = rule(&["list"], &[""], &["pods"]);
        // Identical: nothing to do.
        let same = role(
            &role_with(json!({}), json!({}), json!([a])),
            &role_with(json!({}), json!({}), json!([a])),
        );
        assert_eq!(same.operation, Operation::None);
        // Extra permissions are kept.
        let extra = role(
            &role_with(json!({}), json!({}), json!([a, b])),
            &role_with(json!({}), json!({}), json!([a])),
        );
        assert_eq!(extra.operation, Operation::None);
        // Missing rules are added after the stored ones.
        let missing = role(
            &role_with(json!({}), json!({}), json!([a])),
            &role_with(json!({}), json!({}), json!([b])),
        );
        assert_eq!(updated(&missing)["rules"], json!([a, b]));
        // Covered by a wildcard: nothing missing.
        let star = rule(&["*"], &["*"], &["*"]);
        let covered = role(
            &role_with(json!({}), json!({}), json!([star])),
            &role_with(json!({}), json!({}), json!([a, b])),
        );
        assert_eq!(covered.operation, Operation::None);
        // Partially covered: only the uncovered simple rules are added.
        let both = rule(&["get", "list"], &[""], &["pods", "services"]);
        let partial = role(
            &role_with(json!({}), json!({}), json!([a])),
            &role_with(json!({}), json!({}), json!([both])),
        );
        assert_eq!(
            updated(&partial)["rules"],
            json!([
                a,
                rule(&["list"], &[""], &["pods"]),
                rule(&["get"], &[""], &["services"]),
                rule(&["list"], &[""], &["services"])
            ])
        );
    }

    #[test]
    fn coverage_follows_rule_covers() {
        let sub = rule(&["get"], &[""], &["pods/log"]);
        assert!(rule_covers(&rule(&["get"], &[""], &["*/log"]), &sub));
        assert!(!rule_covers(&rule(&["get"], &[""], &["pods"]), &sub));
        let named = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"],
            "resourceNames": ["a"]});
        assert!(rule_covers(&rule(&["get"], &[""], &["configmaps"]), &named));
        assert!(!rule_covers(
            &named,
            &rule(&["get"], &[""], &["configmaps"])
        ));
        let urls = json!({"verbs": ["get"], "nonResourceURLs": ["/healthz/*"]});
        assert!(rule_covers(
            &urls,
            &json!({"verbs": ["get"], "nonResourceURLs": ["/healthz/etcd"]})
        ));
        assert!(!rule_covers(
            &urls,
            &json!({"verbs": ["get"], "nonResourceURLs": ["/livez"]})
        ));
        assert_eq!(
            breakdown(&json!({"verbs": ["get", "list"], "nonResourceURLs": ["/a"]})),
            vec![
                json!({"nonResourceURLs": ["/a"], "verbs": ["get"]}),
                json!({"nonResourceURLs": ["/a"], "verbs": ["list"]})
            ]
        );
    }

    // TestComputeReconciledRoleLabels and annotations: expected keys are added, stored
    // values win.
    #[test]
    fn labels_and_annotations_are_merged_stored_values_winning() {
        let existing = role_with(json!({"a": "stored"}), json!({"x": "1"}), json!([]));
        let expected = role_with(
            json!({"a": "expected", "b": "new"}),
            json!({"y": "2"}),
            json!([]),
        );
        let result = role(&existing, &expected);
        let new = updated(&result);
        assert_eq!(
            new["metadata"]["annotations"],
            json!({"a": "stored", "b": "new"})
        );
        assert_eq!(new["metadata"]["labels"], json!({"x": "1", "y": "2"}));
        let again = role(new, &expected);
        assert_eq!(again.operation, Operation::None);
    }

    // TestComputeReconciledRoleAggregationRules: an aggregated role's rules are the
    // aggregation controller's; its selectors are unioned.
    #[test]
    fn aggregated_roles_reconcile_their_selectors_not_rules() {
        let sel = |k: &str| json!({"matchLabels": {k: "true"}});
        let expected = json!({"metadata": {"name": "view"},
            "aggregationRule": {"clusterRoleSelectors": [sel("a")]}});
        let existing = json!({"metadata": {"name": "view"},
            "aggregationRule": {"clusterRoleSelectors": [sel("a")]},
            "rules": [rule(&["get"], &[""], &["pods"])]});
        assert_eq!(role(&existing, &expected).operation, Operation::None);
        let other = json!({"metadata": {"name": "view"},
            "aggregationRule": {"clusterRoleSelectors": [sel("b")]}, "rules": []});
        let result = role(&other, &expected);
        assert_eq!(
            updated(&result)["aggregationRule"],
            json!({"clusterRoleSelectors": [sel("b"), sel("a")]})
        );
        let plain = json!({"metadata": {"name": "r"}, "rules": []});
        let result = role(&existing, &plain);
        assert!(updated(&result).get("aggregationRule").is_none());
        let result = role(&plain, &expected);
        assert_eq!(
            updated(&result)["aggregationRule"],
            json!({"clusterRoleSelectors": [sel("a")]})
        );
    }

    #[test]
    fn autoupdate_false_protects() {
        let existing = role_with(
            json!({"rbac.authorization.kubernetes.io/autoupdate": "false"}),
            json!({}),
            json!([]),
        );
        let expected = role_with(
            json!({}),
            json!({}),
            json!([rule(&["get"], &[""], &["pods"])]),
        );
        let result = role(&existing, &expected);
        assert!(result.protected);
        assert!(matches!(result.operation, Operation::Update(_)));
    }

    // reconcile_rolebindings_test.go: TestDiffObjectReferenceLists and the roleRef reset.
    #[test]
    fn bindings_union_subjects_and_recreate_on_another_role_ref() {
        let user =
            |n: &str| json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": n});
        let make = |role: &str, subjects: Value| {
            json!({"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole", "name": role}, "subjects": subjects})
        };
        let expected = make("view", json!([user("a"), user("b")]));
        let result = binding(&make("view", json!([user("c"), user("a")])), &expected);
        assert_eq!(
            updated(&result)["subjects"],
            json!([user("c"), user("a"), user("b")])
        );
        assert_eq!(result.missing, vec![user("b")]);
        assert_eq!(binding(&expected, &expected).operation, Operation::None);
        let result = binding(&make("edit", json!([user("a"), user("b")])), &expected);
        assert_eq!(result.operation, Operation::Recreate);
    }
}
