//! Strategic merge patch (`application/strategic-merge-patch+json`) as apimachinery's
//! `strategicpatch.StrategicMergeMapPatch` applies it on the server: maps merge key by key,
//! `null` deletes a key, lists are replaced unless the field's `patchStrategy` tag says
//! `merge` (then lists of objects merge element by element on the `patchMergeKey`, lists of
//! primitives become a union), and the directives `$patch` (`replace` and `delete`; `merge` is
//! refused, in maps and in lists, as Go refuses it), `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>` (what `kubectl apply`
//! sends) are honoured with Go's ordering rules. As in Go, new list elements and `$patch:
//! replace` values are taken as sent; dropping what the kind's type does not know (unknown
//! fields, leftover nulls) is the decoder's job, as `FromUnstructured` does it in Go.
//!
//! The merge metadata of a kind is a [`Schema`] ([`crate::schema::merge`], which server-side
//! apply reads too): each field's `x-kubernetes-patch-strategy` and `-patch-merge-key` in the
//! kind's OpenAPI definition, the struct tags of `k8s.io/api`. Error messages are apimachinery's, and [`PatchError::status_code`] is
//! the code kube-apiserver answers them with.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::apimachinery::go_value::GoType;
pub use crate::schema::{Schema, schema_for};

mod errors;
mod order;

pub use errors::PatchError;
use errors::{Result, bad_arg_type, bad_patch_type, element_types_differ, no_merge_key};
use order::{
    normalize_element_order, partition_maps, partition_primitives, validate_patch_with_set_order,
};

type Object = Map<String, Value>;

const DIRECTIVE_MARKER: &str = "$patch";
const DELETE_DIRECTIVE: &str = "delete";
const REPLACE_DIRECTIVE: &str = "replace";
const MERGE_DIRECTIVE: &str = "merge";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

/// Applies the strategic merge patch `patch` to `original` with the merge metadata `schema`
/// and returns the patched object. A `null` patch changes nothing.
pub fn apply(original: &Value, patch: &Value, schema: &Schema) -> Result<Value> {
    let Value::Object(original) = original else {
        return Err(PatchError::BadJsonDoc);
    };
    let patch = match patch {
        Value::Object(p) => p.clone(),
        Value::Null => Object::new(),
        Value::Array(_) => return Err(PatchError::PatchNotAnObject("array")),
        Value::String(_) => return Err(PatchError::PatchNotAnObject("string")),
        Value::Number(_) => return Err(PatchError::PatchNotAnObject("number")),
        Value::Bool(_) => return Err(PatchError::PatchNotAnObject("bool")),
    };
    merge_map(original.clone(), patch, "", schema).map(Value::Object)
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `mergeMap`: merges `patch` into `original`, the map at `path`.
fn merge_map(
    mut original: Object,
    mut patch: Object,
    path: &str,
    schema: &Schema,
) -> Result<Object> {
    if let Some(directive) = patch.get(DIRECTIVE_MARKER) {
        return match directive.as_str() {
            Some(REPLACE_DIRECTIVE) => {
                patch.remove(DIRECTIVE_MARKER);
                Ok(patch)
            }
            Some(DELETE_DIRECTIVE) => Ok(Object::new()),
            _ => Err(bad_patch_type(directive, &patch)),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    merge_set_element_order(&mut original, &mut patch, path, schema)?;

    for (key, patch_value) in patch {
        let (key, is_delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
            (
                extract_key(&key, DELETE_FROM_PRIMITIVE_LIST_PREFIX)
                    .ok_or(PatchError::BadPatchFormatForPrimitiveList)?,
                true,
            )
        } else {
            (key, false)
        };
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let same_type = match original.get(&key) {
            None => false,
            Some(o) => GoType::of(o) == GoType::of(&patch_value),
        };
        if !same_type {
            if !is_delete_list {
                let mut v = patch_value;
                discard_nulls(&mut v);
                match remove_directives(v) {
                    Some(v) => original.insert(key, v),
                    None => original.remove(&key),
                };
            }
            continue;
        }
        let field_path = child(path, &key);
        let Some(original_value) = original.remove(&key) else {
            continue;
        };
        let merged = match (original_value, patch_value) {
            (Value::Object(o), Value::Object(p)) => {
                if schema.is_replace(&field_path) {
                    Some(Value::Object(p))
                } else {
                    Some(Value::Object(merge_map(o, p, &field_path, schema)?))
                }
            }
            (Value::Array(o), Value::Array(p)) => {
                let (is_merge, merge_key) = schema.list_meta(&field_path);
                if is_merge || is_delete_list {
                    Some(Value::Array(merge_slice(
                        o,
                        p,
                        &field_path,
                        merge_key,
                        is_delete_list,
                        schema,
                    )?))
                } else {
                    Some(Value::Array(p))
                }
            }
            (_, p) => remove_directives(p),
        };
        if let Some(v) = merged {
            original.insert(key, v);
        }
    }
    Ok(original)
}

/// `applyRetainKeysDirective`: clears the fields of `original` that `$retainKeys` does not
/// list, after checking that the patch sets no field outside it.
fn apply_retain_keys(original: &mut Object, patch: &mut Object) -> Result<()> {
    let Some(retain) = patch.remove(RETAIN_KEYS_DIRECTIVE) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(PatchError::BadPatchFormatForRetainKeys);
    };
    let retained = |k: &str| retain.iter().any(|v| v.as_str() == Some(k));
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
            || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
        {
            continue;
        }
        if !retained(k) {
            return Err(PatchError::BadPatchFormatForRetainKeys);
        }
    }
    original.retain(|k, _| retained(k));
    Ok(())
}

/// `extractKey`: the field a `prefix/field` directive key names.
fn extract_key(key: &str, prefix: &str) -> Option<String> {
    match key.split_once('/') {
        Some((p, field)) if p == prefix => Some(field.to_string()),
        _ => None,
    }
}

fn list_field<'a>(map: &'a Object, key: &str) -> Result<Option<&'a Vec<Value>>> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::Array(l)) => Ok(Some(l)),
        Some(other) => Err(bad_arg_type("[]interface {}", other)),
    }
}

/// `mergePatchIntoOriginal`: merges each list named by a `$setElementOrder/<field>` directive
/// and puts it in the directive's order (the directive first, then the patch's order, then
/// the live list's), removing directive and list from the patch.
fn merge_set_element_order(
    original: &mut Object,
    patch: &mut Object,
    path: &str,
    schema: &Schema,
) -> Result<()> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX))
        .cloned()
        .collect();
    for key in keys {
        let Some(order) = patch.remove(&key) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(bad_arg_type("[]interface {}", &order));
        };
        let list_key = extract_key(&key, SET_ELEMENT_ORDER_PREFIX)
            .ok_or(PatchError::BadPatchFormatForSetElementOrderList)?;
        let original_list = list_field(original, &list_key)?.cloned();
        let patch_list = list_field(patch, &list_key)?.cloned();
        let field_path = child(path, &list_key);
        let (is_merge, merge_key) = schema.list_meta(&field_path);
        validate_patch_with_set_order(patch_list.as_deref().unwrap_or(&[]), &order, merge_key)?;

        let merged = match (&original_list, patch_list) {
            (Some(o), None) => o.clone(),
            (None, Some(p)) => p.into_iter().filter_map(remove_directives).collect(),
            (Some(o), Some(p)) => {
                if is_merge {
                    merge_slice(o.clone(), p.clone(), &field_path, merge_key, false, schema)?
                } else {
                    p
                }
            }
            (None, None) => continue,
        };
        let (patch_items, server_only) = if merge_key.is_empty() {
            partition_primitives(merged, &order)
        } else {
            partition_maps(merged, &order, merge_key)?
        };
        let original_list = original_list.unwrap_or_default();
        let element_type = slice_element_type(&[
            &original_list,
            patch
                .get(&list_key)
                .and_then(Value::as_array)
                .map_or(&[], |v| v),
        ])?;
        let both = normalize_element_order(
            patch_items,
            server_only,
            &order,
            &original_list,
            merge_key,
            element_type == GoType::Map,
        )?;
        original.insert(list_key.clone(), Value::Array(both));
        patch.remove(&list_key);
    }
    Ok(())
}

fn merge_key_value_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool> {
    if merge_key.is_empty() {
        return Ok(left == right);
    }
    let key_of = |v: &Value| -> Result<Value> {
        let Value::Object(m) = v else {
            return Err(bad_arg_type("map[string]interface {}", v));
        };
        m.get(merge_key)
            .cloned()
            .ok_or_else(|| no_merge_key(m, merge_key))
    };
    let l = key_of(left)?;
    let r = key_of(right)?;
    Ok(l == r)
}

/// `mergeSlice`: merges the patch list into the original list of a `merge` field.
fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    path: &str,
    merge_key: &str,
    is_delete_list: bool,
    schema: &Schema,
) -> Result<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let element_type = slice_element_type(&[&original, &patch])?;
    if element_type != GoType::Map {
        if is_delete_list {
            let doomed: HashSet<String> = patch.iter().map(canonical).collect();
            return Ok(original
                .into_iter()
                .filter(|v| !doomed.contains(&canonical(v)))
                .collect());
        }
        let mut seen = HashSet::new();
        let merged: Vec<Value> = original
            .iter()
            .chain(patch.iter())
            .filter(|v| seen.insert(canonical(v)))
            .cloned()
            .collect();
        let (patch_items, server_only) = partition_primitives(merged, &patch);
        return normalize_element_order(patch_items, server_only, &patch, &original, "", false);
    }
    if merge_key.is_empty() {
        return Err(PatchError::NoDeclaredMergeKey);
    }
    let (original, patch) = merge_special_elements(original, patch, merge_key)?;
    let server_order = original.clone();
    let mut merged = original;
    for element in &patch {
        let Value::Object(p) = element else {
            return Err(bad_arg_type("map[string]interface {}", element));
        };
        let Some(value) = p.get(merge_key) else {
            return Err(no_merge_key(p, merge_key));
        };
        match find_by_key(&merged, merge_key, value)? {
            Some(i) => {
                let o = match std::mem::take(&mut merged[i]) {
                    Value::Object(o) => o,
                    _ => Object::new(),
                };
                merged[i] = Value::Object(merge_map(o, p.clone(), path, schema)?);
            }
            None => merged.push(element.clone()),
        }
    }
    let (patch_items, server_only) = partition_maps(merged, &patch, merge_key)?;
    normalize_element_order(
        patch_items,
        server_only,
        &patch,
        &server_order,
        merge_key,
        true,
    )
}

/// `mergeSliceWithSpecialElements`: applies the `$patch` elements of a patch list (`delete`
/// drops the original's elements with that key, `replace` makes the rest of the patch list
/// the result) and returns the original and the patch without them.
fn merge_special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut plain = Vec::new();
    let mut replace = false;
    for v in patch {
        let Value::Object(m) = &v else {
            return Err(bad_arg_type("map[string]interface {}", &v));
        };
        let Some(directive) = m.get(DIRECTIVE_MARKER) else {
            plain.push(v);
            continue;
        };
        match directive.as_str() {
            Some(DELETE_DIRECTIVE) => {
                let Some(value) = m.get(merge_key) else {
                    return Err(no_merge_key(m, merge_key));
                };
                for (i, o) in original.iter().enumerate() {
                    if !o.is_object() {
                        return Err(PatchError::NotAMap(i));
                    }
                }
                original.retain(|o| o.get(merge_key) != Some(value));
            }
            Some(REPLACE_DIRECTIVE) => replace = true,
            Some(MERGE_DIRECTIVE) => return Err(PatchError::MergeListDirective),
            _ => return Err(bad_patch_type(directive, m)),
        }
    }
    if replace {
        Ok((plain, Vec::new()))
    } else {
        Ok((original, plain))
    }
}

/// `findMapInSliceBasedOnKeyValue`: the first element whose merge key equals `value`.
fn find_by_key(list: &[Value], merge_key: &str, value: &Value) -> Result<Option<usize>> {
    for (i, v) in list.iter().enumerate() {
        let Value::Object(m) = v else {
            return Err(PatchError::NotAMap(i));
        };
        if m.get(merge_key) == Some(value) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// `removeDirectives`: drops maps carrying `$patch` (returns `None` for one), recursively.
fn remove_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(m) => {
            if m.contains_key(DIRECTIVE_MARKER) {
                return None;
            }
            Some(Value::Object(
                m.into_iter()
                    .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                    .collect(),
            ))
        }
        Value::Array(l) => Some(Value::Array(
            l.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

/// `discardNullValuesFromPatch`: drops `null` map values, recursively.
fn discard_nulls(value: &mut Value) {
    match value {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(discard_nulls);
        }
        Value::Array(l) => l.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// `sliceElementType`: the one element type of the lists (lists of lists refused).
fn slice_element_type(lists: &[&[Value]]) -> Result<GoType> {
    let mut found: Option<GoType> = None;
    for v in lists.iter().flat_map(|l| l.iter()) {
        let t = GoType::of(v);
        match found {
            None if t == GoType::Slice => return Err(PatchError::NoListOfLists),
            None if t == GoType::Nil => {
                // Go panics here (a nil reflect.Type); refuse the lists instead.
                return Err(element_types_differ(lists));
            }
            None => found = Some(t),
            Some(prev) if prev != t => return Err(element_types_differ(lists)),
            Some(_) => {}
        }
    }
    found.ok_or(PatchError::NoElements)
}

/// A value as text, for set membership and order lookups (equal values, equal text).
fn canonical(v: &Value) -> String {
    v.to_string()
}

#[cfg(test)]
mod tests;
