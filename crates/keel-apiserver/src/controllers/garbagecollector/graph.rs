//! The garbage collector's view of the objects (`GraphBuilder`'s graph in
//! kube-controller-manager): each object's identity, owners, finalizers and whether it is
//! being deleted, kept by uid, with the dependents of every owner uid; and the decisions
//! `attemptToDeleteItem` makes from what it knows of an object's owners ([`decide`]).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::json_pointer::At;
use crate::registry::meta_str;
use crate::registry::store::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER, Propagation};

/// One ownerReference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    /// `apiVersion` of the owner.
    pub api_version: String,
    /// `kind` of the owner.
    pub kind: String,
    /// `name` of the owner.
    pub name: String,
    /// `uid` of the owner.
    pub uid: String,
    /// `blockOwnerDeletion`: a foreground deletion of the owner waits for this object.
    pub block: bool,
}

/// What the collector keeps of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Which of the monitored kinds it is (an index into the collector's kinds).
    pub kind: usize,
    /// Its namespace ("" for a cluster-scoped object).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// Its ownerReferences.
    pub owners: Vec<OwnerRef>,
    /// Its finalizers.
    pub finalizers: Vec<String>,
    /// Whether it has a deletionTimestamp.
    pub deleting: bool,
}

impl Meta {
    /// What the collector keeps of `obj`, an object of the monitored kind `kind`.
    pub fn of(kind: usize, obj: &Value) -> Meta {
        let owners = obj
            .at("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .map(|r| OwnerRef {
                        api_version: text(r, "apiVersion"),
                        kind: text(r, "kind"),
                        name: text(r, "name"),
                        uid: text(r, "uid"),
                        block: r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let finalizers = obj
            .at("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|f| {
                f.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Meta {
            kind,
            namespace: meta_str(obj, "namespace").to_string(),
            name: meta_str(obj, "name").to_string(),
            uid: meta_str(obj, "uid").to_string(),
            owners,
            finalizers,
            deleting: !meta_str(obj, "deletionTimestamp").is_empty(),
        }
    }

    fn has(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }

    /// Being deleted with its dependents orphaned first.
    pub fn orphaning(&self) -> bool {
        self.deleting && self.has(ORPHAN_FINALIZER)
    }

    /// Being deleted after its dependents (`foregroundDeletion`).
    pub fn deleting_dependents(&self) -> bool {
        self.deleting && self.has(FOREGROUND_FINALIZER)
    }

    /// The policy a delete of this object by the collector asks for, from its finalizers.
    pub fn own_policy(&self) -> Propagation {
        if self.has(ORPHAN_FINALIZER) {
            Propagation::Orphan
        } else if self.has(FOREGROUND_FINALIZER) {
            Propagation::Foreground
        } else {
            Propagation::Background
        }
    }
}

fn text(v: &Value, field: &str) -> String {
    v.get(field)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The objects by uid, with each owner uid's dependents.
#[derive(Default)]
pub struct Graph {
    nodes: HashMap<String, Meta>,
    dependents: HashMap<String, BTreeSet<String>>,
    /// `(kind, namespace, name)` to uid, to tell a recreated object from its predecessor.
    by_name: HashMap<(usize, String, String), String>,
}

impl Graph {
    /// The object `uid`.
    pub fn get(&self, uid: &str) -> Option<&Meta> {
        self.nodes.get(uid)
    }

    /// Every object known.
    pub fn all(&self) -> impl Iterator<Item = &Meta> {
        self.nodes.values()
    }

    /// The uids of the objects that name `owner` in their ownerReferences.
    pub fn dependents(&self, owner: &str) -> Vec<String> {
        self.dependents
            .get(owner)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Takes in an object's current state; the uid of the object it replaces under the same
    /// name, if that one is gone.
    pub fn upsert(&mut self, meta: Meta) -> Option<String> {
        let name = (meta.kind, meta.namespace.clone(), meta.name.clone());
        let replaced = self
            .by_name
            .insert(name, meta.uid.clone())
            .filter(|old| *old != meta.uid);
        if let Some(old) = &replaced {
            self.remove_node(old);
        }
        if let Some(old) = self.nodes.get(&meta.uid) {
            for owner in old.owners.clone() {
                self.unlink(&owner.uid, &meta.uid);
            }
        }
        for owner in &meta.owners {
            self.dependents
                .entry(owner.uid.clone())
                .or_default()
                .insert(meta.uid.clone());
        }
        self.nodes.insert(meta.uid.clone(), meta);
        replaced
    }

    /// The uid of the object `kind`/`namespace`/`name`, if it is known.
    pub fn get_uid(&self, kind: usize, namespace: &str, name: &str) -> Option<String> {
        self.by_name
            .get(&(kind, namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Forgets the object `kind`/`namespace`/`name`; its uid, if it was known.
    pub fn remove(&mut self, kind: usize, namespace: &str, name: &str) -> Option<String> {
        let uid = self
            .by_name
            .remove(&(kind, namespace.to_string(), name.to_string()))?;
        self.remove_node(&uid);
        Some(uid)
    }

    fn remove_node(&mut self, uid: &str) {
        if let Some(meta) = self.nodes.remove(uid) {
            for owner in &meta.owners {
                self.unlink(&owner.uid, uid);
            }
        }
    }

    fn unlink(&mut self, owner: &str, dependent: &str) {
        if let Some(set) = self.dependents.get_mut(owner) {
            set.remove(dependent);
            if set.is_empty() {
                self.dependents.remove(owner);
            }
        }
    }

    /// The known objects of `kind` (namespace, name), to tell which a new list left out.
    pub fn names_of(&self, kind: usize) -> Vec<(String, String)> {
        self.by_name
            .keys()
            .filter(|(k, _, _)| *k == kind)
            .map(|(_, ns, name)| (ns.clone(), name.clone()))
            .collect()
    }

    /// The dependents of `owner` whose reference to it blocks its foreground deletion.
    pub fn blocking(&self, owner: &str) -> Vec<String> {
        self.dependents(owner)
            .into_iter()
            .filter(|d| {
                self.nodes
                    .get(d)
                    .is_some_and(|m| m.owners.iter().any(|o| o.uid == owner && o.block))
            })
            .collect()
    }
}

/// What one owner of an object turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerState {
    /// It exists and is not being deleted after its dependents.
    Solid,
    /// It exists and waits for its dependents to be deleted (`foregroundDeletion`).
    Waiting,
    /// It does not exist (or another object has its name).
    Dangling,
    /// Its kind is not served: nothing can be said.
    Unknown,
}

/// What the collector does with an object, given its owners' states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing.
    Keep,
    /// Remove the references to these owner uids.
    DropReferences(Vec<String>),
    /// Delete the object with this policy.
    Delete(Propagation),
    /// Make its references non-blocking (a cycle of foreground deletions would otherwise
    /// wait forever); it is then deleted in the foreground.
    Unblock,
}

/// What an object's own dependents are, as [`decide`] needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dependents {
    /// It has none.
    None,
    /// It has some, none of them deleted after its own dependents.
    Some,
    /// One of them waits for its own dependents (`foregroundDeletion`): perhaps a cycle.
    Waiting,
}

/// `attemptToDeleteItem`'s decision for `item`, whose owners (in order) are in `states`, and
/// whose own dependents are `dependents`.
pub fn decide(item: &Meta, states: &[OwnerState], dependents: Dependents) -> Action {
    let of = |wanted: OwnerState| -> Vec<String> {
        item.owners
            .iter()
            .zip(states)
            .filter(|(_, s)| **s == wanted)
            .map(|(o, _)| o.uid.clone())
            .collect()
    };
    let (solid, waiting, dangling) = (
        of(OwnerState::Solid),
        of(OwnerState::Waiting),
        of(OwnerState::Dangling),
    );
    if item.owners.is_empty() || states.contains(&OwnerState::Unknown) {
        return Action::Keep;
    }
    if !solid.is_empty() {
        // A solid owner keeps it; references to owners that are gone, or that wait for
        // their dependents, are dropped so those owners are not held.
        let mut dropped = dangling;
        dropped.extend(waiting);
        return if dropped.is_empty() {
            Action::Keep
        } else {
            Action::DropReferences(dropped)
        };
    }
    if !waiting.is_empty() && dependents != Dependents::None {
        // Upstream's cycle guard: a dependent that also waits for its dependents may be
        // waiting for this object, so this object stops blocking its owners first.
        if dependents == Dependents::Waiting && item.owners.iter().any(|o| o.block) {
            return Action::Unblock;
        }
        return Action::Delete(Propagation::Foreground);
    }
    Action::Delete(item.own_policy())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(uid: &str, owners: &[(&str, bool)]) -> Meta {
        let refs: Vec<Value> = owners
            .iter()
            .map(|(o, block)| {
                json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": format!("rs-{o}"), "uid": o, "blockOwnerDeletion": block})
            })
            .collect();
        Meta::of(
            0,
            &json!({"metadata": {"name": format!("pod-{uid}"), "namespace": "default",
                "uid": uid, "ownerReferences": refs}}),
        )
    }

    #[test]
    fn dependents_are_indexed_by_owner_and_forgotten_with_their_objects() {
        let mut graph = Graph::default();
        graph.upsert(meta("p1", &[("o1", true)]));
        graph.upsert(meta("p2", &[("o1", false), ("o2", true)]));
        assert_eq!(graph.dependents("o1"), vec!["p1", "p2"]);
        assert_eq!(graph.blocking("o1"), vec!["p1"]);
        // An update that drops a reference unlinks it.
        graph.upsert(meta("p2", &[("o2", true)]));
        assert_eq!(graph.dependents("o1"), vec!["p1"]);
        assert_eq!(graph.remove(0, "default", "pod-p1"), Some("p1".to_string()));
        assert!(graph.dependents("o1").is_empty());
        // The same name with a new uid replaces the old object.
        let mut again = meta("p3", &[]);
        again.name = "pod-p2".into();
        assert_eq!(graph.upsert(again), Some("p2".to_string()));
        assert!(graph.dependents("o2").is_empty());
    }

    #[test]
    fn decisions_follow_attempt_to_delete_item() {
        use OwnerState::*;
        let one = meta("p", &[("a", true)]);
        let two = meta("p", &[("a", true), ("b", true)]);
        assert_eq!(decide(&one, &[Solid], Dependents::None), Action::Keep);
        assert_eq!(
            decide(&one, &[Dangling], Dependents::None),
            Action::Delete(Propagation::Background)
        );
        assert_eq!(decide(&one, &[Unknown], Dependents::None), Action::Keep);
        assert_eq!(
            decide(&two, &[Solid, Dangling], Dependents::None),
            Action::DropReferences(vec!["b".to_string()])
        );
        assert_eq!(
            decide(&two, &[Waiting, Solid], Dependents::None),
            Action::DropReferences(vec!["a".to_string()])
        );
        assert_eq!(
            decide(&one, &[Waiting], Dependents::Some),
            Action::Delete(Propagation::Foreground)
        );
        assert_eq!(
            decide(&one, &[Waiting], Dependents::None),
            Action::Delete(Propagation::Background)
        );
        // A dependent of its own that waits for its dependents: perhaps a cycle.
        assert_eq!(
            decide(&one, &[Waiting], Dependents::Waiting),
            Action::Unblock
        );
        let unblocked = meta("p", &[("a", false)]);
        assert_eq!(
            decide(&unblocked, &[Waiting], Dependents::Waiting),
            Action::Delete(Propagation::Foreground)
        );
        let mut orphaning = meta("p", &[("a", true)]);
        orphaning.finalizers = vec!["orphan".into()];
        assert_eq!(
            decide(&orphaning, &[Dangling], Dependents::None),
            Action::Delete(Propagation::Orphan)
        );
    }
}
