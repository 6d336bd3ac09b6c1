//! What changed between two objects, as SMD's `Compare` finds it: the fields removed,
//! modified and added ([`Comparison`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::walk::{Result, Shape, Ty, common_shape, empty_list, empty_object};
use crate::fieldmanager::fieldpath::{Path, PathElement, Set, values_equal};
use crate::schema::{ListType, Schema};

/// What changed from `lhs` to `rhs` (SMD's `Comparison`); no field is in two of the sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Fields `rhs` no longer has.
    pub removed: Set,
    /// Fields both have, with different values.
    pub modified: Set,
    /// Fields only `rhs` has.
    pub added: Set,
}

impl Comparison {
    /// Takes `fields`, and everything below them, out of all three sets.
    pub fn exclude(&mut self, fields: &Set) {
        self.removed = self.removed.recursive_difference(fields);
        self.modified = self.modified.recursive_difference(fields);
        self.added = self.added.recursive_difference(fields);
    }

    /// Whether nothing changed.
    pub fn is_same(&self) -> bool {
        self.removed.is_empty() && self.modified.is_empty() && self.added.is_empty()
    }
}

/// What changed from `lhs` to `rhs` (SMD's `Compare`).
pub fn compare(schema: &Schema, lhs: &Value, rhs: &Value) -> Result<Comparison> {
    let mut cmp = Comparison::default();
    compare_at(
        Some(lhs),
        Some(rhs),
        &Ty::root(schema),
        &mut Vec::new(),
        &mut cmp,
    )?;
    Ok(cmp)
}

fn compare_at(
    l: Option<&Value>,
    r: Option<&Value>,
    ty: &Ty,
    path: &mut Path,
    cmp: &mut Comparison,
) -> Result<()> {
    let leaf = |cmp: &mut Comparison, path: &Path| {
        match (l, r) {
            (None, _) => cmp.added.insert(path),
            (_, None) => cmp.removed.insert(path),
            (Some(a), Some(b)) if !values_equal(a, b) => cmp.modified.insert(path),
            _ => {}
        };
    };
    match common_shape(l, r) {
        Some(Shape::Object) => {
            if ty.object().is_atomic() || (empty_object(l) && empty_object(r)) {
                leaf(cmp, path);
                return Ok(());
            }
            let (lm, rm) = (l.and_then(Value::as_object), r.and_then(Value::as_object));
            let mut field = |k: &String, a: Option<&Value>, b: Option<&Value>| {
                path.push(PathElement::field(k));
                let compared = compare_at(a, b, &ty.field(k), path, cmp);
                path.pop();
                compared
            };
            for (k, a) in lm.into_iter().flatten() {
                let b = rm.and_then(|m| m.get(k));
                // The same on both sides with no list below: nothing to find there.
                if !b.is_some_and(|b| unchanged(a, b)) {
                    field(k, Some(a), b)?;
                }
            }
            for (k, b) in rm.into_iter().flatten() {
                if !lm.is_some_and(|m| m.contains_key(k)) {
                    field(k, None, Some(b))?;
                }
            }
        }
        Some(Shape::List) => {
            let list = ty.list();
            if list == ListType::Atomic || (empty_list(l) && empty_list(r)) {
                leaf(cmp, path);
                return Ok(());
            }
            let empty = Vec::new();
            let ll = l.and_then(Value::as_array).unwrap_or(&empty);
            let rl = r.and_then(Value::as_array).unwrap_or(&empty);
            let leaf_items = || ll.iter().all(|v| !v.is_object()) || ty.item().object().is_atomic();
            if l.zip(r).is_some_and(|(a, b)| values_equal(a, b)) && leaf_items() {
                // The same items, each a leaf: nothing changed, but the items are named (and
                // may fail to be) as a walk would name them.
                ty.elements(&list, ll, path)?;
                return Ok(());
            }
            compare_items(&list, ll, rl, ty, path, cmp)?;
        }
        _ => {
            leaf(cmp, path);
            return Ok(());
        }
    }
    if l.is_none() {
        cmp.added.insert(path);
    } else if r.is_none() {
        cmp.removed.insert(path);
    }
    Ok(())
}

/// Whether `a` and `b` are equal as [`compare`] judges leaves, with no list (but empty ones)
/// anywhere in them, so comparing them finds nothing and cannot fail (only a list's items
/// can be malformed). Maps are read in order: equal maps in another order are walked.
fn unchanged(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((k, v), (j, w))| k == j && unchanged(v, w))
        }
        (Value::Array(x), Value::Array(y)) => x.is_empty() && y.is_empty(),
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => false,
        _ => values_equal(a, b),
    }
}

/// The items of each element, in first-seen order of the elements.
fn index(pes: Vec<PathElement>, items: &[Value]) -> BTreeMap<PathElement, Vec<&Value>> {
    let mut out: BTreeMap<PathElement, Vec<&Value>> = BTreeMap::new();
    for (pe, item) in pes.into_iter().zip(items) {
        out.entry(pe).or_default().push(item);
    }
    out
}

fn compare_items(
    list: &ListType,
    ll: &[Value],
    rl: &[Value],
    ty: &Ty,
    path: &mut Path,
    cmp: &mut Comparison,
) -> Result<()> {
    let lhs = index(ty.elements(list, ll, path)?, ll);
    let rhs = index(ty.elements(list, rl, path)?, rl);
    let all: BTreeSet<&PathElement> = lhs.keys().chain(rhs.keys()).collect();
    let item_ty = ty.item();
    for pe in all {
        let l = lhs.get(pe).map(Vec::as_slice).unwrap_or(&[]);
        let r = rhs.get(pe).map(Vec::as_slice).unwrap_or(&[]);
        path.push(pe.clone());
        match (l.len(), r.len()) {
            (0..=1, 0..=1) => {
                compare_at(l.first().copied(), r.first().copied(), &item_ty, path, cmp)?;
            }
            (2.., 2..) => {
                let same = l.len() == r.len() && l.iter().zip(r).all(|(a, b)| values_equal(a, b));
                if !same {
                    cmp.modified.insert(path);
                }
            }
            (2.., _) => {
                if let Some(item) = r.first() {
                    compare_at(None, Some(item), &item_ty, path, cmp)?;
                }
                cmp.removed.insert(path);
            }
            (_, _) => {
                if let Some(item) = l.first() {
                    compare_at(Some(item), None, &item_ty, path, cmp)?;
                }
                cmp.added.insert(path);
            }
        }
        path.pop();
    }
    Ok(())
}
