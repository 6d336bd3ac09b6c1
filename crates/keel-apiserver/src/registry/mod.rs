//! The registry: what each resource kind is (scope, validation, defaulting, table columns,
//! field selectors, subresources), one file per kind behind one trait, [`Strategy`] (named
//! after kube-apiserver's `rest.RESTCreateStrategy` and friends). The rules every kind shares
//! live beside them: [`names`] (object names), [`meta`] (object metadata), [`rules`]
//! (validation steps several kinds take), [`data`] (the data maps of ConfigMaps and Secrets)
//! and [`selector`] (label and field selectors); [`store`] runs every verb through a kind, on
//! objects as [`stored`] encodes them and as [`served`] and [`watching`] hand them out. What
//! kind of list, map or struct each field is is [`crate::schema`]'s, and who set which field
//! (`metadata.managedFields` and server-side apply) is [`crate::fieldmanager`]'s.

pub mod admission;
pub mod admissionregistration;
pub mod apiregistration;
pub mod apps;
pub mod authentication;
pub mod authorization;
pub mod autoscaling;
pub mod batch;
pub mod certificates;
pub mod componentstatuses;
pub mod configmaps;
pub mod custom_resources;
pub mod customresourcedefinitions;
pub mod data;
#[cfg(test)]
mod defaulting_tests;
pub mod defaults;
pub mod discovery;
pub mod endpoints;
pub mod events;
pub mod events_k8s_io;
pub mod leases;
pub mod limitranges;
pub mod meta;
pub mod names;
pub mod namespaces;
pub mod networking;
pub mod node;
pub mod nodes;
pub mod object_count;
pub mod persistentvolumeclaims;
pub mod persistentvolumes;
pub mod pods;
pub mod podtemplates;
pub mod policy;
pub mod printing;
pub mod rbac;
pub mod replicationcontrollers;
pub mod resource_lists;
pub mod resourcequotas;
pub mod rules;
pub mod scheduling;
pub mod secrets;
pub mod selector;
pub mod served;
pub mod serviceaccounts;
pub mod services;
pub mod status;
pub mod storage_k8s_io;
pub mod store;
pub mod stored;
pub mod template;
pub mod watching;

/// The timestamps (apimachinery's), where the kinds have always read them.
pub use crate::apimachinery::time;

use serde_json::Value;

use crate::apimachinery::time::Time;
use crate::http::auth::User;
use crate::json_pointer::At;
use crate::storage::{FieldError, Target};
use names::NameRule;

/// What a resource kind is, as discovery and URL paths name it.
#[derive(Debug)]
pub struct ResourceInfo {
    /// API group ("" for core).
    pub group: &'static str,
    /// API version (`v1`).
    pub version: &'static str,
    /// Kind (`ConfigMap`).
    pub kind: &'static str,
    /// Resource, plural, as in URLs (`configmaps`).
    pub resource: &'static str,
    /// Singular name (`configmap`).
    pub singular: &'static str,
    /// Short names (`cm`).
    pub short_names: &'static [&'static str],
    /// Categories (`all`).
    pub categories: &'static [&'static str],
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// The rule object names follow.
    pub name_rule: NameRule,
    /// Whether the kind has a `status` subresource (then an update of the object keeps the
    /// stored status and an update of `status` keeps everything else).
    pub status: bool,
    /// Whether a finished delete answers the deleted object rather than a `Success` Status
    /// (kube-apiserver's `ReturnDeletedObject`; see [`Strategy::returns_deleted_object`]).
    pub returns_deleted_object: bool,
}

impl ResourceInfo {
    /// A namespaced kind whose names are DNS subdomains, without short names, categories or
    /// a `status` subresource: what most kinds are, and what the others change.
    pub const fn new(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        resource: &'static str,
        singular: &'static str,
    ) -> ResourceInfo {
        ResourceInfo {
            group,
            version,
            kind,
            resource,
            singular,
            short_names: &[],
            categories: &[],
            namespaced: true,
            name_rule: NameRule::Subdomain,
            status: false,
            returns_deleted_object: false,
        }
    }

    /// `v1` or `coordination.k8s.io/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Gives `obj` this kind's apiVersion and kind.
    pub fn set_type(&self, obj: &mut Value) {
        obj["apiVersion"] = self.api_version().into();
        obj["kind"] = self.kind.into();
    }

    /// The object `name` of this kind, as a storage error names it (`name` "" for the whole
    /// resource).
    pub fn target(&self, name: &str) -> Target {
        Target {
            group: self.group.to_string(),
            resource: self.resource.to_string(),
            name: name.to_string(),
        }
    }
}

/// Where a kind with a `scale` subresource keeps its replicas and selector: dotted JSON
/// paths (`.spec.replicas`), as a CRD's `subresources.scale` names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// The desired replicas (`specReplicasPath`).
    pub spec_replicas: String,
    /// The observed replicas (`statusReplicasPath`).
    pub status_replicas: String,
    /// The label selector, as a string (`labelSelectorPath`), if any.
    pub label_selector: Option<String>,
}

/// One column of a kind's Table (`meta.k8s.io/v1` `TableColumnDefinition`).
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Header (`Name`, `Age`, ...).
    pub name: &'static str,
    /// OpenAPI type (`string`, `integer`, `date`).
    pub kind: &'static str,
    /// OpenAPI format (`name`, ...), or "".
    pub format: &'static str,
    /// What the column shows.
    pub description: &'static str,
    /// 0: always shown; above 0: only with `-o wide`.
    pub priority: i32,
}

impl Column {
    /// A column of strings without a format (most of a kind's own columns).
    pub const fn string(name: &'static str, priority: i32, description: &'static str) -> Column {
        Column {
            name,
            kind: "string",
            format: "",
            description,
            priority,
        }
    }
}

/// How one resource kind is created, updated, validated and shown.
pub trait Strategy: Send + Sync {
    /// What the kind is.
    fn info(&self) -> &'static ResourceInfo;

    /// The group and resource whose store keeps this kind's objects (what
    /// `--etcd-servers-overrides` names): its own, but for a kind stored as another's
    /// (events.k8s.io/v1 Events live with core/v1 Events, so `/events` moves both).
    fn storage_resource(&self) -> (&'static str, &'static str) {
        (self.info().group, self.info().resource)
    }

    /// The resource part of the kind's keys (`/registry/<this>/<namespace>/<name>`): its
    /// resource, but `<group>/<resource>` where kube-apiserver keys a kind so
    /// (CustomResourceDefinitions and custom resources).
    fn key_resource(&self) -> &'static str {
        self.info().resource
    }

    /// Where the kind keeps what its `scale` subresource shows (None: it has none).
    fn scale(&self) -> Option<ScalePaths> {
        None
    }

    /// A custom resource's schema (its CRD version's `openAPIV3Schema`); None for a built-in
    /// kind, whose schema is upstream's definition of it.
    fn custom_schema(&self) -> Option<Value> {
        None
    }

    /// A custom resource's merge metadata, from its schema; None for a built-in kind (its
    /// definition's, [`crate::schema::schema_of`]).
    fn merge_schema(&self) -> Option<std::sync::Arc<crate::schema::Schema>> {
        None
    }

    /// The object in the form it is stored in. kube-apiserver stores one version of each
    /// resource (events.k8s.io/v1 Events are stored as core/v1 Events), so every version
    /// reads what the others wrote.
    fn to_storage(&self, obj: Value) -> Value {
        obj
    }

    /// A stored object in this kind's form (the inverse of [`Strategy::to_storage`]).
    fn to_served(&self, obj: Value) -> Value {
        obj
    }

    /// The kind's defaults, as the decoder applies them to every object before the
    /// strategy runs (apimachinery's scheme defaulting): what a field manager sees a write
    /// set. [`Strategy::prepare_for_create`] and [`Strategy::prepare_for_update`] apply them
    /// too.
    fn set_defaults(&self, _obj: &mut Value) {}

    /// Sets what a new object gets before it is validated and stored (defaults, a status
    /// a client may not set); by default the kind's defaults.
    fn prepare_for_create(&self, obj: &mut Value) {
        self.set_defaults(obj);
    }

    /// Sets what a new object gets from who asked for it, after
    /// [`Strategy::prepare_for_create`] (upstream's `PrepareForCreate` reading the request's
    /// user: a CSR's requestor); `user` is None for the server's own creates. By default
    /// nothing.
    fn prepare_for_create_by(&self, _obj: &mut Value, _user: Option<&User>) {}

    /// Carries over from the stored object what an update may not change; by default only
    /// the kind's defaults are set.
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        self.set_defaults(new);
    }

    /// The kind's own validation of an object about to be stored (names and metadata are
    /// validated for every kind).
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    /// Validation of an update; by default the same as [`Strategy::validate`].
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }

    /// Carries over from the stored object what an update of the `status` subresource may
    /// not change beyond what every kind keeps (everything but `status` and `metadata`):
    /// upstream's status strategies' `PrepareForUpdate` (a Deployment's status update keeps
    /// its labels, for example). By default nothing more.
    fn prepare_for_status_update(&self, _new: &mut Value, _old: &Value) {}

    /// Validation of an update of the `status` subresource (upstream's
    /// `Validate*StatusUpdate`); by default the same as [`Strategy::validate_update`].
    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.validate_update(new, old)
    }

    /// The fields an update of the `status` subresource resets, so server-side apply to
    /// `status` owns none of them (the status strategies' `GetResetFields`): by default the
    /// spec.
    fn status_reset_fields(&self) -> &'static [&'static [&'static str]] {
        &[&["spec"]]
    }

    /// The fields an update through `subresource` ("" for the object itself) resets, so
    /// server-side apply owns none of them (`GetResetFields`): by default the status for the
    /// object itself (of a kind with a `status` subresource) and for a namespace's
    /// `finalize`, [`Strategy::status_reset_fields`] for `status`.
    fn reset_fields(&self, subresource: &str) -> &'static [&'static [&'static str]] {
        match subresource {
            "" if self.info().status => &[&["status"]],
            "finalize" => &[&["status"]],
            "status" => self.status_reset_fields(),
            _ => &[],
        }
    }

    /// The kind's own subresources beyond `status`, `scale` and a namespace's `finalize`,
    /// each served for get, update and patch as `status` is (a CSR's `approval`): an update
    /// through one keeps all but the status, then runs
    /// [`Strategy::prepare_for_subresource_update`] and
    /// [`Strategy::validate_subresource_update`]. None by default.
    fn subresources(&self) -> &'static [&'static str] {
        &[]
    }

    /// Carries over from the stored object what an update of the kind's own `subresource`
    /// may not change (upstream's strategy of that subresource's `PrepareForUpdate`).
    fn prepare_for_subresource_update(&self, _subresource: &str, _new: &mut Value, _old: &Value) {}

    /// Validation of an update of the kind's own `subresource` (upstream's strategy of that
    /// subresource's `ValidateUpdate`); by default the same as [`Strategy::validate_update`].
    fn validate_subresource_update(
        &self,
        _subresource: &str,
        new: &Value,
        old: &Value,
    ) -> Vec<FieldError> {
        self.validate_update(new, old)
    }

    /// The Table columns, `Name` first, as kube-apiserver's printers define them.
    fn columns(&self) -> &'static [Column];

    /// One Table row for `obj`, one cell per column; `now` is for ages.
    fn cells(&self, obj: &Value, now: Time) -> Vec<Value>;

    /// Fields a field selector may name besides `metadata.name` and `metadata.namespace`.
    fn selectable_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// The value of a selectable field of `obj` ("" when unset): by default the string its
    /// dotted path names ([`field_text`]).
    fn field(&self, obj: &Value, field: &str) -> String {
        if self.selectable_fields().contains(&field) {
            field_text(obj, field)
        } else {
            String::new()
        }
    }

    /// The selectable fields the watch cache indexes (kube-apiserver's indexers), so a list
    /// selecting an exact value reads only the objects that have it.
    fn indexed_fields(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether `metadata.generation` counts changes of everything but metadata and status.
    fn tracks_generation(&self) -> bool {
        false
    }

    /// Whether a finished delete answers the deleted object rather than a `Success` Status
    /// (kube-apiserver's `ReturnDeletedObject`: pods, namespaces, services, serviceaccounts,
    /// resourcequotas, podtemplates, persistent volumes and claims and the storage.k8s.io
    /// kinds): by default what the kind's [`ResourceInfo`] says. A delete that waits
    /// (finalizers, a grace period) answers the object as it now is, whatever the kind.
    fn returns_deleted_object(&self) -> bool {
        self.info().returns_deleted_object
    }

    /// What a delete that names no propagation policy does to the objects the deleted one
    /// owns (kube's `DefaultGarbageCollectionPolicy`): background deletion, but orphaning
    /// for the kinds that orphaned before the garbage collector existed (core/v1
    /// ReplicationControllers, batch/v1 Jobs).
    fn default_propagation(&self) -> store::Propagation {
        store::Propagation::Background
    }

    /// Whether the kind is computed on each read and never stored (componentstatuses):
    /// served for get and list only, every other verb 405.
    fn read_only(&self) -> bool {
        false
    }

    /// What answers a create of this kind when its objects are never stored (the access
    /// and token reviews: each POST answered at once, every other verb 405); None for a
    /// stored kind.
    fn review(&self) -> Option<&dyn authentication::Review> {
        None
    }

    /// Whether the kind's objects are kept in the store (not computed on each read, not
    /// answered at once as the reviews are).
    fn stored(&self) -> bool {
        !self.read_only() && self.review().is_none()
    }

    /// The warning every request for the kind is answered with, if it is deprecated
    /// (`v1 ComponentStatus is deprecated in v1.19+`).
    fn deprecation(&self) -> Option<&'static str> {
        None
    }

    /// Whether an update of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// Why a POST of a new object of this kind is refused now, if it is: a custom resource
    /// whose CRD is terminating.
    fn refuses_create(&self) -> Option<crate::storage::Status> {
        None
    }

    /// Why a DELETE of the object `name` is refused, if it is (the system PriorityClasses;
    /// as upstream, a deletecollection does not ask).
    fn refuses_delete(&self, _name: &str) -> Option<crate::storage::Status> {
        None
    }

    /// How a delete of `obj` waits, if it does: the object marked for deletion (with a
    /// deletionTimestamp) while finalizers remain, None to delete it at once. Kinds with a
    /// grace period (pods) or their own finalizers (namespaces) refine this.
    fn graceful_deletion(
        &self,
        obj: &Value,
        _grace_seconds: Option<i64>,
        now: Time,
    ) -> Option<Value> {
        meta::mark_for_finalizers(obj, now)
    }
}

/// `obj.metadata.<field>` as a string ("" when unset).
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The string at the JSON pointer `pointer` in `obj` ("" when unset or not a string).
pub fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.at(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The string a selectable field names in `obj`, its dots read as a JSON pointer's slashes
/// (`spec.nodeName` is `/spec/nodeName`); "" when unset.
pub fn field_text(obj: &Value, field: &str) -> String {
    text(obj, &format!("/{}", field.replace('.', "/"))).to_string()
}

/// The `Name` column every kind starts with.
pub const NAME_COLUMN: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    description: "Name must be unique within a namespace. Is required when creating resources, \
        although some resources may allow a client to request the generation of an appropriate \
        name automatically. Name is primarily intended for creation idempotence and \
        configuration definition. Cannot be updated. More info: \
        https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    priority: 0,
};

/// The `Age` column (`metadata.creationTimestamp`, shown as kubectl shows ages).
pub const AGE_COLUMN: Column = Column {
    name: "Age",
    kind: "string",
    format: "",
    description: "CreationTimestamp is a timestamp representing the server time when this object \
        was created. It is not guaranteed to be set in happens-before order across separate \
        operations. Clients may not set this value. It is represented in RFC3339 form and is in \
        UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: \
        https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    priority: 0,
};

/// The `Age` cell of `obj`.
pub fn age(obj: &Value, now: Time) -> Value {
    match Time::parse(meta_str(obj, "creationTimestamp")) {
        Some(created) => Value::from(time::human_duration(now.since(created))),
        None => Value::from("<unknown>"),
    }
}

/// A Table row that starts with the Name cell and ends with the Age cell, `middle` between
/// (what most kinds' printers show).
pub fn name_age_row(obj: &Value, now: Time, middle: impl IntoIterator<Item = Value>) -> Vec<Value> {
    let mut row = vec![Value::from(meta_str(obj, "name"))];
    row.extend(middle);
    row.push(age(obj, now));
    row
}

/// Every kind this apiserver serves, in discovery order (kube-apiserver's: the core group,
/// then the named groups).
pub fn kinds() -> Vec<&'static dyn Strategy> {
    let mut kinds: Vec<&'static dyn Strategy> = vec![
        &componentstatuses::ComponentStatuses,
        &configmaps::ConfigMaps,
        &endpoints::Endpoints,
        &events::Events,
        &limitranges::LimitRanges,
        &namespaces::Namespaces,
        &nodes::Nodes,
        &persistentvolumeclaims::PersistentVolumeClaims,
        &persistentvolumes::PersistentVolumes,
        &pods::Pods,
        &podtemplates::PodTemplates,
        &replicationcontrollers::ReplicationControllers,
        &resourcequotas::ResourceQuotas,
        &secrets::Secrets,
        &serviceaccounts::ServiceAccounts,
        &services::Services,
    ];
    kinds.extend(apiregistration::kinds());
    kinds.extend(apps::kinds());
    kinds.push(&events_k8s_io::EventsK8sIo);
    kinds.extend(authentication::kinds());
    kinds.extend(authorization::kinds());
    kinds.extend(autoscaling::kinds());
    kinds.extend(batch::kinds());
    kinds.extend(certificates::kinds());
    kinds.extend(networking::kinds());
    kinds.extend(policy::kinds());
    kinds.extend(rbac::kinds());
    kinds.extend(storage_k8s_io::kinds());
    kinds.extend(admissionregistration::kinds());
    kinds.push(&customresourcedefinitions::CustomResourceDefinitions);
    kinds.extend(scheduling::kinds());
    kinds.push(&leases::Leases);
    kinds.extend(node::kinds());
    kinds.extend(discovery::kinds());
    kinds
}
