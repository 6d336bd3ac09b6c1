//! The kinds the registry serves for custom resources: each established CRD's served
//! versions ([`Registry::serve_custom`]), and the one kind a terminating CRD that serves no
//! version is held by for its cleanup ([`Registry::hold_for_cleanup`]) — reachable by the
//! registry's own verbs, so the CRD's objects are deleted through storage, but never served:
//! no discovery document lists it and no request finds it, as upstream's finalizer deletes
//! through the storage version's store without serving it.

use std::sync::Arc;

use super::{KindSet, Kinds, Registry, same_kind};
use crate::registry::Strategy;

impl Registry {
    /// Serves `kinds` as the kinds of the CRD `crd` (none: it serves nothing), in place of
    /// what it served before; `changed`: some of them changed in place since. A kind it served
    /// already keeps its storage and watch cache; a kind a built-in kind serves already is
    /// left out.
    pub fn serve_custom(&self, crd: &str, kinds: Vec<&'static dyn Strategy>, changed: bool) {
        let mut served = self.served.write().unwrap_or_else(|p| p.into_inner());
        let before = served.0.custom.get(crd).cloned().unwrap_or_default();
        let unchanged = before.len() == kinds.len()
            && before
                .iter()
                .zip(&kinds)
                .all(|(a, b)| std::ptr::addr_eq(*a, *b));
        let mut next = KindSet::clone(&served.0);
        if unchanged {
            // The same kinds, whose CRD changed (its schema, columns, names: they are updated
            // in place): what is made from the set is made again.
            if changed && !before.is_empty() {
                next.generation += 1;
                *served = Kinds(Arc::new(next));
            }
            return;
        }
        for old in &before {
            if let Some(i) = next.kinds.iter().position(|k| same_kind(*k, *old)) {
                next.kinds.remove(i);
                next.storages.remove(i);
            }
        }
        let mut added = Vec::new();
        for kind in kinds {
            if next.kinds.iter().any(|k| same_kind(*k, kind)) {
                tracing::warn!(
                    crd,
                    resource = kind.info().resource,
                    "a CRD names a kind served already"
                );
                continue;
            }
            let storage = served
                .0
                .kinds
                .iter()
                .position(|k| std::ptr::addr_eq(*k, kind))
                .map(|i| served.0.storages[i].clone())
                .unwrap_or_else(|| self.storage_for(kind));
            next.kinds.push(kind);
            next.storages.push(storage);
            added.push(kind);
        }
        if added.is_empty() {
            next.custom.remove(crd);
        } else {
            next.custom.insert(crd.to_string(), added);
        }
        next.generation += 1;
        *served = Kinds(Arc::new(next));
    }

    /// The kinds the CRD `crd` serves.
    pub fn custom_kinds(&self, crd: &str) -> Vec<&'static dyn Strategy> {
        let served = self.served.read().unwrap_or_else(|p| p.into_inner());
        served.0.custom.get(crd).cloned().unwrap_or_default()
    }

    /// Holds `kind` (a version the terminating CRD `crd` does not serve) for the CRD's
    /// cleanup, in place of what it held (None: lets go). The kind keeps the storage and
    /// watch cache it had if it was served before; nothing served changes.
    pub fn hold_for_cleanup(&self, crd: &str, kind: Option<&'static dyn Strategy>) {
        let mut served = self.served.write().unwrap_or_else(|p| p.into_inner());
        let held = served.0.cleanup.get(crd).map(|(k, _)| *k);
        if match (held, kind) {
            (Some(a), Some(b)) => std::ptr::addr_eq(a, b),
            (None, None) => true,
            _ => false,
        } {
            return;
        }
        let mut next = KindSet::clone(&served.0);
        match kind {
            None => {
                next.cleanup.remove(crd);
            }
            Some(kind) => {
                let storage = served
                    .0
                    .kinds
                    .iter()
                    .position(|k| same_kind(*k, kind))
                    .map(|i| served.0.storages[i].clone())
                    .unwrap_or_else(|| self.storage_for(kind));
                next.cleanup.insert(crd.to_string(), (kind, storage));
            }
        }
        *served = Kinds(Arc::new(next));
    }
}
