//! networking.k8s.io/v1 Ingresses (`ing`): NAME, CLASS, HOSTS, ADDRESS, PORTS, AGE
//! (`printIngress`, pkg/printers/internalversion/printers.go; the server prints wide, so
//! addresses are not cut). networking/v1 sets no Ingress defaults. As
//! pkg/registry/networking/ingress/strategy.go: a new ingress's status is
//! `{loadBalancer: {}}`, an update keeps the status and bumps the generation when the spec
//! changed, and the `status` subresource keeps the spec. Validated as
//! pkg/apis/networking/validation/validation.go does (`ValidateIngressCreate`,
//! `ValidateIngressSpec`): rules or a default backend, hosts (DNS names, not IPs, wildcards),
//! paths (pathType required, absolute, no `//` or `/./`), each backend a service (name and
//! port name or number) or a resource but not both, TLS hosts and secret names, the class
//! name, the `kubernetes.io/ingress.class` annotation matching it; a status update's load
//! balancer addresses (`ValidateIngressStatusUpdate`).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::shared::{typed_local_object_reference, wildcard_subdomain};
use crate::apiextensions::crd::dns1035_label;
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::{is_dns1123_subdomain, is_valid_port_name};
use crate::json_pointer::At;
use crate::registry::rules::port_number;
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, status, text};
use crate::storage::FieldError;

/// The Ingress strategy.
pub struct Ingresses;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["ing"],
    status: true,
    ..ResourceInfo::new("networking.k8s.io", "v1", "Ingress", "ingresses", "ingress")
};

static COLUMNS: [Column; 6] = [
    NAME_COLUMN,
    Column::string(
        "Class",
        0,
        "The name of the IngressClass resource that should be used for additional configuration",
    ),
    Column::string(
        "Hosts",
        0,
        "Hosts that incoming requests are matched against before the ingress rule",
    ),
    Column::string(
        "Address",
        0,
        "Address is a list containing ingress points for the load-balancer",
    ),
    Column::string("Ports", 0, "Ports of TLS configurations that open"),
    AGE_COLUMN,
];

/// `annotationIngressClass`.
const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// `supportedPathTypes`, sorted.
const PATH_TYPES: [&str; 3] = ["Exact", "ImplementationSpecific", "Prefix"];
/// `invalidPathSequences` and `invalidPathSuffixes`.
const BAD_SEQUENCES: [&str; 5] = ["//", "/./", "/../", "%2f", "%2F"];
const BAD_SUFFIXES: [&str; 2] = ["/..", "/."];

/// The items of the list at `pointer` in `v`.
fn items<'a>(v: &'a Value, pointer: &str) -> Vec<&'a Value> {
    v.at(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect()
}

/// `validateIngressBackend` of the backend at `path`.
fn validate_backend(backend: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let resource = backend.get("resource").filter(|v| !v.is_null());
    let service = backend.get("service").filter(|v| !v.is_null());
    match (resource, service) {
        (Some(_), Some(_)) => errors.push(FieldError::invalid(
            path,
            "",
            "cannot set both resource and service backends",
        )),
        (Some(r), None) => {
            errors.extend(typed_local_object_reference(r, &format!("{path}.resource")))
        }
        (None, Some(s)) => {
            let name = text(s, "/name");
            let at = format!("{path}.service.name");
            if name.is_empty() {
                errors.push(FieldError::required(&at, ""));
            } else {
                for problem in dns1035_label(name) {
                    errors.push(FieldError::invalid(&at, name, &problem));
                }
            }
            let port_name = text(s, "/port/name");
            let number = s.at("/port/number").and_then(Value::as_i64).unwrap_or(0);
            match (port_name.is_empty(), number == 0) {
                (false, false) => errors.push(FieldError::invalid(
                    path,
                    "",
                    "cannot set both port name & port number",
                )),
                (false, true) => {
                    for problem in is_valid_port_name(port_name) {
                        let at = format!("{path}.service.port.name");
                        errors.push(FieldError::invalid(&at, port_name, &problem));
                    }
                }
                (true, false) => {
                    errors.extend(port_number(&format!("{path}.service.port.number"), number));
                }
                (true, true) => errors.push(FieldError::required(
                    path,
                    "port name or number is required",
                )),
            }
        }
        (None, None) => errors.push(FieldError::invalid(
            path,
            "",
            "resource or service backend is required",
        )),
    }
    errors
}

/// `validateHTTPIngressPath` of the path at `at`.
fn validate_path(p: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(path_type) = p.get("pathType").and_then(Value::as_str) else {
        return vec![FieldError::required(
            &format!("{at}.pathType"),
            "pathType must be specified",
        )];
    };
    let path = text(p, "/path");
    let path_at = format!("{at}.path");
    match path_type {
        "Exact" | "Prefix" => {
            if !path.starts_with('/') {
                errors.push(FieldError::invalid(
                    &path_at,
                    path,
                    "must be an absolute path",
                ));
            }
            for bad in BAD_SEQUENCES.iter().filter(|s| path.contains(**s)) {
                let detail = format!("must not contain '{bad}'");
                errors.push(FieldError::invalid(&path_at, path, &detail));
            }
            for bad in BAD_SUFFIXES.iter().filter(|s| path.ends_with(**s)) {
                let detail = format!("cannot end with '{bad}'");
                errors.push(FieldError::invalid(&path_at, path, &detail));
            }
        }
        "ImplementationSpecific" => {
            if !path.is_empty() && !path.starts_with('/') {
                errors.push(FieldError::invalid(
                    &path_at,
                    path,
                    "must be an absolute path",
                ));
            }
        }
        other => errors.push(FieldError::not_supported(
            &format!("{at}.pathType"),
            other,
            &PATH_TYPES,
        )),
    }
    let backend = p.get("backend").unwrap_or(&Value::Null);
    errors.extend(validate_backend(backend, &format!("{at}.backend")));
    errors
}

/// What is wrong with a host: an IP, or not a (wildcard) DNS subdomain.
fn host_problems(host: &str) -> Vec<String> {
    if host.contains('*') {
        wildcard_subdomain(host)
    } else {
        is_dns1123_subdomain(host)
    }
}

/// `validateIngressRules`.
fn validate_rules(rules: &[&Value]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("spec.rules[{i}]");
        let host = text(rule, "/host");
        if !host.is_empty() {
            let host_at = format!("{at}.host");
            if host.parse::<std::net::IpAddr>().is_ok() {
                errors.push(FieldError::invalid(
                    &host_at,
                    host,
                    "must be a DNS name, not an IP address",
                ));
            }
            for problem in host_problems(host) {
                errors.push(FieldError::invalid(&host_at, host, &problem));
            }
        }
        if let Some(http) = rule.get("http").filter(|v| !v.is_null()) {
            let paths = items(http, "/paths");
            if paths.is_empty() {
                errors.push(FieldError::required(&format!("{at}.http.paths"), ""));
            }
            for (j, p) in paths.iter().enumerate() {
                errors.extend(validate_path(p, &format!("{at}.http.paths[{j}]")));
            }
        }
    }
    errors
}

/// `ValidateIngressSpec`.
fn validate_spec(spec: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let rules = items(spec, "/rules");
    let default_backend = spec.get("defaultBackend").filter(|v| !v.is_null());
    if rules.is_empty() && default_backend.is_none() {
        let printed = match spec.get("rules") {
            Some(Value::Array(_)) => "[]networking.IngressRule{}",
            _ => "[]networking.IngressRule(nil)",
        };
        errors.push(FieldError::invalid_printed(
            "spec",
            printed.to_string(),
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if let Some(backend) = default_backend {
        errors.extend(validate_backend(backend, "spec.defaultBackend"));
    }
    errors.extend(validate_rules(&rules));
    for (i, tls) in items(spec, "/tls").iter().enumerate() {
        for (j, host) in items(tls, "/hosts").iter().enumerate() {
            let host = host.as_str().unwrap_or("");
            for problem in host_problems(host) {
                let at = format!("spec.tls[{i}].hosts[{j}]");
                errors.push(FieldError::invalid(&at, host, &problem));
            }
        }
        let secret = text(tls, "/secretName");
        if !secret.is_empty() {
            for problem in is_dns1123_subdomain(secret) {
                let at = format!("spec.tls[{i}].secretName");
                errors.push(FieldError::invalid(&at, secret, &problem));
            }
        }
    }
    if let Some(class) = spec.get("ingressClassName").and_then(Value::as_str) {
        for problem in is_dns1123_subdomain(class) {
            errors.push(FieldError::invalid(
                "spec.ingressClassName",
                class,
                &problem,
            ));
        }
    }
    errors
}

/// `ValidateIngressStatusUpdate`: each load balancer ingress point's IP (valid unless the
/// stored status has it) and hostname.
fn validate_status(new: &Value, old: &Value) -> Vec<FieldError> {
    let kept = status::ingress_ips(old);
    let mut errors = Vec::new();
    for (i, point) in status::items(new, "/status/loadBalancer/ingress")
        .iter()
        .enumerate()
    {
        let at = format!("status.loadBalancer.ingress[{i}]");
        errors.extend(status::ingress_point(point, &at, &kept));
    }
    errors
}

/// `formatHosts`: at most three hosts, then `+ N more...`; `*` when no rule names one.
fn format_hosts(obj: &Value) -> String {
    const MAX: usize = 3;
    let rules = items(obj, "/spec/rules");
    let mut list: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in &rules {
        if list.len() == MAX {
            more = true;
        }
        let host = text(rule, "/host");
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".into();
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", rules.len() - MAX)
    } else {
        joined
    }
}

/// `ingressLoadBalancerStatusStringer` (wide): the sorted set of each point's IP, else its
/// hostname.
fn format_address(obj: &Value) -> String {
    let mut set = BTreeSet::new();
    for point in items(obj, "/status/loadBalancer/ingress") {
        let (ip, host) = (text(point, "/ip"), text(point, "/hostname"));
        if !ip.is_empty() {
            set.insert(ip);
        } else if !host.is_empty() {
            set.insert(host);
        }
    }
    set.into_iter().collect::<Vec<_>>().join(",")
}

impl Strategy for Ingresses {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// `PrepareForCreate`: the status a client sent is dropped for the zero status.
    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({"loadBalancer": {}}));
        }
    }

    /// `ValidateIngressCreate`.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = validate_spec(obj.get("spec").unwrap_or(&Value::Null));
        let annotation = obj
            .at("/metadata/annotations")
            .and_then(|a| a.get(CLASS_ANNOTATION))
            .and_then(Value::as_str);
        let class = obj.at("/spec/ingressClassName").and_then(Value::as_str);
        if let (Some(annotation), Some(class)) = (annotation, class)
            && annotation != class
        {
            errors.push(FieldError::invalid(
                &format!("annotations.{CLASS_ANNOTATION}"),
                annotation,
                "must match `ingressClassName` when both are specified",
            ));
        }
        errors
    }

    /// `ValidateIngressUpdate`: the spec as on create, without the annotation check.
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_spec(new.get("spec").unwrap_or(&Value::Null))
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_status(new, old)
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let class = obj
            .at("/spec/ingressClassName")
            .and_then(Value::as_str)
            .unwrap_or("<none>");
        let ports = if items(obj, "/spec/tls").is_empty() {
            "80"
        } else {
            "80, 443"
        };
        crate::registry::name_age_row(
            obj,
            now,
            [
                Value::from(class),
                Value::from(format_hosts(obj)),
                Value::from(format_address(obj)),
                Value::from(ports),
            ],
        )
    }

    fn tracks_generation(&self) -> bool {
        true
    }
}

/// `RegexError` of a host, for tests.
#[cfg(test)]
fn subdomain_problem(host: &str) -> String {
    is_dns1123_subdomain(host).remove(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    /// What `kubectl create ingress web --rule=foo.com/bar=svc1:8080` sends.
    fn created() -> Value {
        json!({"metadata": {"name": "web", "creationTimestamp": "2026-05-28T20:00:00Z"},
            "spec": {"rules": [{"host": "foo.com", "http": {"paths": [{"path": "/bar",
                "pathType": "Exact", "backend": {"service": {"name": "svc1",
                "port": {"number": 8080}}}}]}}]}})
    }

    #[test]
    fn a_new_ingress_gets_an_empty_load_balancer_status_and_prints_its_hosts() {
        let mut ing = created();
        ing["status"] = json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}});
        Ingresses.prepare_for_create(&mut ing);
        assert_eq!(ing["status"], json!({"loadBalancer": {}}));
        assert!(Ingresses.validate(&ing).is_empty());
        let now = Time(1_780_000_000);
        assert_eq!(
            Ingresses.cells(&ing, now),
            vec![
                json!("web"),
                json!("<none>"),
                json!("foo.com"),
                json!(""),
                json!("80"),
                json!("26m")
            ]
        );
        let wide = json!({"spec": {"ingressClassName": "nginx", "tls": [{}], "rules": [
            {"host": "a.com"}, {}, {"host": "b.com"}, {"host": "c.com"}, {"host": "d.com"}]},
            "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"},
                {"ip": "10.0.0.9"}, {"ip": "10.0.0.9"}]}}});
        let cells = Ingresses.cells(&wide, now);
        assert_eq!(cells[1], json!("nginx"));
        assert_eq!(cells[2], json!("a.com,b.com,c.com + 2 more..."));
        assert_eq!(cells[3], json!("10.0.0.9,lb.example.com"));
        assert_eq!(cells[4], json!("80, 443"));
        assert_eq!(Ingresses.cells(&json!({}), now)[2], json!("*"));
    }

    #[test]
    fn specs_are_validated_in_upstream_words() {
        assert_eq!(
            messages(&Ingresses.validate(&json!({"spec": {}}))),
            vec![
                "spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or \
                 `rules` must be specified"
            ]
        );
        let bad = json!({"metadata": {"annotations": {"kubernetes.io/ingress.class": "a"}},
            "spec": {"ingressClassName": "b", "rules": [
            {"host": "1.2.3.4", "http": {"paths": [
                {"path": "/x"},
                {"path": "rel//x/.", "pathType": "Prefix", "backend": {"service": {"name": "s"}}},
                {"path": "/", "pathType": "Regex", "backend": {"resource": {"kind": "K", "name": "n"},
                    "service": {"name": "s", "port": {"number": 80}}}},
                {"path": "/", "pathType": "Exact", "backend": {"service": {"name": "1s",
                    "port": {"name": "http", "number": 80}}}},
                {"pathType": "ImplementationSpecific", "backend": {}}]}},
            {"host": "*.Bad"}]}});
        assert_eq!(
            messages(&Ingresses.validate(&bad)),
            vec![
                format!(
                    "spec.rules[0].host: Invalid value: \"1.2.3.4\": must be a DNS name, not an IP \
                     address"
                ),
                "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"
                    .to_string(),
                "spec.rules[0].http.paths[1].path: Invalid value: \"rel//x/.\": must be an \
                 absolute path"
                    .to_string(),
                "spec.rules[0].http.paths[1].path: Invalid value: \"rel//x/.\": must not contain \
                 '//'"
                    .to_string(),
                "spec.rules[0].http.paths[1].path: Invalid value: \"rel//x/.\": cannot end with \
                 '/.'"
                    .to_string(),
                "spec.rules[0].http.paths[1].backend: Required value: port name or number is \
                 required"
                    .to_string(),
                "spec.rules[0].http.paths[2].pathType: Unsupported value: \"Regex\": supported \
                 values: \"Exact\", \"ImplementationSpecific\", \"Prefix\""
                    .to_string(),
                "spec.rules[0].http.paths[2].backend: Invalid value: \"\": cannot set both \
                 resource and service backends"
                    .to_string(),
                format!(
                    "spec.rules[0].http.paths[3].backend.service.name: Invalid value: \"1s\": {}",
                    dns1035_label("1s")[0]
                ),
                "spec.rules[0].http.paths[3].backend: Invalid value: \"\": cannot set both port \
                 name & port number"
                    .to_string(),
                "spec.rules[0].http.paths[4].backend: Invalid value: \"\": resource or service \
                 backend is required"
                    .to_string(),
                format!(
                    "spec.rules[1].host: Invalid value: \"*.Bad\": {}",
                    wildcard_subdomain("*.Bad")[0]
                ),
                "annotations.kubernetes.io/ingress.class: Invalid value: \"a\": must match \
                 `ingressClassName` when both are specified"
                    .to_string(),
            ]
        );
        let tls = json!({"spec": {"defaultBackend": {"service": {"name": "s", "port": {"name": "Web"}}},
            "tls": [{"hosts": ["Bad"], "secretName": "a_b"}]}});
        let errors = messages(&Ingresses.validate(&tls));
        assert_eq!(errors.len(), 3, "{errors:#?}");
        assert!(
            errors[0].starts_with("spec.defaultBackend.service.port.name: Invalid value: \"Web\"")
        );
        assert_eq!(
            errors[1],
            format!(
                "spec.tls[0].hosts[0]: Invalid value: \"Bad\": {}",
                subdomain_problem("Bad")
            )
        );
        assert!(errors[2].starts_with("spec.tls[0].secretName: Invalid value: \"a_b\""));
        let status = json!({"spec": created()["spec"], "status": {"loadBalancer": {"ingress": [
            {"ip": "x"}, {"hostname": "1.2.3.4"}]}}});
        assert_eq!(
            messages(&Ingresses.validate_status_update(&status, &created())),
            vec![
                "status.loadBalancer.ingress[0].ip: Invalid value: \"x\": must be a valid IP \
                 address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "status.loadBalancer.ingress[1].hostname: Invalid value: \"1.2.3.4\": must be a \
                 DNS name, not an IP address",
            ]
        );
    }
}
