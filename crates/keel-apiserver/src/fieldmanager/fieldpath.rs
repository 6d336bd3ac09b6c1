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

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::storage::field::go_quote;

/// A JSON value ordered as structured-merge-diff orders values: numbers (ints and floats
/// compared numerically) before strings, bools, lists, maps and null.
#[derive(Debug, Clone)]
pub struct Ordered(pub Value);

impl PartialEq for Ordered {
    fn eq(&self, other: &Self) -> bool {
        compare_values(&self.0, &other.0) == Ordering::Equal
    }
}

impl Eq for Ordered {}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_values(&self.0, &other.0)
    }
}

/// One step of a path. The derived order is SMD's: fields, then keys, values, indices.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathElement {
    /// A field of a struct or a key of a map (`f:`).
    Field(String),
    /// The item of a keyed list with these key fields, sorted by name (`k:`).
    Key(Vec<(String, Ordered)>),
    /// The item of a set with this value (`v:`).
    Value(Ordered),
    /// The item at this index of an atomic list (`i:`).
    Index(usize),
}

impl PathElement {
    /// A field element.
    pub fn field(name: &str) -> PathElement {
        PathElement::Field(name.to_string())
    }

    /// The element as a FieldsV1 key (`f:a`, `k:{"name":"c"}`, `v:"x"`, `i:0`).
    pub fn to_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let mut out = String::from("k:{");
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&go_json_string(name));
                    out.push(':');
                    out.push_str(&go_json(&value.0));
                }
                out.push('}');
                out
            }
            PathElement::Value(value) => format!("v:{}", go_json(&value.0)),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Reads a FieldsV1 key; `Ok(None)` for an element type this reader does not know.
    pub fn from_key(key: &str) -> Result<Option<PathElement>, String> {
        let b = key.as_bytes();
        if b.len() < 2 {
            return Err("key must be 2 characters long:".to_string());
        }
        if b[1] != b':' {
            return Err(format!("missing colon: {key}"));
        }
        let rest = &key[2..];
        Ok(Some(match b[0] {
            b'f' => PathElement::Field(rest.to_string()),
            b'v' => {
                let value: Value = serde_json::from_str(rest).map_err(|e| e.to_string())?;
                PathElement::Value(Ordered(value))
            }
            b'k' => {
                let value: Value = serde_json::from_str(rest).map_err(|e| e.to_string())?;
                let Value::Object(map) = value else {
                    return Err(format!("key element is not a JSON object: {rest}"));
                };
                // serde_json's map is sorted by name, as SMD sorts key fields.
                PathElement::Key(map.into_iter().map(|(k, v)| (k, Ordered(v))).collect())
            }
            b'i' => PathElement::Index(rest.parse().map_err(|e| format!("{e}"))?),
            _ => return Ok(None),
        }))
    }
}

impl std::fmt::Display for PathElement {
    /// SMD's `PathElement.String`: `.name`, `[name="c",port=80]`, `[="x"]`, `[0]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{k}={}", value_string(&v.0)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", value_string(&v.0)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A field of an object: the elements from the root.
pub type Path = Vec<PathElement>;

/// A path as SMD prints it (`.spec.containers[name="c"].image`).
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of paths, as a trie.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    /// The empty set.
    pub fn new() -> Set {
        Set::default()
    }

    /// Whether the set has no path.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    /// Adds `path` (not its parents). The empty path (the whole object) is never tracked.
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        let mut node = self;
        for pe in parents {
            node = node.children.entry(pe.clone()).or_default();
        }
        node.members.insert(last.clone());
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        let Some((last, parents)) = path.split_last() else {
            return false;
        };
        let mut node = self;
        for pe in parents {
            match node.children.get(pe) {
                Some(child) => node = child,
                None => return false,
            }
        }
        node.members.contains(last)
    }

    /// Whether `pe` is a member of this node.
    pub fn has_member(&self, pe: &PathElement) -> bool {
        self.members.contains(pe)
    }

    /// The paths below `pe`, without it (None when there are none).
    pub fn with_prefix(&self, pe: &PathElement) -> Option<&Set> {
        self.children.get(pe).filter(|s| !s.is_empty())
    }

    /// The members of this node.
    pub fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// The children of this node.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &Set)> {
        self.children.iter()
    }

    /// Makes `pe` a member of this node.
    pub fn insert_member(&mut self, pe: PathElement) {
        self.members.insert(pe);
    }

    /// The child set at `pe`, made if missing.
    pub fn child_mut(&mut self, pe: PathElement) -> &mut Set {
        self.children.entry(pe).or_default()
    }

    /// Paths in either set.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, child)| {
                let both = child.intersection(other.children.get(pe)?);
                (!both.is_empty()).then(|| (pe.clone(), both))
            })
            .collect();
        Set { members, children }
    }

    /// [`Set::difference`] in place: takes `other`'s paths out of this set, copying nothing.
    pub fn subtract(&mut self, other: &Set) {
        if !other.members.is_empty() {
            self.members.retain(|m| !other.members.contains(m));
        }
        self.children.retain(|pe, child| {
            if let Some(theirs) = other.children.get(pe) {
                child.subtract(theirs);
            }
            !child.is_empty()
        });
    }

    /// Paths of this set not in `other` (a member of `other` does not take this set's
    /// paths below it).
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, child)| {
                let rest = match other.children.get(pe) {
                    Some(theirs) => child.difference(theirs),
                    None => child.clone(),
                };
                (!rest.is_empty()).then(|| (pe.clone(), rest))
            })
            .collect();
        Set { members, children }
    }

    /// Paths of this set neither in `other` nor below one of its members.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter(|(pe, _)| !other.members.contains(pe))
            .filter_map(|(pe, child)| {
                let rest = match other.children.get(pe) {
                    Some(theirs) => child.recursive_difference(theirs),
                    None => child.clone(),
                };
                (!rest.is_empty()).then(|| (pe.clone(), rest))
            })
            .collect();
        Set { members, children }
    }

    /// Every path, members of a node before its children, in SMD's order (its `Iterate`).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for pe in &self.members {
            let mut path = prefix.clone();
            path.push(pe.clone());
            out.push(path);
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The FieldsV1 form, as a JSON value.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.fields_v1_map(false))
    }

    fn fields_v1_map(&self, include_self: bool) -> Map<String, Value> {
        let mut map = Map::new();
        if include_self && !self.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for pe in &self.members {
            if self.children.get(pe).is_none_or(Set::is_empty) {
                map.insert(pe.to_key(), Value::Object(Map::new()));
            }
        }
        for (pe, child) in &self.children {
            if child.is_empty() {
                continue;
            }
            let inner = child.fields_v1_map(self.members.contains(pe));
            map.insert(pe.to_key(), Value::Object(inner));
        }
        map
    }

    /// The FieldsV1 form byte for byte as Go's encoder writes it.
    pub fn to_fields_v1_string(&self) -> String {
        let mut out = String::from("{");
        self.write_fields_v1(false, &mut out);
        out.push('}');
        out
    }

    fn write_fields_v1(&self, include_self: bool, out: &mut String) {
        let mut first = true;
        let mut sep = |out: &mut String| {
            if !std::mem::replace(&mut first, false) {
                out.push(',');
            }
        };
        if include_self && !self.is_empty() {
            sep(out);
            out.push_str("\".\":{}");
        }
        // Members and children, merged in element order.
        let mut keys: BTreeSet<&PathElement> = self.members.iter().collect();
        keys.extend(
            self.children
                .iter()
                .filter(|(_, c)| !c.is_empty())
                .map(|(pe, _)| pe),
        );
        for pe in keys {
            sep(out);
            out.push_str(&go_json_string(&pe.to_key()));
            out.push(':');
            match self.children.get(pe).filter(|c| !c.is_empty()) {
                Some(child) => {
                    out.push('{');
                    child.write_fields_v1(self.members.contains(pe), out);
                    out.push('}');
                }
                None => out.push_str("{}"),
            }
        }
    }

    /// Reads the FieldsV1 form (`{}` and null are the empty set).
    pub fn from_fields_v1(value: &Value) -> Result<Set, String> {
        match value {
            Value::Null => Ok(Set::new()),
            Value::Object(map) => Ok(read_node(map)?.0.unwrap_or_default()),
            other => Err(format!("expected a JSON object, got {other}")),
        }
    }
}

/// SMD's `readIterV1`: the set below a node, and whether the node is a member itself.
fn read_node(map: &Map<String, Value>) -> Result<(Option<Set>, bool), String> {
    let mut children: Option<Set> = None;
    let mut is_member = false;
    for (key, value) in map {
        if key == "." {
            is_member = true;
            continue;
        }
        let Some(pe) = PathElement::from_key(key)? else {
            continue;
        };
        let Value::Object(inner) = value else {
            return Err(format!("expected a JSON object at {key}, got {value}"));
        };
        let (grandchildren, child_is_member) = read_node(inner)?;
        if child_is_member {
            children
                .get_or_insert_with(Set::new)
                .members
                .insert(pe.clone());
        }
        if let Some(g) = grandchildren {
            children.get_or_insert_with(Set::new).children.insert(pe, g);
        }
    }
    if children.is_none() {
        is_member = true;
    }
    Ok((children, is_member))
}

/// SMD's `value.Compare`.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    use Value::*;
    let float = |v: &Value| match v {
        Number(n) if n.is_f64() => n.as_f64(),
        _ => None,
    };
    let int = |v: &Value| match v {
        Number(n) if !n.is_f64() => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from)),
        _ => None,
    };
    let (fa, fb, ia, ib) = (float(a), float(b), int(a), int(b));
    if let Some(x) = fa {
        return match (fb, ib) {
            (Some(y), _) => x.total_cmp(&y),
            (None, Some(y)) => x.total_cmp(&(y as f64)),
            _ => Ordering::Less,
        };
    }
    if let Some(y) = fb {
        return match ia {
            Some(x) => (x as f64).total_cmp(&y),
            None => Ordering::Greater,
        };
    }
    match (ia, ib) {
        (Some(x), Some(y)) => return x.cmp(&y),
        (Some(_), None) => return Ordering::Less,
        (None, Some(_)) => return Ordering::Greater,
        _ => {}
    }
    match (a, b) {
        (String(x), String(y)) => x.cmp(y),
        (String(_), _) => Ordering::Less,
        (_, String(_)) => Ordering::Greater,
        (Bool(x), Bool(y)) => x.cmp(y),
        (Bool(_), _) => Ordering::Less,
        (_, Bool(_)) => Ordering::Greater,
        (Array(x), Array(y)) => {
            for (l, r) in x.iter().zip(y) {
                let c = compare_values(l, r);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Array(_), _) => Ordering::Less,
        (_, Array(_)) => Ordering::Greater,
        (Object(x), Object(y)) => compare_maps(x, y),
        (Object(_), _) => Ordering::Less,
        (_, Object(_)) => Ordering::Greater,
        _ => Ordering::Equal,
    }
}

/// SMD's `MapCompare`: the keys in lexical order, the first difference decides.
fn compare_maps(l: &Map<String, Value>, r: &Map<String, Value>) -> Ordering {
    if l.is_empty() && r.is_empty() {
        return Ordering::Equal;
    }
    let keys: BTreeSet<&String> = l.keys().chain(r.keys()).collect();
    for (i, key) in keys.into_iter().enumerate() {
        let c = if i == l.len() {
            Ordering::Less
        } else if i == r.len() {
            Ordering::Greater
        } else {
            match (l.get(key), r.get(key)) {
                (None, _) => Ordering::Greater,
                (_, None) => Ordering::Less,
                (Some(a), Some(b)) => compare_values(a, b),
            }
        };
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}

/// SMD's `value.Equals`: ints and floats compare numerically, the rest structurally.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            x.as_f64() == y.as_f64()
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(l, r)| values_equal(l, r))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// SMD's `value.ToString`: strings quoted as Go's `%q`, numbers and bools plain.
fn value_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::String(s) => go_quote(s),
        Value::Number(n) => match n.as_f64().filter(|_| n.is_f64()) {
            Some(f) => go_float(f),
            None => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(value_string).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", value_string(v)))
            .collect(),
    }
}

/// Go's `%v` of a float64: the shortest digits, with an exponent (`1e+22`, `1.5e-07`) when
/// it is below -4 or from 21 up.
fn go_float(f: f64) -> String {
    let exp = if f == 0.0 {
        0
    } else {
        f.abs().log10().floor() as i32
    };
    if (-4..21).contains(&exp) {
        return format!("{f}");
    }
    let s = format!("{f:e}");
    match s.split_once('e') {
        Some((mantissa, e)) => {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', e),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

/// A JSON value as Go's `encoding/json` writes it (maps sorted by key, HTML characters
/// escaped in strings).
pub fn go_json(v: &Value) -> String {
    match v {
        Value::String(s) => go_json_string(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_json).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}:{}", go_json_string(k), go_json(v)))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        other => other.to_string(),
    }
}

/// A JSON string as Go's `encoding/json` writes it.
pub fn go_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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

    #[test]
    fn values_order_as_smd_orders_them() {
        let order = [
            json!(-1),
            json!(1.5),
            json!(2),
            json!("a"),
            json!("b"),
            json!(false),
            json!(true),
            json!([1]),
            json!({"a": 1}),
            Value::Null,
        ];
        for w in order.windows(2) {
            assert_eq!(compare_values(&w[0], &w[1]), Ordering::Less, "{w:?}");
        }
        assert_eq!(compare_values(&json!(1), &json!(1.0)), Ordering::Equal);
        assert!(values_equal(&json!({"a": [1]}), &json!({"a": [1.0]})));
        assert_eq!(
            go_json_string("a<b>&\"c\""),
            r#""a\u003cb\u003e\u0026\"c\"""#
        );
        assert_eq!(value_string(&json!(1e22)), "1e+22");
        assert_eq!(value_string(&json!(0.5)), "0.5");
    }
}
