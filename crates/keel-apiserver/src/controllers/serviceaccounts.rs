//! The `default` ServiceAccount in every namespace (kube-controller-manager's
//! `serviceaccount` controller): clients such as `kubectl create deployment` and pods wait
//! for it. Made when a namespace appears, and again if it is deleted; a changed one is left
//! as it is.

use serde_json::{Value, json};

use super::per_namespace::PerNamespace;

/// The ServiceAccounts controller.
pub struct ServiceAccounts;

impl PerNamespace for ServiceAccounts {
    const RESOURCE: &'static str = "serviceaccounts";
    const NAME: &'static str = "default";

    fn desired(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": Self::NAME}})
    }
}
