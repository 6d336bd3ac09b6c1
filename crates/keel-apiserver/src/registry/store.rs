//! [`Registry`]: the generic store every kind goes through, as kube-apiserver's
//! `genericregistry.Store`: it turns API verbs on objects (`serde_json::Value`s) into
//! [`Etcd3`] calls on their keys, running the kind's [`Strategy`] and the metadata rules of
//! [`super::meta`] on the way, and answers every failure as a Kubernetes [`Status`].
//!
//! Objects are stored as JSON with apiVersion and kind and without resourceVersion (the key's
//! mod_revision is the resourceVersion, set on every object read), as kube-apiserver stores
//! them, so the two can share a store.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::metrics::Metrics;

use super::selector::{Filter, Selection};
use super::served::{List, Served, ServedObject, decodes_back, written};
use super::watching::{KindCodec, Start, WatchQuery, Watching};
use super::{ResourceInfo, Strategy, meta, meta_str};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::storage::cacher::{self, Cacher};
use crate::storage::interface::{self, WatchSource};
use crate::storage::key::is_path_segment;
use crate::storage::resource_version;
use crate::storage::{
    Backends, Existing, FieldError, KeyLayout, Object, Status, Storage, StorageError,
};

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

/// How a delete is asked for (`DeleteOptions`).
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `dryRun: [All]`.
    pub dry_run: bool,
    /// `orphanDependents` (deprecated; only changes the answer's code).
    pub orphan_dependents: Option<bool>,
}

/// What a delete did.
#[derive(Debug)]
pub struct Deleted {
    /// The object: as it was when it was removed, or as it now is while it waits for its
    /// finalizers or its grace period.
    pub object: Value,
    /// Whether it is gone from the store.
    pub finished: bool,
}

/// The objects of every kind, each in the store that keeps its resource.
pub struct Registry {
    backends: Backends,
    keys: KeyLayout,
    kinds: Vec<&'static dyn Strategy>,
    /// `--event-ttl`, in seconds: how long events are kept.
    event_ttl: i64,
    /// Each kind's storage, in the order of `kinds`.
    storages: Vec<Storage<KindCodec>>,
    metrics: Arc<Metrics>,
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
        let storages = kinds
            .iter()
            .map(|&kind| {
                let info = kind.info();
                let (group, resource) = kind.storage_resource();
                let storage = &backends.of(group, resource).storage;
                let codec = Arc::new(KindCodec(kind));
                let resource = if info.group.is_empty() {
                    info.resource.to_string()
                } else {
                    format!("{}.{}", info.resource, info.group)
                };
                if !watch_cache || info.resource == "events" || kind.read_only() {
                    return Storage::new(storage.clone(), codec, metrics.clone(), resource);
                }
                let cache = Cacher::start(
                    storage.clone(),
                    keys.collection(info.resource, None),
                    cacher::LIMITS,
                    metrics.watch_cache(info.group, info.resource),
                    codec,
                );
                Storage::cached(storage.clone(), cache, metrics.clone(), resource)
            })
            .collect();
        Registry {
            backends,
            keys,
            kinds,
            event_ttl: event_ttl.as_secs() as i64,
            storages,
            metrics,
        }
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

    /// The storage of `kind`.
    fn storage_of(&self, kind: &dyn Strategy) -> &Storage<KindCodec> {
        let info = kind.info();
        let i = self
            .position(info.group, info.version, info.resource)
            .unwrap_or_else(|| panic!("the kind {} is registered", info.resource));
        &self.storages[i]
    }

    /// Every kind served.
    pub fn kinds(&self) -> &[&'static dyn Strategy] {
        &self.kinds
    }

    /// The kind served at `group`/`version` as `resource`.
    pub fn kind(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<&'static dyn Strategy> {
        Some(self.kinds[self.position(group, version, resource)?])
    }

    /// Where the kind served at `group`/`version` as `resource` is in `kinds` (kinds are
    /// told apart by what they serve: a unit struct's address says nothing).
    fn position(&self, group: &str, version: &str, resource: &str) -> Option<usize> {
        self.kinds.iter().position(|k| {
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
        let key = self.key(info, namespace, name);
        let target = info.target(name);
        let (found, _) = self
            .storage_of(kind)
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
            Some(name) => self.key(info, namespace, name),
            None => self.keys.collection(info.resource, namespace),
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
            .storage_of(kind)
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

    /// Creates `obj` (already checked to be of this kind and namespace); the object as
    /// stored, or as it would be with `dry_run`.
    pub async fn create(
        &self,
        kind: &dyn Strategy,
        namespace: Option<&str>,
        mut obj: Value,
        dry_run: bool,
    ) -> Result<Value, Status> {
        if kind.read_only() {
            return Err(Status::method_not_allowed());
        }
        let info = kind.info();
        info.set_type(&mut obj);
        if let Some(ns) = namespace {
            meta::metadata(&mut obj).insert("namespace".into(), ns.into());
        }
        meta::prepare_create(&mut obj, kind.tracks_generation(), Time::now());
        kind.prepare_for_create(&mut obj);
        let name = meta_str(&obj, "name").to_string();
        let mut errors = meta::validate(&obj, info);
        errors.extend(kind.validate(&obj));
        if !errors.is_empty() {
            return Err(invalid(info, &name, &errors));
        }
        if let Some(ns) = namespace {
            self.check_namespace_open(info, ns, &name).await?;
        }
        let key = self.key(info, namespace, &name);
        let storage = self.storage_of(kind);
        if dry_run {
            // A dry run still answers AlreadyExists for a taken name.
            let found = storage
                .current(&key)
                .await
                .map_err(|e| Status::from_storage(&e, &info.target(&name)))?;
            if found.is_some() {
                return Err(Status::from_storage(
                    &StorageError::KeyExists { key },
                    &info.target(&name),
                ));
            }
            return Ok(obj);
        }
        let (bytes, stored) = encode_owned(kind, obj.clone());
        // The watch cache is handed the object as stored, so it need not decode the event.
        let mut handover = storage.handover(&key);
        if let Some(handover) = handover.as_mut().filter(|_| decodes_back(&stored)) {
            handover.offer(&bytes, written(info, kind.to_served(stored)));
        }
        let revision = storage
            .create(&key, bytes, self.ttl(info))
            .await
            .map_err(|e| Status::from_storage(&e, &info.target(&name)))?;
        if let Some(handover) = handover {
            handover.landed(revision);
        }
        meta::metadata(&mut obj).insert("resourceVersion".into(), revision.to_string().into());
        Ok(obj)
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
        self.write(kind, namespace, name, subresource, dry_run, create, make)
            .await
    }

    /// [`Registry::update`] that creates a missing object whatever the kind (server-side
    /// apply creates), except through a subresource.
    pub async fn update_or_create(
        &self,
        kind: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        dry_run: bool,
        make: impl FnMut(Option<&Value>) -> Result<Value, Status>,
    ) -> Result<(Value, bool), Status> {
        self.write(kind, namespace, name, subresource, dry_run, true, make)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn write(
        &self,
        kind: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        dry_run: bool,
        allow_create: bool,
        mut make: impl FnMut(Option<&Value>) -> Result<Value, Status>,
    ) -> Result<(Value, bool), Status> {
        if kind.read_only() {
            return Err(Status::method_not_allowed());
        }
        let info = kind.info();
        let key = self.key(info, namespace, name);
        let target = info.target(name);
        let storage = self.storage_of(kind);
        // A create that loses a race to another writer's create goes on as an update of what
        // that writer stored, as kube-apiserver's GuaranteedUpdate retries it.
        let mut lost_a_create_race = false;
        let (existing, cached) = loop {
            // A real update starts from the watch cache's object, a guess the store checks;
            // a dry run answers what the store holds.
            let found = if dry_run {
                storage.current(&key).await.map(|found| {
                    found.map(|object| {
                        let existing = Existing {
                            object,
                            current: true,
                        };
                        (existing, None)
                    })
                })
            } else {
                storage.existing(&key).await
            };
            if let Some(found) = found.map_err(|e| Status::from_storage(&e, &target))? {
                break found;
            }
            if !allow_create || subresource.is_some() {
                return Err(Status::from_storage(
                    &StorageError::NotFound { key },
                    &target,
                ));
            }
            let obj = make(None)?;
            match self.create(kind, namespace, obj, dry_run).await {
                Err(status) if status.reason == "AlreadyExists" && !lost_a_create_race => {
                    lost_a_create_race = true;
                }
                created => return created.map(|created| (created, true)),
            }
        };
        let now = Time::now();
        let mut delete_after = false;
        // The last value `step` made, as stored and as served: what the store holds if it
        // wrote it, so the answer needs no second decode of the bytes just encoded.
        let mut made: Option<(Vec<u8>, Value)> = None;
        // The cache's object as served, for the start it was made of (the same revision of
        // the same key: the same bytes), so the update need not decode them again. It has the
        // kind's apiVersion and kind where the stored bytes may have others, so a finalize
        // (which keeps the stored object's) decodes, and so does the judgement of a no-op.
        let cached_at = existing.object.mod_revision;
        let cached = cached
            .and_then(Result::ok)
            .filter(|_| subresource != Some("finalize"));
        // What each attempt writes is offered to the watch cache before it is sent (see
        // `crate::storage::cacher::handoff`), so the cache need not decode its event.
        let mut handover = if dry_run {
            None
        } else {
            storage.handover(&key)
        };
        let mut step = |current: &Object| -> Result<Vec<u8>, StorageError> {
            let served = cached
                .as_ref()
                .filter(|_| current.mod_revision == cached_at)
                .map(|served| served.value());
            let old = match served {
                Some(served) => Cow::Borrowed(served),
                None => Cow::Owned(decode(kind, current).map_err(rejected)?),
            };
            let new = self
                .updated(kind, &old, subresource, now, &mut make)
                .map_err(rejected)?;
            delete_after = meta::should_delete_during_update(&new, &old);
            // Unchanged as stored: an object stored under another apiVersion or kind is
            // written again in the kind's (a storage migration's no-op update).
            let unchanged = same_but_resource_version(&new, &old)
                && (served.is_none()
                    || same_but_resource_version(&new, &decode(kind, current).map_err(rejected)?));
            if unchanged {
                if let Some(handover) = &mut handover {
                    handover.withdraw();
                }
                made = Some((current.value.clone(), old.into_owned()));
                return Ok(current.value.clone());
            }
            let (bytes, stored) = encode_owned(kind, new);
            let handed = handover.is_some() && decodes_back(&stored);
            let served = kind.to_served(stored);
            match &mut handover {
                Some(handover) if handed => {
                    handover.offer(&bytes, written(info, served.clone()));
                }
                Some(handover) => handover.withdraw(),
                None => {}
            }
            made = Some((bytes.clone(), served));
            Ok(bytes)
        };
        if dry_run {
            let found = &existing.object;
            let value = step(found).map_err(|e| Status::from_storage(&e, &target))?;
            let mut obj: Value = parse_stored(&value)
                .map_err(|e| Status::internal(format!("decoding the updated object: {e}")))?;
            meta::metadata(&mut obj).insert(
                "resourceVersion".into(),
                found.mod_revision.to_string().into(),
            );
            return Ok((obj, false));
        }
        let stored = storage
            .guaranteed_update(&key, Some(existing), &mut step)
            .await
            .map_err(|e| Status::from_storage(&e, &target))?;
        if let Some(handover) = handover {
            handover.landed(stored.mod_revision);
        }
        if delete_after {
            // The last finalizer of an object marked for deletion is gone: so is the object.
            if let Some(gone) = self
                .delete_if_unchanged(kind, &key, name, stored.mod_revision)
                .await?
            {
                return Ok((gone, false));
            }
        }
        match made {
            Some((bytes, mut obj)) if bytes == stored.value => {
                meta::metadata(&mut obj).insert(
                    "resourceVersion".into(),
                    stored.mod_revision.to_string().into(),
                );
                Ok((obj, false))
            }
            _ => Ok((decode(kind, &stored)?, false)),
        }
    }

    /// Deletes the object at `key` if it is still at `written`, the revision this request
    /// wrote it at: the object as deleted, or None when another writer changed or deleted
    /// it first.
    async fn delete_if_unchanged(
        &self,
        kind: &dyn Strategy,
        key: &str,
        name: &str,
        written: i64,
    ) -> Result<Option<Value>, Status> {
        let info = kind.info();
        let deleted = self
            .storage_of(kind)
            .delete(key, None, |now| {
                if now.mod_revision == written {
                    Ok(())
                } else {
                    Err(StorageError::Conflict {
                        key: key.to_string(),
                    })
                }
            })
            .await;
        match deleted {
            Ok(gone) => Ok(Some(decode(kind, &gone)?)),
            Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => Ok(None),
            Err(e) => Err(Status::from_storage(&e, &info.target(name))),
        }
    }

    /// The new state of `old` by `make`, with the update rules applied and validated.
    fn updated(
        &self,
        kind: &dyn Strategy,
        old: &Value,
        subresource: Option<&str>,
        _now: Time,
        make: &mut impl FnMut(Option<&Value>) -> Result<Value, Status>,
    ) -> Result<Value, Status> {
        let info = kind.info();
        let mut new = make(Some(old))?;
        let name = meta_str(old, "name").to_string();
        let asked = meta_str(&new, "resourceVersion");
        if !asked.is_empty() && asked != meta_str(old, "resourceVersion") {
            return Err(Status::from_storage(
                &StorageError::Conflict { key: String::new() },
                &info.target(&name),
            ));
        }
        info.set_type(&mut new);
        match subresource {
            // A delete's mark is the server's own change: nothing to carry over.
            Some(MARK_FOR_DELETION) => {}
            Some("finalize") => new = finalized(old, &new),
            _ => {
                if info.status {
                    carry_over(&mut new, old, subresource == Some("status"));
                }
                meta::prepare_update(&mut new, old);
                if subresource.is_none() {
                    kind.prepare_for_update(&mut new, old);
                }
            }
        }
        if kind.tracks_generation() {
            meta::bump_generation(&mut new, old);
        }
        let mut errors = meta::validate_update(&new, old);
        if errors.is_empty() {
            errors.extend(meta::validate(&new, info));
            errors.extend(kind.validate_update(&new, old));
        }
        if !errors.is_empty() {
            return Err(invalid(info, &name, &errors));
        }
        Ok(new)
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
        let key = self.key(info, namespace, name);
        let target = info.target(name);
        let current = self.get(kind, namespace, name, "").await?;
        check_preconditions(&current, options, info, name)?;
        if let Some(marked) =
            kind.graceful_deletion(&current, options.grace_period_seconds, Time::now())
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
            .storage_of(kind)
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
        let prefix = self.keys.collection(info.resource, namespace);
        let failed = |e: StorageError| Status::from_storage(&e, &info.target(""));
        let rv = resource_version::parse(query.resource_version).map_err(failed)?;
        let listed = query.send_initial_events.unwrap_or(rv == 0);
        let storage = self.storage_of(kind);
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
        let prefix = self.keys.collection(info.resource, None);
        self.storage_of(kind)
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

    fn key(&self, info: &ResourceInfo, namespace: Option<&str>, name: &str) -> String {
        self.keys
            .object(info.resource, namespace.filter(|_| info.namespaced), name)
    }
}

/// Keeps on `new` what its update may not change: with `status_update` everything but the
/// status (and metadata), otherwise the status.
fn carry_over(new: &mut Value, old: &Value, status_update: bool) {
    let (Some(new), Some(old)) = (new.as_object_mut(), old.as_object()) else {
        return;
    };
    if status_update {
        let status = new.remove("status");
        let meta = new.remove("metadata");
        new.clear();
        for (k, v) in old {
            if k != "status" && k != "metadata" {
                new.insert(k.clone(), v.clone());
            }
        }
        if let Some(meta) = meta {
            new.insert("metadata".into(), meta);
        }
        if let Some(status) = status {
            new.insert("status".into(), status);
        }
    } else {
        match old.get("status") {
            Some(status) => new.insert("status".into(), status.clone()),
            None => new.remove("status"),
        };
    }
}

/// A namespace's `finalize` update: the stored namespace with the new `spec.finalizers`.
fn finalized(old: &Value, new: &Value) -> Value {
    let mut out = old.clone();
    let finalizers = new.at("/spec/finalizers").cloned().unwrap_or(json!([]));
    if !out.get("spec").is_some_and(Value::is_object) {
        out["spec"] = json!({});
    }
    out["spec"]["finalizers"] = finalizers;
    out
}

fn check_preconditions(
    current: &Value,
    options: &DeleteOptions,
    info: &ResourceInfo,
    name: &str,
) -> Result<(), Status> {
    let checks = [
        ("UID", options.uid.as_deref(), meta_str(current, "uid")),
        (
            "ResourceVersion",
            options.resource_version.as_deref(),
            meta_str(current, "resourceVersion"),
        ),
    ];
    for (what, wanted, actual) in checks {
        if let Some(wanted) = wanted
            && wanted != actual
        {
            return Err(Status::conflict(
                &info.target(name),
                &format!(
                    "Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {actual}"
                ),
            ));
        }
    }
    Ok(())
}

fn invalid(info: &ResourceInfo, name: &str, errors: &[FieldError]) -> Status {
    Status::invalid(info.group, info.kind, name, errors)
}

fn rejected(status: Status) -> StorageError {
    StorageError::Rejected(Box::new(status))
}

/// `obj` as the store keeps it: its bytes, and the value they encode (the kind's storage
/// form, without resourceVersion).
fn encode_owned(kind: &dyn Strategy, obj: Value) -> (Vec<u8>, Value) {
    let stored = kind.to_storage(with_no_resource_version(obj));
    let bytes = serde_json::to_vec(&stored).expect("a JSON value encodes");
    (bytes, stored)
}

fn with_no_resource_version(mut obj: Value) -> Value {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    obj
}

/// Whether `a` and `b` are the same object but perhaps for `metadata.resourceVersion`
/// (compared in place: an update that changes nothing is the common case of a retry).
fn same_but_resource_version(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    a.len() == b.len()
        && a.iter()
            .all(|(key, value)| match (key.as_str(), b.get(key)) {
                (_, None) => false,
                ("metadata", Some(other)) => match (value.as_object(), other.as_object()) {
                    (Some(x), Some(y)) => {
                        let fields = |m: &'_ Map<String, Value>| {
                            m.len() - usize::from(m.contains_key("resourceVersion"))
                        };
                        fields(x) == fields(y)
                            && x.iter().all(|(k, v)| {
                                k == "resourceVersion" || y.get(k).is_some_and(|w| v == w)
                            })
                    }
                    _ => value == other,
                },
                (_, Some(other)) => value == other,
            })
}

/// How deep a stored value may nest. Request parsers each stop at 128 levels and the server
/// adds a few (managedFields' sets), so whatever keel wrote reads back; a deeper value (written
/// straight into the store) is answered as a decode error rather than read on a worker
/// thread's stack until it overflows.
pub(super) const MAX_STORED_DEPTH: usize = 1000;

/// Parses a stored value without serde_json's recursion limit of 128 (whatever the request
/// parsers accepted, plus what the server adds, must always read back, or one object would
/// make its whole resource unreadable), but refuses one nested deeper than
/// [`MAX_STORED_DEPTH`].
pub(super) fn parse_stored(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    use serde::Deserialize;
    use serde::de::Error;
    if crate::nesting::depth(bytes) > MAX_STORED_DEPTH {
        return Err(serde_json::Error::custom(format!(
            "nested deeper than {MAX_STORED_DEPTH} levels"
        )));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let value = Value::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// A stored object in `kind`'s form, with its resourceVersion set.
pub(super) fn decode(kind: &dyn Strategy, object: &Object) -> Result<Value, Status> {
    let info = kind.info();
    let value: Value = parse_stored(&object.value).map_err(|e| {
        Status::internal(format!(
            "object at {} is not a JSON {}: {e}",
            object.key, info.kind
        ))
    })?;
    if !value.is_object() {
        return Err(Status::internal(format!(
            "object at {} is not a JSON object",
            object.key
        )));
    }
    let mut value = kind.to_served(value);
    meta::metadata(&mut value).insert(
        "resourceVersion".into(),
        object.mod_revision.to_string().into(),
    );
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_that_differ_only_in_resource_version_are_the_same() {
        let at = |rv: Option<&str>, data: &str| {
            let mut obj =
                json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": data}});
            if let Some(rv) = rv {
                obj["metadata"]["resourceVersion"] = rv.into();
            }
            obj
        };
        assert!(same_but_resource_version(
            &at(Some("1"), "x"),
            &at(Some("2"), "x")
        ));
        assert!(same_but_resource_version(
            &at(None, "x"),
            &at(Some("2"), "x")
        ));
        assert!(same_but_resource_version(
            &at(Some("1"), "x"),
            &at(None, "x")
        ));
        assert!(!same_but_resource_version(
            &at(Some("1"), "x"),
            &at(Some("1"), "y")
        ));
        let mut labelled = at(Some("1"), "x");
        labelled["metadata"]["labels"] = json!({"a": "b"});
        assert!(!same_but_resource_version(&labelled, &at(Some("1"), "x")));
        assert!(!same_but_resource_version(&at(Some("1"), "x"), &labelled));
        let mut extra = at(None, "x");
        extra["spec"] = json!({});
        assert!(!same_but_resource_version(&extra, &at(None, "x")));
        for (a, b) in [(&extra, &at(None, "x")), (&labelled, &labelled)] {
            assert_eq!(
                same_but_resource_version(a, b),
                with_no_resource_version(a.clone()) == with_no_resource_version(b.clone())
            );
        }
    }

    #[test]
    fn stored_values_read_back_deep_but_not_deeper_than_the_limit() {
        let nested = |depth: usize| {
            let mut text = "[".repeat(depth);
            text.push_str(&"]".repeat(depth));
            text
        };
        assert!(parse_stored(nested(MAX_STORED_DEPTH).as_bytes()).is_ok());
        let err = parse_stored(nested(MAX_STORED_DEPTH + 1).as_bytes()).unwrap_err();
        assert!(err.to_string().contains("nested deeper than 1000"), "{err}");
        // Far past what a worker thread's stack would survive: an error, not a crash.
        assert!(parse_stored(nested(100_000).as_bytes()).is_err());
    }
}
