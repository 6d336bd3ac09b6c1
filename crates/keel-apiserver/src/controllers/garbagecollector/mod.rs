//! The garbage collector (kube-controller-manager's `garbagecollector`): objects whose
//! ownerReferences name only owners that are gone are deleted (background deletion); an
//! owner deleted with `propagationPolicy: Foreground` (the `foregroundDeletion` finalizer)
//! has its dependents deleted first and goes once none that blocks it is left; an owner
//! deleted with `Orphan` (the `orphan` finalizer) has its dependents' references to it
//! removed, then goes. The apiserver's delete sets those finalizers
//! ([`crate::registry::store::gc_finalizers`]); this carries them out.
//!
//! Every stored kind is monitored (a list, then a watch; a relist after a failure), custom
//! resources included as their CRDs come and go, and only what the collector needs of each
//! object is kept ([`graph`]). An owner missing from that view is looked up in the store
//! before its dependents are judged (upstream's "absent owner" check), so a monitor that
//! has not caught up never gets an object deleted. Work that fails is tried again every
//! few seconds.

mod graph;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::json_pointer::At;
use crate::registry::Strategy;
use crate::registry::store::{
    DeleteOptions, FOREGROUND_FINALIZER, ListQuery, ORPHAN_FINALIZER, Propagation, Registry,
};
use crate::storage::Status;
use graph::{Action, Dependents, Graph, Meta, OwnerState, decide};

/// How often the monitored kinds are compared with the served ones, and failed work is
/// tried again.
const RESYNC: Duration = Duration::from_secs(3);

/// What a monitor saw.
enum Seen {
    /// A full list of one kind.
    Listed(usize, Vec<Meta>),
    /// The kind cannot be listed (405): nothing of it is monitored.
    Unlisted(usize),
    /// An object added or changed.
    Changed(Meta),
    /// An object deleted: its kind, namespace and name.
    Deleted(usize, String, String),
}

/// One unit of work, by uid.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Work {
    /// Judge an object by its owners.
    Dependent(String),
    /// Carry out an owner's orphaning or foreground deletion.
    Owner(String),
}

/// How long the collector waits for every monitor's first list before it works anyway
/// (kube-controller-manager's `syncPeriod` given to `GarbageCollector.Run`): a kind that
/// cannot be listed (an object the store cannot decode) must not stop all collection.
const INITIAL_SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// One monitored kind.
struct Monitored {
    kind: &'static dyn Strategy,
    task: Option<JoinHandle<()>>,
    /// Whether its first list has been taken in.
    listed: bool,
    /// When its monitor was started.
    since: tokio::time::Instant,
}

impl Monitored {
    /// Whether its monitor runs (a task that ended, as one whose kind went away mid-list
    /// may, is started again).
    fn running(&self) -> bool {
        self.task.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Whether the collector waits for this monitor's first list before it works: it runs,
    /// has not listed, and was started less than [`INITIAL_SYNC_TIMEOUT`] ago.
    fn syncing(&self) -> bool {
        self.task.is_some() && !self.listed && self.since.elapsed() < INITIAL_SYNC_TIMEOUT
    }
}

struct Collector {
    registry: Arc<Registry>,
    kinds: Vec<Monitored>,
    graph: Graph,
    queue: BTreeSet<Work>,
    retry: BTreeSet<Work>,
    /// Whether the monitors that have not listed were named in a warning.
    warned: bool,
}

/// Runs the collector until the process ends.
pub async fn run(registry: Arc<Registry>) {
    let (seen, mut events) = mpsc::unbounded_channel();
    let mut collector = Collector {
        registry,
        kinds: Vec::new(),
        graph: Graph::default(),
        queue: BTreeSet::new(),
        retry: BTreeSet::new(),
        warned: false,
    };
    let mut resync = tokio::time::interval(RESYNC);
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { return };
                collector.take(event);
                while let Ok(event) = events.try_recv() {
                    collector.take(event);
                }
            }
            _ = resync.tick() => {
                collector.monitor(&seen);
                let retry = std::mem::take(&mut collector.retry);
                collector.queue.extend(retry);
                let unlisted: Vec<&str> = collector
                    .kinds
                    .iter()
                    .filter(|m| !m.listed && m.task.is_some())
                    .map(|m| m.kind.info().resource)
                    .collect();
                if !unlisted.is_empty() {
                    tracing::debug!(?unlisted, queued = collector.queue.len(),
                        "garbage collector: waiting for the first lists");
                }
            }
        }
        // As upstream's collector waits for its monitors to sync: an owner judged before
        // its dependents' kind is listed would seem to have none (an orphaning would then
        // drop no reference, and the dependents would later be deleted as dangling). As
        // upstream's, it goes on after a while without the kinds that would not list.
        if collector.kinds.iter().any(Monitored::syncing) {
            continue;
        }
        collector.warn_unsynced();
        collector.work().await;
    }
}

/// The kinds worth monitoring: stored ones, one version of each resource.
fn same_store(a: &dyn Strategy, b: &dyn Strategy) -> bool {
    a.storage_resource() == b.storage_resource() && a.key_resource() == b.key_resource()
}

impl Collector {
    /// Says once which monitors have not listed their kind in time (an object the store
    /// cannot decode, for one): the collector works without them.
    fn warn_unsynced(&mut self) {
        let unlisted: Vec<&str> = self
            .kinds
            .iter()
            .filter(|m| m.task.is_some() && !m.listed)
            .map(|m| m.kind.info().resource)
            .collect();
        if !unlisted.is_empty() && !self.warned {
            tracing::warn!(
                ?unlisted,
                "garbage collector: not all resource monitors could be synced, proceeding anyway"
            );
        }
        self.warned = !unlisted.is_empty();
    }

    /// Starts a monitor for every stored kind not yet monitored, and stops those of kinds no
    /// longer served (a deleted CRD's), forgetting their objects.
    fn monitor(&mut self, seen: &mpsc::UnboundedSender<Seen>) {
        let served = self.registry.kinds();
        for (index, monitored) in self.kinds.iter_mut().enumerate() {
            let gone = !served.iter().any(|k| same_store(*k, monitored.kind));
            // A version no longer served whose objects another version serves (a CRD's
            // version retired): monitored again through the served one, below.
            let retired = !gone && !served.iter().any(|k| std::ptr::addr_eq(*k, monitored.kind));
            if retired && let Some(task) = monitored.task.take() {
                task.abort();
            }
            if gone && let Some(task) = monitored.task.take() {
                task.abort();
                monitored.listed = false;
                for (ns, name) in self.graph.names_of(index) {
                    if let Some(uid) = self.graph.remove(index, &ns, &name) {
                        for dependent in self.graph.dependents(&uid) {
                            self.queue.insert(Work::Dependent(dependent));
                        }
                    }
                }
            }
        }
        for kind in served.iter().copied() {
            if !kind.stored() {
                continue;
            }
            let known = self.kinds.iter().position(|m| same_store(m.kind, kind));
            let index = match known {
                Some(i) if self.kinds[i].running() => continue,
                Some(i) => i,
                None => {
                    self.kinds.push(Monitored {
                        kind,
                        task: None,
                        listed: false,
                        since: tokio::time::Instant::now(),
                    });
                    self.kinds.len() - 1
                }
            };
            // Objects whose owners are of a kind served only now (a new CRD's) were left
            // alone while their owners' kind was unknown: judge them again.
            let info = kind.info();
            let named: Vec<String> = self
                .graph
                .all()
                .filter(|m| {
                    m.owners.iter().any(|o| {
                        o.kind == info.kind
                            && o.api_version.split_once('/').map_or("", |(g, _)| g) == info.group
                    })
                })
                .map(|m| m.uid.clone())
                .collect();
            self.queue.extend(named.into_iter().map(Work::Dependent));
            let task = tokio::spawn(follow(self.registry.clone(), kind, index, seen.clone()));
            self.kinds[index] = Monitored {
                kind,
                task: Some(task),
                listed: false,
                since: tokio::time::Instant::now(),
            };
        }
    }

    /// Takes in what a monitor saw, queueing the work it calls for.
    fn take(&mut self, seen: Seen) {
        match seen {
            Seen::Unlisted(kind) => self.kinds[kind].listed = true,
            Seen::Listed(kind, objects) => {
                self.kinds[kind].listed = true;
                let listed: BTreeSet<(String, String)> = objects
                    .iter()
                    .map(|m| (m.namespace.clone(), m.name.clone()))
                    .collect();
                for (ns, name) in self.graph.names_of(kind) {
                    if !listed.contains(&(ns.clone(), name.clone())) {
                        self.take(Seen::Deleted(kind, ns, name));
                    }
                }
                for meta in objects {
                    self.take(Seen::Changed(meta));
                }
            }
            Seen::Changed(meta) => {
                let before = self.graph.get(&meta.uid).cloned();
                if meta.orphaning() || meta.deleting_dependents() {
                    self.queue.insert(Work::Owner(meta.uid.clone()));
                }
                let owners_changed = before.as_ref().is_none_or(|b| b.owners != meta.owners);
                if !meta.owners.is_empty() && (owners_changed || meta.deleting) {
                    self.queue.insert(Work::Dependent(meta.uid.clone()));
                }
                // The owners it named before too: a reference dropped or no longer blocking
                // may have been the last that held an owner's foreground deletion.
                if let Some(before) = &before {
                    self.owners_waiting(before);
                }
                self.owners_waiting(&meta);
                if let Some(replaced) = self.graph.upsert(meta) {
                    self.owner_gone(&replaced);
                }
            }
            Seen::Deleted(kind, ns, name) => {
                let Some(uid) = self.graph.get_uid(kind, &ns, &name) else {
                    return;
                };
                if let Some(meta) = self.graph.get(&uid).cloned() {
                    self.owners_waiting(&meta);
                }
                self.graph.remove(kind, &ns, &name);
                self.owner_gone(&uid);
            }
        }
    }

    /// Queues the owners of `meta` that wait for their dependents: it may have been the last
    /// one blocking them.
    fn owners_waiting(&mut self, meta: &Meta) {
        for owner in &meta.owners {
            if self
                .graph
                .get(&owner.uid)
                .is_some_and(Meta::deleting_dependents)
            {
                self.queue.insert(Work::Owner(owner.uid.clone()));
            }
        }
    }

    /// Queues the dependents of the owner `uid`, which is gone.
    fn owner_gone(&mut self, uid: &str) {
        for dependent in self.graph.dependents(uid) {
            self.queue.insert(Work::Dependent(dependent));
        }
    }

    /// Does the queued work; what fails waits for the next resync.
    async fn work(&mut self) {
        while let Some(work) = self.queue.pop_first() {
            let done = match &work {
                Work::Dependent(uid) => self.dependent(uid).await,
                Work::Owner(uid) => self.owner(uid).await,
            };
            if let Err(status) = done {
                tracing::debug!(?work, error = %status.message, "garbage collector: will retry");
                self.retry.insert(work);
            }
        }
    }

    /// Judges the object `uid` by its owners and acts on it: first from the collector's
    /// view, then, before anything is changed, again from the object as the store has it
    /// now (as upstream's `attemptToDeleteItem` reads the latest object), so a reference a
    /// client has just changed is never acted on from an old view.
    async fn dependent(&mut self, uid: &str) -> Result<(), Status> {
        let Some(cached) = self.graph.get(uid).cloned() else {
            return Ok(());
        };
        if self.judge(&cached).await? == Action::Keep {
            return Ok(());
        }
        let ns = (!cached.namespace.is_empty()).then_some(cached.namespace.as_str());
        let live = match self
            .registry
            .get(self.kind_of(&cached), ns, &cached.name, "")
            .await
        {
            Ok(live) => live,
            Err(status) if status.code == 404 => return Ok(()),
            Err(status) => return Err(status),
        };
        let item = Meta::of(cached.kind, &live);
        if item.uid != cached.uid {
            return Ok(());
        }
        let resource_version = crate::registry::meta_str(&live, "resourceVersion").to_string();
        match self.judge(&item).await? {
            Action::Keep => Ok(()),
            Action::Delete(_) if item.deleting => Ok(()),
            Action::Delete(policy) => self.delete(&item, &resource_version, policy).await,
            Action::DropReferences(uids) => self.drop_references(&item, &uids).await,
            // The change comes back as an event, and the object is judged again.
            Action::Unblock => self.unblock(&item).await,
        }
    }

    /// What `attemptToDeleteItem` would do with `item`.
    async fn judge(&self, item: &Meta) -> Result<Action, Status> {
        let mut states = Vec::new();
        for owner in &item.owners {
            states.push(self.owner_state(item, owner).await?);
        }
        let dependents = self.graph.dependents(&item.uid);
        let dependents = if dependents
            .iter()
            .any(|d| self.graph.get(d).is_some_and(Meta::deleting_dependents))
        {
            Dependents::Waiting
        } else if dependents.is_empty() {
            Dependents::None
        } else {
            Dependents::Some
        };
        Ok(decide(item, &states, dependents))
    }

    /// What the owner `owner` of `item` is: from the collector's view, else from the store.
    async fn owner_state(
        &self,
        item: &Meta,
        owner: &graph::OwnerRef,
    ) -> Result<OwnerState, Status> {
        let Some(kind) = self.owner_kind(owner) else {
            return Ok(OwnerState::Unknown);
        };
        let namespace = if kind.info().namespaced {
            if item.namespace.is_empty() {
                // A cluster-scoped object cannot be owned by a namespaced one: the reference
                // is invalid, and upstream's collector leaves the object alone.
                tracing::warn!(name = %item.name, owner = %owner.name,
                    "garbage collector: a cluster-scoped object names a namespaced owner; left alone");
                return Ok(OwnerState::Unknown);
            }
            Some(item.namespace.as_str())
        } else {
            None
        };
        let state = |meta: &Meta| {
            if meta.deleting_dependents() {
                OwnerState::Waiting
            } else {
                OwnerState::Solid
            }
        };
        if let Some(known) = self.graph.get(&owner.uid)
            && self.is_named_by(known, owner, namespace)
        {
            return Ok(state(known));
        }
        match self.registry.get(kind, namespace, &owner.name, "").await {
            Ok(obj) => {
                let found = Meta::of(usize::MAX, &obj);
                Ok(if found.uid == owner.uid {
                    state(&found)
                } else {
                    OwnerState::Dangling
                })
            }
            Err(status) if status.code == 404 => Ok(OwnerState::Dangling),
            Err(status) => Err(status),
        }
    }

    /// The served kind an ownerReference names (its version, else another of the group's).
    fn owner_kind(&self, owner: &graph::OwnerRef) -> Option<&'static dyn Strategy> {
        let (group, version) = match owner.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", owner.api_version.as_str()),
        };
        let kinds = self.registry.kinds();
        let named = |k: &&&'static dyn Strategy| {
            let info = k.info();
            info.group == group && info.kind == owner.kind
        };
        let found = kinds
            .iter()
            .filter(named)
            .find(|k| k.info().version == version);
        found.or_else(|| kinds.iter().find(named)).copied()
    }

    /// The kind `item` is read and written as: its monitor's.
    fn kind_of(&self, item: &Meta) -> &'static dyn Strategy {
        self.kinds[item.kind].kind
    }

    /// Whether `known`, an object in the collector's view, is what `owner` (a reference of
    /// an object in `namespace`) names: its uid and name, and also its kind and namespace,
    /// since upstream looks an owner up by the reference's kind in the dependent's
    /// namespace (a reference to another namespace or kind is dangling).
    fn is_named_by(&self, known: &Meta, owner: &graph::OwnerRef, namespace: Option<&str>) -> bool {
        let info = self.kinds[known.kind].kind.info();
        let group = owner.api_version.split_once('/').map_or("", |(g, _)| g);
        known.name == owner.name
            && info.kind == owner.kind
            && info.group == group
            && known.namespace == namespace.unwrap_or("")
    }

    /// Deletes `item` (if it is still that object, at `resource_version`) with `policy`.
    async fn delete(
        &self,
        item: &Meta,
        resource_version: &str,
        policy: Propagation,
    ) -> Result<(), Status> {
        let options = DeleteOptions {
            uid: Some(item.uid.clone()),
            resource_version: Some(resource_version.to_string()),
            propagation: Some(policy),
            ..DeleteOptions::default()
        };
        let ns = (!item.namespace.is_empty()).then_some(item.namespace.as_str());
        tracing::info!(resource = self.kind_of(item).info().resource, namespace = %item.namespace,
            name = %item.name, ?policy, "garbage collector: deleting an object whose owners are gone");
        match self
            .registry
            .delete(self.kind_of(item), ns, &item.name, &options)
            .await
        {
            Ok(_) => Ok(()),
            Err(status) if status.code == 404 || status.code == 409 => Ok(()),
            Err(status) => Err(status),
        }
    }

    /// Removes `item`'s references to the owners `uids`.
    async fn drop_references(&self, item: &Meta, uids: &[String]) -> Result<(), Status> {
        self.rewrite(item, |obj| {
            if let Some(refs) = obj
                .at_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| {
                    let uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
                    !uids.iter().any(|u| u == uid)
                });
                if refs.is_empty()
                    && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
                {
                    meta.remove("ownerReferences");
                }
            }
        })
        .await
    }

    /// Makes `item`'s ownerReferences non-blocking (`unblockOwnerReferences`).
    async fn unblock(&self, item: &Meta) -> Result<(), Status> {
        tracing::info!(namespace = %item.namespace, name = %item.name,
            "garbage collector: an owner and a dependent both wait for their dependents; the references are made non-blocking to end a possible cycle");
        self.rewrite(item, |obj| {
            for r in obj
                .at_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if r.get("blockOwnerDeletion") == Some(&Value::Bool(true)) {
                    r["blockOwnerDeletion"] = Value::Bool(false);
                }
            }
        })
        .await
    }

    /// Updates `item` (if it is still that object) with `change`.
    async fn rewrite(&self, item: &Meta, change: impl Fn(&mut Value)) -> Result<(), Status> {
        let ns = (!item.namespace.is_empty()).then_some(item.namespace.as_str());
        let written = self
            .registry
            .update(self.kind_of(item), ns, &item.name, None, false, |current| {
                let mut obj = current
                    .filter(|c| crate::registry::meta_str(c, "uid") == item.uid)
                    .cloned()
                    .ok_or_else(|| Status::failure(404, "NotFound", "gone".into()))?;
                change(&mut obj);
                Ok(obj)
            })
            .await;
        match written {
            Ok(_) => Ok(()),
            Err(status) if status.code == 404 => Ok(()),
            Err(status) => Err(status),
        }
    }

    /// Carries out the deletion of the owner `uid`: orphans its dependents, or deletes them
    /// first; then removes the finalizer that held it.
    async fn owner(&mut self, uid: &str) -> Result<(), Status> {
        let Some(owner) = self.graph.get(uid).cloned() else {
            return Ok(());
        };
        let finalizer = if owner.orphaning() {
            for dependent in self.graph.dependents(uid) {
                if let Some(item) = self.graph.get(&dependent).cloned() {
                    self.drop_references(&item, &[uid.to_string()]).await?;
                }
            }
            ORPHAN_FINALIZER
        } else if owner.deleting_dependents() {
            let blocking = self.graph.blocking(uid);
            if !blocking.is_empty() {
                for dependent in self.graph.dependents(uid) {
                    if self.graph.get(&dependent).is_some_and(|d| !d.deleting) {
                        self.queue.insert(Work::Dependent(dependent));
                    }
                }
                return Ok(());
            }
            FOREGROUND_FINALIZER
        } else {
            return Ok(());
        };
        self.rewrite(&owner, |obj| {
            if let Some(f) = obj
                .at_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            {
                f.retain(|v| v != finalizer);
            }
        })
        .await
    }
}

/// Lists `kind`, then watches it, sending what it sees; again after a failure, until the
/// collector stops it. A kind that cannot be listed (405) is not monitored.
async fn follow(
    registry: Arc<Registry>,
    kind: &'static dyn Strategy,
    index: usize,
    seen: mpsc::UnboundedSender<Seen>,
) {
    loop {
        let round = async {
            let list = registry.list(kind, None, &ListQuery::default()).await?;
            let objects = list.objects().map(|o| Meta::of(index, o)).collect();
            let _ = seen.send(Seen::Listed(index, objects));
            let mut watching = registry
                .watch(kind, None, list.resource_version(), None)
                .await?;
            while let Some(event) = watching.next().await {
                let event = event?;
                let meta = Meta::of(index, &event.object);
                let _ = seen.send(match event.kind {
                    "DELETED" => Seen::Deleted(index, meta.namespace, meta.name),
                    "BOOKMARK" => continue,
                    _ => Seen::Changed(meta),
                });
            }
            Ok::<(), Status>(())
        };
        match round.await {
            Err(status) if status.code == 405 => {
                let _ = seen.send(Seen::Unlisted(index));
                return;
            }
            Err(status) => tracing::debug!(resource = kind.info().resource,
                error = %status.message, "garbage collector: listing again"),
            Ok(()) => {}
        }
        if seen.is_closed() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
