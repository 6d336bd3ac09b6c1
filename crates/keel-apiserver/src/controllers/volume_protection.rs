//! kube-controller-manager's `pvc-protection` and `pv-protection` controllers
//! (pkg/controller/volume/pvcprotection, pkg/controller/volume/pvprotection): they remove the
//! finalizer the `StorageObjectInUseProtection` admission plugin puts on every claim
//! (`kubernetes.io/pvc-protection`) and volume (`kubernetes.io/pv-protection`) once the
//! object is being deleted and nothing uses it, and add it to one that lacks it (made before
//! the plugin ran, or with the plugin off).
//!
//! A claim is in use while a pod of its namespace scheduled to a node (`spec.nodeName` set)
//! has it as a volume (`persistentVolumeClaim.claimName`), or as the generic ephemeral volume
//! it owns, unless that pod is shut down (deleted with a zero grace period). As upstream, the
//! pods' informer is asked first and a live list of the namespace's pods has the last word,
//! so a pod the informer has not seen yet still counts. A volume is in use while it is
//! `Bound`.
//!
//! The objects are followed by [`Informer`]s. A claim or volume that changes is synced; any
//! change of a pod syncs its namespace's claims being deleted (upstream enqueues the pod's
//! own claims; a deleted pod's volumes are no longer known here, so the namespace stands in).
//! A failed sync is tried again a second later. The finalizer is written on the informer's
//! copy (its resourceVersion), so a stale copy is a conflict, retried once the informer
//! caught up.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use super::informer::Informer;
use crate::apimachinery::time::Time;
use crate::fieldmanager::FieldManager;
use crate::json_pointer::At;
use crate::registry::admission::storage_object_in_use_protection::{PV_PROTECTION, PVC_PROTECTION};
use crate::registry::store::{ListQuery, Registry};
use crate::registry::{Strategy, meta_str};
use crate::storage::Status;

/// The first retry of a failed pass, doubled on every failure after it up to [`MAX_RETRY`]
/// (workqueue's default rate limiter: 5 ms to 1000 s).
const FIRST_RETRY: Duration = Duration::from_millis(5);
/// The longest wait before a failed pass is tried again.
const MAX_RETRY: Duration = Duration::from_secs(1000);

/// The field manager of the controllers' writes.
const MANAGER: &str = "kube-controller-manager";

fn finalizers(obj: &Value) -> impl Iterator<Item = &str> {
    obj.at("/metadata/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// `protectionutil.IsDeletionCandidate`: being deleted, and still holding `finalizer`.
pub fn is_deletion_candidate(obj: &Value, finalizer: &str) -> bool {
    !meta_str(obj, "deletionTimestamp").is_empty() && finalizers(obj).any(|f| f == finalizer)
}

/// `protectionutil.NeedToAddFinalizer`: not being deleted, and without `finalizer`.
pub fn need_to_add_finalizer(obj: &Value, finalizer: &str) -> bool {
    meta_str(obj, "deletionTimestamp").is_empty() && !finalizers(obj).any(|f| f == finalizer)
}

/// `podIsShutDown`: deleted with a zero grace period (done by the kubelet, or forced).
fn pod_is_shut_down(pod: &Value) -> bool {
    !meta_str(pod, "deletionTimestamp").is_empty()
        && pod
            .at("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            == Some(0)
}

/// `ephemeral.VolumeIsForPod`: the claim's controlling owner is the pod.
fn claim_is_for_pod(claim: &Value, pod: &Value) -> bool {
    claim
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .is_some_and(|r| r.get("uid").and_then(Value::as_str) == Some(meta_str(pod, "uid")))
}

/// `podUsesPVC`: whether the scheduled `pod` uses `claim` (of the same namespace).
pub fn pod_uses_claim(pod: &Value, claim: &Value) -> bool {
    let scheduled = pod
        .at("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if !scheduled || meta_str(pod, "namespace") != meta_str(claim, "namespace") {
        return false;
    }
    let name = meta_str(claim, "name");
    let volumes = pod.at("/spec/volumes").and_then(Value::as_array);
    volumes.into_iter().flatten().any(|volume| {
        let claimed = volume
            .at("/persistentVolumeClaim/claimName")
            .and_then(Value::as_str);
        // `ephemeral.VolumeClaimName`: `<pod>-<volume>`.
        let ephemeral = volume.get("ephemeral").is_some_and(|e| !e.is_null())
            && format!(
                "{}-{}",
                meta_str(pod, "name"),
                volume.get("name").and_then(Value::as_str).unwrap_or("")
            ) == name;
        claimed == Some(name)
            || (!pod_is_shut_down(pod) && ephemeral && claim_is_for_pod(claim, pod))
    })
}

/// `isBeingUsed` of the pv-protection controller: the volume is bound to a claim.
pub fn volume_in_use(volume: &Value) -> bool {
    volume.at("/status/phase").and_then(Value::as_str) == Some("Bound")
}

/// The keys waiting for a sync, and how many passes failed in a row (which sets the retry).
#[derive(Default)]
struct Queue {
    keys: BTreeSet<String>,
    /// Passes failed in a row (an informer not synced yet, or a sync refused).
    failures: u32,
}

impl Queue {
    /// How long to wait for news before syncing what is queued again: after failures, a
    /// delay that doubles with each ([`FIRST_RETRY`] to [`MAX_RETRY`]).
    fn wait(&self) -> Duration {
        match self.failures {
            0 => Duration::from_secs(3600),
            n => FIRST_RETRY
                .saturating_mul(1 << (n - 1).min(30))
                .min(MAX_RETRY),
        }
    }

    /// Records how a pass ended.
    fn passed(&mut self, ok: bool) {
        self.failures = if ok {
            0
        } else {
            self.failures.saturating_add(1)
        };
    }
}

/// The object's protection `finalizer` removed (`in_use` false, it being deleted) or added
/// (it lacking it, not being deleted), as `processPVC` and `processPV` do; `obj` is the
/// informer's copy.
async fn sync_finalizer(
    registry: &Registry,
    kind: &'static dyn Strategy,
    obj: &Value,
    finalizer: &str,
    in_use: bool,
) -> Result<(), Status> {
    let mut new = obj.clone();
    let action = if is_deletion_candidate(obj, finalizer) && !in_use {
        if let Some(list) = new
            .at_mut("/metadata/finalizers")
            .and_then(Value::as_array_mut)
        {
            list.retain(|f| f != finalizer);
        }
        "removed"
    } else if need_to_add_finalizer(obj, finalizer) {
        let metadata = crate::registry::meta::metadata(&mut new);
        let list = metadata
            .entry("finalizers")
            .or_insert_with(|| Value::Array(Vec::new()));
        match list.as_array_mut() {
            Some(list) => list.push(finalizer.into()),
            None => *list = Value::Array(vec![finalizer.into()]),
        }
        "added"
    } else {
        return Ok(());
    };
    let namespace = Some(meta_str(obj, "namespace")).filter(|ns| !ns.is_empty());
    let fields = FieldManager::new(kind, None, Time::now());
    let written = registry
        .update(
            kind,
            namespace,
            meta_str(obj, "name"),
            None,
            false,
            |current| {
                let mut made = new.clone();
                fields.update(current, &mut made, MANAGER);
                Ok(made)
            },
        )
        .await;
    match written {
        Ok(_) => {
            tracing::info!(
                resource = kind.info().resource,
                namespace = namespace.unwrap_or_default(),
                name = meta_str(obj, "name"),
                finalizer,
                "protection finalizer {action}"
            );
            Ok(())
        }
        Err(status) if status.code == 404 => Ok(()),
        Err(status) => Err(status),
    }
}

/// Runs the pvc-protection controller until the process ends.
pub async fn run_pvc(registry: Arc<Registry>) {
    let claims_kind = registry.core("persistentvolumeclaims");
    let (claim_sender, mut claim_changes) = mpsc::unbounded_channel();
    let (pod_sender, mut pod_changes) = mpsc::unbounded_channel();
    let claims = Informer::spawn(
        registry.clone(),
        claims_kind,
        None,
        None,
        Some(claim_sender),
    );
    let pods = Informer::spawn(
        registry.clone(),
        registry.core("pods"),
        None,
        None,
        Some(pod_sender),
    );
    let mut queue = Queue::default();
    loop {
        let mut namespaces = BTreeSet::new();
        tokio::select! {
            key = claim_changes.recv() => match key {
                Some(key) => { queue.keys.insert(key); }
                None => return,
            },
            key = pod_changes.recv() => match key {
                Some(key) => { namespaces.insert(namespace_of(&key)); }
                None => return,
            },
            _ = tokio::time::sleep(queue.wait()) => {}
        }
        while let Ok(key) = claim_changes.try_recv() {
            queue.keys.insert(key);
        }
        while let Ok(key) = pod_changes.try_recv() {
            namespaces.insert(namespace_of(&key));
        }
        for claim in claims.list() {
            if namespaces.contains(meta_str(&claim, "namespace"))
                && is_deletion_candidate(&claim, PVC_PROTECTION)
            {
                queue.keys.insert(Informer::key(&claim));
            }
        }
        if !claims.has_synced() || !pods.has_synced() {
            queue.passed(false);
            continue;
        }
        let mut ok = true;
        // `LazyLivePodList`: a namespace's pods listed live once a pass, when needed.
        let mut live = BTreeMap::new();
        for key in std::mem::take(&mut queue.keys) {
            let Some(claim) = claims.get(&key) else {
                continue;
            };
            if let Err(status) = sync_claim(&registry, &pods, &mut live, &claim).await {
                tracing::warn!(claim = %key, error = %status.message, "pvc protection: will retry");
                queue.keys.insert(key);
                ok = false;
            }
        }
        queue.passed(ok);
    }
}

fn namespace_of(key: &str) -> String {
    key.split_once('/').map_or("", |(ns, _)| ns).to_string()
}

/// `processPVC`: the claim's finalizer removed once nothing uses it, or added. `live` holds
/// the namespaces' pods listed live in this pass.
async fn sync_claim(
    registry: &Registry,
    pods: &Informer,
    live: &mut BTreeMap<String, Vec<Value>>,
    claim: &Value,
) -> Result<(), Status> {
    let namespace = meta_str(claim, "namespace");
    let in_use = is_deletion_candidate(claim, PVC_PROTECTION)
        && (pods
            .list_namespace(namespace)
            .iter()
            .any(|pod| pod_uses_claim(pod, claim))
            || {
                // `askInformer`, then `askAPIServer`.
                if !live.contains_key(namespace) {
                    let listed = registry
                        .list(
                            registry.core("pods"),
                            Some(namespace),
                            &ListQuery::default(),
                        )
                        .await?;
                    live.insert(namespace.to_string(), listed.objects().cloned().collect());
                }
                live[namespace].iter().any(|pod| pod_uses_claim(pod, claim))
            });
    if in_use {
        tracing::debug!(
            namespace = meta_str(claim, "namespace"),
            name = meta_str(claim, "name"),
            "keeping the claim: it is being used"
        );
    }
    let kind = registry.core("persistentvolumeclaims");
    sync_finalizer(registry, kind, claim, PVC_PROTECTION, in_use).await
}

/// Runs the pv-protection controller until the process ends.
pub async fn run_pv(registry: Arc<Registry>) {
    let kind = registry.core("persistentvolumes");
    let (sender, mut changes) = mpsc::unbounded_channel();
    let volumes = Informer::spawn(registry.clone(), kind, None, None, Some(sender));
    let mut queue = Queue::default();
    loop {
        match tokio::time::timeout(queue.wait(), changes.recv()).await {
            Ok(None) => return,
            Ok(Some(key)) => {
                queue.keys.insert(key);
            }
            Err(_) => {}
        }
        while let Ok(key) = changes.try_recv() {
            queue.keys.insert(key);
        }
        if !volumes.has_synced() {
            queue.passed(false);
            continue;
        }
        let mut ok = true;
        for key in std::mem::take(&mut queue.keys) {
            let Some(volume) = volumes.get(&key) else {
                continue;
            };
            // `processPV`.
            let in_use = volume_in_use(&volume);
            if let Err(status) =
                sync_finalizer(&registry, kind, &volume, PV_PROTECTION, in_use).await
            {
                tracing::warn!(volume = %key, error = %status.message, "pv protection: will retry");
                queue.keys.insert(key);
                ok = false;
            }
        }
        queue.passed(ok);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn failed_passes_back_off_from_5_ms_to_1000_s_and_a_good_one_resets() {
        let mut queue = Queue::default();
        assert_eq!(queue.wait(), Duration::from_secs(3600));
        let waits: Vec<Duration> = (0..4)
            .map(|_| {
                queue.passed(false);
                queue.wait()
            })
            .collect();
        assert_eq!(waits, [5, 10, 20, 40].map(Duration::from_millis).to_vec());
        for _ in 0..100 {
            queue.passed(false);
        }
        assert_eq!(queue.wait(), MAX_RETRY);
        queue.passed(true);
        assert_eq!(queue.wait(), Duration::from_secs(3600));
    }

    fn claim(deleting: bool, finalizers: Value) -> Value {
        let mut c = json!({"metadata": {"name": "data", "namespace": "ns", "uid": "c1",
                                        "finalizers": finalizers}});
        if deleting {
            c["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z".into();
        }
        c
    }

    /// `pod` deleted with a zero grace period.
    fn shut_down(pod: &Value) -> Value {
        let mut shut = pod.clone();
        shut["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z".into();
        shut["metadata"]["deletionGracePeriodSeconds"] = 0.into();
        shut
    }

    #[test]
    fn candidates_and_missing_finalizers_as_protectionutil_reads_them() {
        let held = claim(true, json!([PVC_PROTECTION]));
        assert!(is_deletion_candidate(&held, PVC_PROTECTION));
        assert!(!need_to_add_finalizer(&held, PVC_PROTECTION));
        let released = claim(true, json!([]));
        assert!(!is_deletion_candidate(&released, PVC_PROTECTION));
        assert!(!need_to_add_finalizer(&released, PVC_PROTECTION));
        let bare = claim(false, json!(["other"]));
        assert!(need_to_add_finalizer(&bare, PVC_PROTECTION));
        assert!(!is_deletion_candidate(&bare, PVC_PROTECTION));
    }

    #[test]
    fn a_claim_is_used_by_a_scheduled_pod_of_its_namespace() {
        let c = claim(true, json!([PVC_PROTECTION]));
        let pod = json!({"metadata": {"name": "web", "namespace": "ns", "uid": "p1"},
            "spec": {"nodeName": "n1", "volumes": [
                {"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}});
        assert!(pod_uses_claim(&pod, &c));
        let mut unscheduled = pod.clone();
        unscheduled["spec"]["nodeName"] = "".into();
        assert!(!pod_uses_claim(&unscheduled, &c));
        let mut elsewhere = pod.clone();
        elsewhere["metadata"]["namespace"] = "other".into();
        assert!(!pod_uses_claim(&elsewhere, &c));
        // A pod shut down still holds a claim it names, not an ephemeral one.
        assert!(pod_uses_claim(&shut_down(&pod), &c));
    }

    #[test]
    fn an_ephemeral_claim_is_used_by_the_pod_that_owns_it() {
        let mut c = claim(true, json!([PVC_PROTECTION]));
        c["metadata"]["name"] = "web-scratch".into();
        c["metadata"]["ownerReferences"] =
            json!([{"kind": "Pod", "name": "web", "uid": "p1", "controller": true}]);
        let pod = json!({"metadata": {"name": "web", "namespace": "ns", "uid": "p1"},
            "spec": {"nodeName": "n1", "volumes": [{"name": "scratch", "ephemeral": {}}]}});
        assert!(pod_uses_claim(&pod, &c));
        let mut other = pod.clone();
        other["metadata"]["uid"] = "p2".into();
        assert!(!pod_uses_claim(&other, &c));
        assert!(!pod_uses_claim(&shut_down(&pod), &c));
    }

    #[test]
    fn a_volume_is_used_while_bound() {
        assert!(volume_in_use(&json!({"status": {"phase": "Bound"}})));
        assert!(!volume_in_use(&json!({"status": {"phase": "Released"}})));
        assert!(!volume_in_use(&json!({"status": {"phase": "Available"}})));
        assert!(!volume_in_use(&json!({})));
    }
}
