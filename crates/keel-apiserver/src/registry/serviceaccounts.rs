//! core/v1 ServiceAccounts: NAME, SECRETS, AGE. References to secrets keep only their
//! names, as kube's strategy cleans them.

use serde_json::{Value, json};

use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy};
use crate::apimachinery::time::Time;

/// The ServiceAccount strategy.
pub struct ServiceAccounts;

static INFO: ResourceInfo = ResourceInfo {
    // `ReturnDeletedObject: true` (pkg/registry/core/serviceaccount/storage).
    returns_deleted_object: true,
    short_names: &["sa"],
    ..ResourceInfo::new(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        "serviceaccount",
    )
};

static COLUMNS: [Column; 3] = [
    NAME_COLUMN,
    Column::string(
        "Secrets",
        0,
        "Secrets is a list of the secrets in the same namespace that pods running \
            using this ServiceAccount are allowed to use. Pods are only limited to this list if \
            this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation \
            set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is \
            deprecated since v1.32. Prefer separate namespaces to isolate access to mounted \
            secrets. This field should not be used to find auto-generated service account token \
            secrets for use outside of pods. Instead, tokens can be requested directly using \
            the TokenRequest API, or service account token secrets can be manually created. \
            More info: https://kubernetes.io/docs/concepts/configuration/secret",
    ),
    AGE_COLUMN,
];

/// `cleanSecretReferences`: each entry of `secrets` keeps only its `name`.
fn clean_secret_references(obj: &mut Value) {
    if let Some(list) = obj.get_mut("secrets").and_then(Value::as_array_mut) {
        for entry in list {
            let name = entry.get("name").cloned();
            *entry = match name {
                Some(n) => json!({"name": n}),
                None => json!({}),
            };
        }
    }
}

impl Strategy for ServiceAccounts {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        clean_secret_references(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        clean_secret_references(new);
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let secrets = obj
            .get("secrets")
            .and_then(Value::as_array)
            .map_or(0, |l| l.len());
        super::name_age_row(obj, now, [Value::from(secrets)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_references_keep_names_and_are_counted() {
        let mut sa = json!({"metadata": {"name": "default", "creationTimestamp": "2026-05-28T20:26:00Z"},
            "secrets": [{"name": "tok", "namespace": "x", "uid": "u"}]});
        ServiceAccounts.prepare_for_create(&mut sa);
        assert_eq!(sa["secrets"], json!([{"name": "tok"}]));
        assert_eq!(
            ServiceAccounts.cells(&sa, Time(1_780_000_000)),
            vec![json!("default"), json!(1), json!("40s")]
        );
    }
}
