//! What kind of list, map or struct each field of a kind is, for both merges: strategic
//! merge patch ([`crate::http::strategic_merge`]) reads the `x-kubernetes-patch-strategy` and
//! `-patch-merge-key` of a field (Go's `patchStrategy`/`patchMergeKey` struct tags);
//! server-side apply reads `x-kubernetes-list-type` and `-list-map-keys` (`+listType`,
//! `+listMapKey`), `x-kubernetes-map-type` (`+mapType`, `+structType`) and the defaults of
//! list-map keys. Where a list has no `x-kubernetes-list-type`, apply reads its patch tags as
//! kube-openapi's `schemaconv` does: `merge` with a key is a map keyed on it, `merge` without
//! one a set, anything else atomic.
//!
//! A [`Schema`] is made by walking a kind's definition once ([`Schema::from_definition`]).
//! Fields are named by path: field names joined by dots, list items not counted
//! (`spec.containers.ports` is the ports of every container); the values of a map are not
//! walked. A field the schema does not name is a struct whose fields are tracked one by one,
//! an atomic list, or a scalar, as its value is. Server-side apply also needs each kind's
//! zero value ([`Schema::zero`]), the object Go's decoder starts from, whose always-present
//! structs are not "added" by a write: it is made from the definition's `default`s (v3 gives
//! a non-pointer struct `default: {}` and a non-pointer scalar its zero) and its required
//! fields without one (which Go writes as `null`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, OnceLock};

use serde_json::{Map, Value, json};

use super::{Definitions, REF_PREFIX, builtin, resolve};

/// Every object's metadata.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// How a patch is merged into one field, from the field's Go struct tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchStrategy {
    /// `patchStrategy:"merge"`: a list of objects merges element by element on the merge key
    /// (`patchMergeKey`), a list of primitives (no merge key) becomes a union.
    Merge {
        /// The `patchMergeKey`, `None` for a list of primitives.
        merge_key: Option<String>,
    },
    /// `patchStrategy:"replace"`: the patch value replaces the field, maps included.
    Replace,
}

/// The strategic merge metadata of one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldMeta {
    /// How the field merges.
    pub strategy: PatchStrategy,
    /// The tag also says `retainKeys`. Informational: on the server `$retainKeys` is applied
    /// wherever a patch carries it, as Go does.
    pub retain_keys: bool,
}

/// How server-side apply tracks a list (`x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Owned and replaced as a whole.
    Atomic,
    /// A set of scalars, each item owned on its own.
    Set,
    /// Items keyed by these fields (`x-kubernetes-list-map-keys`), each owned on its own.
    Map(Vec<String>),
}

/// How server-side apply tracks a JSON object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectType {
    /// A struct: its fields are named, and tracked one by one.
    Struct,
    /// A map (`labels`, `data`): its keys are not fields, each tracked on its own.
    Map,
    /// A struct owned as a whole (`+structType=atomic`).
    AtomicStruct,
    /// A map owned as a whole (`+mapType=atomic`).
    AtomicMap,
}

impl ObjectType {
    /// Whether the object is owned as a whole.
    pub fn is_atomic(self) -> bool {
        matches!(self, ObjectType::AtomicStruct | ObjectType::AtomicMap)
    }

    /// Whether its keys are named fields (of a struct, atomic or not).
    pub fn has_fields(self) -> bool {
        matches!(self, ObjectType::Struct | ObjectType::AtomicStruct)
    }
}

/// The merge metadata of one kind: field paths mapped to what they are.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    fields: BTreeMap<String, FieldMeta>,
    lists: BTreeMap<String, ListType>,
    objects: BTreeMap<String, ObjectType>,
    atomic_items: BTreeSet<String>,
    key_defaults: BTreeMap<String, Vec<(String, Value)>>,
    zero: Value,
}

/// How deep the zero value goes: deeper than any built-in kind.
const MAX_DEPTH: usize = 32;

impl Schema {
    /// The merge metadata of the definition `root` of `defs` (an empty schema when `defs`
    /// lacks it).
    pub fn from_definition(defs: &Definitions, root: &str) -> Self {
        let mut schema = Schema {
            zero: json!({}),
            ..Self::default()
        };
        if let Some(definition) = defs.get(root) {
            schema.walk_struct(defs, definition, "", &mut vec![root]);
            let mut zero = zero_of(defs, definition, 0);
            if let Value::Object(zero) = &mut zero {
                zero.remove("apiVersion");
                zero.remove("kind");
            }
            schema.zero = zero;
        }
        schema
    }

    /// The metadata of the properties of the struct `definition`, whose path is `prefix`;
    /// `within` are the definitions the walk is inside, where a recursive schema ends.
    fn walk_struct<'d>(
        &mut self,
        defs: &'d Definitions,
        definition: &'d Value,
        prefix: &str,
        within: &mut Vec<&'d str>,
    ) {
        let Some(properties) = definition.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (name, property) in properties {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            self.walk_field(defs, property, &path, within);
        }
    }

    /// The metadata of the field at `path`, whose schema is `property`, and of what it holds.
    fn walk_field<'d>(
        &mut self,
        defs: &'d Definitions,
        property: &'d Value,
        path: &str,
        within: &mut Vec<&'d str>,
    ) {
        let text = |field: &str| property.get(field).and_then(Value::as_str);
        if let Some(strategy) = text("x-kubernetes-patch-strategy") {
            let retain_keys = strategy.split(',').any(|s| s == "retainKeys");
            let strategy = if strategy.split(',').any(|s| s == "merge") {
                Some(PatchStrategy::Merge {
                    merge_key: text("x-kubernetes-patch-merge-key").map(str::to_string),
                })
            } else if strategy == "replace" {
                Some(PatchStrategy::Replace)
            } else {
                None
            };
            if let Some(strategy) = strategy {
                self.fields.insert(
                    path.to_string(),
                    FieldMeta {
                        strategy,
                        retain_keys,
                    },
                );
            }
        }
        let (name, target) = resolve(property, defs);
        if name.is_some_and(|n| within.contains(&n)) {
            return;
        }
        within.extend(name);
        let atomic = |schema: &Value| {
            schema.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
        };
        if let Some(items) = target.get("items") {
            match text("x-kubernetes-list-type") {
                Some("atomic") => {
                    self.lists.insert(path.to_string(), ListType::Atomic);
                }
                Some("set") => {
                    self.lists.insert(path.to_string(), ListType::Set);
                }
                Some("map") => {
                    let keys: Vec<String> = property
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|k| Some(k.as_str()?.to_string()))
                        .collect();
                    self.lists.insert(path.to_string(), ListType::Map(keys));
                }
                _ => {}
            }
            let (item_name, item) = resolve(items, defs);
            if atomic(items) || atomic(item) {
                self.atomic_items.insert(path.to_string());
            }
            let keys = self.list_type(path);
            if let ListType::Map(keys) = keys {
                for key in keys {
                    let default = item
                        .get("properties")
                        .and_then(|p| p.get(&key))
                        .and_then(|p| p.get("default"));
                    if let Some(default) = default {
                        self.key_defaults
                            .entry(path.to_string())
                            .or_default()
                            .push((key, default.clone()));
                    }
                }
            }
            if !item_name.is_some_and(|n| within.contains(&n)) {
                within.extend(item_name);
                self.walk_struct(defs, item, path, within);
                if item_name.is_some() {
                    within.pop();
                }
            }
        } else if target
            .get("additionalProperties")
            .is_some_and(Value::is_object)
        {
            let kind = if atomic(property) || atomic(target) {
                ObjectType::AtomicMap
            } else {
                ObjectType::Map
            };
            self.objects.insert(path.to_string(), kind);
        } else if target.get("properties").is_some() {
            if atomic(property) || atomic(target) {
                self.objects
                    .insert(path.to_string(), ObjectType::AtomicStruct);
            }
            self.walk_struct(defs, target, path, within);
        }
        if name.is_some() {
            within.pop();
        }
    }

    /// The strategic merge metadata of the field at `path`, if it has any.
    pub fn field(&self, path: &str) -> Option<&FieldMeta> {
        self.fields.get(path)
    }

    /// Every field with strategic merge metadata, by path.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &FieldMeta)> {
        self.fields.iter().map(|(path, meta)| (path.as_str(), meta))
    }

    /// `(is merge, merge key)` of the field at `path`, `""` when there is no key.
    pub(crate) fn list_meta(&self, path: &str) -> (bool, &str) {
        match self.field(path).map(|m| &m.strategy) {
            Some(PatchStrategy::Merge { merge_key }) => (true, merge_key.as_deref().unwrap_or("")),
            _ => (false, ""),
        }
    }

    /// Whether the patch replaces the field at `path` wholesale.
    pub(crate) fn is_replace(&self, path: &str) -> bool {
        matches!(
            self.field(path).map(|m| &m.strategy),
            Some(PatchStrategy::Replace)
        )
    }

    /// How server-side apply tracks the list at `path`: its `+listType`, else what its
    /// patch tags imply.
    pub fn list_type(&self, path: &str) -> ListType {
        if let Some(list) = self.lists.get(path) {
            return list.clone();
        }
        match self.field(path).map(|m| &m.strategy) {
            Some(PatchStrategy::Merge {
                merge_key: Some(key),
            }) => ListType::Map(vec![key.clone()]),
            Some(PatchStrategy::Merge { merge_key: None }) => ListType::Set,
            _ => ListType::Atomic,
        }
    }

    /// How server-side apply tracks the object at `path` (`item`: an item of the list
    /// there).
    pub fn object_type(&self, path: &str, item: bool) -> ObjectType {
        if item {
            return if self.atomic_items.contains(path) {
                ObjectType::AtomicStruct
            } else {
                ObjectType::Struct
            };
        }
        self.objects
            .get(path)
            .copied()
            .unwrap_or(ObjectType::Struct)
    }

    /// The default of the key `key` of the list map at `path`.
    pub fn key_default_of(&self, path: &str, key: &str) -> Option<&Value> {
        self.key_defaults
            .get(path)?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// The kind's zero value as Go's decoder makes it (its always-present structs, and the
    /// lists and maps it writes as null), without apiVersion and kind.
    pub fn zero(&self) -> &Value {
        &self.zero
    }
}

/// The zero value of the struct `definition` as Go's decoder starts from it: each property
/// with a `default` (a struct's `{}` made the zero of that struct), each required property
/// without one `null`.
fn zero_of(defs: &Definitions, definition: &Value, depth: usize) -> Value {
    let mut zero = Map::new();
    let Some(properties) = definition.get("properties").and_then(Value::as_object) else {
        return Value::Object(zero);
    };
    let required = |name: &str| {
        definition
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|v| v == name))
    };
    for (name, property) in properties {
        let value = match property.get("default") {
            Some(Value::Object(empty)) if empty.is_empty() && depth < MAX_DEPTH => {
                let (_, target) = resolve(property, defs);
                if target.get("properties").is_some() {
                    zero_of(defs, target, depth + 1)
                } else {
                    json!({})
                }
            }
            Some(default) => default.clone(),
            None if required(name) => Value::Null,
            None => continue,
        };
        zero.insert(name.clone(), value);
    }
    Value::Object(zero)
}

/// The merge metadata of a kind (`group` is `""` for core/v1): a built-in kind's from its
/// definition; any other kind (a custom resource) gets only `ObjectMeta`'s
/// (`metadata.finalizers` a set, `metadata.ownerReferences` keyed on `uid`, labels and
/// annotations maps; kube-apiserver refuses strategic merge patches for custom resources
/// with 415 before merging, a check that belongs to the caller).
pub fn schema_for(group: &str, kind: &str) -> Schema {
    let defs = builtin::definitions();
    let version = ["v1", "v2"]
        .into_iter()
        .find_map(|v| builtin::definition_name(group, v, kind));
    match version {
        Some(name) => Schema::from_definition(defs, name),
        None => custom_resource(defs),
    }
}

impl Schema {
    /// The merge metadata of a custom resource whose schema is the definition `root` of
    /// `defs` (a CRD's `openAPIV3Schema`, inline), with `ObjectMeta`'s under `metadata`;
    /// its zero value is `{}` (a custom resource has no Go type to start from).
    pub fn from_custom(defs: &Definitions, root: &str) -> Self {
        let mut schema = custom_resource(builtin::definitions());
        schema.zero = json!({});
        if let Some(definition) = defs.get(root) {
            let mut own = Schema::default();
            own.walk_struct(defs, definition, "", &mut vec![root]);
            // The metadata is ObjectMeta's, whatever the CRD's schema says of it.
            let own_field = |p: &String| p != "metadata" && !p.starts_with("metadata.");
            own.fields.retain(|p, _| own_field(p));
            own.lists.retain(|p, _| own_field(p));
            own.objects.retain(|p, _| own_field(p));
            own.atomic_items.retain(own_field);
            own.key_defaults.retain(|p, _| own_field(p));
            schema.fields.extend(own.fields);
            schema.lists.extend(own.lists);
            schema.objects.extend(own.objects);
            schema.atomic_items.extend(own.atomic_items);
            schema.key_defaults.extend(own.key_defaults);
        }
        schema
    }
}

/// A custom resource's schema as far as its metadata goes.
fn custom_resource(defs: &Definitions) -> Schema {
    let metadata = json!({"$ref": format!("{REF_PREFIX}{OBJECT_META}")});
    let mut schema = Schema {
        zero: json!({"metadata": {}}),
        ..Schema::default()
    };
    schema.walk_field(defs, &metadata, "metadata", &mut Vec::new());
    schema
}

/// [`schema_for`] of a served kind, built once and kept for the life of the process.
pub fn schema_of(group: &'static str, kind: &'static str) -> &'static Schema {
    type Cache = Mutex<BTreeMap<(&'static str, &'static str), &'static Schema>>;
    static SCHEMAS: OnceLock<Cache> = OnceLock::new();
    let mut schemas = SCHEMAS
        .get_or_init(Cache::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    schemas
        .entry((group, kind))
        .or_insert_with(|| Box::leak(Box::new(schema_for(group, kind))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_reads_list_types_from_the_patch_tags_unless_told_otherwise() {
        let pod = schema_for("", "Pod");
        let keys = |v: &[&str]| ListType::Map(v.iter().map(|s| s.to_string()).collect());
        assert_eq!(pod.list_type("spec.containers"), keys(&["name"]));
        assert_eq!(
            pod.list_type("spec.containers.ports"),
            keys(&["containerPort", "protocol"])
        );
        assert_eq!(pod.list_type("spec.containers.env"), keys(&["name"]));
        assert_eq!(pod.list_type("spec.volumes"), keys(&["name"]));
        assert_eq!(pod.list_type("status.conditions"), keys(&["type"]));
        assert_eq!(pod.list_type("status.hostIPs"), ListType::Atomic);
        assert_eq!(pod.list_type("metadata.finalizers"), ListType::Set);
        assert_eq!(pod.list_type("spec.containers.args"), ListType::Atomic);
        assert_eq!(pod.list_type("spec.tolerations"), ListType::Atomic);
        assert_eq!(
            pod.key_default_of("spec.containers.ports", "protocol"),
            Some(&json!("TCP"))
        );
        // Strategic merge still merges ports on containerPort alone.
        assert_eq!(
            pod.list_meta("spec.containers.ports"),
            (true, "containerPort")
        );
        let svc = schema_for("", "Service");
        assert_eq!(svc.list_type("spec.ports"), keys(&["port", "protocol"]));
        assert_eq!(
            svc.object_type("spec.selector", false),
            ObjectType::AtomicMap
        );
        assert_eq!(
            svc.object_type("metadata.ownerReferences", true),
            ObjectType::AtomicStruct
        );
        let cm = schema_for("", "ConfigMap");
        assert_eq!(cm.object_type("data", false), ObjectType::Map);
        assert_eq!(cm.object_type("metadata", false), ObjectType::Struct);
    }
}
