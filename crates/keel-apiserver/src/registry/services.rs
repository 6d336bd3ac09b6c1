//! core/v1 Services: NAME, TYPE, CLUSTER-IP, EXTERNAL-IP, PORT(S), AGE and, wide, SELECTOR.
//! Defaults as `SetDefaults_Service` sets them (type ClusterIP, sessionAffinity None, port
//! protocol TCP, targetPort the port, traffic policies Cluster), `clusterIPs` from
//! `clusterIP`, a new service's status `{loadBalancer: {}}`, and on update the allocated
//! values a client left out (cluster IPs, IP families, node ports) carried over as kube's
//! service REST patches them. Allocating cluster IPs and node ports is not done here. A
//! status update's load balancer is checked by `ValidateServiceStatusUpdate`.
//!
//! The kind, its table and its validation are here; `defaults` sets what a service gets
//! before it is validated.

mod defaults;

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::endpoints::PROTOCOLS;
use super::names::NameRule;
use super::rules::{port_name, port_number, required_one_of};
use super::text;
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, status};
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::is_valid_port_name;
use crate::json_pointer::At;
use crate::storage::FieldError;

/// The Service strategy.
pub struct Services;

static INFO: ResourceInfo = ResourceInfo {
    // `ReturnDeletedObject: true` (pkg/registry/core/service/storage).
    returns_deleted_object: true,
    short_names: &["svc"],
    categories: &["all"],
    status: true,
    ..ResourceInfo::new("", "v1", "Service", "services", "service")
};

static COLUMNS: [Column; 7] = [
    NAME_COLUMN,
    Column::string(
        "Type",
        0,
        "type determines how the Service is exposed. Defaults to ClusterIP. Valid \
            options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" \
            allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints \
            are determined by the selector or if that is not specified, by manual construction \
            of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no \
            virtual IP is allocated and the endpoints are published as a set of endpoints \
            rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on \
            every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" \
            builds on NodePort and creates an external load-balancer (if supported in the \
            current cloud) which routes to the same endpoints as the clusterIP. \
            \"ExternalName\" aliases this service to the specified externalName. Several other \
            fields do not apply to ExternalName services. More info: \
            https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types",
    ),
    Column::string(
        "Cluster-IP",
        0,
        "clusterIP is the IP address of the service and is usually assigned \
            randomly. If an address is specified manually, is in-range (as per system \
            configuration), and is not in use, it will be allocated to the service; otherwise \
            creation of the service will fail. This field may not be changed through updates \
            unless the type field is also being changed to ExternalName (which requires this \
            field to be blank) or the type field is being changed from ExternalName (in which \
            case this field may optionally be specified, as describe above).  Valid values are \
            \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" \
            makes a \"headless service\" (no virtual IP), which is useful when direct endpoint \
            connections are preferred and proxying is not required.  Only applies to types \
            ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a \
            Service of type ExternalName, creation will fail. This field will be wiped when \
            updating a Service to type ExternalName. More info: \
            https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
    ),
    Column::string(
        "External-IP",
        0,
        "externalIPs is a list of IP addresses for which nodes in the cluster will \
            also accept traffic for this service.  These IPs are not managed by Kubernetes.  The \
            user is responsible for ensuring that traffic arrives at a node with this IP.  A \
            common example is external load-balancers that are not part of the Kubernetes \
            system.",
    ),
    Column::string(
        "Port(s)",
        0,
        "The list of ports that are exposed by this service. More info: \
            https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
    ),
    AGE_COLUMN,
    Column::string(
        "Selector",
        1,
        "Route service traffic to pods with label keys and values matching this \
            selector. If empty or not present, the service is assumed to have an external \
            process managing its endpoints, which Kubernetes will not modify. Only applies to \
            types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More \
            info: https://kubernetes.io/docs/concepts/services-networking/service/",
    ),
];

const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const AFFINITIES: [&str; 2] = ["ClientIP", "None"];
/// The strings of the list at `pointer` in `obj` (its other items left out).
fn strings<'a>(obj: &'a Value, pointer: &str) -> Vec<&'a str> {
    let list = obj.at(pointer).and_then(Value::as_array);
    list.into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// apimachinery's `labels.FormatLabels`: `k=v` sorted by key, `<none>` when empty.
pub fn format_labels(map: Option<&Map<String, Value>>) -> String {
    let pairs: Vec<String> = map
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// `ValidatePortNumOrName` of an int-or-string port at `path`.
pub fn validate_port_num_or_name(port: Option<&Value>, path: &str) -> Vec<FieldError> {
    match port {
        Some(Value::String(name)) => is_valid_port_name(name)
            .iter()
            .map(|p| FieldError::invalid(path, name.as_str(), p))
            .collect(),
        Some(v) => port_number(path, v.as_i64().unwrap_or(0))
            .into_iter()
            .collect(),
        None => port_number(path, 0).into_iter().collect(),
    }
}

/// `getServiceExternalIP` of kube's printers (wide).
fn external_ip(obj: &Value) -> String {
    let external = strings(obj, "/spec/externalIPs");
    match text(obj, "/spec/type") {
        "ClusterIP" | "NodePort" => {
            if external.is_empty() {
                "<none>".into()
            } else {
                external.join(",")
            }
        }
        "LoadBalancer" => {
            let mut lb: Vec<&str> = Vec::new();
            let ingress = obj
                .at("/status/loadBalancer/ingress")
                .and_then(Value::as_array);
            for i in ingress.into_iter().flatten() {
                let ip = i.get("ip").and_then(Value::as_str).unwrap_or("");
                let host = i.get("hostname").and_then(Value::as_str).unwrap_or("");
                let v = if !ip.is_empty() { ip } else { host };
                if !v.is_empty() && !lb.contains(&v) {
                    lb.push(v);
                }
            }
            lb.extend(external);
            if lb.is_empty() {
                "<pending>".into()
            } else {
                lb.join(",")
            }
        }
        "ExternalName" => text(obj, "/spec/externalName").into(),
        _ => "<unknown>".into(),
    }
}

/// `makePortString`: `80/TCP`, `80:30080/TCP`.
fn port_string(obj: &Value) -> String {
    let ports = obj.at("/spec/ports").and_then(Value::as_array);
    let pieces: Vec<String> = ports
        .into_iter()
        .flatten()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("");
            match p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) {
                n if n > 0 => format!("{port}:{n}/{protocol}"),
                _ => format!("{port}/{protocol}"),
            }
        })
        .collect();
    if pieces.is_empty() {
        "<none>".into()
    } else {
        pieces.join(",")
    }
}

/// The load balancer IP modes (`supportedLoadBalancerIPMode`).
const IP_MODES: [&str; 2] = ["Proxy", "VIP"];

/// `ValidateServiceStatusUpdate` and its `ValidateLoadBalancerStatus`: ingress points only
/// on a `LoadBalancer` service, each IP valid (unless the stored status has it) and with an
/// `ipMode` of a known kind, each hostname a DNS name.
fn validate_status_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let path = "status.loadBalancer.ingress";
    let points = status::items(new, "/status/loadBalancer/ingress");
    if text(new, "/spec/type") != "LoadBalancer" && !points.is_empty() {
        return vec![FieldError::forbidden(
            path,
            "may only be used when `spec.type` is 'LoadBalancer'",
        )];
    }
    let kept = status::ingress_ips(old);
    let mut errors = Vec::new();
    for (i, point) in points.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let ip = text(point, "/ip");
        errors.extend(status::ingress_point(point, &at, &kept));
        let mode = point.get("ipMode").filter(|m| !m.is_null());
        match mode.map(|m| m.as_str().unwrap_or("")) {
            None if !ip.is_empty() => errors.push(FieldError::required(
                &format!("{at}.ipMode"),
                "must be specified when `ip` is set",
            )),
            Some(_) if ip.is_empty() => errors.push(FieldError::forbidden(
                &format!("{at}.ipMode"),
                "may not be specified when `ip` is not set",
            )),
            Some(mode) if !IP_MODES.contains(&mode) => errors.push(FieldError::not_supported(
                &format!("{at}.ipMode"),
                mode,
                &IP_MODES,
            )),
            _ => {}
        }
    }
    errors
}

impl Strategy for Services {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        defaults::set_defaults(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.set_defaults(obj);
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({"loadBalancer": {}}));
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        defaults::patch_allocated_values(new, old);
        self.set_defaults(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let kind = text(obj, "/spec/type");
        let headless = text(obj, "/spec/clusterIP") == "None";
        let ports = obj.at("/spec/ports").and_then(Value::as_array);
        let ports: Vec<&Value> = ports.into_iter().flatten().collect();
        if kind == "ExternalName" {
            if !strings(obj, "/spec/clusterIPs").is_empty() {
                errors.push(FieldError::forbidden(
                    "spec.clusterIPs",
                    "may not be set for ExternalName services",
                ));
            }
            if !strings(obj, "/spec/ipFamilies").is_empty() {
                errors.push(FieldError::forbidden(
                    "spec.ipFamilies",
                    "may not be set for ExternalName services",
                ));
            }
            if obj.at("/spec/ipFamilyPolicy").is_some_and(|v| !v.is_null()) {
                errors.push(FieldError::forbidden(
                    "spec.ipFamilyPolicy",
                    "may not be set for ExternalName services",
                ));
            }
            let cname = text(obj, "/spec/externalName");
            let cname = cname.strip_suffix('.').unwrap_or(cname);
            if cname.is_empty() {
                errors.push(FieldError::required("spec.externalName", ""));
            } else {
                for problem in NameRule::Subdomain.check(cname, false) {
                    errors.push(FieldError::invalid("spec.externalName", cname, &problem));
                }
            }
        }
        if ports.is_empty() && !headless && kind != "ExternalName" {
            errors.push(FieldError::required("spec.ports", ""));
        }
        let mut names = BTreeSet::new();
        for (i, p) in ports.iter().enumerate() {
            let at = format!("spec.ports[{i}]");
            let name = p.get("name").and_then(Value::as_str).unwrap_or("");
            errors.extend(port_name(&format!("{at}.name"), name, ports.len()));
            if !name.is_empty() && !names.insert(name) {
                errors.push(FieldError::duplicate(&format!("{at}.name"), name));
            }
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            errors.extend(port_number(&format!("{at}.port"), port));
            let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("");
            errors.extend(required_one_of(
                &format!("{at}.protocol"),
                protocol,
                &PROTOCOLS,
            ));
            errors.extend(validate_port_num_or_name(
                p.get("targetPort"),
                &format!("{at}.targetPort"),
            ));
        }
        let affinity = text(obj, "/spec/sessionAffinity");
        if !AFFINITIES.contains(&affinity) {
            errors.push(FieldError::not_supported(
                "spec.sessionAffinity",
                affinity,
                &AFFINITIES,
            ));
        }
        if !TYPES.contains(&kind) {
            errors.push(FieldError::not_supported("spec.type", kind, &TYPES));
        }
        for (i, p) in ports.iter().enumerate() {
            let node_port = p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
            let at = format!("spec.ports[{i}].nodePort");
            if kind == "ClusterIP" && node_port != 0 {
                errors.push(FieldError::forbidden(
                    &at,
                    "may not be used when `type` is 'ClusterIP'",
                ));
            } else if node_port != 0 {
                errors.extend(port_number(&at, node_port));
            }
        }
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        let both_need_ip =
            text(old, "/spec/type") != "ExternalName" && text(new, "/spec/type") != "ExternalName";
        let old_ips = strings(old, "/spec/clusterIPs");
        let new_ips = strings(new, "/spec/clusterIPs");
        if both_need_ip
            && let (Some(o), Some(n)) = (old_ips.first(), new_ips.first())
            && o != n
        {
            errors.push(FieldError::invalid(
                "spec.clusterIPs[0]",
                *n,
                "may not change once set",
            ));
        }
        errors
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_status_update(new, old)
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let ips = strings(obj, "/spec/clusterIPs");
        vec![
            Value::from(super::meta_str(obj, "name")),
            Value::from(text(obj, "/spec/type")),
            Value::from(ips.first().copied().unwrap_or("<none>")),
            Value::from(external_ip(obj)),
            Value::from(port_string(obj)),
            super::age(obj, now),
            Value::from(format_labels(
                obj.at("/spec/selector").and_then(Value::as_object),
            )),
        ]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.clusterIP", "spec.type"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn cells_show_type_ips_ports_and_selector() {
        let now = Time(1_780_000_000);
        let svc = json!({"metadata": {"name": "web", "creationTimestamp": "2026-05-28T20:00:00Z"},
            "spec": {"type": "NodePort", "clusterIPs": ["10.96.0.10"], "selector": {"b": "2", "a": "1"},
                "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}});
        assert_eq!(
            Services.cells(&svc, now),
            vec![
                json!("web"),
                json!("NodePort"),
                json!("10.96.0.10"),
                json!("<none>"),
                json!("80:30080/TCP,53/UDP"),
                json!("26m"),
                json!("a=1,b=2")
            ]
        );
        let lb = json!({"spec": {"type": "LoadBalancer", "externalIPs": ["5.6.7.8"]},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "lb.example.com"}]}}});
        let cells = Services.cells(&lb, now);
        assert_eq!(cells[2], json!("<none>"));
        assert_eq!(cells[3], json!("1.2.3.4,lb.example.com,5.6.7.8"));
        assert_eq!(cells[4], json!("<none>"));
        assert_eq!(cells[6], json!("<none>"));
        let pending = json!({"spec": {"type": "LoadBalancer"}});
        assert_eq!(Services.cells(&pending, now)[3], json!("<pending>"));
        let ext = json!({"spec": {"type": "ExternalName", "externalName": "db.example.com"}});
        assert_eq!(Services.cells(&ext, now)[3], json!("db.example.com"));
        assert_eq!(Services.field(&svc, "spec.type"), "NodePort");
    }

    #[test]
    fn specs_are_validated_as_kube_words_it() {
        let mut no_ports = json!({"spec": {}});
        Services.prepare_for_create(&mut no_ports);
        assert_eq!(
            messages(&Services.validate(&no_ports)),
            vec!["spec.ports: Required value"]
        );
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        Services.prepare_for_create(&mut headless);
        assert!(Services.validate(&headless).is_empty());
        let bad = json!({"spec": {"type": "Magic", "sessionAffinity": "Sticky", "ports": [
            {"name": "http", "port": 0, "protocol": "ICMP", "targetPort": 70000},
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": "Bad_Name"},
            {"port": 81, "protocol": "TCP", "targetPort": 81}]}});
        assert_eq!(
            messages(&Services.validate(&bad)),
            vec![
                "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                "spec.ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \
                 \"TCP\", \"UDP\"",
                "spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, \
                 inclusive",
                "spec.ports[1].name: Duplicate value: \"http\"",
                "spec.ports[1].targetPort: Invalid value: \"Bad_Name\": must contain only \
                 alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "spec.ports[2].name: Required value",
                "spec.sessionAffinity: Unsupported value: \"Sticky\": supported values: \
                 \"ClientIP\", \"None\"",
                "spec.type: Unsupported value: \"Magic\": supported values: \"ClusterIP\", \
                 \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
            ]
        );
        let node_port = json!({"spec": {"type": "ClusterIP", "sessionAffinity": "None",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80, "nodePort": 30000}]}});
        assert_eq!(
            messages(&Services.validate(&node_port)),
            vec!["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
        );
        let ext = json!({"spec": {"type": "ExternalName", "sessionAffinity": "None"}});
        assert_eq!(
            messages(&Services.validate(&ext)),
            vec!["spec.externalName: Required value"]
        );
    }

    #[test]
    fn a_status_update_checks_the_load_balancer_as_validate_service_status_update() {
        use crate::registry::rules::messages;
        let lb = json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {}}});
        let mut new = lb.clone();
        new["status"]["loadBalancer"]["ingress"] = json!([{"ip": "1.2.3.4"}, {"ip": "1.2.3.300", "ipMode": "VIP"},
                {"hostname": "lb.example.com", "ipMode": "Proxy"}, {"ip": "5.6.7.8", "ipMode": "NAT"}]);
        Services.set_defaults(&mut new);
        assert_eq!(new["status"]["loadBalancer"]["ingress"][0]["ipMode"], "VIP");
        assert_eq!(
            messages(&Services.validate_status_update(&new, &lb)),
            [
                "status.loadBalancer.ingress[1].ip: Invalid value: \"1.2.3.300\": must be a valid \
                 IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "status.loadBalancer.ingress[2].ipMode: Forbidden: may not be specified when `ip` \
                 is not set",
                "status.loadBalancer.ingress[3].ipMode: Unsupported value: \"NAT\": supported \
                 values: \"Proxy\", \"VIP\"",
            ]
        );
        let mut plain = new.clone();
        plain["spec"]["type"] = "ClusterIP".into();
        assert_eq!(
            messages(&Services.validate_status_update(&plain, &lb)),
            [
                "status.loadBalancer.ingress: Forbidden: may only be used when `spec.type` is \
              'LoadBalancer'"
            ]
        );
    }
}
