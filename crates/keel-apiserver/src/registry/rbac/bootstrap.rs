//! The ClusterRoles and ClusterRoleBindings kube-apiserver stores at start (its
//! `rbac/bootstrap-roles` post-start hook, `pkg/registry/rbac/rest/storage_rbac.go`): those
//! of `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`, written out in
//! `bootstrap.yaml` beside this file, each labelled `kubernetes.io/bootstrapping:
//! rbac-defaults` and annotated `rbac.authorization.kubernetes.io/autoupdate: "true"`. The
//! ones missing are created; one already there is left as it is.

use std::sync::LazyLock;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::GROUP;
use super::bindings::ClusterRoleBindings;
use super::roles::ClusterRoles;
use crate::apimachinery::time::Time;
use crate::fieldmanager::FieldManager;
use crate::registry::store::{ListQuery, Registry};
use crate::registry::{Strategy, meta_str};
use crate::storage::Status;

/// The label every bootstrap object carries.
pub const LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");

/// The annotation that lets kube-apiserver bring a bootstrap object up to date.
pub const AUTOUPDATE: (&str, &str) = ("rbac.authorization.kubernetes.io/autoupdate", "true");

static POLICY: LazyLock<Policy> = LazyLock::new(|| {
    let text = include_str!("bootstrap.yaml");
    let data: Value = serde_yaml_ng::from_str(text).expect("bootstrap.yaml is valid YAML");
    Policy::from(&data)
});

/// The bootstrap objects.
pub struct Policy {
    /// The ClusterRoles, by name.
    pub cluster_roles: Vec<Value>,
    /// The ClusterRoleBindings, by name.
    pub cluster_role_bindings: Vec<Value>,
}

/// The bootstrap policy.
pub fn policy() -> &'static Policy {
    &POLICY
}

/// Labels and annotations of a bootstrap object, besides `extra` labels.
fn metadata(name: &str, extra: Option<&Value>) -> Value {
    let mut labels = extra
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels.insert(LABEL.0.into(), LABEL.1.into());
    json!({"name": name, "labels": labels, "annotations": {AUTOUPDATE.0: AUTOUPDATE.1}})
}

impl Policy {
    fn from(data: &Value) -> Policy {
        let list = |field: &str| data[field].as_array().cloned().unwrap_or_default();
        let cluster_roles = list("clusterRoles")
            .iter()
            .map(|role| {
                let mut obj = Map::new();
                obj.insert("apiVersion".into(), format!("{GROUP}/v1").into());
                obj.insert("kind".into(), "ClusterRole".into());
                let name = role["name"].as_str().unwrap_or_default();
                obj.insert("metadata".into(), metadata(name, role.get("labels")));
                for field in ["aggregationRule", "rules"] {
                    if let Some(value) = role.get(field) {
                        obj.insert(field.into(), value.clone());
                    }
                }
                Value::Object(obj)
            })
            .collect();
        let cluster_role_bindings = list("clusterRoleBindings")
            .iter()
            .map(|binding| {
                let name = binding["name"].as_str().unwrap_or_default();
                let mut obj = json!({
                    "apiVersion": format!("{GROUP}/v1"),
                    "kind": "ClusterRoleBinding",
                    "metadata": metadata(name, None),
                    "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": binding["role"]},
                });
                let subjects: Vec<Value> = binding["subjects"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(subject)
                    .collect();
                if !subjects.is_empty() {
                    obj["subjects"] = subjects.into();
                }
                obj
            })
            .collect();
        Policy {
            cluster_roles,
            cluster_role_bindings,
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

/// Creates the bootstrap objects that are missing.
pub async fn ensure(registry: &Registry) -> Result<(), Status> {
    let kinds: [(&'static dyn Strategy, &Vec<Value>); 2] = [
        (&ClusterRoles, &policy().cluster_roles),
        (&ClusterRoleBindings, &policy().cluster_role_bindings),
    ];
    for (kind, objects) in kinds {
        let list = registry.list(kind, None, &ListQuery::default()).await?;
        let stored: Vec<&str> = list.objects().map(|o| meta_str(o, "name")).collect();
        for obj in objects {
            let name = meta_str(obj, "name");
            if stored.contains(&name) {
                continue;
            }
            let mut obj = obj.clone();
            FieldManager::new(kind, None, Time::now()).update(None, &mut obj, "kube-apiserver");
            match registry.create(kind, None, obj, false).await {
                Ok(_) => tracing::debug!(kind = kind.info().kind, name, "created"),
                Err(status) if status.code == 409 => {}
                Err(status) => return Err(status),
            }
        }
    }
    Ok(())
}

/// The post-start hook: [`ensure`], tried again until it succeeds.
pub async fn run(registry: &Registry) {
    let mut delay = Duration::from_millis(100);
    while let Err(status) = ensure(registry).await {
        tracing::warn!(error = %status.message, "cannot store the bootstrap RBAC roles yet; retrying");
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::meta;

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
    fn every_bootstrap_object_is_valid() {
        let policy = policy();
        for role in &policy.cluster_roles {
            let mut errors = meta::validate(role, ClusterRoles.info());
            errors.extend(ClusterRoles.validate(role));
            assert!(errors.is_empty(), "{}: {errors:?}", meta_str(role, "name"));
        }
        for binding in &policy.cluster_role_bindings {
            let mut errors = meta::validate(binding, ClusterRoleBindings.info());
            errors.extend(ClusterRoleBindings.validate(binding));
            assert!(
                errors.is_empty(),
                "{}: {errors:?}",
                meta_str(binding, "name")
            );
            let role = binding["roleRef"]["name"].as_str().unwrap();
            assert!(policy.cluster_role(role).is_some(), "{role}");
        }
    }
}
