//! What a service gets before it is validated: `SetDefaults_Service` (type, session
//! affinity and its timeout, port protocols and target ports, traffic policies, load
//! balancer node ports), `clusterIPs` and the IP family fields from `clusterIP`, and on update
//! what the client left out but was allocated before (kube's service REST
//! `patchAllocatedValues`).

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::json_pointer::At;
use crate::registry::text;

/// `v1.DefaultClientIPServiceAffinitySeconds`.
const CLIENT_IP_TIMEOUT: i64 = 10800;

/// `obj.spec`, made an object if it is missing or is not one.
fn spec_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let o = obj.as_object_mut()?;
    let spec = o.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    spec.as_object_mut()
}

/// `SetDefaults_Service`'s load balancer part: an ingress point with an IP and no `ipMode`
/// has mode `VIP`.
fn default_ip_modes(obj: &mut Value) {
    let points = obj
        .pointer_mut("/status/loadBalancer/ingress")
        .and_then(Value::as_array_mut);
    for point in points.into_iter().flatten() {
        let has_ip = point
            .get("ip")
            .and_then(Value::as_str)
            .is_some_and(|ip| !ip.is_empty());
        if let Some(p) = point.as_object_mut()
            && has_ip
            && p.get("ipMode").is_none_or(Value::is_null)
        {
            p.insert("ipMode".into(), json!("VIP"));
        }
    }
}

/// `SetDefaults_Service`, and `clusterIPs` (and `ipFamilies`, `ipFamilyPolicy`) from
/// `clusterIP`.
pub(super) fn set_defaults(obj: &mut Value) {
    default_ip_modes(obj);
    let Some(spec) = spec_mut(obj) else {
        return;
    };
    let get = |spec: &Map<String, Value>, k: &str| {
        spec.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if get(spec, "sessionAffinity").is_empty() {
        spec.insert("sessionAffinity".into(), json!("None"));
    }
    match get(spec, "sessionAffinity").as_str() {
        "None" => {
            spec.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let has_timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.at("/clientIP/timeoutSeconds"))
                .is_some_and(|t| !t.is_null());
            if !has_timeout {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": CLIENT_IP_TIMEOUT}}),
                );
            }
        }
        _ => {}
    }
    if get(spec, "type").is_empty() {
        spec.insert("type".into(), json!("ClusterIP"));
    }
    let kind = get(spec, "type");
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            if p.get("protocol")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                p.insert("protocol".into(), json!("TCP"));
            }
            let unset = match p.get("targetPort") {
                None | Some(Value::Null) => true,
                Some(Value::String(s)) => s.is_empty(),
                Some(v) => v.as_i64() == Some(0),
            };
            if unset {
                let port = p.get("port").cloned().unwrap_or(json!(0));
                p.insert("targetPort".into(), port);
            }
        }
    }
    let external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|l| !l.is_empty());
    let externally_accessible =
        kind == "LoadBalancer" || kind == "NodePort" || (kind == "ClusterIP" && external_ips);
    if externally_accessible && get(spec, "externalTrafficPolicy").is_empty() {
        spec.insert("externalTrafficPolicy".into(), json!("Cluster"));
    }
    let unset = |spec: &Map<String, Value>, k: &str| spec.get(k).is_none_or(Value::is_null);
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP")
        && unset(spec, "internalTrafficPolicy")
    {
        spec.insert("internalTrafficPolicy".into(), json!("Cluster"));
    }
    if kind == "LoadBalancer" && unset(spec, "allocateLoadBalancerNodePorts") {
        spec.insert("allocateLoadBalancerNodePorts".into(), json!(true));
    }
    let cluster_ip = get(spec, "clusterIP");
    let no_ips = spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_ips && !cluster_ip.is_empty() {
        spec.insert("clusterIPs".into(), json!([cluster_ip]));
    }
    if kind != "ExternalName" {
        if unset(spec, "ipFamilyPolicy") {
            spec.insert("ipFamilyPolicy".into(), json!("SingleStack"));
        }
        let no_families = spec
            .get("ipFamilies")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        let families: Vec<&str> = spec
            .get("clusterIPs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter_map(|ip| match ip.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(_)) => Some("IPv4"),
                Ok(std::net::IpAddr::V6(_)) => Some("IPv6"),
                Err(_) => None,
            })
            .collect();
        if no_families && !families.is_empty() {
            spec.insert("ipFamilies".into(), json!(families));
        }
    }
}

/// kube's service REST `patchAllocatedValues`: what the client left out of an update but
/// was allocated before is carried over.
pub(super) fn patch_allocated_values(new: &mut Value, old: &Value) {
    let old_type = text(old, "/spec/type").to_string();
    let Some(spec) = spec_mut(new) else {
        return;
    };
    let new_type = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    let empty = |v: Option<&Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    };
    if old_type != "ExternalName" && new_type != "ExternalName" {
        for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if empty(spec.get(key))
                && let Some(v) = old.at(&format!("/spec/{key}"))
            {
                spec.insert(key.into(), v.clone());
            }
        }
    }
    let needs_node_port = |t: &str| t == "NodePort" || t == "LoadBalancer";
    if needs_node_port(&old_type) && needs_node_port(&new_type) {
        let node_ports = |ports: Option<&Value>| -> BTreeSet<i64> {
            ports
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
                .filter(|n| *n != 0)
                .collect()
        };
        let old_ports = old.at("/spec/ports");
        let used: BTreeSet<i64> = node_ports(old_ports)
            .intersection(&node_ports(spec.get("ports")))
            .copied()
            .collect();
        let by_name: Map<String, Value> = old_ports
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| {
                let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                (
                    name.to_string(),
                    p.get("nodePort").cloned().unwrap_or(json!(0)),
                )
            })
            .collect();
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                if p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                    continue;
                }
                let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                if let Some(old_value) = by_name.get(name).and_then(Value::as_i64)
                    && old_value != 0
                    && !used.contains(&old_value)
                {
                    p.insert("nodePort".into(), json!(old_value));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Services;
    use crate::registry::Strategy;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn defaults_are_set_as_set_defaults_service_sets_them() {
        let mut svc = json!({"metadata": {"name": "web"}, "spec": {"clusterIP": "10.96.0.10",
            "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 0}, {"port": 53, "targetPort": "dns"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}});
        Services.prepare_for_create(&mut svc);
        assert_eq!(
            svc["spec"],
            json!({"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "type": "ClusterIP",
                "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
                "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"], "selector": {"app": "web"},
                "ports": [{"port": 80, "targetPort": 80, "protocol": "TCP"},
                    {"port": 53, "targetPort": "dns", "protocol": "TCP"}]})
        );
        assert_eq!(svc["status"], json!({"loadBalancer": {}}));
        let mut lb = json!({"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP",
            "ports": [{"port": 443}]}});
        Services.prepare_for_create(&mut lb);
        assert_eq!(lb["spec"]["externalTrafficPolicy"], json!("Cluster"));
        assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], json!(true));
        assert_eq!(
            lb["spec"]["sessionAffinityConfig"],
            json!({"clientIP": {"timeoutSeconds": 10800}})
        );
    }

    #[test]
    fn updates_keep_allocated_values_the_client_left_out() {
        let old = json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "ports": [{"name": "http", "port": 80, "nodePort": 30080, "protocol": "TCP"}]}});
        let mut new =
            json!({"spec": {"type": "NodePort", "ports": [{"name": "http", "port": 8080}]}});
        Services.prepare_for_update(&mut new, &old);
        assert_eq!(new["spec"]["clusterIPs"], json!(["10.96.0.10"]));
        assert_eq!(new["spec"]["ports"][0]["nodePort"], json!(30080));
        let mut moved = new.clone();
        moved["spec"]["clusterIPs"] = json!(["10.96.0.11"]);
        assert_eq!(
            messages(&Services.validate_update(&moved, &old)),
            vec!["spec.clusterIPs[0]: Invalid value: \"10.96.0.11\": may not change once set"]
        );
    }
}
