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
//! The merge metadata of a kind is a [`Schema`], a table of field paths (no list indices) taken
//! from the `patchStrategy`/`patchMergeKey` struct tags of `k8s.io/api` v0.34; [`schema_for`]
//! ([`crate::registry::schema`], which server-side apply reads too) holds the tables of the
//! kinds keel serves. Error messages are apimachinery's, and [`PatchError::status_code`] is
//! the code kube-apiserver answers them with.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::apimachinery::go_value::{GoType, go_fmt_list, go_fmt_map, go_fmt_s};
pub use crate::registry::schema::{Schema, schema_for};

type Object = Map<String, Value>;

const DIRECTIVE_MARKER: &str = "$patch";
const DELETE_DIRECTIVE: &str = "delete";
const REPLACE_DIRECTIVE: &str = "replace";
const MERGE_DIRECTIVE: &str = "merge";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

/// Why a strategic merge patch could not be applied; the messages are apimachinery's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The object patched is not a JSON object (`mergepatch.ErrBadJSONDoc`).
    #[error("invalid JSON document")]
    BadJsonDoc,
    /// The patch is JSON but not an object (the JSON decoder's error).
    #[error("json: cannot unmarshal {0} into Go value of type map[string]interface {{}}")]
    PatchNotAnObject(&'static str),
    /// A malformed `$deleteFromPrimitiveList` key.
    #[error("invalid patch format of primitive list")]
    BadPatchFormatForPrimitiveList,
    /// `$retainKeys` is not a list, or the patch has a field the list does not retain.
    #[error("invalid patch format of retainKeys")]
    BadPatchFormatForRetainKeys,
    /// A malformed `$setElementOrder` key.
    #[error("invalid patch format of setElementOrder list")]
    BadPatchFormatForSetElementOrderList,
    /// A list whose elements are lists.
    #[error("lists of lists are not supported")]
    NoListOfLists,
    /// A list element without the field's merge key.
    #[error("map: {map} does not contain declared merge key: {key}")]
    NoMergeKey {
        /// The element, as Go prints a map.
        map: String,
        /// The merge key.
        key: String,
    },
    /// A value of the wrong JSON type where a map or list was expected.
    #[error("expected a {expected}, but received a {actual}")]
    BadArgType {
        /// The Go type expected.
        expected: &'static str,
        /// The Go type received.
        actual: &'static str,
    },
    /// A `$patch` value that is not a directive (or `merge` on a map).
    #[error("unknown patch type: {patch_type} in map: {map}")]
    BadPatchType {
        /// The value, as Go prints it.
        patch_type: String,
        /// The map holding it, as Go prints it.
        map: String,
    },
    /// `$patch: merge` as a list element.
    #[error("merging lists cannot yet be specified in the patch")]
    MergeListDirective,
    /// A list of objects merged (or deleted from) without a declared merge key.
    #[error("cannot merge lists without merge key for struct")]
    NoDeclaredMergeKey,
    /// A merged list mixes element types.
    #[error("list element types are not identical: {0}")]
    ElementTypesDiffer(String),
    /// Both lists of a `$setElementOrder` are empty.
    #[error("no elements in any of the given slices")]
    NoElements,
    /// `$setElementOrder` lists an element that is not an object.
    #[error("value for key {0} is not a map")]
    NotAMap(usize),
    /// The patch list's order contradicts its `$setElementOrder` list.
    #[error("The order in patch list:\n{patch}\n doesn't match $setElementOrder list:\n{order}\n")]
    SetElementOrderMismatch {
        /// The patch list, as Go prints it.
        patch: String,
        /// The `$setElementOrder` list, as Go prints it.
        order: String,
    },
}

impl PatchError {
    /// The HTTP code kube-apiserver answers with (`interpretStrategicMergePatchError`): 400
    /// BadRequest for a malformed document or directive list, 422 for lists of lists, and
    /// 500 (a plain error, `Status` with no reason) for everything else.
    pub fn status_code(&self) -> u16 {
        match self {
            PatchError::BadJsonDoc
            | PatchError::PatchNotAnObject(_)
            | PatchError::BadPatchFormatForPrimitiveList
            | PatchError::BadPatchFormatForRetainKeys
            | PatchError::BadPatchFormatForSetElementOrderList => 400,
            PatchError::NoListOfLists => 422,
            _ => 500,
        }
    }
}

type Result<T> = std::result::Result<T, PatchError>;

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

/// `validatePatchWithSetOrderList`: the patch list (deletions aside) must be a subsequence
/// of the `$setElementOrder` list.
fn validate_patch_with_set_order(patch: &[Value], order: &[Value], merge_key: &str) -> Result<()> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let non_delete: Vec<&Value> = if merge_key.is_empty() {
        patch.iter().collect()
    } else {
        let mut kept = Vec::new();
        for v in patch {
            let Value::Object(m) = v else {
                return Err(bad_arg_type("map[string]interface {}", v));
            };
            if m.get(DIRECTIVE_MARKER).and_then(Value::as_str) != Some(DELETE_DIRECTIVE) {
                kept.push(v);
            }
        }
        kept
    };
    let (mut p, mut o) = (0, 0);
    while p < non_delete.len() && o < order.len() {
        if non_delete[p]
            .as_object()
            .is_some_and(|m| m.contains_key(DIRECTIVE_MARKER))
        {
            p += 1;
            continue;
        }
        if merge_key_value_equal(non_delete[p], &order[o], merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < non_delete.len() && o >= order.len() {
        return Err(PatchError::SetElementOrderMismatch {
            patch: go_fmt_list(patch),
            order: go_fmt_list(order),
        });
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

/// Splits `list` into the items present in `by` and the others.
fn partition_primitives(list: Vec<Value>, by: &[Value]) -> (Vec<Value>, Vec<Value>) {
    let present: HashSet<String> = by.iter().map(canonical).collect();
    list.into_iter()
        .partition(|v| present.contains(&canonical(v)))
}

/// Splits `list` into the objects whose merge key appears in `by` and the others.
fn partition_maps(
    list: Vec<Value>,
    by: &[Value],
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut present = Vec::with_capacity(list.len());
    let mut absent = Vec::with_capacity(list.len());
    for v in list {
        let Value::Object(m) = &v else {
            return Err(bad_arg_type("map[string]interface {}", &v));
        };
        let Some(value) = m.get(merge_key) else {
            return Err(no_merge_key(m, merge_key));
        };
        if find_by_key(by, merge_key, value)?.is_some() {
            present.push(v);
        } else {
            absent.push(v);
        }
    }
    Ok((present, absent))
}

/// The value an item is ordered by: its merge key (maps) or itself (primitives), as text.
fn order_key(item: &Value, merge_key: &str, is_map: bool) -> String {
    if is_map {
        canonical(
            item.as_object()
                .and_then(|m| m.get(merge_key))
                .unwrap_or(&Value::Null),
        )
    } else {
        canonical(item)
    }
}

/// First position of each order key in `order` (Go's `index`).
fn positions(order: &[Value], merge_key: &str, is_map: bool) -> HashMap<String, usize> {
    let mut at = HashMap::new();
    for (i, v) in order.iter().enumerate() {
        at.entry(order_key(v, merge_key, is_map)).or_insert(i);
    }
    at
}

/// `normalizeElementOrder`: sorts the patch items by `patch_order` and the server-only items
/// by `server_order`, then interleaves them keeping the live order where both are known.
fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    is_map: bool,
) -> Result<Vec<Value>> {
    let patch = normalize_slice_order(patch, patch_order, merge_key, is_map)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, is_map)?;
    let at = positions(server_order, merge_key, is_map);
    let rank = |v: &Value| at.get(&order_key(v, merge_key, is_map)).copied();
    // mergeSortedSlice: take a server-only item first only when both are in the live list
    // and it comes first there.
    let mut out = Vec::with_capacity(patch.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!((rank(l), rank(r)), (Some(a), Some(b)) if a < b),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    Ok(out)
}

/// `normalizeSliceOrder`: a stable sort of `items` by their position in `order`, with the
/// `$patch: delete` elements of a list of objects moved to the end.
fn normalize_slice_order(
    items: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    is_map: bool,
) -> Result<Vec<Value>> {
    let (items, deleted) = if is_map {
        for v in items.iter().chain(order) {
            let Value::Object(m) = v else {
                return Err(bad_arg_type("map[string]interface {}", v));
            };
            if !m.contains_key(merge_key) {
                return Err(no_merge_key(m, merge_key));
            }
        }
        items.into_iter().partition(|v| {
            v.get(DIRECTIVE_MARKER).and_then(Value::as_str) != Some(DELETE_DIRECTIVE)
        })
    } else {
        (items, Vec::new())
    };
    let at = positions(order, merge_key, is_map);
    let mut keyed: Vec<(Option<usize>, Value)> = items
        .into_iter()
        .map(|v| (at.get(&order_key(&v, merge_key, is_map)).copied(), v))
        .collect();
    go_stable_sort(&mut keyed);
    let mut out: Vec<Value> = keyed.into_iter().map(|(_, v)| v).collect();
    out.extend(deleted);
    Ok(out)
}

/// Go's `sort.SliceStable` with apimachinery's comparator ("less" when both items are in the
/// order list and the first comes first, and also whenever either is missing), so that
/// items missing from the order list land where Go puts them.
fn go_stable_sort(data: &mut [(Option<usize>, Value)]) {
    if data.iter().all(|(k, _)| k.is_some()) {
        data.sort_by_key(|(k, _)| *k);
        return;
    }
    let less = |d: &[(Option<usize>, Value)], i: usize, j: usize| match (d[i].0, d[j].0) {
        (Some(a), Some(b)) => a < b,
        _ => true,
    };
    let n = data.len();
    let insertion = |d: &mut [(Option<usize>, Value)], a: usize, b: usize| {
        for i in a + 1..b {
            let mut j = i;
            while j > a && less(d, j, j - 1) {
                d.swap(j, j - 1);
                j -= 1;
            }
        }
    };
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        insertion(data, a, b);
        a = b;
        b += block;
    }
    insertion(data, a, n);
    while block < n {
        a = 0;
        b = 2 * block;
        while b <= n {
            sym_merge(data, a, a + block, b, &less);
            a = b;
            b += 2 * block;
        }
        if a + block < n {
            sym_merge(data, a, a + block, n, &less);
        }
        block *= 2;
    }
}

type Less = dyn Fn(&[(Option<usize>, Value)], usize, usize) -> bool;

/// Go's `symMerge_func`.
fn sym_merge(d: &mut [(Option<usize>, Value)], a: usize, m: usize, b: usize, less: &Less) {
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if less(d, h, a) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = a;
        while k + 1 < i {
            d.swap(k, k + 1);
            k += 1;
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !less(d, m, h) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            d.swap(k, k - 1);
            k -= 1;
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !less(d, p - c, c) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        rotate(d, start, m, end);
    }
    if a < start && start < mid {
        sym_merge(d, a, start, mid, less);
    }
    if mid < end && end < b {
        sym_merge(d, mid, end, b, less);
    }
}

/// Go's `rotate_func`: swaps the blocks `d[a..m]` and `d[m..b]`.
fn rotate(d: &mut [(Option<usize>, Value)], a: usize, m: usize, b: usize) {
    let (mut i, mut j) = (m - a, b - m);
    let swap_range = |d: &mut [(Option<usize>, Value)], x: usize, y: usize, n: usize| {
        for k in 0..n {
            d.swap(x + k, y + k);
        }
    };
    while i != j {
        if i > j {
            swap_range(d, m - i, m, j);
            i -= j;
        } else {
            swap_range(d, m - i, m + j - i, i);
            j -= i;
        }
    }
    swap_range(d, m - i, m, i);
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

fn element_types_differ(lists: &[&[Value]]) -> PatchError {
    let inner: Vec<String> = lists.iter().map(|l| go_fmt_list(l)).collect();
    PatchError::ElementTypesDiffer(format!("[{}]", inner.join(" ")))
}

fn bad_arg_type(expected: &'static str, actual: &Value) -> PatchError {
    PatchError::BadArgType {
        expected,
        actual: GoType::of(actual).name(),
    }
}

fn no_merge_key(map: &Object, key: &str) -> PatchError {
    PatchError::NoMergeKey {
        map: go_fmt_map(map),
        key: key.to_string(),
    }
}

fn bad_patch_type(directive: &Value, map: &Object) -> PatchError {
    PatchError::BadPatchType {
        patch_type: go_fmt_s(directive),
        map: go_fmt_map(map),
    }
}

/// A value as text, for set membership and order lookups (equal values, equal text).
fn canonical(v: &Value) -> String {
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Schema {
        schema_for("", "Pod")
    }

    fn two_container_pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "finalizers": ["a", "b"]},
            "spec": {
                "containers": [
                    {"name": "a", "image": "busybox", "env": [{"name": "A", "value": "1"}]},
                    {"name": "b", "image": "nginx:1", "ports": [{"containerPort": 80}]}
                ]
            }
        })
    }

    #[test]
    fn kubectl_apply_changes_one_container_image() {
        let patch = json!({
            "metadata": {"annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"kind\":\"Pod\"}\n"
            }},
            "spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"image": "nginx:2", "name": "b"}]
            }
        });
        let out = apply(&two_container_pod(), &patch, &pod()).unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([
                {"name": "a", "image": "busybox", "env": [{"name": "A", "value": "1"}]},
                {"name": "b", "image": "nginx:2", "ports": [{"containerPort": 80}]}
            ])
        );
        assert_eq!(
            out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            "{\"kind\":\"Pod\"}\n"
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
    }

    #[test]
    fn kubectl_apply_adds_an_env_var() {
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{
                "$setElementOrder/env": [{"name": "A"}, {"name": "B"}],
                "env": [{"name": "B", "value": "2"}],
                "name": "a"
            }]
        }});
        let out = apply(&two_container_pod(), &patch, &pod()).unwrap();
        assert_eq!(
            out["spec"]["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
        );
        assert_eq!(out["spec"]["containers"][1]["name"], "b");
    }

    #[test]
    fn kubectl_apply_deletes_a_container() {
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "a"}],
            "containers": [{"$patch": "delete", "name": "b"}]
        }});
        let out = apply(&two_container_pod(), &patch, &pod()).unwrap();
        let names: Vec<&str> = out["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a"]);
    }

    #[test]
    fn kubectl_apply_removes_an_env_var() {
        let original = json!({"spec": {"containers": [{"name": "a", "env": [
            {"name": "A", "value": "1"}, {"name": "B", "value": "2"}
        ]}]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "a"}],
            "containers": [{
                "$setElementOrder/env": [{"name": "A"}],
                "env": [{"$patch": "delete", "name": "B"}],
                "name": "a"
            }]
        }});
        let out = apply(&original, &patch, &pod()).unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "a", "env": [{"name": "A", "value": "1"}]}])
        );
    }

    #[test]
    fn set_element_order_alone_reorders_the_live_list() {
        let patch =
            json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}});
        let out = apply(&two_container_pod(), &patch, &pod()).unwrap();
        assert_eq!(out["spec"]["containers"][0]["name"], "b");
        assert_eq!(out["spec"]["containers"][1]["name"], "a");
    }

    #[test]
    fn merged_list_puts_new_items_in_patch_order_before_live_ones() {
        let original = json!({"spec": {"containers": [{"name": "a", "env": [
            {"name": "A", "value": "1"}, {"name": "B", "value": "2"}
        ]}]}});
        let patch = json!({"spec": {"containers": [{"name": "a", "env": [
            {"name": "C", "value": "3"}, {"name": "A", "value": "9"}
        ]}]}});
        let out = apply(&original, &patch, &pod()).unwrap();
        assert_eq!(
            out["spec"]["containers"][0]["env"],
            json!([
                {"name": "C", "value": "3"},
                {"name": "A", "value": "9"},
                {"name": "B", "value": "2"}
            ])
        );
    }

    #[test]
    fn configmap_data_change_with_null_deleting_a_key() {
        let original = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {"keep": "1"}},
            "data": {"k1": "v1", "k2": "v2"}
        });
        let patch = json!({
            "data": {"k1": null, "k2": "v2b", "k3": "v3"},
            "metadata": {"annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{}\n"
            }}
        });
        let out = apply(&original, &patch, &schema_for("", "ConfigMap")).unwrap();
        assert_eq!(out["data"], json!({"k2": "v2b", "k3": "v3"}));
        assert_eq!(out["metadata"]["annotations"]["keep"], "1");
        assert_eq!(
            out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            "{}\n"
        );
    }

    #[test]
    fn finalizers_merge_as_a_set_and_delete_from_primitive_list() {
        let schema = schema_for("", "ConfigMap");
        let original = json!({"metadata": {"name": "c", "finalizers": ["a", "b"]}});
        let out = apply(
            &original,
            &json!({"metadata": {"finalizers": ["b", "c"]}}),
            &schema,
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));

        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
        let out = apply(&original, &patch, &schema).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));

        // What kubectl apply sends when "a" leaves and "c" joins the configuration.
        let patch = json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": ["a"],
            "$setElementOrder/finalizers": ["c", "b"],
            "finalizers": ["c"]
        }});
        let out = apply(&original, &patch, &schema).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["c", "b"]));
    }

    #[test]
    fn non_merge_lists_are_replaced() {
        let original = json!({"spec": {"containers": [{"name": "a", "args": ["x", "y"]}]}});
        let patch = json!({"spec": {"containers": [{"name": "a", "args": ["z"]}]}});
        let out = apply(&original, &patch, &pod()).unwrap();
        assert_eq!(out["spec"]["containers"][0]["args"], json!(["z"]));
    }

    #[test]
    fn patch_replace_on_a_list() {
        let patch = json!({"spec": {"containers": [
            {"name": "z", "image": "x"},
            {"$patch": "replace"}
        ]}});
        let out = apply(&two_container_pod(), &patch, &pod()).unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "z", "image": "x"}])
        );
    }

    #[test]
    fn patch_replace_and_delete_on_maps() {
        let original = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"x": "1"}});
        let patch = json!({
            "metadata": {"labels": {"$patch": "replace", "c": "3"}},
            "data": {"$patch": "delete"}
        });
        let out = apply(&original, &patch, &schema_for("", "ConfigMap")).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"c": "3"}));
        assert_eq!(out["data"], json!({}));
    }

    #[test]
    fn pod_status_conditions_merge_by_type() {
        let original = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}
        ]}});
        let patch = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": null},
            {"type": "Initialized", "status": "True"}
        ]}});
        let out = apply(&original, &patch, &pod()).unwrap();
        assert_eq!(
            out["status"]["conditions"],
            json!([
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
                {"type": "Initialized", "status": "True"}
            ])
        );
        assert_eq!(out["status"]["phase"], "Pending");
    }

    #[test]
    fn service_ports_merge_by_port() {
        let original = json!({"spec": {"ports": [
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
            {"name": "https", "port": 443, "protocol": "TCP"}
        ]}});
        let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}});
        let out = apply(&original, &patch, &schema_for("", "Service")).unwrap();
        assert_eq!(
            out["spec"]["ports"],
            json!([
                {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 9090},
                {"name": "https", "port": 443, "protocol": "TCP"}
            ])
        );
    }

    #[test]
    fn node_addresses_merge_by_type_and_pod_cidrs_union() {
        let original = json!({
            "spec": {"podCIDRs": ["10.0.0.0/24"]},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.1.1.1"}]}
        });
        let patch = json!({
            "spec": {"podCIDRs": ["fd00::/64"]},
            "status": {"addresses": [
                {"type": "Hostname", "address": "n1"},
                {"type": "InternalIP", "address": "10.1.1.2"}
            ]}
        });
        let out = apply(&original, &patch, &schema_for("", "Node")).unwrap();
        // Go puts patch items missing from the live list first.
        assert_eq!(out["spec"]["podCIDRs"], json!(["fd00::/64", "10.0.0.0/24"]));
        assert_eq!(
            out["status"]["addresses"],
            json!([
                {"type": "Hostname", "address": "n1"},
                {"type": "InternalIP", "address": "10.1.1.2"}
            ])
        );
    }

    #[test]
    fn retain_keys_clears_a_volume_source() {
        let original = json!({"spec": {"volumes": [
            {"name": "v", "configMap": {"name": "cm"}}
        ]}});
        let patch = json!({"spec": {"volumes": [
            {"$retainKeys": ["name", "secret"], "name": "v", "secret": {"secretName": "s"}}
        ]}});
        let out = apply(&original, &patch, &pod()).unwrap();
        assert_eq!(
            out["spec"]["volumes"],
            json!([{"name": "v", "secret": {"secretName": "s"}}])
        );

        let bad = json!({"spec": {"volumes": [
            {"$retainKeys": ["name"], "name": "v", "secret": {"secretName": "s"}}
        ]}});
        let err = apply(&original, &bad, &pod()).unwrap_err();
        assert_eq!(err, PatchError::BadPatchFormatForRetainKeys);
        assert_eq!(err.status_code(), 400);
    }

    #[test]
    fn new_fields_drop_nulls_and_directives() {
        let original = json!({"metadata": {"name": "c"}});
        let patch = json!({"data": {"a": "1", "b": null}, "metadata": {"labels": {"x": null}}});
        let out = apply(&original, &patch, &schema_for("", "ConfigMap")).unwrap();
        assert_eq!(out["data"], json!({"a": "1"}));
        assert_eq!(out["metadata"]["labels"], json!({}));
        assert_eq!(
            apply(&original, &Value::Null, &Schema::new()).unwrap(),
            original
        );
    }

    #[test]
    fn owner_references_merge_by_uid() {
        let original = json!({"metadata": {"ownerReferences": [
            {"uid": "1", "name": "a", "kind": "X", "apiVersion": "v1"}
        ]}});
        let patch = json!({"metadata": {"ownerReferences": [
            {"uid": "2", "name": "b", "kind": "X", "apiVersion": "v1"}
        ]}});
        let out = apply(
            &original,
            &patch,
            &schema_for("coordination.k8s.io", "Lease"),
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["ownerReferences"].as_array().unwrap().len(),
            2
        );
    }

    #[test]
    fn element_without_merge_key_is_refused_with_gos_message() {
        let patch = json!({"spec": {"containers": [{"image": "nginx"}]}});
        let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "map: map[image:nginx] does not contain declared merge key: name"
        );
        assert_eq!(err.status_code(), 500);
    }

    #[test]
    fn unknown_and_misplaced_patch_directives() {
        let patch = json!({"spec": {"containers": [{"name": "a", "$patch": "foo"}]}});
        let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown patch type: foo in map: map[$patch:foo name:a]"
        );

        let patch = json!({"metadata": {"$patch": "merge"}});
        let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown patch type: merge in map: map[$patch:merge]"
        );

        let patch = json!({"spec": {"containers": [{"$patch": "merge"}]}});
        let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
        assert_eq!(err, PatchError::MergeListDirective);

        let patch = json!({"spec": {"containers": [{"$patch": "delete"}]}});
        let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "map: map[$patch:delete] does not contain declared merge key: name"
        );

        let patch = json!({"spec": {"containers": [{"name": "a", "$patch": 1}]}});
        let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown patch type: %!s(int64=1) in map: map[$patch:1 name:a]"
        );
    }

    #[test]
    fn malformed_directive_keys_are_bad_requests() {
        let patch = json!({"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}});
        let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
        assert_eq!(err.to_string(), "invalid patch format of primitive list");
        assert_eq!(err.status_code(), 400);

        let patch = json!({"spec": {"$setElementOrder": [{"name": "a"}]}});
        let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
        assert_eq!(err, PatchError::BadPatchFormatForSetElementOrderList);

        let patch = json!({"spec": {"$setElementOrder/containers": {"name": "a"}}});
        let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "expected a []interface {}, but received a map[string]interface {}"
        );

        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "a"}],
            "containers": [{"name": "b", "image": "x"}]
        }});
        let err = apply(&two_container_pod(), &patch, &pod()).unwrap_err();
        assert!(
            matches!(err, PatchError::SetElementOrderMismatch { .. }),
            "{err}"
        );

        let err = apply(&two_container_pod(), &json!([1]), &pod()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        assert_eq!(err.status_code(), 400);
    }

    #[test]
    fn lists_of_lists_and_mixed_lists_are_refused() {
        let original = json!({"metadata": {"finalizers": [["a"]]}});
        let patch = json!({"metadata": {"finalizers": [["b"]]}});
        let err = apply(&original, &patch, &pod()).unwrap_err();
        assert_eq!(err, PatchError::NoListOfLists);
        assert_eq!(err.status_code(), 422);

        let original = json!({"metadata": {"finalizers": ["a"]}});
        let patch = json!({"metadata": {"finalizers": [1]}});
        let err = apply(&original, &patch, &pod()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "list element types are not identical: [[a] [1]]"
        );
    }

    #[test]
    fn go_stable_sort_matches_go_for_missing_items() {
        // Go's insertion sort moves items missing from the order list to the front.
        let mut d: Vec<(Option<usize>, Value)> = vec![
            (Some(1), json!("b")),
            (None, json!("x")),
            (Some(0), json!("a")),
        ];
        go_stable_sort(&mut d);
        let got: Vec<&Value> = d.iter().map(|(_, v)| v).collect();
        assert_eq!(got, [&json!("a"), &json!("x"), &json!("b")]);
        let mut big: Vec<(Option<usize>, Value)> = (0..50)
            .map(|i| (if i % 7 == 0 { None } else { Some(50 - i) }, json!(i)))
            .collect();
        go_stable_sort(&mut big);
        assert_eq!(big.len(), 50);
    }
}
