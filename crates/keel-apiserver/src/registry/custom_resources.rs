//! Custom resources: the kind each served version of a CustomResourceDefinition defines, as
//! apiextensions-apiserver's `customresource` strategy runs it. Its objects are defaulted,
//! pruned and validated by the version's `openAPIV3Schema` ([`crate::apiextensions`]) and its
//! CEL rules; with a `status` subresource an update keeps the status and a status update
//! keeps the rest, and `metadata.generation` counts the other changes; its Table has the
//! `additionalPrinterColumns` (or `Age` when there are none); its `selectableFields` are
//! field selectors.
//!
//! The registry holds kinds for the life of the process (`&'static`). A custom resource kind
//! is made once per group, version and plural and kept: a CRD that changes updates it in
//! place (its schema, columns, names), so a CRD updated a thousand times is still one kind.
//! Names and columns are interned (each distinct one leaked once).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{Value, json};

use super::names::NameRule;
use super::time::Time;
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, ScalePaths, Strategy, meta, text};
use crate::apiextensions::jsonpath::JsonPath;
use crate::apiextensions::{cel, crd, defaults, listtype, prune, validate};
use crate::schema::Schema;
use crate::storage::{Details, FieldError, Status};

/// What one served version of a CRD says about its objects.
struct Version {
    /// The version's `openAPIV3Schema`.
    schema: Value,
    /// The merge metadata server-side apply reads from it.
    merge: Arc<Schema>,
    /// The Table's columns, and each printer column's path and type.
    columns: &'static [Column],
    cells: Vec<(JsonPath, String)>,
    /// The `scale` subresource's paths, if the version has one.
    scale: Option<ScalePaths>,
    /// The apiVersion objects are stored in (`<group>/<the storage version>`).
    storage_api_version: String,
    /// The selectable fields (`spec.color`) and their paths.
    selectable: &'static [&'static str],
    selectable_paths: Vec<JsonPath>,
    /// Whether the CRD is terminating (its `Terminating` condition true): creates refused.
    terminating: bool,
}

/// The kind one served version of a CRD defines.
pub struct CustomResource {
    info: RwLock<&'static ResourceInfo>,
    version: RwLock<Arc<Version>>,
    /// What the kind was last made from (its CRD's group, names, scope, storage version and
    /// this version), so a CRD that did not change is not made again.
    source: Mutex<Value>,
}

/// `s`, kept for the life of the process (each distinct string once).
fn intern(s: &str) -> &'static str {
    static STRINGS: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut strings = STRINGS.lock().unwrap_or_else(|p| p.into_inner());
    let strings = strings.get_or_insert_with(HashSet::new);
    if let Some(found) = strings.get(s) {
        return found;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    strings.insert(leaked);
    leaked
}

/// Interns values of one type by their debug form (each distinct one leaked once).
struct Interner<T: 'static>(Mutex<Option<HashMap<String, &'static T>>>);

impl<T: std::fmt::Debug> Interner<T> {
    const fn new() -> Self {
        Interner(Mutex::new(None))
    }

    fn get(&self, value: T) -> &'static T {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get_or_insert_with(HashMap::new)
            .entry(format!("{value:?}"))
            .or_insert_with(|| Box::leak(Box::new(value)))
    }
}

static INFOS: Interner<ResourceInfo> = Interner::new();
static COLUMNS: Interner<Vec<Column>> = Interner::new();
static LISTS: Interner<Vec<&'static str>> = Interner::new();

fn strings(v: &Value, pointer: &str) -> Vec<&'static str> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(intern)
        .collect()
}

type Kinds = HashMap<(String, String, String), &'static CustomResource>;

/// Every custom resource kind made, by group, version and plural.
static KINDS: Mutex<Option<Kinds>> = Mutex::new(None);

/// Lets go of what the kinds of a deleted CRD held (their schemas, paths and merge
/// metadata): the kinds themselves stay, small, to be used again if the CRD comes back.
pub fn release(crd: &Value) {
    let mut kinds = KINDS.lock().unwrap_or_else(|p| p.into_inner());
    let Some(kinds) = kinds.as_mut() else {
        return;
    };
    let group = text(crd, "/spec/group");
    let plural = text(crd, "/spec/names/plural");
    for version in crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = (
            group.to_string(),
            text(version, "/name").to_string(),
            plural.to_string(),
        );
        if let Some(kind) = kinds.get(&key) {
            let empty = json!({"metadata": {}, "spec": {"group": group}});
            *kind.version.write().unwrap_or_else(|p| p.into_inner()) =
                Arc::new(version_of(&empty, &json!({"name": key.1})));
            *kind.source.lock().unwrap_or_else(|p| p.into_inner()) = Value::Null;
        }
    }
}

/// What of a CRD a version's kind is made from.
fn source_of(crd: &Value, version: &Value) -> Value {
    let spec = &crd["spec"];
    json!([
        spec["group"],
        spec["names"],
        spec["scope"],
        crd::storage_version(crd),
        terminating(crd),
        version
    ])
}

/// The kind `crd`'s `version` (one of its `spec.versions`) defines, made or brought up to
/// date; true when it was made or changed (false: the CRD says what it said before).
pub fn serve(crd: &Value, version: &Value) -> (&'static CustomResource, bool) {
    let source = source_of(crd, version);
    let key = (
        text(crd, "/spec/group").to_string(),
        text(version, "/name").to_string(),
        text(crd, "/spec/names/plural").to_string(),
    );
    let mut kinds = KINDS.lock().unwrap_or_else(|p| p.into_inner());
    let kinds = kinds.get_or_insert_with(HashMap::new);
    if let Some(kind) = kinds.get(&key) {
        let mut made_from = kind.source.lock().unwrap_or_else(|p| p.into_inner());
        if *made_from == source {
            return (kind, false);
        }
        *kind.info.write().unwrap_or_else(|p| p.into_inner()) = info_of(crd, version);
        *kind.version.write().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(version_of(crd, version));
        *made_from = source;
        return (kind, true);
    }
    let kind: &'static CustomResource = Box::leak(Box::new(CustomResource {
        info: RwLock::new(info_of(crd, version)),
        version: RwLock::new(Arc::new(version_of(crd, version))),
        source: Mutex::new(source),
    }));
    kinds.insert(key, kind);
    (kind, true)
}

fn info_of(crd: &Value, version: &Value) -> &'static ResourceInfo {
    let status = version.pointer("/subresources/status").is_some();
    INFOS.get(ResourceInfo {
        group: intern(text(crd, "/spec/group")),
        version: intern(text(version, "/name")),
        kind: intern(text(crd, "/spec/names/kind")),
        resource: intern(text(crd, "/spec/names/plural")),
        singular: intern(text(crd, "/spec/names/singular")),
        short_names: LISTS.get(strings(crd, "/spec/names/shortNames")).as_slice(),
        categories: LISTS.get(strings(crd, "/spec/names/categories")).as_slice(),
        namespaced: text(crd, "/spec/scope") == "Namespaced",
        name_rule: NameRule::Subdomain,
        status,
        returns_deleted_object: false,
    })
}

fn version_of(crd: &Value, version: &Value) -> Version {
    let schema = version
        .pointer("/schema/openAPIV3Schema")
        .cloned()
        .unwrap_or(Value::Null);
    let mut defs = serde_json::Map::new();
    defs.insert("root".into(), schema.clone());
    let merge = Arc::new(Schema::from_custom(&defs, "root"));
    let printer = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut columns = vec![NAME_COLUMN];
    let mut cells = Vec::new();
    for column in &printer {
        let Ok(path) = JsonPath::parse(text(column, "/jsonPath")) else {
            continue;
        };
        columns.push(Column {
            name: intern(text(column, "/name")),
            kind: intern(text(column, "/type")),
            format: intern(text(column, "/format")),
            description: intern(text(column, "/description")),
            priority: column.get("priority").and_then(Value::as_i64).unwrap_or(0) as i32,
        });
        cells.push((path, text(column, "/type").to_string()));
    }
    if printer.is_empty() {
        columns.push(AGE_COLUMN);
        cells.push((
            JsonPath::parse(".metadata.creationTimestamp").expect("a valid path"),
            "date".into(),
        ));
    }
    let selectable_paths: Vec<(String, JsonPath)> = version
        .get("selectableFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| {
            let path = text(f, "/jsonPath");
            Some((
                path.trim_start_matches('.').to_string(),
                JsonPath::parse(path).ok()?,
            ))
        })
        .collect();
    let selectable: Vec<&'static str> = selectable_paths.iter().map(|(n, _)| intern(n)).collect();
    let storage = crd::storage_version(crd).unwrap_or_else(|| text(version, "/name"));
    let scale = version
        .pointer("/subresources/scale")
        .map(|scale| ScalePaths {
            spec_replicas: text(scale, "/specReplicasPath").to_string(),
            status_replicas: text(scale, "/statusReplicasPath").to_string(),
            label_selector: Some(text(scale, "/labelSelectorPath").to_string())
                .filter(|p| !p.is_empty()),
        });
    Version {
        schema,
        merge,
        scale,
        storage_api_version: format!("{}/{storage}", text(crd, "/spec/group")),
        columns: COLUMNS.get(columns).as_slice(),
        cells,
        selectable: LISTS.get(selectable).as_slice(),
        selectable_paths: selectable_paths.into_iter().map(|(_, p)| p).collect(),
        terminating: terminating(crd),
    }
}

/// Whether the CRD says it is terminating (its `Terminating` condition true).
fn terminating(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Terminating" && c["status"] == "True")
        })
}

impl CustomResource {
    fn version(&self) -> Arc<Version> {
        self.version
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Drops what the schema does not declare from `obj`; the paths dropped.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        prune::prune(&self.version().schema, obj)
    }

    /// The version's `openAPIV3Schema`.
    pub fn schema(&self) -> Value {
        self.version().schema.clone()
    }
}

/// One printer column's cell, as apiextensions-apiserver's table convertor makes it: the
/// first value the path finds, of the column's type (a `date` as an age), else null.
fn cell(ty: &str, found: Option<&Value>, now: Time) -> Value {
    let Some(value) = found else {
        return Value::Null;
    };
    match (ty, value) {
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, Value::from),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("string", Value::String(s)) => Value::from(s.as_str()),
        ("string", other) => Value::from(other.to_string()),
        ("date", Value::String(s)) => match Time::parse(s) {
            Some(t) => Value::from(super::time::human_duration(now.since(t))),
            None => Value::from("<invalid>"),
        },
        _ => Value::Null,
    }
}

impl Strategy for CustomResource {
    fn info(&self) -> &'static ResourceInfo {
        *self.info.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Objects are stored in the storage version; with the `None` conversion a version's
    /// object is the stored one with its apiVersion.
    fn to_storage(&self, mut obj: Value) -> Value {
        obj["apiVersion"] = self.version().storage_api_version.clone().into();
        obj
    }

    /// The stored object in this version, defaulted by this version's schema, as
    /// apiextensions-apiserver defaults what it reads (a default added to a schema shows on
    /// objects stored before it).
    fn to_served(&self, mut obj: Value) -> Value {
        obj["apiVersion"] = self.info().api_version().into();
        defaults::apply(&self.version().schema, &mut obj);
        obj
    }

    fn key_resource(&self) -> &'static str {
        let info = self.info();
        intern(&format!("{}/{}", info.group, info.resource))
    }

    fn scale(&self) -> Option<ScalePaths> {
        self.version().scale.clone()
    }

    fn merge_schema(&self) -> Option<Arc<Schema>> {
        Some(self.version().merge.clone())
    }

    fn custom_schema(&self) -> Option<Value> {
        Some(self.schema())
    }

    fn set_defaults(&self, obj: &mut Value) {
        defaults::apply(&self.version().schema, obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if self.info().status
            && let Some(map) = obj.as_object_mut()
        {
            map.remove("status");
        }
        self.set_defaults(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        self.set_defaults(new);
    }

    /// The custom resource status strategy's `PrepareForUpdate`
    /// (apiextensions-apiserver pkg/registry/customresource/status_strategy.go): everything
    /// but the status, the metadata too, is the stored object's; only the managed fields
    /// (which track the write) are the new ones. The update is then validated as any update
    /// of the object: its schema, list types (ratcheting) and CEL rules.
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        let managed = new.pointer("/metadata/managedFields").cloned();
        let status = new.get("status").cloned();
        let mut kept = old.clone();
        match managed {
            Some(m) => meta::metadata(&mut kept).insert("managedFields".into(), m),
            None => meta::metadata(&mut kept).remove("managedFields"),
        };
        if let Some(map) = kept.as_object_mut() {
            match status {
                Some(s) => map.insert("status".into(), s),
                None => map.remove("status"),
            };
        }
        *new = kept;
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let version = self.version();
        let mut errors = validate::validate(&version.schema, obj);
        errors.extend(listtype::validate(&version.schema, obj));
        errors.extend(cel::validate(&version.schema, obj, None, ""));
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let version = self.version();
        let mut errors = validate::validate(&version.schema, new);
        errors.extend(listtype::validate_update(&version.schema, new, old));
        errors.extend(cel::validate(&version.schema, new, Some(old), ""));
        errors
    }

    fn columns(&self) -> &'static [Column] {
        self.version().columns
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let version = self.version();
        let mut cells = vec![Value::from(super::meta_str(obj, "name"))];
        for (path, ty) in &version.cells {
            cells.push(cell(ty, path.find(obj).first().copied(), now));
        }
        cells
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        self.version().selectable
    }

    fn field(&self, obj: &Value, field: &str) -> String {
        let version = self.version();
        let Some(i) = version.selectable.iter().position(|f| *f == field) else {
            return String::new();
        };
        match version.selectable_paths[i].find(obj).first() {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        }
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    /// As apiextensions-apiserver's handler answers a create while the CRD is terminating.
    fn refuses_create(&self) -> Option<Status> {
        if !self.version().terminating {
            return None;
        }
        let info = self.info();
        Some(Status {
            details: Some(Box::new(Details {
                group: info.group.to_string(),
                kind: info.resource.to_string(),
                ..Details::default()
            })),
            ..Status::failure(
                405,
                "MethodNotAllowed",
                "create not allowed while custom resource definition is terminating".to_string(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn crd() -> Value {
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                    "listKind": "WidgetList", "shortNames": ["wd"]},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "replicas": {"type": "integer", "default": 1, "maximum": 5},
                            "color": {"type": "string"},
                        }},
                        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                    }}},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                        {"name": "Ready", "type": "boolean", "jsonPath": ".status.ready"},
                    ],
                    "selectableFields": [{"jsonPath": ".spec.color"}],
                }],
            },
        })
    }

    #[test]
    fn a_crd_version_is_one_kind_updated_in_place() {
        let crd = crd();
        let (kind, made) = serve(&crd, &crd["spec"]["versions"][0]);
        assert!(made);
        let info = kind.info();
        assert_eq!(
            (info.group, info.version, info.kind, info.resource),
            ("example.com", "v1", "Widget", "widgets")
        );
        assert_eq!(info.short_names, ["wd"]);
        assert!(info.namespaced && info.status);
        let names: Vec<&str> = kind.columns().iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Replicas", "Ready"]);
        let mut obj = json!({"metadata": {"name": "w"}, "spec": {"color": "red", "extra": 1}, "status": {"ready": true}});
        assert_eq!(kind.prune(&mut obj), ["spec.extra"]);
        kind.prepare_for_create(&mut obj);
        assert_eq!(
            obj,
            json!({"metadata": {"name": "w"}, "spec": {"color": "red", "replicas": 1}})
        );
        assert_eq!(kind.field(&obj, "spec.color"), "red");
        assert_eq!(kind.cells(&obj, Time::now())[1], json!(1));
        obj["spec"]["replicas"] = json!(9);
        assert_eq!(
            crate::storage::field::aggregate(&kind.validate(&obj)),
            "spec.replicas: Invalid value: 9: spec.replicas in body should be less than or equal to 5"
        );
        // The CRD again, unchanged: the same kind, not made again.
        let (again, changed) = serve(&crd, &crd["spec"]["versions"][0]);
        assert!(std::ptr::eq(kind, again) && !changed);
        // The CRD changes: the same kind, its new columns.
        let mut changed = crd.clone();
        changed["spec"]["versions"][0]["additionalPrinterColumns"] = json!([]);
        let (again, made) = serve(&changed, &changed["spec"]["versions"][0]);
        assert!(std::ptr::eq(kind, again) && made);
        let names: Vec<&str> = kind.columns().iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Age"]);
    }

    #[test]
    fn a_deleted_crds_kinds_let_go_of_their_schema() {
        let mut crd = crd();
        crd["metadata"]["name"] = json!("widgets.released.example.com");
        crd["spec"]["group"] = json!("released.example.com");
        let (kind, _) = serve(&crd, &crd["spec"]["versions"][0]);
        assert!(kind.schema().is_object());
        release(&crd);
        assert_eq!(kind.schema(), Value::Null);
        assert!(kind.selectable_fields().is_empty());
        // Created again, the same kind has its schema again.
        let (again, made) = serve(&crd, &crd["spec"]["versions"][0]);
        assert!(std::ptr::eq(kind, again) && made && kind.schema().is_object());
    }

    #[test]
    fn a_status_update_keeps_all_but_the_status_and_managed_fields() {
        let crd = crd();
        let (kind, _) = serve(&crd, &crd["spec"]["versions"][0]);
        let old = json!({"metadata": {"name": "w", "labels": {"a": "b"}, "resourceVersion": "5"},
            "spec": {"color": "red"}, "status": {"ready": false}});
        let mut new = json!({"metadata": {"name": "w", "labels": {"a": "c"},
            "managedFields": [{"manager": "m"}]}, "spec": {"color": "blue"},
            "status": {"ready": true}});
        kind.prepare_for_status_update(&mut new, &old);
        assert_eq!(
            new,
            json!({"metadata": {"name": "w", "labels": {"a": "b"}, "resourceVersion": "5",
                "managedFields": [{"manager": "m"}]}, "spec": {"color": "red"},
                "status": {"ready": true}})
        );
        let mut bad = new.clone();
        bad["status"]["ready"] = json!("yes");
        let errors = crate::registry::rules::messages(&kind.validate_status_update(&bad, &old));
        assert_eq!(
            errors,
            [
                "status.ready: Invalid value: \"string\": status.ready in body must be of type \
              boolean: \"string\""
            ]
        );
    }
}
