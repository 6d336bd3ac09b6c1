//! An applied configuration merged into a live object, as SMD's `Merge` merges them
//! ([`merge`]), and fields taken out of an object, as its `RemoveItems` takes them
//! ([`remove_items`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Map, Value};

use super::walk::{Result, Shape, Ty, TypedErrors, common_shape, empty_list, empty_object};
use crate::fieldmanager::fieldpath::{Path, PathElement, Set, path_string};
use crate::schema::{ListType, Schema};

/// `config` merged into `live` (SMD's `Merge`): every leaf `config` sets takes its value.
pub fn merge(schema: &Schema, live: &Value, config: &Value) -> Result<Value> {
    let merged = merge_at(Some(live), Some(config), &Ty::root(schema), &mut Vec::new())?;
    Ok(merged.unwrap_or_else(|| Value::Object(Map::new())))
}

fn merge_at(
    l: Option<&Value>,
    r: Option<&Value>,
    ty: &Ty,
    path: &mut Path,
) -> Result<Option<Value>> {
    let leaf = || r.or(l).cloned();
    match common_shape(l, r) {
        Some(Shape::Object) => {
            if ty.object().is_atomic() || (empty_object(l) && empty_object(r)) {
                return Ok(leaf());
            }
            let (lm, rm) = (l.and_then(Value::as_object), r.and_then(Value::as_object));
            let keys: BTreeSet<&String> = lm
                .into_iter()
                .flat_map(Map::keys)
                .chain(rm.into_iter().flat_map(Map::keys))
                .collect();
            let mut out = Map::new();
            for k in keys {
                path.push(PathElement::field(k));
                let (a, b) = (lm.and_then(|m| m.get(k)), rm.and_then(|m| m.get(k)));
                if let Some(v) = merge_at(a, b, &ty.field(k), path)? {
                    out.insert(k.clone(), v);
                }
                path.pop();
            }
            Ok((!out.is_empty()).then_some(Value::Object(out)))
        }
        Some(Shape::List) => {
            let list = ty.list();
            if list == ListType::Atomic || (empty_list(l) && empty_list(r)) {
                return Ok(leaf());
            }
            let empty = Vec::new();
            let ll = l.and_then(Value::as_array).unwrap_or(&empty);
            let rl = r.and_then(Value::as_array).unwrap_or(&empty);
            let out = merge_items(&list, ll, rl, ty, path)?;
            Ok((!out.is_empty()).then_some(Value::Array(out)))
        }
        _ => Ok(leaf()),
    }
}

/// SMD's `indexListPathElements`: the elements of `items` and the item of each (null for
/// an element `items` repeats, when it may).
fn observe(
    ty: &Ty,
    list: &ListType,
    items: &[Value],
    path: &Path,
    allow_duplicates: bool,
) -> Result<(Vec<PathElement>, BTreeMap<PathElement, Value>)> {
    let pes = ty.elements(list, items, path)?;
    let mut observed = BTreeMap::new();
    let mut errors = Vec::new();
    let mut kept = Vec::with_capacity(pes.len());
    for (pe, item) in pes.into_iter().zip(items) {
        if observed.contains_key(&pe) {
            if !allow_duplicates {
                errors.push((path_string(path), format!("duplicate entries for key {pe}")));
                continue;
            }
            observed.insert(pe.clone(), Value::Null);
        } else {
            observed.insert(pe.clone(), item.clone());
        }
        kept.push(pe);
    }
    if errors.is_empty() {
        Ok((kept, observed))
    } else {
        Err(TypedErrors(errors))
    }
}

/// SMD's `mergingWalker.visitListItems`: the applied items in their order, live-only items
/// kept where they stood among the items both have.
fn merge_items(
    list: &ListType,
    ll: &[Value],
    rl: &[Value],
    ty: &Ty,
    path: &mut Path,
) -> Result<Vec<Value>> {
    let (rhs_pes, observed_rhs) = observe(ty, list, rl, path, false)?;
    let (lhs_pes, observed_lhs) = observe(ty, list, ll, path, true)?;
    let item_ty = ty.item();
    let mut shared: VecDeque<&PathElement> = rhs_pes
        .iter()
        .filter(|pe| observed_lhs.contains_key(pe))
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: BTreeSet<&PathElement> = BTreeSet::new();
    let mut out = Vec::with_capacity(ll.len().max(rl.len()));
    let (mut li, mut ri) = (0, 0);
    let merge_item = |pe: &PathElement,
                      l: Option<&Value>,
                      r: Option<&Value>,
                      out: &mut Vec<Value>,
                      path: &mut Path|
     -> Result<()> {
        path.push(pe.clone());
        let merged = merge_at(l, r, &item_ty, path);
        path.pop();
        if let Some(v) = merged? {
            out.push(v);
        }
        Ok(())
    };
    // An item by its element, from both sides.
    let merge_observed = |pe: &PathElement, out: &mut Vec<Value>, path: &mut Path| {
        merge_item(pe, observed_lhs.get(pe), observed_rhs.get(pe), out, path)
    };
    while li < lhs_pes.len() || ri < rhs_pes.len() {
        if li < lhs_pes.len() && ri < rhs_pes.len() {
            let pe = &lhs_pes[li];
            if *pe == rhs_pes[ri] {
                merged_rhs.insert(pe);
                merge_observed(pe, &mut out, path)?;
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if observed_rhs.contains_key(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lhs_pes.len() {
            let pe = &lhs_pes[li];
            if !observed_rhs.contains_key(pe) {
                merge_item(pe, Some(&ll[li]), None, &mut out, path)?;
                li += 1;
                continue;
            } else if merged_rhs.contains(pe) {
                li += 1;
            }
        }
        if ri < rhs_pes.len() {
            let pe = &rhs_pes[ri];
            merged_rhs.insert(pe);
            merge_observed(pe, &mut out, path)?;
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    Ok(out)
}

/// `value` without the fields of `set` (SMD's `RemoveItems`; a map or list left empty by
/// the removal goes too, as the typed object drops it).
pub fn remove_items(schema: &Schema, value: &Value, set: &Set) -> Value {
    remove_at(value, set, &Ty::root(schema)).unwrap_or_else(|| Value::Object(Map::new()))
}

fn remove_at(value: &Value, set: &Set, ty: &Ty) -> Option<Value> {
    match value {
        Value::Object(map) => {
            if map.is_empty() || ty.object().is_atomic() {
                return None;
            }
            let mut out = Map::new();
            for (k, v) in map {
                let pe = PathElement::field(k);
                if set.has_member(&pe) {
                    continue;
                }
                let kept = match set.with_prefix(&pe) {
                    Some(below) => remove_at(v, below, &ty.field(k)),
                    None => Some(v.clone()),
                };
                if let Some(kept) = kept {
                    out.insert(k.clone(), kept);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Value::Array(items) => {
            let list = ty.list();
            if items.is_empty() || list == ListType::Atomic {
                return None;
            }
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                let Ok(pe) = ty.element(&list, item) else {
                    out.push(item.clone());
                    continue;
                };
                if set.has_member(&pe) {
                    continue;
                }
                let kept = match set.with_prefix(&pe) {
                    Some(below) => remove_at(item, below, &ty.item()),
                    None => Some(item.clone()),
                };
                out.extend(kept);
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
        v => Some(v.clone()),
    }
}
