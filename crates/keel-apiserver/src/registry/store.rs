//! [`Registry`]: the generic store every kind goes through, as kube-apiserver's
//! `genericregistry.Store`: it turns API verbs on objects (`serde_json::Value`s) into
//! [`Etcd3`](crate::storage::Etcd3) calls on their keys, running the kind's [`Strategy`] and
//! the metadata rules of [`super::meta`] on the way, and answers every failure as a
//! Kubernetes [`Status`].
//!
//! Objects are stored as JSON with apiVersion and kind and without resourceVersion (the key's
//! mod_revision is the resourceVersion, set on every object read), as kube-apiserver stores
//! them, so the two can share a store ([`super::stored`]).
//!
//! The verbs are here; the write every update goes through is in `write`, and what a delete
//! is asked and did in `delete`.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};

use crate::metrics::Metrics;

mod custom;
mod delete;
mod write;
pub use write::canonical_quantities;

pub use delete::{
    DeleteOptions, Deleted, FOREGROUND_FINALIZER, ORPHAN_FINALIZER, Propagation, gc_finalizers,
};

use delete::check_preconditions;
use write::WriteTo;

use super::admission::Plugins as AdmissionPlugins;
use super::selector::{Filter, Selection};
use super::served::{List, Served, ServedObject};
use super::stored::decode;
use super::watching::{KindCodec, Start, WatchQuery, Watching};
use super::{ResourceInfo, Strategy, meta, meta_str};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::storage::cacher::{self, Cacher};
use crate::storage::interface::{self, WatchSource};
use crate::storage::key::is_path_segment;
use crate::storage::resource_version;
use crate::storage::{Backends, FieldError, KeyLayout, Status, Storage, StorageError};

/// The update that marks an object for deletion (an internal subresource name no request
/// path can carry).
const MARK_FOR_DELETION: &str = "(mark for deletion)";

/// A list request.
#[derive(Default)]
pub struct ListQuery<'a> {
    /// `resourceVersion` ("" when unset).
    pub resource_version: &'a str,
    /// `resourceVersionMatch` ("" when unset).
    pub resource_version_match: &'a str,
    /// `limit` (0: all).
    pub limit: i64,
    /// `continue`.
    pub continue_token: Option<&'a str>,
    /// Only the objects this selects.
    pub selection: Option<&'a Selection>,
}

/// The objects of every kind, each in the store that keeps its resource.
pub struct Registry {
    backends: Backends,
    keys: KeyLayout,
    /// `--event-ttl`, in seconds: how long events are kept.
    event_ttl: i64,
    /// Whether kinds get a watch cache (`--watch-cache`).
    watch_cache: bool,
    /// Whether deletes set the garbage collector's finalizers (`--enable-garbage-collector`).
    garbage_collection: std::sync::atomic::AtomicBool,
    /// The admission plugins that run (`--enable-admission-plugins`,
    /// `--disable-admission-plugins`).
    admission: RwLock<AdmissionPlugins>,
    /// The kinds served now, swapped whole when a CRD adds or removes some.
    served: RwLock<Kinds>,
    metrics: Arc<Metrics>,
}

/// The kinds served at one moment, each with its storage: the built-in ones for the life of
/// the process, and the versions each established CRD serves.
#[derive(Clone)]
pub struct Kinds(Arc<KindSet>);

#[derive(Clone, Default)]
struct KindSet {
    kinds: Vec<&'static dyn Strategy>,
    /// Each kind's storage, in the order of `kinds`.
    storages: Vec<Arc<Storage<KindCodec>>>,
    /// The kinds each CRD serves, by the CRD's name.
    custom: BTreeMap<String, Vec<&'static dyn Strategy>>,
    /// A kind, with its storage, that a terminating CRD serves to no client but whose
    /// objects its cleanup deletes through the registry, by the CRD's name.
    cleanup: BTreeMap<String, (&'static dyn Strategy, Arc<Storage<KindCodec>>)>,
    /// Counts the changes of the set, for what is made from it (the OpenAPI documents).
    generation: u64,
}

impl std::ops::Deref for Kinds {
    type Target = [&'static dyn Strategy];

    fn deref(&self) -> &Self::Target {
        &self.0.kinds
    }
}

impl Kinds {
    /// How many times the set has changed since the process started.
    pub fn generation(&self) -> u64 {
        self.0.generation
    }
}

/// Whether two kinds serve the same thing (a unit struct's address says nothing).
fn same_kind(a: &dyn Strategy, b: &dyn Strategy) -> bool {
    let (a, b) = (a.info(), b.info());
    a.group == b.group && a.version == b.version && a.resource == b.resource
}

impl Registry {
    /// A registry of `kinds` keeping its objects in `backends` under `keys`, with a watch
    /// cache for each kind but events when `watch_cache` says so (kube-apiserver leaves
    /// events out: they are written often and watched little). Must be called within a Tokio
    /// runtime: each watch cache starts following the store.
    pub fn new(
        backends: Backends,
        keys: KeyLayout,
        kinds: Vec<&'static dyn Strategy>,
        event_ttl: std::time::Duration,
        watch_cache: bool,
        metrics: Arc<Metrics>,
    ) -> Registry {
        let mut registry = Registry {
            backends,
            keys,
            event_ttl: event_ttl.as_secs() as i64,
            watch_cache,
            garbage_collection: std::sync::atomic::AtomicBool::new(true),
            admission: RwLock::new(AdmissionPlugins::default()),
            served: RwLock::new(Kinds(Arc::default())),
            metrics,
        };
        let storages = kinds
            .iter()
            .map(|&kind| registry.storage_for(kind))
            .collect();
        registry.served = RwLock::new(Kinds(Arc::new(KindSet {
            kinds,
            storages,
            ..KindSet::default()
        })));
        registry
    }

    /// Whether deletes set the garbage collector's finalizers (on unless turned off).
    pub fn set_garbage_collection(&self, on: bool) {
        self.garbage_collection
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Which admission plugins run (all of keel's unless set otherwise).
    pub fn set_admission_plugins(&self, plugins: AdmissionPlugins) {
        *self.admission.write().unwrap_or_else(|p| p.into_inner()) = plugins;
    }

    /// The admission plugins that run.
    pub fn admission_plugins(&self) -> AdmissionPlugins {
        *self.admission.read().unwrap_or_else(|p| p.into_inner())
    }

    /// A new storage for `kind`, with a watch cache following the store unless the kind
    /// goes without one.
    fn storage_for(&self, kind: &'static dyn Strategy) -> Arc<Storage<KindCodec>> {
        let info = kind.info();
        let (group, resource) = kind.storage_resource();
        let storage = &self.backends.of(group, resource).storage;
        let codec = Arc::new(KindCodec(kind));
        let resource = if info.group.is_empty() {
            info.resource.to_string()
        } else {
            format!("{}.{}", info.resource, info.group)
        };
        let metrics = self.metrics.clone();
        if !self.watch_cache || info.resource == "events" || !kind.stored() {
            return Arc::new(Storage::new(storage.clone(), codec, metrics, resource));
        }
        let cache = Cacher::start(
            storage.clone(),
            self.keys.collection(kind.key_resource(), None),
            cacher::LIMITS,
            self.metrics.watch_cache(info.group, info.resource),
            codec,
        );
        Arc::new(Storage::cached(storage.clone(), cache, metrics, resource))
    }

    /// The apiserver's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The stores (for the compactors, health checks and size metrics).
    pub fn backends(&self) -> &Backends {
        &self.backends
    }

    /// Whether the stores keeping Nodes and Leases (the heartbeats the node lifecycle
    /// controller reads) pass their health check.
    pub async fn heartbeat_stores_healthy(&self) -> bool {
        let nodes = &self.backends.of("", "nodes").storage;
        let leases = &self.backends.of("coordination.k8s.io", "leases").storage;
        nodes.healthy().await && (std::ptr::eq(nodes, leases) || leases.healthy().await)
    }

    /// The storage of `kind` (served, or held for its CRD's cleanup); 404 for a kind no
    /// longer served (a custom resource whose CRD was deleted, or whose version stopped
    /// being served, after the caller found it).
    fn storage_of(&self, kind: &dyn Strategy) -> Result<Arc<Storage<KindCodec>>, Status> {
        let served = self.kinds();
        if let Some(i) = served.0.kinds.iter().position(|k| same_kind(*k, kind)) {
            return Ok(served.0.storages[i].clone());
        }
        served
            .0
            .cleanup
            .values()
            .find(|(k, _)| same_kind(*k, kind))
            .map(|(_, storage)| storage.clone())
            .ok_or_else(|| {
                Status::failure(
                    404,
                    "NotFound",
                    "the server could not find the requested resource".into(),
                )
            })
    }

    /// Every kind served now.
    pub fn kinds(&self) -> Kinds {
        self.served
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The kind served at `group`/`version` as `resource`.
    pub fn kind(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<&'static dyn Strategy> {
        self.kinds().iter().copied().find(|k| {
            let info = k.info();
            info.group == group && info.version == version && info.resource == resource
        })
    }

    /// The kind named `resource` in the core group.
    pub fn core(&self, resource: &str) -> &'static dyn Strategy {
        self.kind("", "v1", resource)
            .unwrap_or_else(|| panic!("the core kind {resource} is registered"))
    }

    /// The object `name` (in `namespace`), at a resourceVersion not older than the one
    /// asked for.
    pub async fn get(
        &self,
        kind: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        resource_version: &str,
    ) -> Result<Value, Status> {
        if kind.read_only() {
            return super::componentstatuses::get(&self.backends, name).await;
        }
        let info = kind.info();
        let key = self.key(kind, namespace, name);
        let target = info.target(name);
        let (found, _) = self
            .storage_of(kind)?
            .get(&key, resource_version)
            .await
            .map_err(|e| Status::from_storage(&e, &target))?;
        let object =
            found.ok_or_else(|| Status::from_storage(&StorageError::NotFound { key }, &target))?;
        Ok(Value::clone(object?.value()))
    }

    /// A page of a collection (all namespaces when `namespace` is None): its `<Kind>List`,
    /// whose items are the objects as the storage serves them (from the watch cache, shared).
    pub async fn list(
        &self,
        kind: &dyn Strategy,
        namespace: Option<&str>,
        query: &ListQuery<'_>,
    ) -> Result<List, Status> {
        let info = kind.info();
        let list = |metadata, items| List {
            kind: format!("{}List", info.kind),
            api_version: info.api_version(),
            metadata,
            items,
            // A custom resource (the one kind with its own merge schema) lists unstructured.
            unstructured: kind.merge_schema().is_some(),
        };
        if kind.read_only() {
            let items = super::componentstatuses::all(&self.backends)
                .await
                .into_iter()
                .filter(|c| query.selection.is_none_or(|s| (s.filter)(c)))
                .map(|c| Arc::new(ServedObject::from(c)))
                .collect();
            return Ok(list(Map::new(), items));
        }
        let exact: Vec<(&str, &str)> = query
            .selection
            .iter()
            .flat_map(|s| &s.exact)
            .map(|(f, v)| (f.as_str(), v.as_str()))
            .collect();
        let required = |field: &str| {
            exact
                .iter()
                .find(|(f, v)| *f == field && is_path_segment(v))
                .map(|(_, v)| *v)
        };
        // As kube-apiserver's ListPredicate: a selected namespace is the namespace listed, a
        // selected name (in a namespace, or of a cluster-scoped kind) the one key read.
        let namespace = match namespace {
            None if info.namespaced => required("metadata.namespace"),
            given => given,
        };
        let single = required("metadata.name").filter(|_| namespace.is_some() || !info.namespaced);
        let key = match single {
            Some(name) => self.key(kind, namespace, name),
            None => self.keys.collection(kind.key_resource(), namespace),
        };
        let selected = |served: &Served| match (query.selection, served) {
            (Some(s), Ok(object)) => (s.filter)(object.value()),
            (None, _) => true,
            (Some(_), Err(_)) => false,
        };
        let storage_query = interface::ListQuery {
            resource_version: query.resource_version,
            resource_version_match: query.resource_version_match,
            limit: query.limit,
            continue_token: query.continue_token,
            recursive: single.is_none(),
            filter: query
                .selection
                .map(|_| &selected as &(dyn Fn(&Served) -> bool + Sync)),
            exact: &exact,
        };
        let page = self
            .storage_of(kind)?
            .list(&key, storage_query)
            .await
            .map_err(|e| Status::from_storage(&e, &info.target("")))?;
        let items = page.items.into_iter().collect::<Result<_, _>>()?;
        let mut metadata = Map::new();
        metadata.insert("resourceVersion".into(), page.revision.to_string().into());
        if let Some(token) = page.continue_token {
            metadata.insert("continue".into(), token.into());
        }
        if let Some(remaining) = page.remaining_item_count {
            metadata.insert("remainingItemCount".into(), remaining.into());
        }
        Ok(list(metadata, items))
    }

    /// Replaces the object `name` (or, for `subresource` `status`, its status) with what
    /// `make` makes of the stored one (None: there is none, and the kind creates on update).
    /// `make` runs again on a newer object when another writer got there first; its result
    /// is refused with 409 Conflict if it names a resourceVersion other than the stored
    /// one. An update that changes nothing writes nothing. Returns the object and whether it
    /// was created.
    pub async fn update(
        &self,
        kind: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        dry_run: bool,
        make: impl FnMut(Option<&Value>) -> Result<Value, Status>,
    ) -> Result<(Value, bool), Status> {
        let create = kind.allow_create_on_update();
        let to = WriteTo {
            namespace,
            name,
            subresource,
            dry_run,
            allow_create: create,
            user: None,
        };
        self.write(kind, to, make).await
    }

    /// [`Registry::update`] that creates a missing object whatever the kind (server-side
    /// apply creates), except through a subresource; a create is `user`'s.
    #[allow(clippy::too_many_arguments)]
    pub async fn update_or_create(
        &self,
        kind: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        dry_run: bool,
        user: Option<&crate::http::auth::User>,
        make: impl FnMut(Option<&Value>) -> Result<Value, Status>,
    ) -> Result<(Value, bool), Status> {
        let to = WriteTo {
            namespace,
            name,
            subresource,
            dry_run,
            allow_create: true,
            user,
        };
        self.write(kind, to, make).await
    }

    /// Deletes the object `name`: at once, or (with finalizers, or a pod's grace period)
    /// by marking it with a deletionTimestamp.
    pub async fn delete(
        &self,
        kind: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, Status> {
        if kind.read_only() {
            return Err(Status::method_not_allowed());
        }
        let info = kind.info();
        let key = self.key(kind, namespace, name);
        let target = info.target(name);
        let current = self.get(kind, namespace, name, "").await?;
        check_preconditions(&current, options, info, name)?;
        let policy = kind.default_propagation();
        let collected = self
            .garbage_collection
            .load(std::sync::atomic::Ordering::Relaxed);
        let finalize = |obj: &Value| {
            if collected {
                delete::with_gc_finalizers(obj, options, policy)
            } else {
                obj.clone()
            }
        };
        let finalized = finalize(&current);
        if let Some(marked) =
            kind.graceful_deletion(&finalized, options.grace_period_seconds, Time::now())
        {
            let pending = marked != current;
            if !pending || options.dry_run {
                return Ok(Deleted {
                    object: marked,
                    finished: false,
                });
            }
            let (object, _) = self
                .update(
                    kind,
                    namespace,
                    name,
                    Some(MARK_FOR_DELETION),
                    false,
                    |now| {
                        let now = now.cloned().unwrap_or_default();
                        check_preconditions(&now, options, info, name)?;
                        let now = finalize(&now);
                        Ok(kind
                            .graceful_deletion(&now, options.grace_period_seconds, Time::now())
                            .unwrap_or(now))
                    },
                )
                .await?;
            // A grace period cut to 0 with no finalizers left: written, then deleted, as
            // kube-apiserver's updateForGracefulDeletionAndFinalizers does.
            if meta::deletes_now(&object) {
                let written = meta_str(&object, "resourceVersion").parse().unwrap_or(0);
                if let Some(gone) = self.delete_if_unchanged(kind, &key, name, written).await? {
                    return Ok(Deleted {
                        object: gone,
                        finished: true,
                    });
                }
            }
            return Ok(Deleted {
                object,
                finished: false,
            });
        }
        if options.dry_run {
            return Ok(Deleted {
                object: current,
                finished: true,
            });
        }
        let deleted = self
            .storage_of(kind)?
            .delete(&key, None, |object| {
                let now = decode(kind, object).map_err(rejected)?;
                check_preconditions(&now, options, info, name).map_err(rejected)
            })
            .await
            .map_err(|e| Status::from_storage(&e, &target))?;
        Ok(Deleted {
            object: decode(kind, &deleted)?,
            finished: true,
        })
    }

    /// Watches a collection (or all namespaces) from `resource_version` as a client that
    /// knows no other watch option does ([`Registry::watch_with`]).
    pub async fn watch(
        &self,
        kind: &'static dyn Strategy,
        namespace: Option<&str>,
        resource_version: &str,
        filter: Option<Box<Filter>>,
    ) -> Result<Watching, Status> {
        let query = WatchQuery {
            resource_version,
            ..WatchQuery::default()
        };
        self.watch_with(kind, namespace, &query, filter).await
    }

    /// Watches a collection (or all namespaces) as `query` says, only the objects `filter`
    /// accepts (see [`super::watching`]). With the current objects first (a streaming list,
    /// or a watch from "" or "0" that does not say), they come as ADDED events, read at the
    /// latest revision (not older than the resourceVersion asked for), then the changes
    /// after them; without, the changes after the resourceVersion (from "" or "0": after
    /// the store's current revision). The kind's watch cache serves the changes when it
    /// holds them all; otherwise the watch is a store watch of its own. Either way a start
    /// the store has compacted is 410 Expired, as a store watch answers it (kube-apiserver's
    /// cache serves such a start from its buffer instead; keel answers the same whether or
    /// not the cache holds it), and a streaming list from a resourceVersion the store has
    /// not reached is 504, both in the stream.
    pub async fn watch_with(
        &self,
        kind: &'static dyn Strategy,
        namespace: Option<&str>,
        query: &WatchQuery<'_>,
        filter: Option<Box<Filter>>,
    ) -> Result<Watching, Status> {
        if kind.read_only() {
            return Err(Status::method_not_allowed());
        }
        let info = kind.info();
        let prefix = self.keys.collection(kind.key_resource(), namespace);
        let failed = |e: StorageError| Status::from_storage(&e, &info.target(""));
        let rv = resource_version::parse(query.resource_version).map_err(failed)?;
        let listed = query.send_initial_events.unwrap_or(rv == 0);
        let storage = self.storage_of(kind)?;
        match storage
            .watch(&prefix, query.resource_version, query.send_initial_events)
            .await
        {
            Ok(watched) => {
                let start = Start {
                    initial: watched.initial,
                    after: watched.after,
                    initial_events_end: listed
                        && query.send_initial_events == Some(true)
                        && query.allow_bookmarks,
                };
                Ok(match watched.source {
                    WatchSource::Cache(watch) => Watching::cached(kind, start, watch, filter),
                    WatchSource::Store(watch) => Watching::store(kind, start, watch, filter),
                })
            }
            // Sent in the stream as an ERROR event, as kube-apiserver sends them: a start the
            // store compacted (410 Expired, whoever serves the watch) and a streaming list
            // from a resourceVersion the store has not reached (504).
            Err(
                e @ (StorageError::Expired { .. } | StorageError::TooLargeResourceVersion { .. }),
            ) => Ok(Watching::failed(kind, failed(e))),
            Err(e) => Err(failed(e)),
        }
    }

    /// How many objects of `kind` there are (all namespaces).
    pub async fn count(&self, kind: &dyn Strategy) -> Result<i64, Status> {
        let info = kind.info();
        let prefix = self.keys.collection(kind.key_resource(), None);
        self.storage_of(kind)?
            .count(&prefix)
            .await
            .map_err(|e| Status::from_storage(&e, &info.target("")))
    }

    /// A namespaced object may be created only in a namespace that exists and is not being
    /// deleted. For an Event the namespace is read as kube-apiserver's NamespaceLifecycle
    /// admission reads it, from the watch cache, and from the store only when the cache does
    /// not have it (one created a moment ago), so a flood of Events costs the main store no
    /// read each. Other kinds read it from the store: a create right after the namespace's
    /// deletion is refused even before the cache saw the deletion (upstream keeps a list of
    /// namespaces deleted in the last 30 s for that).
    async fn check_namespace_open(
        &self,
        info: &ResourceInfo,
        namespace: &str,
        name: &str,
    ) -> Result<(), Status> {
        let namespaces = self.core("namespaces");
        let ns = match info.resource {
            "events" => match self.get(namespaces, None, namespace, "0").await {
                Err(status) if status.code == 404 => {
                    self.get(namespaces, None, namespace, "").await
                }
                cached => cached,
            },
            _ => self.get(namespaces, None, namespace, "").await,
        }?;
        if !meta_str(&ns, "deletionTimestamp").is_empty()
            || ns.at("/status/phase").and_then(Value::as_str) == Some("Terminating")
        {
            return Err(Status::namespace_terminating(&info.target(name), namespace));
        }
        Ok(())
    }

    /// The TTL of a new object of this kind (events: `--event-ttl`; others none).
    fn ttl(&self, info: &ResourceInfo) -> i64 {
        if info.resource == "events" {
            self.event_ttl
        } else {
            0
        }
    }

    fn key(&self, kind: &dyn Strategy, namespace: Option<&str>, name: &str) -> String {
        let namespaced = kind.info().namespaced;
        self.keys
            .object(kind.key_resource(), namespace.filter(|_| namespaced), name)
    }
}

fn invalid(info: &ResourceInfo, name: &str, errors: &[FieldError]) -> Status {
    Status::invalid(info.group, info.kind, name, errors)
}

fn rejected(status: Status) -> StorageError {
    StorageError::Rejected(Box::new(status))
}
