//! The `StorageObjectInUseProtection` admission plugin
//! (plugin/pkg/admission/storage/storageobjectinuseprotection/admission.go): a new
//! PersistentVolumeClaim gets the `kubernetes.io/pvc-protection` finalizer and a new
//! PersistentVolume `kubernetes.io/pv-protection`, unless they have it; the pvc- and
//! pv-protection controllers (`controllers::volume_protection`) remove them once the object
//! being deleted is no longer in use.

use serde_json::Value;

use crate::registry::{Strategy, meta};

/// The plugin's name.
pub const PLUGIN: &str = "StorageObjectInUseProtection";

/// `volumeutil.PVCProtectionFinalizer`.
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";

/// `volumeutil.PVProtectionFinalizer`.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

/// The finalizer protecting objects of `kind`, if any (core claims and volumes).
pub fn finalizer_of(kind: &dyn Strategy) -> Option<&'static str> {
    let info = kind.info();
    match (info.group, info.resource) {
        ("", "persistentvolumeclaims") => Some(PVC_PROTECTION),
        ("", "persistentvolumes") => Some(PV_PROTECTION),
        _ => None,
    }
}

/// `Admit` on a new object: its kind's protection finalizer appended when missing.
pub fn admit_new(kind: &dyn Strategy, obj: &mut Value) {
    let Some(finalizer) = finalizer_of(kind) else {
        return;
    };
    let metadata = meta::metadata(obj);
    let finalizers = metadata
        .entry("finalizers")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !finalizers.is_array() {
        *finalizers = Value::Array(Vec::new());
    }
    if let Some(list) = finalizers.as_array_mut()
        && !list.iter().any(|f| f == finalizer)
    {
        list.push(finalizer.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::persistentvolumeclaims::PersistentVolumeClaims;
    use crate::registry::persistentvolumes::PersistentVolumes;
    use crate::registry::pods::Pods;
    use serde_json::json;

    #[test]
    fn claims_and_volumes_get_their_finalizer_once() {
        let mut claim = json!({"metadata": {"name": "c", "finalizers": ["example.com/keep"]}});
        admit_new(&PersistentVolumeClaims, &mut claim);
        assert_eq!(
            claim["metadata"]["finalizers"],
            json!(["example.com/keep", "kubernetes.io/pvc-protection"])
        );
        admit_new(&PersistentVolumeClaims, &mut claim);
        assert_eq!(claim["metadata"]["finalizers"].as_array().unwrap().len(), 2);
        let mut volume = json!({"metadata": {"name": "v"}});
        admit_new(&PersistentVolumes, &mut volume);
        assert_eq!(
            volume["metadata"]["finalizers"],
            json!(["kubernetes.io/pv-protection"])
        );
        let mut pod = json!({"metadata": {"name": "p"}});
        admit_new(&Pods, &mut pod);
        assert_eq!(pod, json!({"metadata": {"name": "p"}}));
    }
}
