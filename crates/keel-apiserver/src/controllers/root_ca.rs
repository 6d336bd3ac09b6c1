//! The `kube-root-ca.crt` ConfigMap in every namespace (kube-controller-manager's
//! `root-ca-cert-publisher`): `ca.crt` holds the CA that verifies the apiserver, for pods to
//! mount. Made when a namespace appears, made again if deleted, and its data and
//! description annotation set back if changed.

use serde_json::{Value, json};

use super::per_namespace::PerNamespace;
use crate::json_pointer::At;

/// The ConfigMap's name.
pub const NAME: &str = "kube-root-ca.crt";
/// The annotation describing it.
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
/// What the annotation says.
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the \
    kube-apiserver when using internal endpoints such as the internal service IP or \
    kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes \
    clusters.";

/// The publisher of `ca` (PEM).
pub struct RootCaPublisher {
    /// The CA bundle (PEM).
    pub ca: String,
}

impl RootCaPublisher {
    fn data(&self) -> Value {
        json!({"ca.crt": self.ca})
    }
}

impl PerNamespace for RootCaPublisher {
    const RESOURCE: &'static str = "configmaps";
    const NAME: &'static str = NAME;

    fn desired(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": NAME, "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
            "data": self.data(),
        })
    }

    fn reconcile(&self, stored: &Value) -> Option<Value> {
        let described = stored
            .at("/metadata/annotations")
            .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
            .and_then(Value::as_str)
            .is_some_and(|d| !d.is_empty());
        if stored.get("data") == Some(&self.data()) && described {
            return None;
        }
        let mut fixed = stored.clone();
        fixed["data"] = self.data();
        let meta = &mut fixed["metadata"];
        if !meta["annotations"].is_object() {
            meta["annotations"] = json!({});
        }
        meta["annotations"][DESCRIPTION_ANNOTATION] = DESCRIPTION.into();
        Some(fixed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_configmap_gets_its_data_and_description_back() {
        let publisher = RootCaPublisher { ca: "PEM".into() };
        let good = publisher.desired();
        assert_eq!(publisher.reconcile(&good), None);
        let mut changed = good.clone();
        changed["data"]["extra"] = "x".into();
        changed["metadata"]["annotations"] = json!({"other": "kept"});
        let fixed = publisher.reconcile(&changed).unwrap();
        assert_eq!(fixed["data"], json!({"ca.crt": "PEM"}));
        assert_eq!(fixed["metadata"]["annotations"]["other"], "kept");
        assert_eq!(
            fixed["metadata"]["annotations"][DESCRIPTION_ANNOTATION],
            DESCRIPTION
        );
    }
}
