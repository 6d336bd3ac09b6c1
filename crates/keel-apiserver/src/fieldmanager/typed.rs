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

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::fieldpath::{Ordered, Path, PathElement, Set, path_string, values_equal};
use crate::registry::schema::{ListType, ObjectType, Schema};

/// Problems SMD finds walking a value, each at its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedErrors(pub Vec<(String, String)>);

impl std::fmt::Display for TypedErrors {
    /// SMD's `ValidationErrors.Error`: one error alone, or `errors:` and one per line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let line = |(path, message): &(String, String)| format!("{path}: {message}");
        match self.0.as_slice() {
            [one] => write!(f, "{}", line(one)),
            many => {
                write!(f, "errors:")?;
                for e in many {
                    write!(f, "\n  {}", line(e))?;
                }
                Ok(())
            }
        }
    }
}

type Result<T> = std::result::Result<T, TypedErrors>;

/// Where a walk is in the schema: a field path, or the items of the list there.
#[derive(Clone)]
struct Ty<'a> {
    schema: &'a Schema,
    path: String,
    item: bool,
}

impl<'a> Ty<'a> {
    fn root(schema: &'a Schema) -> Ty<'a> {
        Ty {
            schema,
            path: String::new(),
            item: false,
        }
    }

    fn field(&self, name: &str) -> Ty<'a> {
        let mut path = String::with_capacity(self.path.len() + 1 + name.len());
        if !self.path.is_empty() {
            path.push_str(&self.path);
            path.push('.');
        }
        path.push_str(name);
        Ty {
            schema: self.schema,
            path,
            item: false,
        }
    }

    fn item(&self) -> Ty<'a> {
        Ty {
            schema: self.schema,
            path: self.path.clone(),
            item: true,
        }
    }

    fn object(&self) -> ObjectType {
        self.schema.object_type(&self.path, self.item)
    }

    fn list(&self) -> ListType {
        if self.item {
            // A list of lists is atomic.
            ListType::Atomic
        } else {
            self.schema.list_type(&self.path)
        }
    }

    /// SMD's `listItemToPathElement`: the element naming `item` of this list.
    fn element(&self, list: &ListType, item: &Value) -> std::result::Result<PathElement, String> {
        match list {
            ListType::Map(keys) => {
                let Some(fields) = item.as_object() else {
                    return Err(if item.is_null() {
                        "associative list with keys may not have a null element".into()
                    } else {
                        "associative list with keys may not have non-map elements".into()
                    });
                };
                let mut key: Vec<(String, Ordered)> = keys
                    .iter()
                    .filter_map(|k| {
                        let v = fields
                            .get(k)
                            .or_else(|| self.schema.key_default_of(&self.path, k))?;
                        Some((k.clone(), Ordered(v.clone())))
                    })
                    .collect();
                if key.is_empty() {
                    let quoted: Vec<String> = keys
                        .iter()
                        .map(|k| crate::storage::field::go_quote(k))
                        .collect();
                    return Err(format!(
                        "associative list with keys has an element that omits all key fields \
                         [{}] (and doesn't have default values for any key fields)",
                        quoted.join(" ")
                    ));
                }
                key.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(PathElement::Key(key))
            }
            _ => match item {
                Value::Object(_) => {
                    Err("associative list without keys has an element that's a map type".into())
                }
                Value::Array(_) => {
                    Err("not supported: associative list with lists as elements".into())
                }
                Value::Null => Err(
                    "associative list without keys has an element that's an explicit null".into(),
                ),
                v => Ok(PathElement::Value(Ordered(v.clone()))),
            },
        }
    }

    /// The elements of `items`, or the errors of those that have none.
    fn elements(&self, list: &ListType, items: &[Value], path: &Path) -> Result<Vec<PathElement>> {
        let mut out = Vec::with_capacity(items.len());
        let mut errors = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match self.element(list, item) {
                Ok(pe) => out.push(pe),
                Err(e) => errors.push((path_string(path), format!("element {i}: {e}"))),
            }
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(TypedErrors(errors))
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Object,
    List,
    Scalar,
}

fn shape(v: &Value) -> Option<Shape> {
    match v {
        Value::Null => None,
        Value::Object(_) => Some(Shape::Object),
        Value::Array(_) => Some(Shape::List),
        _ => Some(Shape::Scalar),
    }
}

/// The shape both sides share (null takes the other side's); None when they differ.
fn common_shape(l: Option<&Value>, r: Option<&Value>) -> Option<Shape> {
    match (l.and_then(shape), r.and_then(shape)) {
        (Some(a), Some(b)) if a == b => Some(a),
        (Some(_), Some(_)) => None,
        (Some(a), None) | (None, Some(a)) => Some(a),
        (None, None) => Some(Shape::Scalar),
    }
}

fn empty_object(v: Option<&Value>) -> bool {
    v.and_then(Value::as_object).is_none_or(Map::is_empty)
}

fn empty_list(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array).is_none_or(Vec::is_empty)
}

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
    let mut shared: std::collections::VecDeque<&PathElement> = rhs_pes
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
    while li < lhs_pes.len() || ri < rhs_pes.len() {
        if li < lhs_pes.len() && ri < rhs_pes.len() {
            let pe = &lhs_pes[li];
            if *pe == rhs_pes[ri] {
                merged_rhs.insert(pe);
                merge_item(
                    pe,
                    observed_lhs.get(pe),
                    observed_rhs.get(pe),
                    &mut out,
                    path,
                )?;
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
            merge_item(
                pe,
                observed_lhs.get(pe),
                observed_rhs.get(pe),
                &mut out,
                path,
            )?;
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
    use crate::registry::schema::schema_for;

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
        let keyless = json!({"spec": {"containers": [{"image": "i"}]}});
        let e = validate(&pod, &keyless).unwrap_err();
        assert_eq!(
            e.to_string(),
            ".spec.containers: element 0: associative list with keys has an element that omits all key fields [\"name\"] (and doesn't have default values for any key fields)"
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
