//! What kind of list, map or struct each field of a built-in kind is: the one table both
//! merges read. Strategic merge patch ([`crate::http::strategic_merge`]) reads the
//! `patchStrategy`/`patchMergeKey` struct tags; server-side apply
//! ([`super::managed_fields`]) reads `x-kubernetes-list-type` and `-list-map-keys` (`+listType`,
//! `+listMapKey`), `x-kubernetes-map-type` (`+mapType`, `+structType`) and the defaults of
//! list-map keys, all taken from `k8s.io/api` v0.34. Where a list has no `+listType`, apply
//! reads its patch tags as kube-openapi's `schemaconv` does: `merge` with a key is a map
//! keyed on it, `merge` without one a set, anything else atomic; so the tables below only
//! name what the tags do not already say.
//!
//! Fields are named by path: field names joined by dots, list items not counted
//! (`spec.containers.ports` is the ports of every container). A field the table does not
//! name is a struct whose fields are tracked one by one, an atomic list, or a scalar, as its
//! value is; server-side apply also needs each kind's zero value ([`Schema::zero`]), the
//! object Go's decoder starts from, whose always-present structs are not "added" by a write.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, OnceLock};

use serde_json::{Value, json};

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

impl Schema {
    /// A schema with no merge fields.
    pub fn new() -> Self {
        Schema {
            zero: json!({}),
            ..Self::default()
        }
    }

    /// Declares `path` a list of objects merged on `merge_key`.
    pub fn merge_by_key(mut self, path: &str, merge_key: &str) -> Self {
        self.insert(path, Some(merge_key), false);
        self
    }

    /// Declares `path` a list of objects merged on `merge_key` whose elements also carry
    /// `retainKeys` (`patchStrategy:"merge,retainKeys"`).
    pub fn merge_by_key_retain_keys(mut self, path: &str, merge_key: &str) -> Self {
        self.insert(path, Some(merge_key), true);
        self
    }

    /// Declares `path` a list of primitives merged as a set.
    pub fn merge_primitives(mut self, path: &str) -> Self {
        self.insert(path, None, false);
        self
    }

    /// Declares `path` replaced wholesale by the patch (`patchStrategy:"replace"`).
    pub fn replace(mut self, path: &str) -> Self {
        self.fields.insert(
            path.to_string(),
            FieldMeta {
                strategy: PatchStrategy::Replace,
                retain_keys: false,
            },
        );
        self
    }

    /// Declares the `+listType` of `path` where its patch tags say otherwise (or nothing).
    pub fn list_type_of(mut self, path: &str, list: ListType) -> Self {
        self.lists.insert(path.to_string(), list);
        self
    }

    /// Declares `path` a list keyed by `keys` (`+listType=map`).
    pub fn list_map(self, path: &str, keys: &[&str]) -> Self {
        self.list_type_of(
            path,
            ListType::Map(keys.iter().map(|k| k.to_string()).collect()),
        )
    }

    /// Declares the object at `path` a map, or an atomic struct or map.
    pub fn object(mut self, path: &str, kind: ObjectType) -> Self {
        self.objects.insert(path.to_string(), kind);
        self
    }

    /// Declares the maps (keys tracked one by one) among `paths`.
    pub fn maps(mut self, paths: &[&str]) -> Self {
        for p in paths {
            self = self.object(p, ObjectType::Map);
        }
        self
    }

    /// Declares the atomic structs among `paths`.
    pub fn atomic_structs(mut self, paths: &[&str]) -> Self {
        for p in paths {
            self = self.object(p, ObjectType::AtomicStruct);
        }
        self
    }

    /// Declares the items of the list at `path` atomic structs.
    pub fn atomic_items(mut self, path: &str) -> Self {
        self.atomic_items.insert(path.to_string());
        self
    }

    /// Declares the default of the key `key` of the list map at `path` (`+default`), used
    /// for an item that leaves the key out.
    pub fn key_default(mut self, path: &str, key: &str, value: Value) -> Self {
        self.key_defaults
            .entry(path.to_string())
            .or_default()
            .push((key.to_string(), value));
        self
    }

    /// Sets the kind's zero value.
    pub fn with_zero(mut self, zero: Value) -> Self {
        self.zero = zero;
        self
    }

    /// The strategic merge metadata of the field at `path`, if it has any.
    pub fn field(&self, path: &str) -> Option<&FieldMeta> {
        self.fields.get(path)
    }

    /// Every field with strategic merge metadata, by path.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &FieldMeta)> {
        self.fields.iter().map(|(path, meta)| (path.as_str(), meta))
    }

    fn insert(&mut self, path: &str, merge_key: Option<&str>, retain_keys: bool) {
        self.fields.insert(
            path.to_string(),
            FieldMeta {
                strategy: PatchStrategy::Merge {
                    merge_key: merge_key.map(str::to_string),
                },
                retain_keys,
            },
        );
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

    fn object_meta(self, prefix: &str) -> Self {
        let p = |f: &str| join(prefix, f);
        self.merge_primitives(&p("metadata.finalizers"))
            .merge_by_key(&p("metadata.ownerReferences"), "uid")
            .atomic_items(&p("metadata.ownerReferences"))
            .maps(&[&p("metadata.labels"), &p("metadata.annotations")])
    }

    fn pod_spec(mut self, prefix: &str) -> Self {
        let p = |f: &str| format!("{prefix}.{f}");
        self = self
            .merge_by_key_retain_keys(&p("volumes"), "name")
            .merge_by_key(&p("imagePullSecrets"), "name")
            .atomic_items(&p("imagePullSecrets"))
            .key_default(&p("imagePullSecrets"), "name", json!(""))
            .merge_by_key(&p("hostAliases"), "ip")
            .merge_by_key(&p("topologySpreadConstraints"), "topologyKey")
            .list_map(
                &p("topologySpreadConstraints"),
                &["topologyKey", "whenUnsatisfiable"],
            )
            .merge_by_key(&p("schedulingGates"), "name")
            .merge_by_key_retain_keys(&p("resourceClaims"), "name")
            .list_map(&p("resources.claims"), &["name"])
            .object(&p("nodeSelector"), ObjectType::AtomicMap)
            .maps(&[
                &p("overhead"),
                &p("resources.limits"),
                &p("resources.requests"),
                &p("volumes.flexVolume.options"),
                &p("volumes.csi.volumeAttributes"),
            ])
            .atomic_structs(&[
                &p("affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"),
                &p("topologySpreadConstraints.labelSelector"),
                &p("volumes.iscsi.secretRef"),
                &p("volumes.rbd.secretRef"),
                &p("volumes.flexVolume.secretRef"),
                &p("volumes.cinder.secretRef"),
                &p("volumes.cephfs.secretRef"),
                &p("volumes.scaleIO.secretRef"),
                &p("volumes.storageos.secretRef"),
                &p("volumes.csi.nodePublishSecretRef"),
                &p("volumes.ephemeral.volumeClaimTemplate.spec.selector"),
                &p("volumes.ephemeral.volumeClaimTemplate.spec.dataSource"),
            ]);
        for list in ["initContainers", "containers", "ephemeralContainers"] {
            let c = |f: &str| format!("{}.{f}", p(list));
            self = self
                .merge_by_key(&p(list), "name")
                .merge_by_key(&c("ports"), "containerPort")
                .list_map(&c("ports"), &["containerPort", "protocol"])
                .key_default(&c("ports"), "protocol", json!("TCP"))
                .merge_by_key(&c("env"), "name")
                .merge_by_key(&c("volumeMounts"), "mountPath")
                .merge_by_key(&c("volumeDevices"), "devicePath")
                .list_map(&c("resources.claims"), &["name"])
                .maps(&[&c("resources.limits"), &c("resources.requests")])
                .atomic_structs(&[
                    &c("env.valueFrom.fieldRef"),
                    &c("env.valueFrom.resourceFieldRef"),
                    &c("env.valueFrom.configMapKeyRef"),
                    &c("env.valueFrom.secretKeyRef"),
                    &c("env.valueFrom.fileKeyRef"),
                ]);
        }
        self
    }

    fn pod_status(mut self) -> Self {
        self = self
            .merge_by_key("status.conditions", "type")
            .merge_by_key("status.hostIPs", "ip")
            .list_type_of("status.hostIPs", ListType::Atomic)
            .merge_by_key("status.podIPs", "ip")
            .merge_by_key_retain_keys("status.resourceClaimStatuses", "name")
            .maps(&[
                "status.allocatedResources",
                "status.resources.limits",
                "status.resources.requests",
            ])
            .list_map("status.resources.claims", &["name"]);
        for list in [
            "initContainerStatuses",
            "containerStatuses",
            "ephemeralContainerStatuses",
        ] {
            let c = |f: &str| format!("status.{list}.{f}");
            self = self
                .merge_by_key(&c("volumeMounts"), "mountPath")
                .merge_by_key(&c("allocatedResourcesStatus"), "name")
                .list_map(&c("allocatedResourcesStatus.resources"), &["resourceID"])
                .list_map(&c("resources.claims"), &["name"])
                .maps(&[
                    &c("allocatedResources"),
                    &c("resources.limits"),
                    &c("resources.requests"),
                ]);
        }
        self
    }
}

fn join(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_string()
    } else {
        format!("{prefix}.{field}")
    }
}

/// The merge metadata of a built-in kind (`group` is `""` for core/v1), from the struct tags
/// of `k8s.io/api` v0.34: Pod, Node, Namespace, Service, Endpoints, ConfigMap, Secret,
/// ServiceAccount, ResourceQuota, LimitRange, Event, coordination.k8s.io Lease and
/// events.k8s.io Event. Every kind gets
/// the `ObjectMeta` fields (`metadata.finalizers` a set, `metadata.ownerReferences` keyed on
/// `uid`, labels and annotations maps); a kind not in the table gets only those
/// (kube-apiserver refuses strategic merge patches for custom resources with 415 before
/// merging; that check belongs to the caller).
pub fn schema_for(group: &str, kind: &str) -> Schema {
    let schema = Schema::new().object_meta("");
    match (group, kind) {
        ("", "Pod") => schema
            .pod_spec("spec")
            .pod_status()
            .with_zero(json!({"metadata": {}, "spec": {"containers": null}, "status": {}})),
        ("", "Node") => schema
            .merge_primitives("spec.podCIDRs")
            .merge_by_key("status.conditions", "type")
            .merge_by_key("status.addresses", "type")
            .maps(&["status.capacity", "status.allocatable"])
            .with_zero(json!({
                "metadata": {}, "spec": {},
                "status": {
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                    "nodeInfo": {
                        "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                        "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "",
                        "kubeProxyVersion": "", "operatingSystem": "", "architecture": ""
                    }
                }
            })),
        ("", "Namespace") => schema
            .merge_by_key("status.conditions", "type")
            .with_zero(json!({"metadata": {}, "spec": {}, "status": {}})),
        ("", "Service") => schema
            .merge_by_key("spec.ports", "port")
            .list_map("spec.ports", &["port", "protocol"])
            .key_default("spec.ports", "protocol", json!("TCP"))
            .object("spec.selector", ObjectType::AtomicMap)
            .merge_by_key("status.conditions", "type")
            .with_zero(json!({"metadata": {}, "spec": {}, "status": {"loadBalancer": {}}})),
        ("", "ServiceAccount") => schema
            .merge_by_key("secrets", "name")
            .atomic_items("secrets")
            .with_zero(json!({"metadata": {}})),
        ("", "ConfigMap") => schema
            .maps(&["data", "binaryData"])
            .with_zero(json!({"metadata": {}})),
        ("", "ResourceQuota") => schema
            .maps(&["spec.hard", "status.hard", "status.used"])
            .object("spec.scopeSelector", ObjectType::AtomicStruct)
            .with_zero(json!({"metadata": {}, "spec": {}, "status": {}})),
        ("", "LimitRange") => schema.with_zero(json!({"metadata": {}, "spec": {"limits": null}})),
        ("", "Secret") => schema
            .maps(&["data", "stringData"])
            .with_zero(json!({"metadata": {}})),
        ("", "Event") => schema
            .atomic_structs(&["involvedObject", "related"])
            .with_zero(json!({
                "metadata": {}, "involvedObject": {}, "source": {},
                "reportingComponent": "", "reportingInstance": ""
            })),
        ("events.k8s.io", "Event") => {
            schema
                .atomic_structs(&["regarding", "related"])
                .with_zero(json!({
                    "metadata": {}, "eventTime": null, "regarding": {}, "deprecatedSource": {}
                }))
        }
        ("coordination.k8s.io", "Lease") => schema.with_zero(json!({"metadata": {}, "spec": {}})),
        _ => schema.with_zero(json!({"metadata": {}})),
    }
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
