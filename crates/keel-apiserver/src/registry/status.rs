//! What the strategies of the `status` subresource share: the metadata a status update
//! keeps (`metav1.ResetObjectMetaForStatus`, or the labels alone), counts that may not be
//! negative or above another (`ValidateNonnegativeField`, `cannot be greater than
//! status.replicas`), a `collisionCount` that may not go down (`IsDecremented`), IPs as
//! `IsValidIPForLegacyField` checks them, the load balancer ingress points of Services and
//! Ingresses (pkg/apis/core/validation and pkg/apis/networking/validation) and
//! `metav1.Condition` lists (apimachinery's `metav1validation.ValidateConditions`).

use std::net::IpAddr;

use serde_json::Value;

use crate::apimachinery::validation::{is_dns1123_subdomain, is_qualified_name, regex_error};
use crate::json_pointer::At;
use crate::registry::meta;
use crate::registry::rules::non_negative;
use crate::storage::FieldError;

/// `IsValidIP`'s words for a value that is no IP.
pub const NOT_AN_IP: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

/// `cannot be greater than status.replicas`.
pub const ABOVE_REPLICAS: &str = "cannot be greater than status.replicas";

/// Sets `metadata.<field>` of `new` to what `old` has (removed when `old` has none).
fn keep_meta(new: &mut Value, old: &Value, field: &str) {
    let kept = old.at(&format!("/metadata/{field}")).cloned();
    let metadata = meta::metadata(new);
    match kept {
        Some(v) => metadata.insert(field.into(), v),
        None => metadata.remove(field),
    };
}

/// The labels of a status update are the stored ones (Deployments, StatefulSets).
pub fn keep_labels(new: &mut Value, old: &Value) {
    keep_meta(new, old, "labels");
}

/// `metav1.ResetObjectMetaForStatus`: a status update keeps the stored deletion timestamp,
/// generation, labels, annotations, finalizers and owner references.
pub fn reset_meta(new: &mut Value, old: &Value) {
    for field in [
        "deletionTimestamp",
        "generation",
        "selfLink",
        "labels",
        "annotations",
        "finalizers",
        "ownerReferences",
    ] {
        keep_meta(new, old, field);
    }
}

/// `resourceVersion: Required value` when the update names no resource version (the status
/// updates of PersistentVolumes, their claims and ResourceQuotas ask for one).
pub fn resource_version_required(new: &Value) -> Option<FieldError> {
    let rv = new.at("/metadata/resourceVersion").and_then(Value::as_str);
    rv.is_none_or(str::is_empty)
        .then(|| FieldError::required("resourceVersion", ""))
}

/// `ValidateNonnegativeField` of each `status.<field>` of `obj` that is set.
pub fn non_negative_counts(obj: &Value, fields: &[&str]) -> Vec<FieldError> {
    fields
        .iter()
        .filter_map(|f| non_negative(obj, &format!("/status/{f}"), &format!("status.{f}")))
        .collect()
}

/// The integer `status.<field>` of `obj`, 0 when unset.
pub fn count(obj: &Value, field: &str) -> i64 {
    obj.at(&format!("/status/{field}"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// `status.<field>: Invalid value: <n>: <message>` when `status.<field>` is above
/// `status.<limit>`.
pub fn not_above(obj: &Value, field: &str, limit: &str, message: &str) -> Option<FieldError> {
    let n = count(obj, field);
    (n > count(obj, limit)).then(|| FieldError::invalid(&format!("status.{field}"), n, message))
}

/// The replica counts a workload's status reports: none of `fields` above
/// `status.replicas`, and `availableReplicas` not above `readyReplicas` (`above_ready` the
/// words: `cannot be greater than readyReplicas`, StatefulSets' `... status.readyReplicas`).
pub fn replica_bounds(obj: &Value, fields: &[&str], above_ready: &str) -> Vec<FieldError> {
    let mut errors: Vec<FieldError> = fields
        .iter()
        .filter_map(|f| not_above(obj, f, "replicas", ABOVE_REPLICAS))
        .collect();
    errors.extend(not_above(
        obj,
        "availableReplicas",
        "readyReplicas",
        above_ready,
    ));
    errors
}

/// `ValidateReplicaSetStatus` and `ValidateReplicationControllerStatus`: the counts not
/// negative, none above `status.replicas`, `availableReplicas` not above `readyReplicas`.
pub fn replica_set_status(obj: &Value) -> Vec<FieldError> {
    let mut errors = non_negative_counts(
        obj,
        &[
            "replicas",
            "fullyLabeledReplicas",
            "readyReplicas",
            "availableReplicas",
            "observedGeneration",
            "terminatingReplicas",
        ],
    );
    errors.extend(replica_bounds(
        obj,
        &["fullyLabeledReplicas", "readyReplicas", "availableReplicas"],
        ABOVE_READY,
    ));
    errors
}

/// `cannot be greater than readyReplicas`.
pub const ABOVE_READY: &str = "cannot be greater than readyReplicas";

/// `IsDecremented` of `status.collisionCount`: `cannot be decremented` when the new count
/// (unset reads 0) is below a stored one.
pub fn collision_count_kept(new: &Value, old: &Value) -> Option<FieldError> {
    let old_count = old.at("/status/collisionCount").and_then(Value::as_i64)?;
    let new_count = new.at("/status/collisionCount").and_then(Value::as_i64);
    (new_count.is_none_or(|n| n < old_count)).then(|| {
        FieldError::invalid(
            "status.collisionCount",
            new_count.unwrap_or(0),
            "cannot be decremented",
        )
    })
}

/// `IsValidIPForLegacyField` (without the strict checks of `StrictIPCIDRValidation`): an IP
/// at `path`, unless it is one of `kept` (what the stored object already has).
pub fn legacy_ip(path: &str, ip: &str, kept: &[&str]) -> Option<FieldError> {
    (!kept.contains(&ip) && parse_ip_sloppy(ip).is_none())
        .then(|| FieldError::invalid(path, ip, NOT_AN_IP))
}

/// `netutils.ParseIPSloppy`: an IP, IPv4 octets with leading zeros read as decimal.
pub fn parse_ip_sloppy(ip: &str) -> Option<IpAddr> {
    if let Ok(addr) = ip.parse::<IpAddr>() {
        return Some(addr);
    }
    let octets: Vec<u8> = ip
        .split('.')
        .map(|p| match p.len() {
            1..=3 if p.bytes().all(|b| b.is_ascii_digit()) => p.parse::<u8>().ok(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let octets: [u8; 4] = octets.try_into().ok()?;
    Some(IpAddr::from(octets))
}

/// The string at `pointer` of `v`, "" when unset.
fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.at(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The items of the array at `pointer` of `v`.
pub fn items<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.at(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The IPs of the load balancer ingress points of `obj` (`status.loadBalancer.ingress`).
pub fn ingress_ips(obj: &Value) -> Vec<&str> {
    items(obj, "/status/loadBalancer/ingress")
        .iter()
        .map(|p| text(p, "/ip"))
        .filter(|ip| !ip.is_empty())
        .collect()
}

/// The IP and hostname of one load balancer ingress point at `at` (Services'
/// `ValidateLoadBalancerStatus` and Ingresses' `ValidateIngressLoadBalancerStatus`): the IP
/// valid unless the stored object has it (`kept`), the hostname a DNS subdomain and no IP.
pub fn ingress_point(point: &Value, at: &str, kept: &[&str]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ip = text(point, "/ip");
    if !ip.is_empty() {
        errors.extend(legacy_ip(&format!("{at}.ip"), ip, kept));
    }
    let host = text(point, "/hostname");
    if !host.is_empty() {
        let host_at = format!("{at}.hostname");
        for problem in is_dns1123_subdomain(host) {
            errors.push(FieldError::invalid(&host_at, host, &problem));
        }
        if parse_ip_sloppy(host).is_some() {
            errors.push(FieldError::invalid(
                &host_at,
                host,
                "must be a DNS name, not an IP address",
            ));
        }
    }
    errors
}

/// `metav1.Condition` statuses.
const CONDITION_STATUSES: [&str; 3] = ["False", "True", "Unknown"];

/// `conditionReasonFmt`.
const REASON_FORMAT: &str = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?";

/// Whether `reason` matches [`REASON_FORMAT`].
fn is_reason(reason: &str) -> bool {
    let b = reason.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || b"_,:".contains(c);
    let end = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphabetic() && (b.len() == 1 || end(l)) && b.iter().all(inner)
        }
        _ => false,
    }
}

/// `metav1validation.ValidateConditions` of the list at `path`: each type once and a
/// qualified name, a known status, a non-negative observed generation, a transition time,
/// a reason in its format and both within their lengths.
pub fn conditions(list: &[Value], path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let kind = text(c, "/type");
        if seen.contains(&kind) {
            errors.push(FieldError::duplicate(&format!("{at}.type"), kind));
        } else {
            seen.push(kind);
        }
        for problem in is_qualified_name(kind) {
            errors.push(FieldError::invalid(&format!("{at}.type"), kind, &problem));
        }
        let status = text(c, "/status");
        if !CONDITION_STATUSES.contains(&status) {
            errors.push(FieldError::not_supported(
                &format!("{at}.status"),
                status,
                &CONDITION_STATUSES,
            ));
        }
        if let Some(g) = c.get("observedGeneration").and_then(Value::as_i64)
            && g < 0
        {
            errors.push(FieldError::invalid(
                &format!("{at}.observedGeneration"),
                g,
                "must be greater than or equal to zero",
            ));
        }
        if text(c, "/lastTransitionTime").is_empty() {
            errors.push(FieldError::required(
                &format!("{at}.lastTransitionTime"),
                "",
            ));
        }
        let reason = text(c, "/reason");
        if reason.is_empty() {
            errors.push(FieldError::required(&format!("{at}.reason"), ""));
        } else {
            if !is_reason(reason) {
                let message = regex_error(
                    "a condition reason must start with alphabetic character, optionally \
                     followed by a string of alphanumeric characters or '_,:', and must end \
                     with an alphanumeric character or '_'",
                    REASON_FORMAT,
                    &[
                        "my_name",
                        "MY_NAME",
                        "MyName",
                        "ReasonA,ReasonB",
                        "ReasonA:ReasonB",
                    ],
                );
                errors.push(FieldError::invalid(
                    &format!("{at}.reason"),
                    reason,
                    &message,
                ));
            }
            if reason.len() > 1024 {
                errors.push(FieldError::too_long(&format!("{at}.reason"), 1024));
            }
        }
        if text(c, "/message").len() > 32 * 1024 {
            errors.push(FieldError::too_long(&format!("{at}.message"), 32 * 1024));
        }
    }
    errors
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
