//! Objects walked with their [`Schema`], as structured-merge-diff's `typed` package walks a
//! `TypedValue`: the field set an object sets ([`to_field_set`]), what changed between two
//! objects ([`compare`]), an applied configuration merged into a live object ([`merge`]),
//! fields taken out of an object ([`remove_items`]), and the checks an applied
//! configuration passes first ([`validate`]).
//!
//! Each walk follows SMD's rules, which decide what a manager owns:
//! - a struct's fields, a map's keys, a keyed list's items and a set's items are tracked one
//!   by one; an atomic list, map or struct, and every scalar, is one leaf;
//! - an object or list that is empty (or null) on both sides is a leaf too, so `{}` and
//!   absent differ;
//! - a field `compare` finds on one side only is added or removed itself, besides its
//!   leaves (that is where FieldsV1's `"."` comes from); a field present on both sides
//!   (a struct Go always writes, as the kind's zero value has it) is not;
//! - `merge` keeps the applied value of every leaf it sets, merges keyed lists item by item
//!   in SMD's order (applied order, live-only items where they were), replaces atomic ones.
//!
//! Items of keyed lists are named by their key fields (a key the item leaves out takes its
//! `+default`, or is left out); an item with none of its keys, or a duplicate item in an
//! applied configuration, is an error worded as SMD words it.

mod compare;
mod merge;
mod walk;

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::fieldpath::{Path, PathElement, Set, path_string};
use crate::schema::{ListType, Schema};
use walk::{Result, Ty};

pub use compare::{Comparison, compare};
pub use merge::{merge, remove_items};
pub use walk::TypedErrors;

/// The fields `value` sets (SMD's `ToFieldSet`).
pub fn to_field_set(schema: &Schema, value: &Value) -> Result<Set> {
    let mut set = Set::new();
    field_set(value, &Ty::root(schema), &mut Vec::new(), &mut set)?;
    Ok(set)
}

fn field_set(value: &Value, ty: &Ty, path: &mut Path, set: &mut Set) -> Result<()> {
    match value {
        Value::Object(map) => {
            let kind = ty.object();
            if kind.is_atomic() {
                set.insert(path);
                return Ok(());
            }
            for (k, child) in map {
                path.push(PathElement::field(k));
                field_set(child, &ty.field(k), path, set)?;
                let empty = child.as_object().is_some_and(Map::is_empty);
                if child.is_null() || empty || !kind.has_fields() {
                    set.insert(path);
                }
                path.pop();
            }
        }
        Value::Array(items) => {
            let list = ty.list();
            if list == ListType::Atomic {
                set.insert(path);
                return Ok(());
            }
            let pes = ty.elements(&list, items, path)?;
            let mut seen = BTreeSet::new();
            let mut duplicated = BTreeSet::new();
            for pe in &pes {
                if !seen.insert(pe) && duplicated.insert(pe) {
                    path.push(pe.clone());
                    set.insert(path);
                    path.pop();
                }
            }
            for (pe, item) in pes.iter().zip(items) {
                if duplicated.contains(pe) {
                    continue;
                }
                path.push(pe.clone());
                field_set(item, &ty.item(), path, set)?;
                set.insert(path);
                path.pop();
            }
        }
        _ => set.insert(path),
    }
    Ok(())
}

/// `set` with every named field that has fields below it a member too (SMD's
/// `EnsureNamedFieldsAreMembers`: `.data.a` brings `.data`, a map's keys bring nothing).
pub fn ensure_named_fields_are_members(schema: &Schema, set: &Set) -> Set {
    named_fields(set, Some(&Ty::root(schema)))
}

fn named_fields(set: &Set, ty: Option<&Ty>) -> Set {
    let mut out = Set::new();
    for pe in set.members() {
        out.insert_member(pe.clone());
    }
    let fields = ty.is_some_and(|t| t.object().has_fields());
    for (pe, child) in set.children() {
        let child_ty = match (pe, ty) {
            (PathElement::Field(name), Some(t)) => Some(t.field(name)),
            (PathElement::Key(_), Some(t)) => Some(t.item()),
            _ => None,
        };
        if fields && matches!(pe, PathElement::Field(_)) {
            out.insert_member(pe.clone());
        }
        let below = named_fields(child, child_ty.as_ref());
        if !below.is_empty() {
            *out.child_mut(pe.clone()) = below;
        }
    }
    out
}

/// The checks an applied configuration passes before it is merged (SMD's validation of a
/// typed value): every item of a keyed list or set has its element, none twice.
pub fn validate(schema: &Schema, value: &Value) -> Result<()> {
    let mut errors = Vec::new();
    validate_at(value, &Ty::root(schema), &mut Vec::new(), &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(TypedErrors(errors))
    }
}

fn validate_at(value: &Value, ty: &Ty, path: &mut Path, errors: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            if ty.object().is_atomic() {
                return;
            }
            for (k, child) in map {
                path.push(PathElement::field(k));
                validate_at(child, &ty.field(k), path, errors);
                path.pop();
            }
        }
        Value::Array(items) => {
            let list = ty.list();
            if list == ListType::Atomic {
                return;
            }
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                match ty.element(&list, item) {
                    Ok(pe) => {
                        if !seen.insert(pe.clone()) {
                            errors.push((
                                path_string(path),
                                format!("duplicate entries for key {pe}"),
                            ));
                            continue;
                        }
                        path.push(pe);
                        validate_at(item, &ty.item(), path, errors);
                        path.pop();
                    }
                    Err(e) => errors.push((path_string(path), format!("element {i}: {e}"))),
                }
            }
        }
        _ => {}
    }
}

/// `value` with what `zero` has and it lacks (the structs Go always writes, the lists it
/// writes as null), at every level both are objects; `value` itself (no copy) when it lacks
/// nothing, as a stored object usually does.
pub fn with_zero<'v>(value: &'v Value, zero: &Value) -> Cow<'v, Value> {
    if !lacks(value, zero) {
        return Cow::Borrowed(value);
    }
    let mut out = value.clone();
    fill(&mut out, zero);
    Cow::Owned(out)
}

/// Whether [`fill`] would add anything to `value`.
fn lacks(value: &Value, zero: &Value) -> bool {
    let (Some(map), Some(zero)) = (value.as_object(), zero.as_object()) else {
        return false;
    };
    zero.iter().any(|(k, z)| match map.get(k) {
        Some(v) => lacks(v, z),
        None => true,
    })
}

fn fill(value: &mut Value, zero: &Value) {
    let (Some(map), Some(zero)) = (value.as_object_mut(), zero.as_object()) else {
        return;
    };
    for (k, z) in zero {
        match map.get_mut(k) {
            Some(v) => fill(v, z),
            None => {
                map.insert(k.clone(), z.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::schema_for;

    fn paths(set: &Set) -> Vec<String> {
        set.paths().iter().map(|p| path_string(p)).collect()
    }

    #[test]
    fn zero_fills_what_is_missing_and_copies_nothing_when_nothing_is() {
        let zero = json!({"metadata": {"creationTimestamp": null}, "spec": {}});
        let full = json!({"metadata": {"name": "a", "creationTimestamp": "t"}, "spec": {"x": 1}});
        assert!(matches!(with_zero(&full, &zero), Cow::Borrowed(_)));
        let partial = json!({"metadata": {"name": "a"}, "spec": 5});
        assert_eq!(
            *with_zero(&partial, &zero),
            json!({"metadata": {"name": "a", "creationTimestamp": null}, "spec": 5})
        );
    }

    #[test]
    fn compare_names_the_added_parents_and_the_changed_leaves() {
        let cm = schema_for("", "ConfigMap");
        let cmp = compare(
            &cm,
            &json!({"data": {"a": "1"}, "x": {"k": 1}}),
            &json!({"data": {"a": "2"}, "binaryData": {"b": "Yg=="}, "x": {}}),
        )
        .unwrap();
        assert_eq!(paths(&cmp.modified), [".data.a"]);
        assert_eq!(paths(&cmp.added), [".binaryData", ".binaryData.b"]);
        assert_eq!(paths(&cmp.removed), [".x.k"]);
    }

    #[test]
    fn merge_puts_applied_items_in_applied_order_and_keeps_live_only_ones_in_place() {
        let pod = schema_for("", "Pod");
        let c = |names: &[&str]| {
            let items: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
            json!({"spec": {"containers": items}})
        };
        let merged = merge(&pod, &c(&["a", "b", "c"]), &c(&["c", "a"])).unwrap();
        assert_eq!(merged, c(&["b", "c", "a"]));
        let merged = merge(&pod, &c(&["a"]), &c(&["b"])).unwrap();
        assert_eq!(merged, c(&["a", "b"]));
        // Atomic lists and maps are replaced, granular maps merged.
        let live = json!({"spec": {"nodeSelector": {"a": "1"}, "containers": [{"name": "x", "args": ["1", "2"]}]}, "metadata": {"labels": {"a": "1"}}});
        let config = json!({"spec": {"nodeSelector": {"b": "2"}, "containers": [{"name": "x", "args": ["3"]}]}, "metadata": {"labels": {"b": "2"}}});
        let merged = merge(&pod, &live, &config).unwrap();
        assert_eq!(merged["spec"]["nodeSelector"], json!({"b": "2"}));
        assert_eq!(merged["spec"]["containers"][0]["args"], json!(["3"]));
        assert_eq!(merged["metadata"]["labels"], json!({"a": "1", "b": "2"}));
    }

    #[test]
    fn field_sets_own_atomic_things_whole_and_name_list_items_by_key() {
        let pod = schema_for("", "Pod");
        let obj = json!({
            "metadata": {"ownerReferences": [{"uid": "u", "kind": "K"}], "finalizers": ["f"]},
            "spec": {"nodeSelector": {"a": "1"}, "containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}
        });
        let set = to_field_set(&pod, &obj).unwrap();
        assert_eq!(
            paths(&set),
            [
                r#".metadata.finalizers[="f"]"#,
                r#".metadata.ownerReferences[uid="u"]"#,
                ".spec.nodeSelector",
                r#".spec.containers[name="c"]"#,
                r#".spec.containers[name="c"].name"#,
                r#".spec.containers[name="c"].ports[containerPort=80,protocol="TCP"]"#,
                r#".spec.containers[name="c"].ports[containerPort=80,protocol="TCP"].containerPort"#,
            ]
        );
        let named = ensure_named_fields_are_members(&pod, &set);
        assert!(named.has(&[PathElement::field("spec")]));
        assert!(named.has(&[PathElement::field("spec"), PathElement::field("containers")]));
        // A container without a name is keyed on the name's default, "" (upstream's
        // definitions give every required string one); a key with no default is an error.
        let keyless = json!({"spec": {"containers": [{"image": "i"}]}});
        assert!(validate(&pod, &keyless).is_ok());
        let defs = json!({"root": {"properties": {"items": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}}},
        }}}});
        let custom = Schema::from_definition(defs.as_object().unwrap(), "root");
        let e = validate(&custom, &json!({"items": [{"image": "i"}]})).unwrap_err();
        assert_eq!(
            e.to_string(),
            ".items: element 0: associative list with keys has an element that omits all key fields [\"name\"] (and doesn't have default values for any key fields)"
        );
    }

    #[test]
    fn pod_affinity_terms_are_atomic_lists_selectors_and_all() {
        let pod = schema_for("", "Pod");
        let selector = json!({"matchLabels": {"app": "web"}});
        let term = json!({"labelSelector": selector, "topologyKey": "zone"});
        let obj = json!({"spec": {"affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"namespaceSelector": selector, "topologyKey": "zone"}}
            ]}
        }}});
        let set = to_field_set(&pod, &obj).unwrap();
        assert_eq!(
            paths(&set),
            [
                ".spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                ".spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution",
            ]
        );
    }

    #[test]
    fn removing_items_drops_what_they_emptied() {
        let cm = schema_for("", "ConfigMap");
        let mut set = Set::new();
        set.insert(&[PathElement::field("data"), PathElement::field("a")]);
        let obj = json!({"data": {"a": "1"}, "metadata": {"name": "n"}});
        assert_eq!(
            remove_items(&cm, &obj, &set),
            json!({"metadata": {"name": "n"}})
        );
        let two = json!({"data": {"a": "1", "b": "2"}});
        assert_eq!(remove_items(&cm, &two, &set), json!({"data": {"b": "2"}}));
    }
}
