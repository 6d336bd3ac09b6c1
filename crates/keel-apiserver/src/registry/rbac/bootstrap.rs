//! The RBAC objects kube-apiserver 1.34 keeps at start (its `rbac/bootstrap-roles`
//! post-start hook, `pkg/registry/rbac/rest/storage_rbac.go`): the ClusterRoles and
//! ClusterRoleBindings of `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go` and
//! `controller_policy.go`, the Roles and RoleBindings of `namespace_policy.go` (in
//! kube-system and kube-public), written out in `bootstrap.yaml` beside this file, each
//! labelled `kubernetes.io/bootstrapping: rbac-defaults` and annotated
//! `rbac.authorization.kubernetes.io/autoupdate: "true"`. On every start each is created
//! when missing and otherwise reconciled ([`super::reconcile`]): what it lacks is added,
//! nothing is taken away, and one annotated `autoupdate: "false"` is left alone. The hook's
//! once-off migrations run first ([`prime_aggregated_cluster_roles`],
//! [`prime_split_cluster_role_bindings`]).

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::GROUP;
use crate::registry::meta_str;

/// The label every bootstrap object carries.
pub const LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");

/// The annotation that lets kube-apiserver bring a bootstrap object up to date.
pub const AUTOUPDATE: (&str, &str) = ("rbac.authorization.kubernetes.io/autoupdate", "true");

static POLICY: LazyLock<Policy> = LazyLock::new(|| {
    let text = include_str!("bootstrap.yaml");
    let data: Value = serde_yaml_ng::from_str(text).expect("bootstrap.yaml is valid YAML");
    Policy::from(&data)
});

/// The prefix of the controllers' roles (`saRolePrefix`).
const CONTROLLER_PREFIX: &str = "system:controller:";

/// The bootstrap objects.
pub struct Policy {
    /// The ClusterRoles: policy.go's, then the controllers'.
    pub cluster_roles: Vec<Value>,
    /// The ClusterRoleBindings: policy.go's, then the controllers'.
    pub cluster_role_bindings: Vec<Value>,
    /// The Roles of namespace_policy.go (each with its namespace).
    pub roles: Vec<Value>,
    /// The RoleBindings of namespace_policy.go (each with its namespace).
    pub role_bindings: Vec<Value>,
}

/// The bootstrap policy.
pub fn policy() -> &'static Policy {
    &POLICY
}

/// Labels and annotations of a bootstrap object, besides `extra` labels.
fn metadata(name: &str, namespace: Option<&str>, extra: Option<&Value>) -> Value {
    let mut labels = extra
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels.insert(LABEL.0.into(), LABEL.1.into());
    let mut meta =
        json!({"name": name, "labels": labels, "annotations": {AUTOUPDATE.0: AUTOUPDATE.1}});
    if let Some(namespace) = namespace {
        meta["namespace"] = namespace.into();
    }
    meta
}

/// A rule as `RuleOrDie` makes it: each list sorted.
fn sorted_rule(rule: &Value) -> Value {
    let mut rule = rule.clone();
    if let Some(fields) = rule.as_object_mut() {
        for list in fields.values_mut().filter_map(Value::as_array_mut) {
            list.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        }
    }
    rule
}

/// A (Cluster)Role of `kind` from its entry in bootstrap.yaml.
fn role(kind: &str, name: &str, namespace: Option<&str>, entry: &Value) -> Value {
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), format!("{GROUP}/v1").into());
    obj.insert("kind".into(), kind.into());
    obj.insert(
        "metadata".into(),
        metadata(name, namespace, entry.get("labels")),
    );
    if let Some(rule) = entry.get("aggregationRule") {
        obj.insert("aggregationRule".into(), rule.clone());
    }
    if let Some(rules) = entry.get("rules").and_then(Value::as_array) {
        obj.insert("rules".into(), rules.iter().map(sorted_rule).collect());
    }
    Value::Object(obj)
}

/// A (Cluster)RoleBinding of `kind` to the (Cluster)Role `role` with `subjects`.
fn binding(
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    role: &str,
    subjects: &[&str],
) -> Value {
    let role_kind = kind.trim_end_matches("Binding");
    let mut obj = json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": kind,
        "metadata": metadata(name, namespace, None),
        "roleRef": {"apiGroup": GROUP, "kind": role_kind, "name": role},
    });
    if !subjects.is_empty() {
        obj["subjects"] = subjects.iter().map(|s| subject(s)).collect();
    }
    obj
}

/// The subjects of a binding's entry in bootstrap.yaml.
fn subjects(entry: &Value) -> Vec<&str> {
    entry["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

impl Policy {
    fn from(data: &Value) -> Policy {
        let list = |field: &str| data[field].as_array().cloned().unwrap_or_default();
        let name = |entry: &Value| entry["name"].as_str().unwrap_or_default().to_string();
        let mut cluster_roles: Vec<Value> = list("clusterRoles")
            .iter()
            .map(|entry| role("ClusterRole", &name(entry), None, entry))
            .collect();
        let mut cluster_role_bindings: Vec<Value> = list("clusterRoleBindings")
            .iter()
            .map(|entry| {
                let role = entry["role"].as_str().unwrap_or_default();
                binding(
                    "ClusterRoleBinding",
                    &name(entry),
                    None,
                    role,
                    &subjects(entry),
                )
            })
            .collect();
        // addControllerRole: each controller's role, bound to its service account.
        for entry in list("controllerRoles") {
            let controller = name(&entry);
            let full = format!("{CONTROLLER_PREFIX}{controller}");
            cluster_roles.push(role("ClusterRole", &full, None, &entry));
            let account = format!("ServiceAccount kube-system/{controller}");
            cluster_role_bindings.push(binding(
                "ClusterRoleBinding",
                &full,
                None,
                &full,
                &[&account],
            ));
        }
        let by_namespace = |field: &str| -> Vec<(String, Value)> {
            let map = data[field].as_object().cloned().unwrap_or_default();
            map.into_iter()
                .flat_map(|(ns, entries)| {
                    let entries = entries.as_array().cloned().unwrap_or_default();
                    entries.into_iter().map(move |e| (ns.clone(), e))
                })
                .collect()
        };
        let roles = by_namespace("namespaceRoles")
            .iter()
            .map(|(ns, entry)| role("Role", &name(entry), Some(ns), entry))
            .collect();
        let role_bindings = by_namespace("namespaceRoleBindings")
            .iter()
            .map(|(ns, entry)| {
                let role = entry["role"].as_str().unwrap_or_default();
                binding(
                    "RoleBinding",
                    &name(entry),
                    Some(ns),
                    role,
                    &subjects(entry),
                )
            })
            .collect();
        Policy {
            cluster_roles,
            cluster_role_bindings,
            roles,
            role_bindings,
        }
    }

    /// The bootstrap ClusterRole `name`.
    pub fn cluster_role(&self, name: &str) -> Option<&Value> {
        self.cluster_roles
            .iter()
            .find(|r| meta_str(r, "name") == name)
    }

    /// The bootstrap ClusterRoleBinding `name`.
    pub fn cluster_role_binding(&self, name: &str) -> Option<&Value> {
        self.cluster_role_bindings
            .iter()
            .find(|r| meta_str(r, "name") == name)
    }

    /// The bootstrap Role `name` in `namespace`.
    pub fn role(&self, namespace: &str, name: &str) -> Option<&Value> {
        self.roles
            .iter()
            .find(|r| meta_str(r, "namespace") == namespace && meta_str(r, "name") == name)
    }
}

/// A subject written `<Kind> <name>` (`ServiceAccount <namespace>/<name>`), as
/// `rbacv1helpers.NewClusterBinding(...).Groups/Users/SAs` makes it.
fn subject(text: &str) -> Value {
    let (kind, name) = text.split_once(' ').unwrap_or(("", text));
    match (kind, name.split_once('/')) {
        ("ServiceAccount", Some((namespace, name))) => {
            json!({"kind": kind, "name": name, "namespace": namespace})
        }
        _ => json!({"kind": kind, "apiGroup": GROUP, "name": name}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Strategy;
    use crate::registry::meta;
    use crate::registry::rbac::bindings::{ClusterRoleBindings, RoleBindings};
    use crate::registry::rbac::roles::{ClusterRoles, Roles};

    #[test]
    fn the_policy_holds_upstreams_roles_and_bindings() {
        let policy = policy();
        // Spot checks against policy.go.
        let admin = policy.cluster_role("cluster-admin").unwrap();
        assert_eq!(
            admin["rules"],
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]}])
        );
        assert_eq!(
            admin["metadata"]["labels"],
            json!({"kubernetes.io/bootstrapping": "rbac-defaults"})
        );
        assert_eq!(
            admin["metadata"]["annotations"],
            json!({"rbac.authorization.kubernetes.io/autoupdate": "true"})
        );
        let view = policy.cluster_role("view").unwrap();
        assert_eq!(
            view["aggregationRule"],
            json!({"clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]})
        );
        assert_eq!(
            view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"],
            "true"
        );
        assert!(view.get("rules").is_none());
        let basic = policy.cluster_role("system:basic-user").unwrap();
        assert_eq!(
            basic["rules"][0],
            json!({"apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]})
        );
        for name in [
            "admin",
            "edit",
            "system:aggregate-to-admin",
            "system:aggregate-to-edit",
            "system:aggregate-to-view",
            "system:discovery",
            "system:public-info-viewer",
            "system:node",
            "system:kube-scheduler",
            "system:kube-controller-manager",
            "system:monitoring",
        ] {
            assert!(policy.cluster_role(name).is_some(), "{name}");
        }
        let masters = policy.cluster_role_binding("cluster-admin").unwrap();
        assert_eq!(
            masters["roleRef"],
            json!({"apiGroup": GROUP, "kind": "ClusterRole", "name": "cluster-admin"})
        );
        assert_eq!(
            masters["subjects"],
            json!([{"kind": "Group", "apiGroup": GROUP, "name": "system:masters"}])
        );
        let dns = policy.cluster_role_binding("system:kube-dns").unwrap();
        assert_eq!(
            dns["subjects"],
            json!([{"kind": "ServiceAccount", "name": "kube-dns", "namespace": "kube-system"}])
        );
        assert!(
            policy
                .cluster_role_binding("system:node")
                .unwrap()
                .get("subjects")
                .is_none()
        );
    }

    #[test]
    fn controller_and_namespace_objects_are_those_of_1_34() {
        let policy = policy();
        assert_eq!(policy.cluster_roles.len(), 31 + 37);
        assert_eq!(policy.cluster_role_bindings.len(), 12 + 37);
        assert_eq!((policy.roles.len(), policy.role_bindings.len()), (7, 7));
        // testdata/controller-roles.yaml: rules sorted as RuleOrDie sorts them.
        let deployments = policy
            .cluster_role("system:controller:deployment-controller")
            .unwrap();
        assert_eq!(
            deployments["rules"][3],
            json!({"apiGroups": ["apps", "extensions"], "resources": ["replicasets"],
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
        );
        assert_eq!(deployments["rules"].as_array().unwrap().len(), 6);
        let binding = policy
            .cluster_role_binding("system:controller:deployment-controller")
            .unwrap();
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "deployment-controller", "namespace": "kube-system"}])
        );
        assert_eq!(
            binding["roleRef"]["name"],
            "system:controller:deployment-controller"
        );
        // Gated off by default in 1.34.
        for gated in [
            "device-taint-eviction-controller",
            "podcertificaterequestcleaner",
            "storage-version-migrator-controller",
        ] {
            assert!(
                policy
                    .cluster_role(&format!("{CONTROLLER_PREFIX}{gated}"))
                    .is_none()
            );
        }
        let reader = policy
            .role("kube-system", "extension-apiserver-authentication-reader")
            .unwrap();
        assert_eq!(
            reader["rules"],
            json!([{"apiGroups": [""], "resourceNames": ["extension-apiserver-authentication"],
                "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}])
        );
        assert_eq!(reader["kind"], "Role");
        assert!(
            policy
                .role("kube-public", "system:controller:bootstrap-signer")
                .is_some()
        );
        let locking = policy
            .role_bindings
            .iter()
            .find(|b| meta_str(b, "name") == "system::leader-locking-kube-controller-manager")
            .unwrap();
        assert_eq!(locking["roleRef"]["kind"], "Role");
        assert_eq!(locking["subjects"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn every_bootstrap_object_is_valid() {
        let policy = policy();
        let kinds: [(&dyn Strategy, &Vec<Value>); 4] = [
            (&ClusterRoles, &policy.cluster_roles),
            (&ClusterRoleBindings, &policy.cluster_role_bindings),
            (&Roles, &policy.roles),
            (&RoleBindings, &policy.role_bindings),
        ];
        for (kind, objects) in kinds {
            for obj in objects {
                let mut errors = meta::validate(obj, kind.info());
                errors.extend(kind.validate(obj));
                assert!(errors.is_empty(), "{}: {errors:?}", meta_str(obj, "name"));
            }
        }
        for binding in &policy.cluster_role_bindings {
            let role = binding["roleRef"]["name"].as_str().unwrap();
            assert!(policy.cluster_role(role).is_some(), "{role}");
        }
        for binding in &policy.role_bindings {
            let role = binding["roleRef"]["name"].as_str().unwrap();
            assert!(
                policy.role(meta_str(binding, "namespace"), role).is_some(),
                "{role}"
            );
        }
    }
}
