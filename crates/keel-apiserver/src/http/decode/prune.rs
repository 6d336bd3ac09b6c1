//! A decoded object made what decoding it into its Go type keeps: the fields its schema
//! does not declare removed, and a float without a fraction in an integer field an integer
//! (the unstructured converter and Go's YAML-to-JSON conversion both make it one). The same
//! walk judges every value as the unstructured converter ([`fit::converted`]) and
//! structured-merge-diff's validation ([`fit::typed`]) would, for the readers that decode
//! that way.

use serde_json::{Map, Value};

use super::fit;
use super::{Place, Scalar, Shape};

/// What pruning an object found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// The fields removed (`spec.foo`, list items as `[0]`), in key order.
    pub removed: Vec<String>,
    /// The error the unstructured converter fails with, if any: its first refusal.
    pub conversion: Option<String>,
    /// What structured-merge-diff's validation of the object as an applied configuration
    /// reports, in key order: each value of the wrong type (`.data.a: expected string, got
    /// ...`) and each field removed (`.spec.foo: field not declared in schema`).
    pub typed: Vec<String>,
}

/// Prunes `obj` to the definition `root`, judging its values as it goes.
pub fn prune(obj: &mut Value, root: &str, defs: &Map<String, Value>) -> Pruned {
    let mut pruned = Pruned::default();
    if let Some(shape) = Shape::root(root, defs) {
        walk(obj, shape, &Place::default(), defs, &mut pruned);
    }
    pruned
}

fn walk(
    value: &mut Value,
    shape: Shape<'_>,
    place: &Place<'_>,
    defs: &Map<String, Value>,
    out: &mut Pruned,
) {
    if out.conversion.is_none() {
        out.conversion = fit::converted(shape, place, value, defs);
    }
    if let Some(error) = fit::typed(shape, value) {
        out.typed.push(format!(".{}: {error}", place.path()));
    }
    match (shape, value) {
        (Shape::Struct(name, properties), Value::Object(map)) => {
            let mut undeclared = Vec::new();
            for (key, value) in map.iter_mut() {
                let child = place.field(name, key);
                match properties.get(key) {
                    Some(schema) => walk(value, Shape::of(schema, defs), &child, defs, out),
                    None => {
                        let path = child.path();
                        out.typed
                            .push(format!(".{path}: field not declared in schema"));
                        out.removed.push(path);
                        undeclared.push(key.clone());
                    }
                }
            }
            for key in undeclared {
                map.remove(&key);
            }
        }
        (Shape::Map(values), Value::Object(map)) => {
            let shape = Shape::of(values, defs);
            for (key, child) in map.iter_mut() {
                walk(child, shape, &place.value(key), defs, out);
            }
        }
        (Shape::Slice(items), Value::Array(list)) => {
            let shape = Shape::of(items, defs);
            for (i, child) in list.iter_mut().enumerate() {
                walk(child, shape, &place.item(i), defs, out);
            }
        }
        (Shape::Scalar(Scalar::Int32 | Scalar::Int64 | Scalar::IntOrString), value) => {
            if let Some(f) = value
                .as_f64()
                .filter(|f| value.is_f64() && f.fract() == 0.0)
                && f.abs() < 9.2e18
            {
                *value = Value::from(f as i64);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::openapi;
    use crate::registry;
    use serde_json::json;

    fn defs() -> &'static Map<String, Value> {
        openapi::documents(&registry::kinds()).definitions()
    }

    #[test]
    fn unknown_fields_go_and_whole_floats_become_integers() {
        let mut pod = json!({
            "metadata": {"name": "p", "bogus": 1},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80.0}], "x": 1}]}
        });
        let pruned = prune(&mut pod, "io.k8s.api.core.v1.Pod", defs());
        assert_eq!(pruned.removed, ["metadata.bogus", "spec.containers[0].x"]);
        assert_eq!(
            pod["spec"]["containers"][0]["ports"][0]["containerPort"],
            json!(80)
        );
        assert!(pod["spec"]["containers"][0]["ports"][0]["containerPort"].is_i64());
        assert_eq!(pruned.conversion, None);
        assert_eq!(
            pruned.typed,
            [
                ".metadata.bogus: field not declared in schema",
                ".spec.containers[0].x: field not declared in schema"
            ]
        );
    }

    #[test]
    fn values_are_judged_as_the_converter_and_structured_merge_diff_judge_them() {
        let mut cm =
            json!({"metadata": {"name": "c", "labels": {"a": 1}}, "data": {"b": true, "c": "x"}});
        let pruned = prune(&mut cm, "io.k8s.api.core.v1.ConfigMap", defs());
        // The first the converter meets, in key order.
        assert_eq!(
            pruned.conversion.as_deref(),
            Some("unrecognized type: string")
        );
        assert_eq!(
            pruned.typed,
            [
                ".data.b: expected string, got &value.valueUnstructured{Value:true}",
                ".metadata.labels.a: expected string, got &value.valueUnstructured{Value:1}"
            ]
        );
        let mut svc = json!({"spec": {"ports": [{"port": "80", "protocol": 6}]}});
        let pruned = prune(&mut svc, "io.k8s.api.core.v1.Service", defs());
        assert_eq!(
            pruned.conversion.as_deref(),
            Some("unrecognized type: int32")
        );
        assert_eq!(
            pruned.typed,
            [
                ".spec.ports[0].port: expected numeric (int or float), got string",
                ".spec.ports[0].protocol: expected string, got &value.valueUnstructured{Value:6}"
            ]
        );
        let mut svc = json!({"spec": {"ports": [{"port": 80, "protocol": 6}]}});
        let pruned = prune(&mut svc, "io.k8s.api.core.v1.Service", defs());
        assert_eq!(
            pruned.conversion.as_deref(),
            Some("cannot convert int64 to v1.Protocol")
        );
    }
}
