//! networking.k8s.io/v1 NetworkPolicies (`netpol`): NAME, POD-SELECTOR, AGE
//! (`printNetworkPolicy`, pkg/printers/internalversion/printers.go). Defaults as
//! pkg/apis/networking/v1/defaults.go sets them: `SetDefaults_NetworkPolicy` (policyTypes
//! `[Ingress]`, plus `Egress` when there are egress rules) and `SetDefaults_NetworkPolicyPort`
//! (protocol TCP). As pkg/registry/networking/networkpolicy/strategy.go the generation counts
//! spec changes. Validated as pkg/apis/networking/validation/validation.go does
//! (`ValidateNetworkPolicySpec`): the pod selector, each rule's ports (protocol, port number
//! or name, endPort) and peers (one of pod and namespace selectors or an ipBlock), and the
//! policy types.

use std::net::IpAddr;

use serde_json::{Value, json};

use crate::apimachinery::time::Time;
use crate::apimachinery::validation::is_valid_port_name;
use crate::json_pointer::At;
use crate::registry::rules::port_number;
use crate::registry::selector::LabelSelector;
use crate::registry::selector::validate_label_selector;
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, text};
use crate::storage::FieldError;

/// The NetworkPolicy strategy.
pub struct NetworkPolicies;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["netpol"],
    ..ResourceInfo::new(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        "networkpolicy",
    )
};

static COLUMNS: [Column; 3] = [
    NAME_COLUMN,
    Column::string(
        "Pod-Selector",
        0,
        "podSelector selects the pods to which this NetworkPolicy object applies. The array \
            of rules is applied to any pods selected by this field. An empty selector matches \
            all pods in the policy's namespace. Multiple network policies can select the same \
            set of pods. In this case, the ingress rules for each are combined additively. This \
            field is optional. If it is not specified, it defaults to an empty selector.",
    ),
    AGE_COLUMN,
];

/// The protocols a port may name, in the order `ValidateNetworkPolicyPort` lists them.
const PORT_PROTOCOLS: [&str; 3] = ["TCP", "UDP", "SCTP"];
/// The policy types.
const POLICY_TYPES: [&str; 2] = ["Ingress", "Egress"];
/// `IsValidCIDR`'s message.
const CIDR_MESSAGE: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// The rules at `pointer` in `obj` (`/spec/ingress`).
fn rules<'a>(obj: &'a Value, pointer: &str) -> Vec<&'a Value> {
    obj.at(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect()
}

/// A CIDR: its address as bits, its prefix length and the address's width (32 or 128).
fn parse_cidr(s: &str) -> Option<(u128, u32, u32)> {
    let (ip, len) = s.split_once('/')?;
    if len.is_empty() || !len.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let len: u32 = len.parse().ok()?;
    let (bits, width) = match ip.parse::<IpAddr>().ok()? {
        IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
        IpAddr::V6(a) => (u128::from(a), 128),
    };
    (len <= width).then_some((bits, len, width))
}

/// `ValidateIPBlock` of the block at `path`.
fn validate_ip_block(block: &Value, path: &str) -> Vec<FieldError> {
    let cidr = text(block, "/cidr");
    let at = format!("{path}.cidr");
    if cidr.is_empty() {
        return vec![FieldError::required(&at, "")];
    }
    let Some((net, len, width)) = parse_cidr(cidr) else {
        return vec![FieldError::invalid(&at, cidr, CIDR_MESSAGE)];
    };
    let mut errors = Vec::new();
    let excepts = block.get("except").and_then(Value::as_array);
    for (i, except) in excepts.into_iter().flatten().enumerate() {
        let except = except.as_str().unwrap_or("");
        let at = format!("{path}.except[{i}]");
        let Some((sub, sub_len, sub_width)) = parse_cidr(except) else {
            errors.push(FieldError::invalid(&at, except, CIDR_MESSAGE));
            continue;
        };
        let shift = width - len;
        let inside = sub_width == width && (len == 0 || (sub >> shift) == (net >> shift));
        if !inside || len >= sub_len {
            errors.push(FieldError::invalid(
                &at,
                except,
                "must be a strict subset of `cidr`",
            ));
        }
    }
    errors
}

/// `ValidateNetworkPolicyPort` of the port at `path`.
fn validate_port(port: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(protocol) = port.get("protocol").and_then(Value::as_str)
        && !PORT_PROTOCOLS.contains(&protocol)
    {
        errors.push(FieldError::not_supported(
            &format!("{path}.protocol"),
            protocol,
            &PORT_PROTOCOLS,
        ));
    }
    let end = port.get("endPort").and_then(Value::as_i64);
    let end_at = format!("{path}.endPort");
    match port.get("port").filter(|v| !v.is_null()) {
        Some(Value::String(name)) => {
            if let Some(end) = end {
                errors.push(FieldError::invalid(
                    &end_at,
                    end,
                    "may not be specified when `port` is non-numeric",
                ));
            }
            for problem in is_valid_port_name(name) {
                errors.push(FieldError::invalid(
                    &format!("{path}.port"),
                    name.as_str(),
                    &problem,
                ));
            }
        }
        Some(number) => {
            let number = number.as_i64().unwrap_or(0);
            errors.extend(port_number(&format!("{path}.port"), number));
            if let Some(end) = end {
                if end < number {
                    errors.push(FieldError::invalid(
                        &end_at,
                        number,
                        "must be greater than or equal to `port`",
                    ));
                }
                errors.extend(port_number(&end_at, end));
            }
        }
        None => {
            if let Some(end) = end {
                errors.push(FieldError::invalid(
                    &end_at,
                    end,
                    "may not be specified when `port` is not specified",
                ));
            }
        }
    }
    errors
}

/// `ValidateNetworkPolicyPeer` of the peer at `path`.
fn validate_peer(peer: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut peers = 0;
    for selector in ["podSelector", "namespaceSelector"] {
        if let Some(s) = peer.get(selector).filter(|v| !v.is_null()) {
            peers += 1;
            errors.extend(validate_label_selector(s, &format!("{path}.{selector}")));
        }
    }
    let block = peer.get("ipBlock").filter(|v| !v.is_null());
    if let Some(block) = block {
        peers += 1;
        errors.extend(validate_ip_block(block, &format!("{path}.ipBlock")));
    }
    if peers == 0 {
        errors.push(FieldError::required(path, "must specify a peer"));
    } else if peers > 1 && block.is_some() {
        errors.push(FieldError::forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
    errors
}

impl Strategy for NetworkPolicies {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// `SetDefaults_NetworkPolicy` and `SetDefaults_NetworkPolicyPort`.
    fn set_defaults(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        for direction in ["ingress", "egress"] {
            let rules = spec.get_mut(direction).and_then(Value::as_array_mut);
            for rule in rules.into_iter().flatten() {
                let ports = rule.get_mut("ports").and_then(Value::as_array_mut);
                for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
                    if port.get("protocol").is_none_or(Value::is_null) {
                        port.insert("protocol".into(), json!("TCP"));
                    }
                }
            }
        }
        let no_types = spec
            .get("policyTypes")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if no_types {
            let egress = spec
                .get("egress")
                .and_then(Value::as_array)
                .is_some_and(|e| !e.is_empty());
            let types = if egress {
                json!(["Ingress", "Egress"])
            } else {
                json!(["Ingress"])
            };
            spec.insert("policyTypes".into(), types);
        }
    }

    /// `ValidateNetworkPolicySpec`.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let selector = obj.at("/spec/podSelector").cloned().unwrap_or(json!({}));
        errors.extend(validate_label_selector(&selector, "spec.podSelector"));
        for (i, rule) in rules(obj, "/spec/ingress").iter().enumerate() {
            let at = format!("spec.ingress[{i}]");
            for (j, port) in rules(rule, "/ports").iter().enumerate() {
                errors.extend(validate_port(port, &format!("{at}.ports[{j}]")));
            }
            for (j, peer) in rules(rule, "/from").iter().enumerate() {
                errors.extend(validate_peer(peer, &format!("{at}.from[{j}]")));
            }
        }
        for (i, rule) in rules(obj, "/spec/egress").iter().enumerate() {
            let at = format!("spec.egress[{i}]");
            for (j, peer) in rules(rule, "/to").iter().enumerate() {
                errors.extend(validate_peer(peer, &format!("{at}.to[{j}]")));
            }
            for (j, port) in rules(rule, "/ports").iter().enumerate() {
                errors.extend(validate_port(port, &format!("{at}.ports[{j}]")));
            }
        }
        let types = rules(obj, "/spec/policyTypes");
        if types.len() > POLICY_TYPES.len() {
            let printed: Vec<String> = types
                .iter()
                .map(|t| format!("\"{}\"", t.as_str().unwrap_or("")))
                .collect();
            errors.push(FieldError::invalid_printed(
                "spec.policyTypes",
                format!("[]networking.PolicyType{{{}}}", printed.join(", ")),
                "may not specify more than two policyTypes",
            ));
            return errors;
        }
        for (i, t) in types.iter().enumerate() {
            let t = t.as_str().unwrap_or("");
            if !POLICY_TYPES.contains(&t) {
                errors.push(FieldError::not_supported(
                    &format!("spec.policyTypes[{i}]"),
                    t,
                    &POLICY_TYPES,
                ));
            }
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let selector = obj.at("/spec/podSelector").cloned().unwrap_or(json!({}));
        crate::registry::name_age_row(
            obj,
            now,
            [Value::from(LabelSelector::format_object(&selector))],
        )
    }

    fn tracks_generation(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn policy_types_and_port_protocols_default_as_upstream_sets_them() {
        let mut ingress_only = json!({"spec": {"podSelector": {}, "ingress": [{"ports": [
            {"port": 80}, {"port": 53, "protocol": "UDP"}]}]}});
        NetworkPolicies.set_defaults(&mut ingress_only);
        let expected = json!({"spec": {"podSelector": {}, "ingress": [{"ports": [
            {"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}],
            "policyTypes": ["Ingress"]}});
        assert_eq!(ingress_only, expected);
        let mut egress =
            json!({"spec": {"podSelector": {}, "egress": [{"ports": [{"port": 443}]}]}});
        NetworkPolicies.set_defaults(&mut egress);
        let expected = json!({"spec": {"podSelector": {}, "egress": [{"ports": [
            {"port": 443, "protocol": "TCP"}]}], "policyTypes": ["Ingress", "Egress"]}});
        assert_eq!(egress, expected);
        let mut given =
            json!({"spec": {"podSelector": {}, "egress": [{}], "policyTypes": ["Egress"]}});
        NetworkPolicies.set_defaults(&mut given);
        assert_eq!(given["spec"]["policyTypes"], json!(["Egress"]));
        assert!(NetworkPolicies.validate(&egress).is_empty());
    }

    #[test]
    fn rules_are_validated_in_upstream_words() {
        let bad = json!({"spec": {"podSelector": {}, "policyTypes": ["Ingress", "Sideways"],
            "ingress": [{"ports": [{"port": 0, "protocol": "ICMP"}, {"port": "http", "endPort": 90},
                {"endPort": 90}, {"port": 100, "endPort": 90}],
                "from": [{}, {"podSelector": {}, "ipBlock": {"cidr": "10.0.0.0/8"}}]}],
            "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/33"}},
                {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24", "10.0.0.0/8", "x"]}}]}]}});
        assert_eq!(
            messages(&NetworkPolicies.validate(&bad)),
            vec![
                "spec.ingress[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \
                 \"TCP\", \"UDP\", \"SCTP\"",
                "spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, \
                 inclusive",
                "spec.ingress[0].ports[1].endPort: Invalid value: 90: may not be specified when \
                 `port` is non-numeric",
                "spec.ingress[0].ports[2].endPort: Invalid value: 90: may not be specified when \
                 `port` is not specified",
                "spec.ingress[0].ports[3].endPort: Invalid value: 100: must be greater than or \
                 equal to `port`",
                "spec.ingress[0].from[0]: Required value: must specify a peer",
                "spec.ingress[0].from[1]: Forbidden: may not specify both ipBlock and another peer",
                "spec.egress[0].to[0].ipBlock.cidr: Invalid value: \"10.0.0.0/33\": must be a \
                 valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                "spec.egress[0].to[1].ipBlock.except[0]: Invalid value: \"10.1.0.0/24\": must be \
                 a strict subset of `cidr`",
                "spec.egress[0].to[1].ipBlock.except[1]: Invalid value: \"10.0.0.0/8\": must be a \
                 strict subset of `cidr`",
                "spec.egress[0].to[1].ipBlock.except[2]: Invalid value: \"x\": must be a valid \
                 CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                "spec.policyTypes[1]: Unsupported value: \"Sideways\": supported values: \
                 \"Ingress\", \"Egress\"",
            ]
        );
        let subset = json!({"spec": {"egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/16",
            "except": ["10.0.5.0/24"]}}]}]}});
        assert!(NetworkPolicies.validate(&subset).is_empty());
        let three = json!({"spec": {"policyTypes": ["Ingress", "Egress", "Ingress"]}});
        assert_eq!(
            messages(&NetworkPolicies.validate(&three)),
            vec![
                "spec.policyTypes: Invalid value: []networking.PolicyType{\"Ingress\", \
                 \"Egress\", \"Ingress\"}: may not specify more than two policyTypes"
            ]
        );
    }

    #[test]
    fn the_row_shows_the_pod_selector() {
        let now = Time(1_780_000_000);
        let np = json!({"metadata": {"name": "deny", "creationTimestamp": "2026-05-28T20:00:00Z"},
            "spec": {"podSelector": {"matchLabels": {"app": "web"}}}});
        assert_eq!(
            NetworkPolicies.cells(&np, now),
            vec![json!("deny"), json!("app=web"), json!("26m")]
        );
        let all = json!({"spec": {"podSelector": {}}});
        assert_eq!(NetworkPolicies.cells(&all, now)[1], json!("<none>"));
    }
}
