//! The renewal shortcut (a Lease renewed by its holder) against the general update: the
//! same entries, taken only when it may be.

use super::*;

/// The general way to an update's entries, for comparing the renewal shortcut with it.
fn updated_the_long_way(kind: &dyn Strategy, live: &Value, mut new: Value, manager: &str) -> Value {
    let fm = FieldManager::new(kind, None, T2);
    fm.kind.set_defaults(&mut new);
    fm.try_update(Some(live), &mut new, manager).unwrap();
    new
}

#[test]
fn a_renewal_stamps_the_entry_as_the_general_update_would() {
    use crate::registry::leases::Leases;
    let lease = |spec: Value| {
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "n1", "namespace": "kube-node-lease",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u9"}]},
            "spec": spec,
        })
    };
    let live = created(
        &Leases,
        lease(
            json!({"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2024-01-01T00:00:00.000000Z"}),
        ),
        "kubelet",
    );
    let with_entries = |mut obj: Value, entries: Option<&Value>| {
        let meta = meta::metadata(&mut obj);
        for f in ["uid", "resourceVersion", "creationTimestamp"] {
            meta.insert(f.into(), live["metadata"][f].clone());
        }
        if let Some(e) = entries {
            meta.insert("managedFields".into(), e.clone());
        }
        obj
    };
    let stored = &live["metadata"]["managedFields"];
    let renewed = json!({"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2024-01-01T00:00:10.000000Z"});
    let cases = [
        // The shortcut's case: entries sent back, or left out.
        (
            "kubelet",
            with_entries(lease(renewed.clone()), Some(stored)),
            true,
        ),
        ("kubelet", with_entries(lease(renewed.clone()), None), true),
        // Another manager, a new field, a removed field, changed entries, nothing changed.
        (
            "other",
            with_entries(lease(renewed.clone()), Some(stored)),
            false,
        ),
        (
            "kubelet",
            with_entries(
                lease(json!({"holderIdentity": "n1", "leaseDurationSeconds": 40,
            "renewTime": "2024-01-01T00:00:10.000000Z", "leaseTransitions": 1})),
                Some(stored),
            ),
            false,
        ),
        (
            "kubelet",
            with_entries(
                lease(json!({"holderIdentity": "n1",
            "renewTime": "2024-01-01T00:00:10.000000Z"})),
                Some(stored),
            ),
            false,
        ),
        (
            "kubelet",
            with_entries(
                lease(renewed.clone()),
                Some(&json!([{"manager": "x", "operation": "Update",
            "apiVersion": "coordination.k8s.io/v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}])),
            ),
            false,
        ),
        (
            "kubelet",
            with_entries(
                lease(json!({"holderIdentity": "n1", "leaseDurationSeconds": 40,
            "renewTime": "2024-01-01T00:00:00.000000Z"})),
                Some(stored),
            ),
            false,
        ),
    ];
    for (i, (manager, new, shortcut)) in cases.into_iter().enumerate() {
        assert_renewal(&live, manager, new, shortcut, i);
    }
    // Entries written some other way than the field manager writes them go the general way.
    for (i, fields_v1) in [
        json!({"f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}, "f:renewTime": {".": {}}}}),
        json!({"f:metadata": {"f:labels": []}, "f:spec": {"f:renewTime": {}}}),
        json!({"f:spec": {"f:leaseDurationSeconds": {"x:y": {}}, "f:renewTime": {}}}),
    ]
    .into_iter()
    .enumerate()
    {
        let mut odd = live.clone();
        odd["metadata"]["managedFields"][0]["fieldsV1"] = fields_v1;
        let stored = odd["metadata"]["managedFields"].clone();
        let new = with_entries(lease(renewed.clone()), Some(&stored));
        assert_renewal(&odd, "kubelet", new, false, 100 + i);
    }
}

/// Checks that the renewal shortcut takes the Lease update (`shortcut`) or not, and that the
/// update gives what the general way gives.
fn assert_renewal(live: &Value, manager: &str, new: Value, shortcut: bool, case: usize) {
    use crate::registry::leases::Leases;
    let fm = FieldManager::new(&Leases, None, T2);
    let mut defaulted = new.clone();
    Leases.set_defaults(&mut defaulted);
    let taken = fm.renewed_entries(live, &defaulted, manager).is_some();
    assert_eq!(taken, shortcut, "case {case}");
    let long = updated_the_long_way(&Leases, live, new.clone(), manager);
    assert_eq!(
        updated(&Leases, live, new, manager, T2),
        long,
        "case {case}"
    );
    if shortcut {
        assert_eq!(entries(&long)[0]["time"], T2.rfc3339(), "case {case}");
    }
}
