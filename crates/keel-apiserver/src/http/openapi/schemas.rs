//! The OpenAPI schemas of the kinds served: upstream's own definitions
//! ([`crate::schema::builtin`], the `components.schemas` kube-apiserver publishes), those a
//! group version's kinds reach through their `$ref`s, and the meta types every group version
//! document holds. As kube-apiserver's documents do:
//!
//! - `DeleteOptions` and `WatchEvent` carry the `x-kubernetes-group-version-kind` of every
//!   group version served (here: those of the document);
//! - Swagger 2.0 points its `$ref`s at `#/definitions/`, writes a reference with a
//!   description as `$ref` beside `description` (v3's `allOf: [{$ref}]`), and a type v3 gives
//!   as `oneOf` (`Quantity`, `IntOrString`) as the string it is written as.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::registry::Strategy;
use crate::schema::{self, builtin};

/// Which OpenAPI version a document is for: where its `$ref`s point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// OpenAPI v3: `#/components/schemas/<name>`.
    V3,
    /// Swagger 2.0: `#/definitions/<name>`.
    V2,
}

impl Flavor {
    /// The prefix of a `$ref` to a definition.
    pub fn prefix(self) -> &'static str {
        match self {
            Flavor::V3 => schema::REF_PREFIX,
            Flavor::V2 => "#/definitions/",
        }
    }

    /// A `$ref` to the definition `name`.
    pub fn reference(self, name: &str) -> Value {
        json!({"$ref": format!("{}{name}", self.prefix())})
    }
}

/// The definition name of a kind served (`io.k8s.api.core.v1.ConfigMap`), None when keel has
/// no schema for it.
pub fn definition_name(group: &str, version: &str, kind: &str) -> Option<String> {
    builtin::definition_name(group, version, kind).map(str::to_string)
}

/// The definition name of a kind served: a built-in kind's upstream name, a custom
/// resource's as apiextensions-apiserver names it (the group reversed, the version, the
/// kind: `com.example.v1.Widget`).
pub fn kind_definition(kind: &dyn Strategy) -> Option<String> {
    let info = kind.info();
    if kind.custom_schema().is_some() {
        let group: Vec<&str> = info.group.split('.').rev().collect();
        return Some(format!(
            "{}.{}.{}",
            group.join("."),
            info.version,
            info.kind
        ));
    }
    definition_name(info.group, info.version, info.kind)
}

/// The definitions of a custom resource and its list, as apiextensions-apiserver's OpenAPI
/// builder makes them from the CRD's schema: `apiVersion`, `kind` and `metadata`
/// (`ObjectMeta`) beside the schema's own properties, tagged with the kind.
fn custom_definitions(kind: &dyn Strategy, schema: Value, into: &mut Map<String, Value>) {
    let info = kind.info();
    let Some(name) = kind_definition(kind) else {
        return;
    };
    let type_meta =
        |field: &str| json!({"type": "string", "description": type_meta_description(field)});
    let reference = |to: &str| json!({"allOf": [{"$ref": format!("{}{to}", schema::REF_PREFIX)}]});
    let mut def = match schema {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let properties = def
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .map(std::mem::take)
        .unwrap_or_default();
    let mut all = Map::new();
    all.insert("apiVersion".into(), type_meta("apiVersion"));
    all.insert("kind".into(), type_meta("kind"));
    let mut metadata = reference(OBJECT_META);
    metadata["description"] = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata".into();
    all.insert("metadata".into(), metadata);
    for (k, v) in properties {
        if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            all.insert(k, v);
        }
    }
    def.insert("properties".into(), Value::Object(all));
    def.insert("type".into(), "object".into());
    let gvk = |kind: &str| json!([{"group": info.group, "kind": kind, "version": info.version}]);
    def.insert("x-kubernetes-group-version-kind".into(), gvk(info.kind));
    let list_kind = format!("{}List", info.kind);
    let list = json!({
        "description": format!("{list_kind} is a list of {}", info.kind),
        "type": "object",
        "properties": {
            "apiVersion": type_meta("apiVersion"),
            "items": {
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/api-conventions.md", info.resource),
                "type": "array",
                "items": {"$ref": format!("{}{name}", schema::REF_PREFIX)},
            },
            "kind": type_meta("kind"),
            "metadata": reference(LIST_META),
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": gvk(&list_kind),
    });
    into.insert(format!("{name}List"), list);
    into.insert(name, Value::Object(def));
}

/// The descriptions of `apiVersion` and `kind`, as upstream's definitions carry them.
fn type_meta_description(field: &str) -> &'static str {
    if field == "apiVersion" {
        "APIVersion defines the versioned schema of this representation of an object. Servers \
         should convert recognized schemas to the latest internal value, and may reject \
         unrecognized values. More info: \
         https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
    } else {
        "Kind is a string value representing the REST resource this object represents. Servers \
         may infer this from the endpoint the client submits requests to. Cannot be updated. In \
         CamelCase. More info: \
         https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
    }
}

/// Every object's metadata.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
/// Every list's metadata.
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// The meta types every group version document holds.
pub const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
/// `DeleteOptions`.
pub const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
/// `WatchEvent`.
pub const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
/// `APIResourceList`.
pub const API_RESOURCE_LIST: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList";
/// `Patch`.
pub const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

/// The definitions of `kinds` (with their lists), the meta types, and all they refer to,
/// with `$ref`s in `flavor`; `group_versions` are the group versions the meta types are
/// tagged with.
pub fn definitions(
    kinds: &[&'static dyn Strategy],
    group_versions: &[(&str, &str)],
    flavor: Flavor,
) -> Map<String, Value> {
    let all = builtin::definitions();
    let mut wanted: Vec<String> = [
        API_RESOURCE_LIST,
        DELETE_OPTIONS,
        PATCH,
        STATUS,
        WATCH_EVENT,
    ]
    .map(str::to_string)
    .to_vec();
    let mut defs = Map::new();
    for kind in kinds {
        let info = kind.info();
        if let Some(schema) = kind.custom_schema() {
            custom_definitions(*kind, schema, &mut defs);
            wanted.extend([OBJECT_META.to_string(), LIST_META.to_string()]);
            continue;
        }
        let list = format!("{}List", info.kind);
        for kind in [info.kind, list.as_str()] {
            wanted.extend(definition_name(info.group, info.version, kind));
        }
    }
    let mut seen = BTreeSet::new();
    while let Some(name) = wanted.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(definition) = all.get(&name) else {
            continue;
        };
        collect_references(definition, &mut wanted);
        defs.insert(name, definition.clone());
    }
    for (meta_kind, name) in [
        ("DeleteOptions", DELETE_OPTIONS),
        ("WatchEvent", WATCH_EVENT),
    ] {
        let gvks: Vec<Value> = group_versions
            .iter()
            .map(|(group, version)| json!({"group": group, "kind": meta_kind, "version": version}))
            .collect();
        if let Some(Value::Object(def)) = defs.get_mut(name) {
            def.insert("x-kubernetes-group-version-kind".into(), Value::Array(gvks));
        }
    }
    if flavor == Flavor::V2 {
        for def in defs.values_mut() {
            to_swagger(def);
        }
    }
    defs
}

/// The names of the definitions `schema` refers to.
fn collect_references(schema: &Value, into: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(schema::REF_PREFIX))
            {
                into.push(name.to_string());
            }
            map.values().for_each(|v| collect_references(v, into));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_references(v, into)),
        _ => {}
    }
}

/// Swagger 2.0 as kube-apiserver writes it: `$ref`s into `#/definitions/`, a reference with a
/// description `$ref` beside `description` (what kube-openapi's v2 readers follow), not v3's
/// `allOf: [{$ref}]`, and no `oneOf` (a string, as `Quantity` and `IntOrString` are written).
fn to_swagger(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let single = map
                .get("allOf")
                .and_then(Value::as_array)
                .filter(|all| all.len() == 1)
                .and_then(|all| all[0].get("$ref"))
                .cloned();
            if let Some(reference) = single {
                map.remove("allOf");
                map.insert("$ref".into(), reference);
            }
            if let Some(Value::String(reference)) = map.get_mut("$ref")
                && let Some(name) = reference.strip_prefix(schema::REF_PREFIX)
            {
                *reference = format!("{}{name}", Flavor::V2.prefix());
            }
            if map.remove("oneOf").is_some() {
                map.insert("type".into(), "string".into());
            }
            map.values_mut().for_each(to_swagger);
        }
        Value::Array(items) => items.iter_mut().for_each(to_swagger),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_pointer::At;
    use crate::registry;

    fn core_defs(flavor: Flavor) -> Map<String, Value> {
        let kinds: Vec<_> = registry::kinds()
            .into_iter()
            .filter(|k| k.info().group.is_empty())
            .collect();
        definitions(&kinds, &[("", "v1")], flavor)
    }

    #[test]
    fn every_kind_served_has_a_schema() {
        for kind in registry::kinds() {
            let info = kind.info();
            assert!(
                definition_name(info.group, info.version, info.kind).is_some(),
                "{} has no schema",
                info.kind
            );
        }
    }

    #[test]
    fn kinds_carry_their_group_version_kind_and_refs_point_into_the_document() {
        let defs = core_defs(Flavor::V3);
        let cm = &defs["io.k8s.api.core.v1.ConfigMap"];
        assert_eq!(
            cm["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "ConfigMap", "version": "v1"}])
        );
        assert!(cm.get("required").is_none(), "{cm}");
        assert_eq!(
            cm.at("/properties/metadata/allOf/0/$ref"),
            Some(&json!(
                "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
            ))
        );
        let list = &defs["io.k8s.api.core.v1.ConfigMapList"];
        assert_eq!(
            list.at("/properties/items/items/allOf/0/$ref"),
            Some(&json!("#/components/schemas/io.k8s.api.core.v1.ConfigMap"))
        );
        assert_eq!(
            list["x-kubernetes-group-version-kind"][0]["kind"],
            "ConfigMapList"
        );
        assert_eq!(
            defs["io.k8s.api.core.v1.Event"]["required"],
            json!(["metadata", "involvedObject"])
        );
        let events = definitions(&registry::kinds(), &[("events.k8s.io", "v1")], Flavor::V3);
        assert_eq!(
            events["io.k8s.api.events.v1.Event"]["required"],
            json!(["eventTime"])
        );
        // Every reference resolves.
        let text = serde_json::to_string(&defs).unwrap();
        for piece in text.split("\"$ref\":\"").skip(1) {
            let target = piece.split('"').next().unwrap();
            let name = target.strip_prefix("#/components/schemas/").unwrap();
            assert!(defs.contains_key(name), "dangling {target}");
        }
        let v2 = core_defs(Flavor::V2);
        let text = serde_json::to_string(&v2).unwrap();
        assert!(!text.contains("#/components/"));
        assert!(text.contains("\"#/definitions/io.k8s.api.core.v1.PodSpec\""));
        assert!(!text.contains("allOf"));
        assert_eq!(
            v2["io.k8s.api.core.v1.Pod"]["properties"]["spec"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.PodSpec"
        );
    }

    #[test]
    fn merge_lists_are_tagged_with_their_patch_strategy() {
        let defs = core_defs(Flavor::V3);
        let containers = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        let env = &defs["io.k8s.api.core.v1.Container"]["properties"]["env"];
        assert_eq!(env["x-kubernetes-patch-merge-key"], "name");
        let volumes = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["volumes"];
        assert_eq!(volumes["x-kubernetes-patch-strategy"], "merge,retainKeys");
        let finalizers =
            &defs["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["finalizers"];
        assert_eq!(finalizers["x-kubernetes-patch-strategy"], "merge");
        assert!(finalizers.get("x-kubernetes-patch-merge-key").is_none());
    }
}
