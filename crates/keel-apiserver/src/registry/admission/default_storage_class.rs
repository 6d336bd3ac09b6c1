//! The `DefaultStorageClass` admission plugin
//! (plugin/pkg/admission/storage/storageclass/setdefault/admission.go): a new
//! PersistentVolumeClaim that asks for no class (no `spec.storageClassName`, not even `""`,
//! and no beta `volume.beta.kubernetes.io/storage-class` annotation) gets the default
//! StorageClass, the one annotated `storageclass.kubernetes.io/is-default-class: "true"` (or
//! its beta form); of several, the newest, and of those created in the same second the first
//! by name (`GetDefaultClass` in pkg/volume/util/storageclass.go, since 1.26). No default: the
//! claim is left as it is.

use serde_json::Value;

use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::registry::meta_str;
use crate::registry::storage_k8s_io::storage_classes::is_default;

/// The plugin's name.
pub const PLUGIN: &str = "DefaultStorageClass";

/// `v1.BetaStorageClassAnnotation`: a claim's class before `spec.storageClassName`.
const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// `GetDefaultClass`: the newest class marked default, by name among the equally new.
pub fn default_class(classes: &[Value]) -> Option<&Value> {
    let created = |c: &Value| Time::parse(meta_str(c, "creationTimestamp")).map_or(0, |t| t.0);
    classes.iter().filter(|c| is_default(c)).min_by(|a, b| {
        created(b)
            .cmp(&created(a))
            .then_with(|| meta_str(a, "name").cmp(meta_str(b, "name")))
    })
}

/// `PersistentVolumeClaimHasClass`: whether the claim names a class (`""` included).
fn has_class(claim: &Value) -> bool {
    claim
        .at("/spec/storageClassName")
        .is_some_and(|c| !c.is_null())
        || claim
            .at("/metadata/annotations")
            .and_then(|a| a.get(BETA_STORAGE_CLASS))
            .is_some()
}

/// `Admit` on a new claim: the default class set when it names none.
pub fn admit_new_claim(claim: &mut Value, classes: &[Value]) {
    if has_class(claim) {
        return;
    }
    let Some(default) = default_class(classes) else {
        return;
    };
    let name = meta_str(default, "name").to_string();
    if !claim.get("spec").is_some_and(Value::is_object) {
        claim["spec"] = Value::Object(Default::default());
    }
    claim["spec"]["storageClassName"] = name.into();
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(name: &str, created: &str, annotation: Option<&str>) -> Value {
        let annotations = match annotation {
            Some(key) => json!({key: "true"}),
            None => json!({}),
        };
        json!({"metadata": {"name": name, "creationTimestamp": created,
                            "annotations": annotations}})
    }

    const GA: &str = "storageclass.kubernetes.io/is-default-class";
    const BETA: &str = "storageclass.beta.kubernetes.io/is-default-class";

    #[test]
    fn a_claim_without_a_class_gets_the_newest_default() {
        let classes = vec![
            class("old", "2026-01-01T00:00:00Z", Some(GA)),
            class("plain", "2026-06-01T00:00:00Z", None),
            class("newer-b", "2026-03-01T00:00:00Z", Some(BETA)),
            class("newer-a", "2026-03-01T00:00:00Z", Some(GA)),
        ];
        let mut claim = json!({"spec": {"resources": {}}});
        admit_new_claim(&mut claim, &classes);
        assert_eq!(claim["spec"]["storageClassName"], "newer-a");
        let mut claim = json!({"spec": {}});
        admit_new_claim(&mut claim, &classes[..3]);
        assert_eq!(claim["spec"]["storageClassName"], "newer-b");
        let mut claim = json!({"spec": {}});
        admit_new_claim(&mut claim, &classes[1..2]);
        assert_eq!(claim, json!({"spec": {}}));
    }

    #[test]
    fn a_claim_that_names_a_class_keeps_it() {
        let classes = vec![class("default", "2026-01-01T00:00:00Z", Some(GA))];
        for claim in [
            json!({"spec": {"storageClassName": ""}}),
            json!({"spec": {"storageClassName": "fast"}}),
            json!({"metadata": {"annotations": {BETA_STORAGE_CLASS: "slow"}}, "spec": {}}),
        ] {
            let mut admitted = claim.clone();
            admit_new_claim(&mut admitted, &classes);
            assert_eq!(admitted, claim);
        }
        let mut null = json!({"spec": {"storageClassName": null}});
        admit_new_claim(&mut null, &classes);
        assert_eq!(null["spec"]["storageClassName"], "default");
    }
}
