//! Field sets, as structured-merge-diff's `fieldpath` package has them: which fields of an
//! object a manager owns. A field is a [`Path`] of [`PathElement`]s from the object's root;
//! a [`Set`] is a trie of them (a node's `members` are the paths that end there, its
//! `children` the paths that go on), and the set operations are SMD's, down to the
//! difference between `difference` (a parent stays when only its children are taken away)
//! and `recursive_difference` (a parent takes its children with it).
//!
//! # FieldsV1
//!
//! A set is written in `managedFields[].fieldsV1` as nested JSON objects, one key per path
//! element: `f:<name>` for a field of a map or struct, `k:<json>` for an item of a list
//! keyed by `x-kubernetes-list-map-keys` (the keys' names and values as a JSON object, names
//! sorted), `v:<json>` for an item of a set, `i:<n>` for an index. A path that ends at a
//! node is `{}`; a node that is itself a member and has children says so with `".": {}`:
//!
//! ```text
//! {"f:data":{".":{},"f:a":{}},"f:spec":{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{}}}}
//! ```
//!
//! [`Set::to_fields_v1_string`] writes the bytes exactly as the Go encoder does (`"."` first,
//! then the elements in SMD's order: fields by name, then keys, values and indices; HTML
//! characters escaped); [`Set::to_fields_v1`] is the same as a JSON value, as objects carry
//! it. Elements of a kind the reader does not know are skipped, as SMD skips them.

mod path;
mod set;
mod value;

pub use path::{Path, PathElement, path_string};
pub use set::Set;
pub use value::{Ordered, compare_values, go_json, go_json_string, values_equal};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use serde_json::Value;

    use super::*;

    fn f(name: &str) -> PathElement {
        PathElement::field(name)
    }

    fn key(fields: &[(&str, Value)]) -> PathElement {
        let mut fields: Vec<(String, Ordered)> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), Ordered(v.clone())))
            .collect();
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    #[test]
    fn kubectl_create_configmap_reads_as_upstream_writes_it() {
        let mut set = Set::new();
        set.insert(&[f("data")]);
        set.insert(&[f("data"), f("a")]);
        assert_eq!(set.to_fields_v1_string(), r#"{"f:data":{".":{},"f:a":{}}}"#);
        assert_eq!(set.to_fields_v1(), json!({"f:data": {".": {}, "f:a": {}}}));
        let back = Set::from_fields_v1(&set.to_fields_v1()).unwrap();
        assert_eq!(back, set);
    }

    #[test]
    fn list_items_are_keyed_and_ordered_as_smd_orders_them() {
        let mut set = Set::new();
        let ports = [f("spec"), f("ports")];
        for port in [8080, 80, 9] {
            let mut p = ports.to_vec();
            p.push(key(&[("port", json!(port)), ("protocol", json!("TCP"))]));
            set.insert(&p);
        }
        let mut fin = vec![f("metadata"), f("finalizers")];
        fin.push(PathElement::Value(Ordered(json!("a/b"))));
        set.insert(&fin);
        // Ports numerically (9 < 80 < 8080), unlike the keys' text.
        assert_eq!(
            set.to_fields_v1_string(),
            concat!(
                r#"{"f:metadata":{"f:finalizers":{"v:\"a/b\"":{}}},"#,
                r#""f:spec":{"f:ports":{"k:{\"port\":9,\"protocol\":\"TCP\"}":{},"#,
                r#""k:{\"port\":80,\"protocol\":\"TCP\"}":{},"#,
                r#""k:{\"port\":8080,\"protocol\":\"TCP\"}":{}}}}"#
            )
        );
        assert_eq!(Set::from_fields_v1(&set.to_fields_v1()).unwrap(), set);
        let paths: Vec<String> = set.paths().iter().map(|p| path_string(p)).collect();
        assert_eq!(
            paths,
            [
                r#".metadata.finalizers[="a/b"]"#,
                r#".spec.ports[port=9,protocol="TCP"]"#,
                r#".spec.ports[port=80,protocol="TCP"]"#,
                r#".spec.ports[port=8080,protocol="TCP"]"#,
            ]
        );
    }

    #[test]
    fn the_docs_examples_read_and_write_back() {
        let pod = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:containers": {"k:{\"name\":\"nginx\"}": {
                    ".": {}, "f:image": {}, "f:name": {}, "f:resources": {}
                }},
                "f:restartPolicy": {}
            }
        });
        let set = Set::from_fields_v1(&pod).unwrap();
        assert!(set.has(&[f("metadata"), f("labels")]));
        assert!(set.has(&[f("metadata"), f("labels"), f("app")]));
        assert!(!set.has(&[f("metadata")]));
        let c = key(&[("name", json!("nginx"))]);
        assert!(set.has(&[f("spec"), f("containers"), c.clone()]));
        assert!(set.has(&[f("spec"), f("containers"), c, f("image")]));
        assert_eq!(set.to_fields_v1(), pod);
        assert_eq!(
            set.to_fields_v1_string(),
            serde_json::to_string(&pod).unwrap(),
            "no number or HTML character here, so sorted text is the Go order"
        );
        // Unknown element types are dropped; bad ones refused.
        let odd = json!({"x:y": {}, "f:a": {}});
        assert_eq!(Set::from_fields_v1(&odd).unwrap().paths().len(), 1);
        assert!(Set::from_fields_v1(&json!({"fa": {}})).is_err());
        assert!(Set::from_fields_v1(&json!({"k:[1]": {}})).is_err());
    }

    #[test]
    fn differences_keep_or_take_children() {
        let mut a = Set::new();
        a.insert(&[f("a"), f("b"), f("c")]);
        a.insert(&[f("a"), f("d")]);
        let mut parent = Set::new();
        parent.insert(&[f("a"), f("b")]);
        assert_eq!(a.difference(&parent), a, "parent - child = parent");
        let rest = a.recursive_difference(&parent);
        assert!(!rest.has(&[f("a"), f("b"), f("c")]));
        assert!(rest.has(&[f("a"), f("d")]));
        let mut both = Set::new();
        both.insert(&[f("a"), f("d")]);
        assert_eq!(a.intersection(&both), both);
        assert_eq!(a.union(&parent).paths().len(), 3);
        assert!(a.difference(&a).is_empty());
        // In place, the same answers, empty children dropped.
        let mut c = a.clone();
        c.insert(&[f("e")]);
        c.insert(&[f("a")]);
        for other in [&parent, &both, &a, &Set::new(), &c] {
            for set in [&a, &c] {
                let mut in_place = set.clone();
                in_place.subtract(other);
                assert_eq!(in_place, set.difference(other));
            }
        }
        let mut gone = a.clone();
        gone.subtract(&a);
        assert_eq!(gone, Set::new());
    }
}
