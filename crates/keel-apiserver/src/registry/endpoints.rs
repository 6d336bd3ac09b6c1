//! core/v1 Endpoints: NAME, ENDPOINTS (at most three `ip:port`, then `+ N more...`), AGE.
//! An update of missing Endpoints creates them (as kube's strategy allows); port protocols
//! default to TCP; addresses and ports are validated.

use std::net::IpAddr;

use serde_json::Value;

use super::rules::{port_name, port_number, required_one_of};
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy};
use crate::apimachinery::time::Time;
use crate::storage::FieldError;

/// The Endpoints strategy.
pub struct Endpoints;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["ep"],
    ..ResourceInfo::new("", "v1", "Endpoints", "endpoints", "endpoints")
};

static COLUMNS: [Column; 3] = [
    NAME_COLUMN,
    Column::string(
        "Endpoints",
        0,
        "The set of all endpoints is the union of all subsets. Addresses are \
            placed into subsets according to the IPs they share. A single address with multiple \
            ports, some of which are ready and some of which are not (because they come from \
            different containers) will result in the address being displayed in different \
            subsets for the different ports. No address will appear in both Addresses and \
            NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a \
            service.",
    ),
    AGE_COLUMN,
];

/// The protocols a port may have, as kube lists them in errors.
pub const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

/// What is wrong with an IP of an endpoint address (kube's `ValidateEndpointIP` and
/// `IsValidIP`), empty if nothing.
pub fn endpoint_ip_problems(ip: &str) -> Vec<&'static str> {
    let Ok(addr) = ip.parse::<IpAddr>() else {
        return vec!["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"];
    };
    let mut problems = Vec::new();
    if addr.is_unspecified() {
        problems.push("may not be unspecified (0.0.0.0)");
    }
    if addr.is_loopback() {
        problems.push("may not be in the loopback range (127.0.0.0/8, ::1/128)");
    }
    let link_local = match addr {
        IpAddr::V4(a) => a.is_link_local(),
        IpAddr::V6(a) => (a.segments()[0] & 0xffc0) == 0xfe80,
    };
    if link_local {
        problems.push("may not be in the link-local range (169.254.0.0/16, fe80::/10)");
    }
    let link_local_multicast = match addr {
        IpAddr::V4(a) => a.octets()[..3] == [224, 0, 0],
        IpAddr::V6(a) => (a.segments()[0] & 0xff0f) == 0xff02,
    };
    if link_local_multicast {
        problems.push("may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)");
    }
    problems
}

/// `net.JoinHostPort`.
fn join_host_port(ip: &str, port: i64) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// `formatEndpoints` of kube's printers (all ports).
pub fn format_endpoints(obj: &Value) -> String {
    let subsets = obj.get("subsets").and_then(Value::as_array);
    let subsets: Vec<&Value> = subsets.into_iter().flatten().collect();
    if subsets.is_empty() {
        return "<none>".into();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0;
    for ss in subsets {
        let addresses: Vec<&str> = ss
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|a| a.get("ip").and_then(Value::as_str).unwrap_or(""))
            .collect();
        let ports = ss.get("ports").and_then(Value::as_array);
        let ports: Vec<&Value> = ports.into_iter().flatten().collect();
        if ports.is_empty() {
            count += addresses.len();
            for ip in &addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(ip.to_string());
            }
            continue;
        }
        for port in ports {
            let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
            count += addresses.len();
            for ip in &addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(join_host_port(ip, number));
            }
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

fn default_protocols(obj: &mut Value) {
    let Some(subsets) = obj.get_mut("subsets").and_then(Value::as_array_mut) else {
        return;
    };
    for ss in subsets {
        let Some(ports) = ss.get_mut("ports").and_then(Value::as_array_mut) else {
            continue;
        };
        for p in ports {
            if let Some(p) = p.as_object_mut()
                && p.get("protocol")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
            {
                p.insert("protocol".into(), Value::from("TCP"));
            }
        }
    }
}

impl Strategy for Endpoints {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        default_protocols(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let subsets = obj.get("subsets").and_then(Value::as_array);
        for (i, ss) in subsets.into_iter().flatten().enumerate() {
            let path = format!("subsets[{i}]");
            let addresses = ss.get("addresses").and_then(Value::as_array);
            let not_ready = ss.get("notReadyAddresses").and_then(Value::as_array);
            let ports = ss.get("ports").and_then(Value::as_array);
            if addresses.is_none_or(Vec::is_empty) && not_ready.is_none_or(Vec::is_empty) {
                errors.push(FieldError::required(
                    &path,
                    "must specify `addresses` or `notReadyAddresses`",
                ));
            }
            for (field, list) in [("addresses", addresses), ("notReadyAddresses", not_ready)] {
                for (j, a) in list.into_iter().flatten().enumerate() {
                    let ip = a.get("ip").and_then(Value::as_str).unwrap_or("");
                    let at = format!("{path}.{field}[{j}].ip");
                    for problem in endpoint_ip_problems(ip) {
                        errors.push(FieldError::invalid(&at, ip, problem));
                    }
                }
            }
            let ports: Vec<&Value> = ports.into_iter().flatten().collect();
            for (j, p) in ports.iter().enumerate() {
                let at = format!("{path}.ports[{j}]");
                let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                errors.extend(port_name(&format!("{at}.name"), name, ports.len()));
                let number = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                errors.extend(port_number(&format!("{at}.port"), number));
                let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("");
                errors.extend(required_one_of(
                    &format!("{at}.protocol"),
                    protocol,
                    &PROTOCOLS,
                ));
            }
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        super::name_age_row(obj, now, [Value::from(format_endpoints(obj))])
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn endpoints_show_three_then_how_many_more() {
        let ep = json!({"metadata": {"name": "web", "creationTimestamp": "2026-05-28T20:26:40Z"},
        "subsets": [
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]},
            {"addresses": [{"ip": "fd00::1"}]}
        ]});
        assert_eq!(
            Endpoints.cells(&ep, Time(1_780_000_000)),
            vec![
                json!("web"),
                json!("10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 2 more..."),
                json!("0s")
            ]
        );
        let v6 = json!({"subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 53}]}]});
        assert_eq!(format_endpoints(&v6), "[fd00::1]:53");
        assert_eq!(format_endpoints(&json!({})), "<none>");
        assert!(Endpoints.allow_create_on_update());
    }

    #[test]
    fn ports_default_and_addresses_and_ports_are_validated() {
        let mut ep =
            json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]});
        Endpoints.prepare_for_create(&mut ep);
        assert_eq!(ep["subsets"][0]["ports"][0]["protocol"], json!("TCP"));
        assert!(Endpoints.validate(&ep).is_empty());
        let bad = json!({"subsets": [
            {"addresses": [{"ip": "nope"}, {"ip": "127.0.0.1"}],
             "ports": [{"name": "a", "port": 0, "protocol": "ICMP"}, {"port": 80, "protocol": "TCP"}]},
            {"ports": []}
        ]});
        let errors = messages(&Endpoints.validate(&bad));
        assert_eq!(
            errors,
            vec![
                "subsets[0].addresses[0].ip: Invalid value: \"nope\": must be a valid IP address, \
                 (e.g. 10.9.8.7 or 2001:db8::ffff)",
                "subsets[0].addresses[1].ip: Invalid value: \"127.0.0.1\": may not be in the \
                 loopback range (127.0.0.0/8, ::1/128)",
                "subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                "subsets[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \
                 \"SCTP\", \"TCP\", \"UDP\"",
                "subsets[0].ports[1].name: Required value",
                "subsets[1]: Required value: must specify `addresses` or `notReadyAddresses`",
            ]
        );
    }
}
