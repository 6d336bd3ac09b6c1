//! A pod's `status` subresource: what `podStatusStrategy.PrepareForUpdate`
//! (pkg/registry/core/pod/strategy.go) keeps of the stored pod and the checks of
//! `ValidatePodStatusUpdate` (pkg/apis/core/validation/validation.go): condition types, the
//! node name and nominated node name, the QoS class, terminated containers that may not run
//! again (regular, init but for sidecars, and ephemeral ones), the resource claim statuses
//! and the pod's and host's IPs.

use serde_json::Value;

use crate::apimachinery::validation::{is_dns1123_subdomain, is_qualified_name};
use crate::json_pointer::At;
use crate::registry::rules::immutable_at;
use crate::registry::status::{items, legacy_ip, parse_ip_sloppy};
use crate::registry::{meta, text};
use crate::storage::FieldError;

/// The condition types the system owns, whatever their form.
const SYSTEM_CONDITIONS: [&str; 3] = ["PodScheduled", "Ready", "Initialized"];

/// `podStatusStrategy.PrepareForUpdate`: the owner references stay the stored ones (old
/// kubelets corrupted them), and a status without a QoS class keeps the stored class.
pub fn prepare(new: &mut Value, old: &Value) {
    match old.at("/metadata/ownerReferences").cloned() {
        Some(refs) => meta::metadata(new).insert("ownerReferences".into(), refs),
        None => meta::metadata(new).remove("ownerReferences"),
    };
    let stored_qos = text(old, "/status/qosClass");
    if text(new, "/status/qosClass").is_empty() && !stored_qos.is_empty() {
        if !new.get("status").is_some_and(Value::is_object) {
            new["status"] = serde_json::json!({});
        }
        new["status"]["qosClass"] = stored_qos.into();
    }
}

/// `ValidatePodStatusUpdate`.
pub fn validate(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = conditions(new);
    if text(new, "/spec/nodeName") != text(old, "/spec/nodeName") {
        errors.push(FieldError::forbidden(
            "status.nodeName",
            "may not be changed directly",
        ));
    }
    let nominated = text(new, "/status/nominatedNodeName");
    if nominated != text(old, "/status/nominatedNodeName") && !nominated.is_empty() {
        for problem in is_dns1123_subdomain(nominated) {
            errors.push(FieldError::invalid(
                "status.nominatedNodeName",
                nominated,
                &problem,
            ));
        }
    }
    errors.extend(immutable_at(
        new,
        old,
        "/status/qosClass",
        "status.qosClass",
    ));
    let policy = text(old, "/spec/restartPolicy");
    let none = |_: &str| false;
    errors.extend(state_transitions(
        new,
        old,
        "containerStatuses",
        policy,
        &none,
    ));
    // `ValidateInitContainerStateTransition`: a restartable init container (a sidecar,
    // `restartPolicy: Always`) may run again.
    let restartable = |name: &str| {
        items(old, "/spec/initContainers")
            .iter()
            .find(|c| text(c, "/name") == name)
            .is_some_and(|c| text(c, "/restartPolicy") == "Always")
    };
    errors.extend(state_transitions(
        new,
        old,
        "initContainerStatuses",
        policy,
        &restartable,
    ));
    // The kubelet never restarts an ephemeral container: as under `Never`.
    errors.extend(state_transitions(
        new,
        old,
        "ephemeralContainerStatuses",
        "Never",
        &none,
    ));
    errors.extend(resource_claim_statuses(new));
    errors.extend(ips(new, old, "pod"));
    errors.extend(ips(new, old, "host"));
    errors
}

/// `validatePodConditions`: each condition type not the system's a qualified name (at
/// `metadata.conditions[i].Type`, the path upstream builds from the metadata's).
fn conditions(pod: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, c) in items(pod, "/status/conditions").iter().enumerate() {
        let kind = text(c, "/type");
        if SYSTEM_CONDITIONS.contains(&kind) {
            continue;
        }
        for problem in is_qualified_name(kind) {
            let at = format!("metadata.conditions[{i}].Type");
            errors.push(FieldError::invalid(&at, kind, &problem));
        }
    }
    errors
}

/// `ValidateContainerStateTransition` (and its init-container and ephemeral-container
/// uses): unless the pod always restarts (`policy`), a container that terminated (and,
/// under `OnFailure`, succeeded) may not be reported running again, but for those `may_run`
/// lets run again.
fn state_transitions(
    new: &Value,
    old: &Value,
    list: &str,
    policy: &str,
    may_run: &dyn Fn(&str) -> bool,
) -> Vec<FieldError> {
    if policy == "Always" {
        return Vec::new();
    }
    let pointer = format!("/status/{list}");
    let mut errors = Vec::new();
    for (i, before) in items(old, &pointer).iter().enumerate() {
        let Some(terminated) = before.at("/state/terminated") else {
            continue;
        };
        let exit = terminated
            .get("exitCode")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if exit != 0 && policy == "OnFailure" {
            continue;
        }
        let name = text(before, "/name");
        if may_run(name) {
            continue;
        }
        for after in items(new, &pointer) {
            if text(after, "/name") == name && after.at("/state/terminated").is_none() {
                errors.push(FieldError::forbidden(
                    &format!("status.{list}[{i}].state"),
                    "may not be transitioned to non-terminated state",
                ));
            }
        }
    }
    errors
}

/// `validatePodResourceClaimStatuses`: each status names an entry of `spec.resourceClaims`,
/// once, and the claim it names (if any) is a valid claim name (reported at `.name`, as
/// upstream reports it).
fn resource_claim_statuses(pod: &Value) -> Vec<FieldError> {
    let claims: Vec<&str> = items(pod, "/spec/resourceClaims")
        .iter()
        .map(|c| text(c, "/name"))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    let mut errors = Vec::new();
    for (i, status) in items(pod, "/status/resourceClaimStatuses")
        .iter()
        .enumerate()
    {
        let path = format!("status.resourceClaimStatuses[{i}].name");
        let name = text(status, "/name");
        if !claims.contains(&name) {
            errors.push(FieldError::invalid(
                &path,
                name,
                "must match the name of an entry in `spec.resourceClaims`",
            ));
        }
        if !seen.insert(name) {
            errors.push(FieldError::duplicate(&path, name));
        }
        if let Some(claim) = status.get("resourceClaimName").and_then(Value::as_str) {
            for problem in is_dns1123_subdomain(claim) {
                errors.push(FieldError::invalid(&path, claim, &problem));
            }
        }
    }
    errors
}

/// The IPs of `who` (`pod` or `host`) as the internal pod has them: `<who>IPs`, or the one
/// `<who>IP` when it differs from the first of them (the v1 conversion keeps the singular
/// field authoritative).
fn effective_ips<'a>(pod: &'a Value, who: &str) -> Vec<&'a str> {
    let single = text(pod, &format!("/status/{who}IP"));
    let list: Vec<&str> = items(pod, &format!("/status/{who}IPs"))
        .iter()
        .map(|ip| text(ip, "/ip"))
        .collect();
    match list.first() {
        _ if single.is_empty() => list,
        Some(first) if *first == single => list,
        _ => vec![single],
    }
}

/// `validatePodIPs` and `validateHostIPs`: each new IP valid (the stored ones may stay), and
/// several only as one of each family.
fn ips(new: &Value, old: &Value, who: &str) -> Vec<FieldError> {
    let path = format!("status.{who}IPs");
    let kept = effective_ips(old, who);
    let list = effective_ips(new, who);
    let mut errors: Vec<FieldError> = list
        .iter()
        .enumerate()
        .filter_map(|(i, ip)| legacy_ip(&format!("{path}[{i}]"), ip, &kept))
        .collect();
    if list.len() > 1 {
        let parsed: Vec<_> = list.iter().filter_map(|ip| parse_ip_sloppy(ip)).collect();
        let dual = parsed.iter().any(|ip| ip.is_ipv4()) && parsed.iter().any(|ip| ip.is_ipv6());
        if list.len() > 2 || !dual {
            let value: Vec<Value> = list
                .iter()
                .map(|ip| serde_json::json!({"ip": ip}))
                .collect();
            errors.push(FieldError::invalid(
                &path,
                value,
                "may specify no more than one IP for each IP family",
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    fn pod(status: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Never", "nodeName": "n1"},
            "status": status})
    }

    #[test]
    fn pod_status_updates_are_checked_as_validate_pod_status_update_checks_them() {
        let old = pod(json!({"qosClass": "BestEffort", "podIP": "10.0.0.1",
            "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 0}}}]}));
        let new = pod(json!({"qosClass": "Burstable", "podIP": "10.0.0.300",
            "nominatedNodeName": "Bad_Node",
            "conditions": [{"type": "Ready"}, {"type": "bad type"}],
            "containerStatuses": [{"name": "c", "state": {"running": {}}}]}));
        let errors = messages(&validate(&new, &old));
        assert!(
            errors.iter().any(|e| {
                e.starts_with(
            "metadata.conditions[1].Type: Invalid value: \"bad type\": name part must consist of"
        )
            }),
            "{errors:?}"
        );
        assert!(
            errors.iter().any(|e| {
                e.starts_with(
            "status.nominatedNodeName: Invalid value: \"Bad_Node\": a lowercase RFC 1123 subdomain"
        )
            }),
            "{errors:?}"
        );
        assert!(errors.contains(
            &"status.qosClass: Invalid value: \"Burstable\": field is immutable".to_string()
        ));
        assert!(
            errors.contains(
                &"status.containerStatuses[0].state: Forbidden: may not be transitioned to \
              non-terminated state"
                    .to_string()
            )
        );
        assert!(
            errors.contains(
                &"status.podIPs[0]: Invalid value: \"10.0.0.300\": must be a valid IP address, \
              (e.g. 10.9.8.7 or 2001:db8::ffff)"
                    .to_string()
            )
        );
        assert_eq!(errors.len(), 5, "{errors:?}");
    }

    #[test]
    fn the_node_name_is_the_bindings_and_two_ips_must_be_of_two_families() {
        let old = pod(json!({}));
        let mut new = pod(json!({"podIPs": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}));
        new["spec"]["nodeName"] = "n2".into();
        assert_eq!(
            messages(&validate(&new, &old)),
            [
                "status.nodeName: Forbidden: may not be changed directly",
                "status.podIPs: Invalid value: [{\"ip\":\"10.0.0.1\"},{\"ip\":\"10.0.0.2\"}]: may \
                 specify no more than one IP for each IP family",
            ]
        );
        let dual = pod(json!({"podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}));
        assert!(validate(&dual, &old).is_empty());
    }

    /// `ValidateInitContainerStateTransition` lets a sidecar (an init container with
    /// `restartPolicy: Always`) run again but not a plain init container; an ephemeral
    /// container may never run again, whatever the pod's policy.
    #[test]
    fn sidecars_may_run_again_and_ephemeral_containers_never() {
        let terminated = json!({"terminated": {"exitCode": 0}});
        let mut old = pod(json!({
            "initContainerStatuses": [{"name": "init", "state": terminated},
                                      {"name": "proxy", "state": terminated}],
            "ephemeralContainerStatuses": [{"name": "debug", "state": terminated}]}));
        old["spec"]["restartPolicy"] = "OnFailure".into();
        old["spec"]["initContainers"] = json!([{"name": "init"},
            {"name": "proxy", "restartPolicy": "Always"}]);
        let mut new = old.clone();
        new["status"] = json!({
            "initContainerStatuses": [{"name": "init", "state": {"running": {}}},
                                      {"name": "proxy", "state": {"running": {}}}],
            "ephemeralContainerStatuses": [{"name": "debug", "state": {"running": {}}}]});
        assert_eq!(
            messages(&validate(&new, &old)),
            [
                "status.initContainerStatuses[0].state: Forbidden: may not be transitioned to \
                 non-terminated state",
                "status.ephemeralContainerStatuses[0].state: Forbidden: may not be \
                 transitioned to non-terminated state",
            ]
        );
        // Under `Always` only the ephemeral container is held.
        old["spec"]["restartPolicy"] = "Always".into();
        new["spec"]["restartPolicy"] = "Always".into();
        assert_eq!(
            messages(&validate(&new, &old)),
            [
                "status.ephemeralContainerStatuses[0].state: Forbidden: may not be transitioned \
              to non-terminated state"
            ]
        );
    }

    /// `validatePodResourceClaimStatuses`: names from `spec.resourceClaims`, once each, and
    /// a valid claim name (reported at `.name`).
    #[test]
    fn resource_claim_statuses_name_the_pods_claims_once() {
        let old = pod(json!({}));
        let mut new = pod(json!({"resourceClaimStatuses": [
            {"name": "gpu", "resourceClaimName": "p-gpu-x"},
            {"name": "gpu"},
            {"name": "tpu", "resourceClaimName": "Bad_Claim"}]}));
        new["spec"]["resourceClaims"] = json!([{"name": "gpu"}]);
        let errors = messages(&validate(&new, &old));
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert_eq!(
            errors[0],
            "status.resourceClaimStatuses[1].name: Duplicate value: \"gpu\""
        );
        assert_eq!(
            errors[1],
            "status.resourceClaimStatuses[2].name: Invalid value: \"tpu\": must match the \
             name of an entry in `spec.resourceClaims`"
        );
        assert!(
            errors[2].starts_with(
                "status.resourceClaimStatuses[2].name: Invalid value: \"Bad_Claim\": a \
                 lowercase RFC 1123 subdomain"
            ),
            "{errors:?}"
        );
    }

    #[test]
    fn a_status_update_keeps_owner_references_and_the_qos_class() {
        let old = json!({"metadata": {"ownerReferences": [{"name": "rs"}]},
            "status": {"qosClass": "Guaranteed"}});
        let mut new = json!({"metadata": {"ownerReferences": []}, "status": {"phase": "Running"}});
        prepare(&mut new, &old);
        assert_eq!(new["metadata"]["ownerReferences"], json!([{"name": "rs"}]));
        assert_eq!(new["status"]["qosClass"], "Guaranteed");
    }
}
