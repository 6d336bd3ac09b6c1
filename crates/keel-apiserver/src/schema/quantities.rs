//! Where the built-in kinds hold resource quantities, and their objects' quantities written
//! in canonical form, as kube-apiserver stores them: it decodes every `resource.Quantity`
//! field into its Go type and encodes it back with `Quantity.String()`, so `cpu: 0.5` is
//! stored, returned and watched as `500m` ([`crate::apimachinery::quantity`]).
//!
//! The places are not listed by hand: they are every schema of the vendored OpenAPI
//! definitions ([`super::builtin`]) that is, or refers to, [`QUANTITY`], a map's values
//! (`resources.limits`, `spec.hard`, `status.capacity`) and a list's items included. They are
//! gathered once into a tree per definition holding only the branches that lead to a
//! quantity, so an object of a kind without one (a ConfigMap) is not walked at all, and the
//! walk goes no deeper than the schema does, however deep the object nests. A definition that
//! refers to itself (none holds a quantity) is cut where it recurs.
//!
//! Custom resources are not touched: apiextensions-apiserver stores them as written.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::{Definitions, builtin, reference};
use crate::apimachinery::go_value::json_float;
use crate::apimachinery::quantity;

/// The definition of `resource.Quantity`.
pub const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// The part of a schema that leads to quantities.
#[derive(Debug)]
enum Node {
    /// A quantity.
    Quantity,
    /// A struct: the fields that lead to quantities.
    Fields(Vec<(String, Arc<Node>)>),
    /// A map whose values lead to quantities.
    Values(Arc<Node>),
    /// A list whose items lead to quantities.
    Items(Arc<Node>),
}

/// Each built-in definition's tree, None for one without quantities.
fn trees() -> &'static HashMap<String, Option<Arc<Node>>> {
    static TREES: OnceLock<HashMap<String, Option<Arc<Node>>>> = OnceLock::new();
    TREES.get_or_init(|| {
        let defs = builtin::definitions();
        let mut memo = HashMap::new();
        for name in defs.keys() {
            definition(name, defs, &mut memo, &mut HashSet::new());
        }
        memo
    })
}

/// The tree of the definition `name`.
fn definition(
    name: &str,
    defs: &Definitions,
    memo: &mut HashMap<String, Option<Arc<Node>>>,
    visiting: &mut HashSet<String>,
) -> Option<Arc<Node>> {
    if name == QUANTITY {
        return Some(Arc::new(Node::Quantity));
    }
    if let Some(done) = memo.get(name) {
        return done.clone();
    }
    let schema = defs.get(name)?;
    if !visiting.insert(name.to_string()) {
        return None;
    }
    let tree = of(schema, defs, memo, visiting);
    visiting.remove(name);
    memo.insert(name.to_string(), tree.clone());
    tree
}

/// The tree of `schema`.
fn of(
    schema: &Value,
    defs: &Definitions,
    memo: &mut HashMap<String, Option<Arc<Node>>>,
    visiting: &mut HashSet<String>,
) -> Option<Arc<Node>> {
    if let Some(name) = reference(schema) {
        return definition(name, defs, memo, visiting);
    }
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return None;
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        let fields: Vec<(String, Arc<Node>)> = properties
            .iter()
            .filter_map(|(key, field)| Some((key.clone(), of(field, defs, memo, visiting)?)))
            .collect();
        return (!fields.is_empty()).then(|| Arc::new(Node::Fields(fields)));
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        return of(values, defs, memo, visiting).map(|n| Arc::new(Node::Values(n)));
    }
    let items = schema.get("items")?;
    of(items, defs, memo, visiting).map(|n| Arc::new(Node::Items(n)))
}

/// Whether objects of the built-in kind `group`/`version`/`kind` have any quantity field.
pub fn has_quantities(group: &str, version: &str, kind: &str) -> bool {
    builtin::definition_name(group, version, kind)
        .and_then(|name| trees().get(name))
        .is_some_and(Option::is_some)
}

/// Writes every quantity of `obj`, an object of the built-in kind `group`/`version`/`kind`,
/// in canonical form. A value that is no quantity is left for validation to refuse (the
/// decoder refused it first for a request's body).
pub fn canonicalize(group: &str, version: &str, kind: &str, obj: &mut Value) {
    let Some(name) = builtin::definition_name(group, version, kind) else {
        return;
    };
    if let Some(Some(tree)) = trees().get(name) {
        walk(tree, obj);
    }
}

fn walk(node: &Node, value: &mut Value) {
    match (node, value) {
        (Node::Quantity, value) => canonical(value),
        (Node::Fields(fields), Value::Object(map)) => {
            for (key, node) in fields {
                if let Some(value) = map.get_mut(key) {
                    walk(node, value);
                }
            }
        }
        (Node::Values(node), Value::Object(map)) => {
            for value in map.values_mut() {
                // Go decodes `null` into a map's Quantity as zero, which it writes `0`.
                if value.is_null() && matches!(**node, Node::Quantity) {
                    *value = Value::String("0".into());
                }
                walk(node, value);
            }
        }
        (Node::Items(node), Value::Array(items)) => {
            for item in items {
                walk(node, item);
            }
        }
        _ => {}
    }
}

/// One quantity, a string or a number (by the text `encoding/json` writes it as, which is
/// what a Go client sends), in canonical form.
fn canonical(value: &mut Value) {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => json_float(f),
            _ => return,
        },
        _ => return,
    };
    if let Ok(canonical) = quantity::canonical(&text)
        && value.as_str() != Some(canonical.as_str())
    {
        *value = Value::String(canonical);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn quantities_are_found_through_the_schema_and_made_canonical() {
        let mut pod = json!({
            "metadata": {"name": "p", "labels": {"cpu": "0.5"}},
            "spec": {
                "containers": [{
                    "name": "c",
                    "resources": {"limits": {"cpu": 0.5, "memory": "1.5Gi"}, "requests": {"cpu": "1000m", "x": null}},
                }],
                "overhead": {"cpu": "1e3"},
                "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "2048Mi"}}],
            },
        });
        canonicalize("", "v1", "Pod", &mut pod);
        let c = &pod["spec"]["containers"][0]["resources"];
        assert_eq!(c["limits"], json!({"cpu": "500m", "memory": "1536Mi"}));
        assert_eq!(c["requests"], json!({"cpu": "1", "x": "0"}));
        assert_eq!(pod["spec"]["overhead"]["cpu"], "1e3");
        assert_eq!(pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "2Gi");
        // Not a quantity: a label that looks like one.
        assert_eq!(pod["metadata"]["labels"]["cpu"], "0.5");
        // Not a quantity at all: left for validation.
        let mut quota = json!({"spec": {"hard": {"cpu": "abc", "pods": 10.0}}});
        canonicalize("", "v1", "ResourceQuota", &mut quota);
        assert_eq!(quota["spec"]["hard"], json!({"cpu": "abc", "pods": "10"}));
    }

    #[test]
    fn kinds_with_quantities_have_trees_and_others_none() {
        let tree = |name: &str| trees().get(name).cloned().flatten();
        for name in [
            "io.k8s.api.core.v1.Pod",
            "io.k8s.api.core.v1.Node",
            "io.k8s.api.core.v1.LimitRange",
            "io.k8s.api.core.v1.PersistentVolume",
            "io.k8s.api.core.v1.PersistentVolumeClaim",
            "io.k8s.api.storage.v1.CSIStorageCapacity",
            "io.k8s.api.storage.v1.VolumeAttachment",
            "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
            "io.k8s.api.apps.v1.Deployment",
        ] {
            assert!(tree(name).is_some(), "{name}");
        }
        for name in ["io.k8s.api.core.v1.ConfigMap", "io.k8s.api.rbac.v1.Role"] {
            assert!(tree(name).is_none(), "{name}");
        }
    }
}
