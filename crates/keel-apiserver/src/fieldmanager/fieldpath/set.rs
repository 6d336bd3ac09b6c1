//! [`Set`]: a set of paths as a trie, with SMD's set operations, read from and written as
//! FieldsV1.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::path::{Path, PathElement};
use super::value::go_json_string;

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
        self.without(other, false)
    }

    /// Paths of this set neither in `other` nor below one of its members.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        self.without(other, true)
    }

    /// Paths of this set not in `other`; with `recursive`, not below one of its members
    /// either.
    fn without(&self, other: &Set, recursive: bool) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter(|(pe, _)| !(recursive && other.members.contains(pe)))
            .filter_map(|(pe, child)| {
                let rest = match other.children.get(pe) {
                    Some(theirs) => child.without(theirs, recursive),
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
