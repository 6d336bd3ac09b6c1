//! The OpenAPI schemas of the kinds served, generated from the Rust types of the `k8s-openapi`
//! crate (its `v1_37` types, `k8s.io/api` of Kubernetes 1.37) through their `schemars`
//! implementations: keel writes no schema by hand. What kube-apiserver's generator adds to the
//! Go types' schemas, keel adds the same way:
//!
//! - `x-kubernetes-group-version-kind` on each kind, its list, and the meta types a group
//!   version serves (`DeleteOptions`, `WatchEvent`, `Status`, `APIResourceList`);
//! - the strategic merge patch tags `x-kubernetes-patch-strategy` and
//!   `x-kubernetes-patch-merge-key` (what `kubectl apply` and `kubectl edit` compute their
//!   patches from), taken from the table [`strategic_merge::schema_for`] keeps;
//! - `metadata` is required only where the Go field has no `omitempty` (core/v1 `Event`),
//!   where k8s-openapi makes it required on every kind, and events.k8s.io/v1 `Event`'s
//!   `eventTime`, optional in k8s-openapi, is required as upstream has it.
//!
//! The `<Kind>List` types are generic in k8s-openapi and have no schema of their own; they are
//! made from `ListMeta` and the item kind as upstream's generator makes them.

use std::borrow::Cow;

use k8s_openapi::api::coordination::v1 as coordination;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::events::v1 as events;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::http::strategic_merge;
use crate::json_pointer::At;
use crate::registry::Strategy;
use crate::registry::schema::PatchStrategy;

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
            Flavor::V3 => "#/components/schemas/",
            Flavor::V2 => "#/definitions/",
        }
    }

    /// A `$ref` to the definition `name`.
    pub fn reference(self, name: &str) -> Value {
        json!({"$ref": format!("{}{name}", self.prefix())})
    }
}

/// A Rust type with a schema: how to generate it, and its definition name.
struct Typed {
    schema: fn(&mut SchemaGenerator) -> schemars::Schema,
    name: fn() -> Cow<'static, str>,
}

fn subschema<T: JsonSchema>(generator: &mut SchemaGenerator) -> schemars::Schema {
    generator.subschema_for::<T>()
}

macro_rules! typed {
    ($t:ty) => {
        Typed {
            schema: subschema::<$t>,
            name: <$t as JsonSchema>::schema_name,
        }
    };
}

/// The Rust type of a kind keel serves (None: no schema for it).
fn rust_type(group: &str, version: &str, kind: &str) -> Option<Typed> {
    Some(match (group, version, kind) {
        ("", "v1", "ComponentStatus") => typed!(core::ComponentStatus),
        ("", "v1", "ConfigMap") => typed!(core::ConfigMap),
        ("", "v1", "Endpoints") => typed!(core::Endpoints),
        ("", "v1", "Event") => typed!(core::Event),
        ("", "v1", "LimitRange") => typed!(core::LimitRange),
        ("", "v1", "Namespace") => typed!(core::Namespace),
        ("", "v1", "Node") => typed!(core::Node),
        ("", "v1", "Pod") => typed!(core::Pod),
        ("", "v1", "ResourceQuota") => typed!(core::ResourceQuota),
        ("", "v1", "Secret") => typed!(core::Secret),
        ("", "v1", "Service") => typed!(core::Service),
        ("", "v1", "ServiceAccount") => typed!(core::ServiceAccount),
        ("coordination.k8s.io", "v1", "Lease") => typed!(coordination::Lease),
        ("events.k8s.io", "v1", "Event") => typed!(events::Event),
        _ => return None,
    })
}

/// The definition name of a kind served (`io.k8s.api.core.v1.ConfigMap`), None when keel has
/// no schema for it.
pub fn definition_name(group: &str, version: &str, kind: &str) -> Option<String> {
    rust_type(group, version, kind).map(|t| (t.name)().into_owned())
}

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

/// The definitions of `kinds` (with their lists) and the meta types, with `$ref`s in `flavor`;
/// `group_versions` are the group versions the meta types are tagged with.
pub fn definitions(
    kinds: &[&'static dyn Strategy],
    group_versions: &[(&str, &str)],
    flavor: Flavor,
) -> Map<String, Value> {
    let settings = SchemaSettings::openapi3().with(|s| {
        s.meta_schema = None;
        if flavor == Flavor::V2 {
            s.definitions_path = "/definitions".into();
        }
    });
    let mut generator = settings.into_generator();
    let meta_types = [
        typed!(meta::APIResourceList),
        typed!(meta::DeleteOptions),
        typed!(meta::Patch),
        typed!(meta::Status),
        typed!(meta::WatchEvent<meta::Status>),
    ];
    for t in &meta_types {
        (t.schema)(&mut generator);
    }
    let list_meta = subschema::<meta::ListMeta>(&mut generator);
    let mut lists = Vec::new();
    for kind in kinds {
        let info = kind.info();
        let Some(t) = rust_type(info.group, info.version, info.kind) else {
            continue;
        };
        (t.schema)(&mut generator);
        let name = (t.name)().into_owned();
        lists.push((
            format!("{name}List"),
            list_schema(&name, &list_meta, flavor),
        ));
    }
    let mut defs = generator.take_definitions(true);
    defs.extend(lists);
    for kind in kinds {
        let info = kind.info();
        let Some(name) = definition_name(info.group, info.version, info.kind) else {
            continue;
        };
        tag(&mut defs, &name, &[(info.group, info.version, info.kind)]);
        let list_kind = format!("{}List", info.kind);
        tag(
            &mut defs,
            &format!("{name}List"),
            &[(info.group, info.version, &list_kind)],
        );
        if let Some(Value::Object(def)) = defs.get_mut(&name) {
            fix_required(def, info.group, info.kind);
        }
        annotate_patch_strategy(&mut defs, &name, info.group, info.kind, flavor);
    }
    for (meta_kind, name) in [
        ("DeleteOptions", DELETE_OPTIONS),
        ("WatchEvent", WATCH_EVENT),
    ] {
        let gvks: Vec<(&str, &str, &str)> = group_versions
            .iter()
            .map(|(g, v)| (*g, *v, meta_kind))
            .collect();
        tag(&mut defs, name, &gvks);
    }
    tag(&mut defs, STATUS, &[("", "v1", "Status")]);
    tag(
        &mut defs,
        API_RESOURCE_LIST,
        &[("", "v1", "APIResourceList")],
    );
    if flavor == Flavor::V2 {
        for def in defs.values_mut() {
            ref_siblings(def);
        }
    }
    defs
}

/// A kind's `required` fields as kube-apiserver's generator lists them, where k8s-openapi's
/// differ: `metadata` is required only where the Go field has no `omitempty` (core/v1
/// `Event`), not on every kind; events.k8s.io/v1 `Event`'s `eventTime` (a struct without
/// `omitempty`, optional in k8s-openapi) is required.
fn fix_required(def: &mut Map<String, Value>, group: &str, kind: &str) {
    let mut required = match def.remove("required") {
        Some(Value::Array(required)) => required,
        _ => Vec::new(),
    };
    if !(group.is_empty() && kind == "Event") {
        required.retain(|r| r != "metadata");
    }
    let event_time = Value::from("eventTime");
    if (group, kind) == ("events.k8s.io", "Event") && !required.contains(&event_time) {
        required.insert(0, event_time);
    }
    if !required.is_empty() {
        def.insert("required".into(), Value::Array(required));
    }
}

/// Swagger 2.0 as kube-apiserver writes it: a reference with a description is `$ref` beside
/// `description` (what kube-openapi's v2 readers follow), not v3's `allOf: [{$ref}]`.
fn ref_siblings(schema: &mut Value) {
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
            map.values_mut().for_each(ref_siblings);
        }
        Value::Array(items) => items.iter_mut().for_each(ref_siblings),
        _ => {}
    }
}

/// `<Kind>List`: `apiVersion`, `items`, `kind`, `metadata` (`ListMeta`), `items` required.
fn list_schema(item: &str, list_meta: &schemars::Schema, flavor: Flavor) -> Value {
    let kind = item.rsplit('.').next().unwrap_or(item);
    let type_meta =
        |field: &str| json!({"description": type_meta_description(field), "type": "string"});
    let mut metadata = Map::new();
    metadata.insert("allOf".into(), json!([list_meta.as_value().clone()]));
    metadata.insert(
        "description".into(),
        "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds".into(),
    );
    json!({
        "description": format!("{kind}List is a list of {kind} objects."),
        "type": "object",
        "properties": {
            "apiVersion": type_meta("apiVersion"),
            "items": {
                "description": format!("Items is a list of {kind} objects."),
                "type": "array",
                "items": flavor.reference(item),
            },
            "kind": type_meta("kind"),
            "metadata": Value::Object(metadata),
        },
        "required": ["items"],
    })
}

/// The descriptions of `apiVersion` and `kind`, as every k8s-openapi kind carries them.
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

/// Sets `x-kubernetes-group-version-kind` on the definition `name`.
fn tag(defs: &mut Map<String, Value>, name: &str, gvks: &[(&str, &str, &str)]) {
    let list: Vec<Value> = gvks
        .iter()
        .map(|(group, version, kind)| json!({"group": group, "kind": kind, "version": version}))
        .collect();
    if let Some(Value::Object(def)) = defs.get_mut(name) {
        def.insert("x-kubernetes-group-version-kind".into(), Value::Array(list));
    }
}

/// The definition a property schema refers to: `$ref`, `allOf: [{$ref}]`, or those of an
/// array's `items`.
pub fn referenced(schema: &Value, flavor: Flavor) -> Option<&str> {
    let reference = schema
        .get("$ref")
        .or_else(|| schema.at("/allOf/0/$ref"))
        .and_then(Value::as_str);
    match reference {
        Some(r) => r.strip_prefix(flavor.prefix()),
        None => schema.get("items").and_then(|i| referenced(i, flavor)),
    }
}

/// Tags the fields of the kind `root` that strategic merge patches merge (Go's
/// `patchStrategy` and `patchMergeKey` struct tags).
fn annotate_patch_strategy(
    defs: &mut Map<String, Value>,
    root: &str,
    group: &str,
    kind: &str,
    flavor: Flavor,
) {
    let table = strategic_merge::schema_for(group, kind);
    for (path, field) in table.fields() {
        let mut definition = root.to_string();
        let segments: Vec<&str> = path.split('.').collect();
        let (last, parents) = segments.split_last().expect("a field path has a segment");
        let mut found = true;
        for segment in parents {
            let next = defs
                .get(&definition)
                .and_then(|d| d.at(&format!("/properties/{segment}")))
                .and_then(|p| referenced(p, flavor));
            match next {
                Some(next) => definition = next.to_string(),
                None => {
                    found = false;
                    break;
                }
            }
        }
        let property = defs
            .get_mut(&definition)
            .and_then(|d| d.at_mut(&format!("/properties/{last}")))
            .and_then(Value::as_object_mut);
        let (true, Some(property)) = (found, property) else {
            continue;
        };
        let (strategy, key) = match &field.strategy {
            PatchStrategy::Merge { merge_key } if field.retain_keys => {
                ("merge,retainKeys", merge_key.clone())
            }
            PatchStrategy::Merge { merge_key } => ("merge", merge_key.clone()),
            PatchStrategy::Replace => ("replace", None),
        };
        property.insert("x-kubernetes-patch-strategy".into(), strategy.into());
        if let Some(key) = key {
            property.insert("x-kubernetes-patch-merge-key".into(), key.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
            list.at("/properties/items/items/$ref"),
            Some(&json!("#/components/schemas/io.k8s.api.core.v1.ConfigMap"))
        );
        assert_eq!(
            list["x-kubernetes-group-version-kind"][0]["kind"],
            "ConfigMapList"
        );
        assert_eq!(
            defs["io.k8s.api.core.v1.Event"]["required"],
            json!(["involvedObject", "metadata"])
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
