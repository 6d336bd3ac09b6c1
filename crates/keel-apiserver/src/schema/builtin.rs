//! The built-in kinds' definitions: the `components.schemas` of the OpenAPI v3 documents of
//! Kubernetes' generally available group versions, at the release keel reports
//! ([`crate::http::discovery::KUBERNETES_VERSION`]), vendored in `openapi/kubernetes.json` by
//! `scripts/k8s-openapi.py` and read once, on first use.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

use super::Definitions;

/// The vendored file.
const VENDORED: &str = include_str!("../../openapi/kubernetes.json");

struct Builtin {
    definitions: Definitions,
    /// `(group, version, kind)` to the definition that is that kind (and only that kind: the
    /// meta types every group version shares are not indexed).
    kinds: HashMap<(String, String, String), String>,
}

fn builtin() -> &'static Builtin {
    static BUILTIN: OnceLock<Builtin> = OnceLock::new();
    BUILTIN.get_or_init(|| {
        let mut document: Value =
            serde_json::from_str(VENDORED).expect("openapi/kubernetes.json is JSON");
        let definitions = match document["definitions"].take() {
            Value::Object(definitions) => definitions,
            _ => panic!("openapi/kubernetes.json has no definitions"),
        };
        let mut kinds = HashMap::new();
        for (name, schema) in &definitions {
            let Some([gvk]) = schema
                .get("x-kubernetes-group-version-kind")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
            else {
                continue;
            };
            let text = |field: &str| gvk[field].as_str().unwrap_or("").to_string();
            kinds.insert((text("group"), text("version"), text("kind")), name.clone());
        }
        Builtin { definitions, kinds }
    })
}

/// Every built-in definition.
pub fn definitions() -> &'static Definitions {
    &builtin().definitions
}

/// The definition of a built-in kind (`("", "v1", "Pod")` is `io.k8s.api.core.v1.Pod`).
pub fn definition_name(group: &str, version: &str, kind: &str) -> Option<&'static str> {
    builtin()
        .kinds
        .get(&(group.to_string(), version.to_string(), kind.to_string()))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_found_by_group_version_and_kind() {
        assert_eq!(
            definition_name("", "v1", "Pod"),
            Some("io.k8s.api.core.v1.Pod")
        );
        assert_eq!(
            definition_name("apps", "v1", "Deployment"),
            Some("io.k8s.api.apps.v1.Deployment")
        );
        assert_eq!(
            definition_name("coordination.k8s.io", "v1", "Lease"),
            Some("io.k8s.api.coordination.v1.Lease")
        );
        // DeleteOptions is every group version's, so no one kind's.
        assert_eq!(definition_name("", "v1", "DeleteOptions"), None);
        assert_eq!(definition_name("", "v1", "Nothing"), None);
    }

    #[test]
    fn every_reference_resolves() {
        let text = serde_json::to_string(definitions()).unwrap();
        for piece in text.split("\"$ref\":\"").skip(1) {
            let target = piece.split('"').next().unwrap();
            let name = target.strip_prefix(super::super::REF_PREFIX).unwrap();
            assert!(definitions().contains_key(name), "dangling {target}");
        }
    }
}
