//! core/v1 Pods: NAME, READY, STATUS, RESTARTS, AGE and, wide, IP, NODE, NOMINATED NODE,
//! READINESS GATES, as kube's `printPod` shows them. Defaults as `SetDefaults_Pod` and its
//! helpers set them (restart and DNS policies, scheduler, image pull policy, termination
//! message, probe timings, volume modes, requests from limits); a new pod's status is
//! `{phase: Pending, qosClass}` (with the `SchedulingGated` condition when it has gates)
//! and its generation 1; the commonest spec rules are validated, and an update may change
//! only what kube lets a running pod change.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::endpoints::PROTOCOLS;
use super::names::NameRule;
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy};
use crate::apimachinery::time::{Time, human_duration_secs};
use crate::apimachinery::validation::{PORT_NUM_RANGE, is_valid_port_name};
use crate::json_pointer::At;
use crate::storage::FieldError;

/// The Pod strategy.
pub struct Pods;

static INFO: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Pod",
    resource: "pods",
    singular: "pod",
    short_names: &["po"],
    categories: &["all"],
    namespaced: true,
    name_rule: NameRule::Subdomain,
    status: true,
};

const fn column(name: &'static str, priority: i32, description: &'static str) -> Column {
    Column {
        name,
        kind: "string",
        format: "",
        description,
        priority,
    }
}

static COLUMNS: [Column; 9] = [
    NAME_COLUMN,
    column(
        "Ready",
        0,
        "The aggregate readiness state of this pod for accepting traffic.",
    ),
    column(
        "Status",
        0,
        "The aggregate status of the containers in this pod.",
    ),
    column(
        "Restarts",
        0,
        "The number of times the containers in this pod have been restarted and when the last \
         container in this pod has restarted.",
    ),
    AGE_COLUMN,
    column(
        "IP",
        1,
        "podIP address allocated to the pod. Routable at least within the cluster. Empty if not \
         yet allocated.",
    ),
    column(
        "Node",
        1,
        "NodeName indicates in which node this pod is scheduled. If empty, this pod is a \
         candidate for scheduling by the scheduler defined in schedulerName. Once this field is \
         set, the kubelet for this node becomes responsible for the lifecycle of this pod. This \
         field should not be used to express a desire for the pod to be scheduled on a specific \
         node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
    ),
    column(
        "Nominated Node",
        1,
        "nominatedNodeName is set only when this pod preempts other pods on the node, but it \
         cannot be scheduled right away as preemption victims receive their graceful \
         termination periods. This field does not guarantee that the pod will be scheduled on \
         this node. Scheduler may decide to place the pod elsewhere if other nodes become \
         available sooner. Scheduler may also decide to give the resources on this node to a \
         higher priority pod that is created after preemption. As a result, this field may be \
         different than PodSpec.nodeName when the pod is scheduled.",
    ),
    column(
        "Readiness Gates",
        1,
        "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready \
         when all its containers are ready AND all conditions specified in the readiness gates \
         have status equal to \"True\" More info: \
         https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
    ),
];

const RESTART_POLICIES: [&str; 3] = ["Always", "OnFailure", "Never"];
const DNS_POLICIES: [&str; 4] = ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];
const MESSAGE_POLICIES: [&str; 2] = ["File", "FallbackToLogsOnError"];
/// The fields of a pod's spec an update may change, as kube's error lists them.
const UPDATABLE: &str = "pod updates may not change fields other than \
    `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,\
    `spec.tolerations` (only additions to existing tolerations),\
    `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.at(pointer).and_then(Value::as_str).unwrap_or("")
}

fn list<'a>(obj: &'a Value, pointer: &str) -> Vec<&'a Value> {
    let l = obj.at(pointer).and_then(Value::as_array);
    l.into_iter().flatten().collect()
}

fn object_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let v = map.entry(key).or_insert_with(|| json!({}));
    if !v.is_object() {
        *v = json!({});
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

fn default_str(map: &mut Map<String, Value>, key: &str, value: &str) {
    if map
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        map.insert(key.into(), Value::from(value));
    }
}

fn default_value(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.into(), value);
    }
}

/// The tag `parsers.ParseImageName` finds (`latest` when there is neither tag nor digest).
fn image_tag(image: &str) -> &str {
    if image.contains('@') {
        return "";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag,
        None => "latest",
    }
}

fn default_probe(probe: &mut Value) {
    let Some(p) = probe.as_object_mut() else {
        return;
    };
    default_value(p, "timeoutSeconds", json!(1));
    default_value(p, "periodSeconds", json!(10));
    default_value(p, "successThreshold", json!(1));
    default_value(p, "failureThreshold", json!(3));
    if let Some(get) = p.get_mut("httpGet").and_then(Value::as_object_mut) {
        default_str(get, "path", "/");
        default_str(get, "scheme", "HTTP");
    }
}

/// `SetDefaults_Container` and what `SetDefaults_Pod` does to each container.
fn default_container(c: &mut Value, host_network: bool) {
    let Some(c) = c.as_object_mut() else {
        return;
    };
    if c.get("imagePullPolicy")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let policy = if image_tag(image) == "latest" {
            "Always"
        } else {
            "IfNotPresent"
        };
        c.insert("imagePullPolicy".into(), Value::from(policy));
    }
    default_str(c, "terminationMessagePath", "/dev/termination-log");
    default_str(c, "terminationMessagePolicy", "File");
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default_str(p, "protocol", "TCP");
            if host_network
                && p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
                && let Some(cp) = p.get("containerPort").cloned()
            {
                p.insert("hostPort".into(), cp);
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe) {
            default_probe(p);
        }
    }
    if let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) {
        for e in env {
            if let Some(f) = e
                .at_mut("/valueFrom/fieldRef")
                .and_then(Value::as_object_mut)
            {
                default_str(f, "apiVersion", "v1");
            }
        }
    }
    let resources = object_entry(c, "resources");
    if let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() {
        let requests = object_entry(resources, "requests");
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
}

/// `SetDefaults_Pod`, `SetDefaults_PodSpec` and the defaults of containers and volumes.
fn set_defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let spec = object_entry(o, "spec");
    default_str(spec, "dnsPolicy", "ClusterFirst");
    default_str(spec, "restartPolicy", "Always");
    default_str(spec, "schedulerName", "default-scheduler");
    default_value(spec, "terminationGracePeriodSeconds", json!(30));
    default_value(spec, "securityContext", json!({}));
    default_value(spec, "enableServiceLinks", json!(true));
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    for field in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(field).and_then(Value::as_array_mut) {
            for c in cs {
                default_container(c, host_network);
            }
        }
    }
    if let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        for v in volumes.iter_mut().filter_map(Value::as_object_mut) {
            if v.keys().all(|k| k == "name") {
                v.insert("emptyDir".into(), json!({}));
            }
            for source in ["secret", "configMap", "projected", "downwardAPI"] {
                if let Some(s) = v.get_mut(source).and_then(Value::as_object_mut) {
                    default_value(s, "defaultMode", json!(420));
                }
            }
        }
    }
}

/// A resource quantity in billionths (`500m` is 500_000_000), or None if it is not one.
pub fn quantity_nanos(q: &str) -> Option<i128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let negative = int.starts_with('-');
    let int = int.trim_start_matches(['+', '-']);
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
    if !digits(int) || !digits(frac) {
        return None;
    }
    let mut nanos: i128 = if int.is_empty() {
        0
    } else {
        int.parse::<i128>().ok()? * 1_000_000_000
    };
    let frac9: String = frac.chars().chain("000000000".chars()).take(9).collect();
    nanos += frac9.parse::<i128>().ok()?;
    let scale: i128 = match suffix {
        "" => 1,
        "n" => return Some(sign(nanos, negative) / 1_000_000_000),
        "u" => return Some(sign(nanos, negative) / 1_000_000),
        "m" => return Some(sign(nanos, negative) / 1000),
        "k" => 1000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        s => {
            let exp: u32 = s.strip_prefix(['e', 'E'])?.parse().ok()?;
            10i128.checked_pow(exp)?
        }
    };
    Some(sign(nanos.checked_mul(scale)?, negative))
}

fn sign(n: i128, negative: bool) -> i128 {
    if negative { -n } else { n }
}

/// kube's `ComputePodQOS` (containers and init containers; cpu and memory).
pub fn qos_class(obj: &Value) -> &'static str {
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    let containers = list(obj, "/spec/containers")
        .into_iter()
        .chain(list(obj, "/spec/initContainers"));
    for c in containers {
        let quantities = |field: &str| -> Vec<(&'static str, i128)> {
            let map = c
                .at(&format!("/resources/{field}"))
                .and_then(Value::as_object);
            ["cpu", "memory"]
                .into_iter()
                .filter_map(|name| {
                    let v = map?.get(name)?;
                    let n = match v {
                        Value::String(s) => quantity_nanos(s)?,
                        v => i128::from(v.as_i64()?) * 1_000_000_000,
                    };
                    (n > 0).then_some((name, n))
                })
                .collect()
        };
        for (name, n) in quantities("requests") {
            *requests.entry(name).or_default() += n;
        }
        let found = quantities("limits");
        for (name, n) in &found {
            *limits.entry(name).or_default() += n;
        }
        if found.len() < 2 {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed && requests.iter().any(|(k, v)| limits.get(k) != Some(v)) {
        guaranteed = false;
    }
    if guaranteed && requests.len() == limits.len() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn is_restartable_init(obj: &Value, name: &str) -> bool {
    list(obj, "/spec/initContainers").iter().any(|c| {
        c.get("name").and_then(Value::as_str) == Some(name)
            && c.get("restartPolicy").and_then(Value::as_str) == Some("Always")
    })
}

fn condition_true(obj: &Value, kind: &str) -> bool {
    list(obj, "/status/conditions").iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some(kind)
            && c.get("status").and_then(Value::as_str) == Some("True")
    })
}

fn terminated_at(container: &Value) -> Option<Time> {
    Time::parse(text(container, "/lastState/terminated/finishedAt"))
}

/// The READY, STATUS and RESTARTS cells of `printPod`.
fn pod_status(obj: &Value, now: Time) -> (String, String, String) {
    let mut restarts: i64 = 0;
    let mut restartable_restarts: i64 = 0;
    let mut total = list(obj, "/spec/containers").len();
    let mut ready = 0;
    let mut last_restart: Option<Time> = None;
    let mut last_restartable_restart: Option<Time> = None;
    let phase = text(obj, "/status/phase");
    let mut reason = phase.to_string();
    if !text(obj, "/status/reason").is_empty() {
        reason = text(obj, "/status/reason").into();
    }
    for c in list(obj, "/status/conditions") {
        if c.get("type").and_then(Value::as_str) == Some("PodScheduled")
            && c.get("reason").and_then(Value::as_str) == Some("SchedulingGated")
        {
            reason = "SchedulingGated".into();
        }
    }
    let init_specs = list(obj, "/spec/initContainers");
    total += init_specs
        .iter()
        .filter(|c| c.get("restartPolicy").and_then(Value::as_str) == Some("Always"))
        .count();
    let later = |a: Option<Time>, b: Option<Time>| match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let mut initializing = false;
    for (i, c) in list(obj, "/status/initContainerStatuses")
        .into_iter()
        .enumerate()
    {
        let count = c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        restarts += count;
        last_restart = later(last_restart, terminated_at(c));
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        let restartable = is_restartable_init(obj, name);
        if restartable {
            restartable_restarts += count;
            last_restartable_restart = later(last_restartable_restart, terminated_at(c));
        }
        let terminated = c.at("/state/terminated").filter(|t| t.is_object());
        let exit = terminated
            .and_then(|t| t.get("exitCode"))
            .and_then(Value::as_i64);
        let waiting_reason = text(c, "/state/waiting/reason");
        if terminated.is_some() && exit.unwrap_or(0) == 0 {
            continue;
        }
        if restartable && c.get("started").and_then(Value::as_bool) == Some(true) {
            if c.get("ready").and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            let r = t.get("reason").and_then(Value::as_str).unwrap_or("");
            let signal = t.get("signal").and_then(Value::as_i64).unwrap_or(0);
            reason = if !r.is_empty() {
                format!("Init:{r}")
            } else if signal != 0 {
                format!("Init:Signal:{signal}")
            } else {
                format!("Init:ExitCode:{}", exit.unwrap_or(0))
            };
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            reason = format!("Init:{waiting_reason}");
        } else {
            reason = format!("Init:{i}/{}", init_specs.len());
        }
        initializing = true;
        break;
    }
    if !initializing || condition_true(obj, "Initialized") {
        restarts = restartable_restarts;
        last_restart = last_restartable_restart;
        let mut has_running = false;
        for c in list(obj, "/status/containerStatuses").into_iter().rev() {
            restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
            last_restart = later(last_restart, terminated_at(c));
            let terminated = c.at("/state/terminated").filter(|t| t.is_object());
            let waiting_reason = text(c, "/state/waiting/reason");
            let running = c.at("/state/running").is_some_and(Value::is_object);
            if !waiting_reason.is_empty() {
                reason = waiting_reason.into();
            } else if let Some(t) = terminated {
                let r = t.get("reason").and_then(Value::as_str).unwrap_or("");
                let signal = t.get("signal").and_then(Value::as_i64).unwrap_or(0);
                let exit = t.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
                reason = if !r.is_empty() {
                    r.into()
                } else if signal != 0 {
                    format!("Signal:{signal}")
                } else {
                    format!("ExitCode:{exit}")
                };
            } else if c.get("ready").and_then(Value::as_bool) == Some(true) && running {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if condition_true(obj, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    let deleting = !super::meta_str(obj, "deletionTimestamp").is_empty();
    if deleting && text(obj, "/status/reason") == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && phase != "Failed" && phase != "Succeeded" {
        reason = "Terminating".into();
    }
    let restarts_text = match last_restart {
        Some(t) if restarts != 0 => {
            format!(
                "{restarts} ({} ago)",
                human_duration_secs(now.seconds_since(t))
            )
        }
        _ => restarts.to_string(),
    };
    (format!("{ready}/{total}"), reason, restarts_text)
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s.into()
    }
}

fn pod_ip(obj: &Value) -> &str {
    list(obj, "/status/podIPs")
        .first()
        .map_or("", |ip| ip.get("ip").and_then(Value::as_str).unwrap_or(""))
}

fn validate_containers(obj: &Value, field: &str, names: &mut BTreeSet<String>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let containers = list(obj, &format!("/spec/{field}"));
    if field == "containers" && containers.is_empty() {
        errors.push(FieldError::required("spec.containers", ""));
    }
    let volumes: BTreeSet<&str> = list(obj, "/spec/volumes")
        .iter()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .collect();
    for (i, c) in containers.iter().enumerate() {
        let at = format!("spec.{field}[{i}]");
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            errors.push(FieldError::required(&format!("{at}.name"), ""));
        } else {
            for problem in NameRule::Label.check(name, false) {
                errors.push(FieldError::invalid(&format!("{at}.name"), name, &problem));
            }
        }
        if c.get("image")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            errors.push(FieldError::required(&format!("{at}.image"), ""));
        }
        let policy = text(c, "/terminationMessagePolicy");
        if policy.is_empty() {
            errors.push(FieldError::required(
                &format!("{at}.terminationMessagePolicy"),
                "",
            ));
        } else if !MESSAGE_POLICIES.contains(&policy) {
            errors.push(FieldError::not_supported(
                &format!("{at}.terminationMessagePolicy"),
                policy,
                &MESSAGE_POLICIES,
            ));
        }
        let mut port_names = BTreeSet::new();
        for (j, p) in list(c, "/ports").into_iter().enumerate() {
            let pat = format!("{at}.ports[{j}]");
            let pname = p.get("name").and_then(Value::as_str).unwrap_or("");
            if !pname.is_empty() {
                let problems = is_valid_port_name(pname);
                if !problems.is_empty() {
                    for problem in problems {
                        errors.push(FieldError::invalid(&format!("{pat}.name"), pname, &problem));
                    }
                } else if !port_names.insert(pname) {
                    errors.push(FieldError::duplicate(&format!("{pat}.name"), pname));
                }
            }
            let port = p.get("containerPort").and_then(Value::as_i64).unwrap_or(0);
            if port == 0 {
                errors.push(FieldError::required(&format!("{pat}.containerPort"), ""));
            } else if !(1..=65535).contains(&port) {
                errors.push(FieldError::invalid(
                    &format!("{pat}.containerPort"),
                    port,
                    PORT_NUM_RANGE,
                ));
            }
            let host = p.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
            if host != 0 && !(1..=65535).contains(&host) {
                errors.push(FieldError::invalid(
                    &format!("{pat}.hostPort"),
                    host,
                    PORT_NUM_RANGE,
                ));
            }
            let protocol = text(p, "/protocol");
            if protocol.is_empty() {
                errors.push(FieldError::required(&format!("{pat}.protocol"), ""));
            } else if !PROTOCOLS.contains(&protocol) {
                errors.push(FieldError::not_supported(
                    &format!("{pat}.protocol"),
                    protocol,
                    &PROTOCOLS,
                ));
            }
        }
        for (j, e) in list(c, "/env").into_iter().enumerate() {
            if text(e, "/name").is_empty() {
                errors.push(FieldError::required(&format!("{at}.env[{j}].name"), ""));
            }
        }
        for (j, m) in list(c, "/volumeMounts").into_iter().enumerate() {
            let mat = format!("{at}.volumeMounts[{j}]");
            let vname = text(m, "/name");
            if vname.is_empty() {
                errors.push(FieldError::required(&format!("{mat}.name"), ""));
            } else if !volumes.contains(vname) {
                errors.push(FieldError::not_found(&format!("{mat}.name"), vname));
            }
            if text(m, "/mountPath").is_empty() {
                errors.push(FieldError::required(&format!("{mat}.mountPath"), ""));
            }
        }
        let pull = text(c, "/imagePullPolicy");
        if pull.is_empty() {
            errors.push(FieldError::required(&format!("{at}.imagePullPolicy"), ""));
        } else if !PULL_POLICIES.contains(&pull) {
            errors.push(FieldError::not_supported(
                &format!("{at}.imagePullPolicy"),
                pull,
                &PULL_POLICIES,
            ));
        }
        let limits = c.at("/resources/limits").and_then(Value::as_object);
        let requests = c.at("/resources/requests").and_then(Value::as_object);
        for (resource, req) in requests.into_iter().flatten() {
            let Some(lim) = limits.and_then(|l| l.get(resource)) else {
                continue;
            };
            let shown = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
            let n = |v: &Value| match v {
                Value::String(s) => quantity_nanos(s),
                v => v.as_i64().map(|i| i128::from(i) * 1_000_000_000),
            };
            if let (Some(r), Some(l)) = (n(req), n(lim))
                && r > l
            {
                errors.push(FieldError::invalid(
                    &format!("{at}.resources.requests"),
                    shown(req),
                    &format!(
                        "must be less than or equal to {resource} limit of {}",
                        shown(lim)
                    ),
                ));
            }
        }
        if !name.is_empty() && !names.insert(name.to_string()) {
            errors.push(FieldError::duplicate(&format!("{at}.name"), name));
        }
    }
    errors
}

/// A spec with what an update may change blanked out.
fn immutable_part(spec: Option<&Value>) -> Value {
    let mut spec = spec.cloned().unwrap_or(json!({}));
    if let Some(s) = spec.as_object_mut() {
        for field in ["containers", "initContainers"] {
            if let Some(cs) = s.get_mut(field).and_then(Value::as_array_mut) {
                for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                    c.remove("image");
                }
            }
        }
        for field in [
            "activeDeadlineSeconds",
            "tolerations",
            "terminationGracePeriodSeconds",
            "schedulingGates",
        ] {
            s.remove(field);
        }
    }
    spec
}

impl Strategy for Pods {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        set_defaults(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        set_defaults(obj);
        let qos = qos_class(obj);
        let gated = !list(obj, "/spec/schedulingGates").is_empty();
        let Some(o) = obj.as_object_mut() else {
            return;
        };
        object_entry(o, "metadata").insert("generation".into(), json!(1));
        let mut status = json!({"phase": "Pending", "qosClass": qos});
        if gated {
            status["conditions"] = json!([{
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": null,
                "lastTransitionTime": Time::now().rfc3339(),
                "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
            }]);
        }
        o.insert("status".into(), status);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        set_defaults(new);
    }

    /// kube's pod `CheckGracefulDeletion`: a pod bound to a node and not finished gets
    /// `terminationGracePeriodSeconds` (or the delete's `gracePeriodSeconds`) to stop, its
    /// deletionTimestamp that far ahead, and the kubelet deletes it with grace 0; an unbound or
    /// finished pod (or grace 0) goes at once, finalizers permitting.
    fn graceful_deletion(&self, obj: &Value, grace: Option<i64>, now: Time) -> Option<Value> {
        let phase = text(obj, "/status/phase");
        let bound = !text(obj, "/spec/nodeName").is_empty();
        let mut grace = grace
            .or_else(|| {
                obj.at("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30);
        if !bound || phase == "Succeeded" || phase == "Failed" {
            grace = 0;
        }
        // A negative grace period reads as 1 s, as the pod strategy's CheckGracefulDelete has it.
        if grace < 0 {
            grace = 1;
        }
        let current = obj
            .at("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64);
        if grace == 0 {
            return match current {
                // Already waiting for a grace period: grace 0 ends it (written, then deleted
                // unless finalizers remain).
                Some(g) if g > 0 => Some(shorten_grace(obj, g, 0)),
                _ => super::meta::mark_for_finalizers(obj, now),
            };
        }
        match current {
            // A shorter or equal grace period is already running.
            Some(g) if g <= grace => return Some(obj.clone()),
            Some(g) if meta_has_deletion(obj) => return Some(shorten_grace(obj, g, grace)),
            _ => {}
        }
        let mut marked = obj.clone();
        let meta = super::meta::metadata(&mut marked);
        meta.insert(
            "deletionTimestamp".into(),
            Time(now.0 + grace).rfc3339().into(),
        );
        meta.insert("deletionGracePeriodSeconds".into(), grace.into());
        Some(marked)
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let mut volume_names = BTreeSet::new();
        for (i, v) in list(obj, "/spec/volumes").into_iter().enumerate() {
            let at = format!("spec.volumes[{i}].name");
            let name = text(v, "/name");
            if name.is_empty() {
                errors.push(FieldError::required(&at, ""));
                continue;
            }
            for problem in NameRule::Label.check(name, false) {
                errors.push(FieldError::invalid(&at, name, &problem));
            }
            if !volume_names.insert(name) {
                errors.push(FieldError::duplicate(&at, name));
            }
        }
        let mut names = BTreeSet::new();
        errors.extend(validate_containers(obj, "containers", &mut names));
        errors.extend(validate_containers(obj, "initContainers", &mut names));
        let restart = text(obj, "/spec/restartPolicy");
        if restart.is_empty() {
            errors.push(FieldError::required("spec.restartPolicy", ""));
        } else if !RESTART_POLICIES.contains(&restart) {
            errors.push(FieldError::not_supported(
                "spec.restartPolicy",
                restart,
                &RESTART_POLICIES,
            ));
        }
        let dns = text(obj, "/spec/dnsPolicy");
        if dns.is_empty() {
            errors.push(FieldError::required("spec.dnsPolicy", ""));
        } else if !DNS_POLICIES.contains(&dns) {
            errors.push(FieldError::not_supported(
                "spec.dnsPolicy",
                dns,
                &DNS_POLICIES,
            ));
        }
        if let Some(d) = obj
            .at("/spec/activeDeadlineSeconds")
            .and_then(Value::as_i64)
            && !(1..=i64::from(i32::MAX)).contains(&d)
        {
            errors.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                d,
                "must be between 1 and 2147483647, inclusive",
            ));
        }
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        if immutable_part(new.get("spec")) != immutable_part(old.get("spec")) {
            errors.push(FieldError::forbidden("spec", UPDATABLE));
        }
        let old_gates: BTreeSet<&str> = list(old, "/spec/schedulingGates")
            .iter()
            .map(|g| text(g, "/name"))
            .collect();
        for g in list(new, "/spec/schedulingGates") {
            let name = text(g, "/name");
            if !old_gates.contains(name) {
                errors.push(FieldError::forbidden(
                    "spec.schedulingGates",
                    &format!("only deletion is allowed, but found new scheduling gate '{name}'"),
                ));
            }
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let (ready, status, restarts) = pod_status(obj, now);
        let gates = list(obj, "/spec/readinessGates");
        let readiness = if gates.is_empty() {
            "<none>".to_string()
        } else {
            let conditions = list(obj, "/status/conditions");
            let met = gates
                .iter()
                .filter(|g| {
                    let kind = text(g, "/conditionType");
                    conditions
                        .iter()
                        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
                        .is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True"))
                })
                .count();
            format!("{met}/{}", gates.len())
        };
        vec![
            Value::from(super::meta_str(obj, "name")),
            Value::from(ready),
            Value::from(status),
            Value::from(restarts),
            super::age(obj, now),
            Value::from(or_none(pod_ip(obj))),
            Value::from(or_none(text(obj, "/spec/nodeName"))),
            Value::from(or_none(text(obj, "/status/nominatedNodeName"))),
            Value::from(readiness),
        ]
    }

    /// kube-apiserver's pod indexer (`NodeNameIndexFunc`): a kubelet lists its own pods.
    fn indexed_fields(&self) -> &'static [&'static str] {
        &["spec.nodeName"]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ]
    }

    fn field(&self, obj: &Value, field: &str) -> String {
        match field {
            "spec.hostNetwork" => {
                let h = obj.at("/spec/hostNetwork").and_then(Value::as_bool);
                h.unwrap_or(false).to_string()
            }
            "status.podIP" => pod_ip(obj).into(),
            // Accepted by kube's field label conversion but never set by its
            // PodToSelectableFields, so it reads as "".
            "status.podIPs" => String::new(),
            "spec.nodeName"
            | "spec.restartPolicy"
            | "spec.schedulerName"
            | "spec.serviceAccountName"
            | "status.phase"
            | "status.nominatedNodeName" => {
                text(obj, &format!("/{}", field.replace('.', "/"))).into()
            }
            _ => String::new(),
        }
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// Whether `obj` is already marked for deletion.
fn meta_has_deletion(obj: &Value) -> bool {
    !text(obj, "/metadata/deletionTimestamp").is_empty()
}

/// `obj`, deleting with a grace period of `from` seconds, now deleting with `to`: the
/// deletion time moves by the difference, as kube-apiserver's `BeforeDelete` moves it.
fn shorten_grace(obj: &Value, from: i64, to: i64) -> Value {
    let mut shortened = obj.clone();
    let meta = super::meta::metadata(&mut shortened);
    meta.insert("deletionGracePeriodSeconds".into(), to.into());
    let at = meta
        .get("deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(Time::parse);
    if let Some(at) = at {
        meta.insert(
            "deletionTimestamp".into(),
            Time(at.0 - from + to).rfc3339().into(),
        );
    }
    shortened
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(|e| e.to_string()).collect()
    }

    const NOW: Time = Time(1_780_000_000);

    fn crash_looping() -> Value {
        json!({
            "metadata": {"name": "web-7d4b9", "creationTimestamp": "2026-05-28T19:26:40Z"},
            "spec": {"nodeName": "worker-1", "containers": [{"name": "app"}, {"name": "sidecar"}],
                "readinessGates": [{"conditionType": "example.com/lb"}]},
            "status": {
                "phase": "Running",
                "podIPs": [{"ip": "10.244.1.7"}, {"ip": "fd00::7"}],
                "conditions": [{"type": "Ready", "status": "False"},
                    {"type": "example.com/lb", "status": "True"}],
                "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 5,
                     "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                     "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                        "finishedAt": "2026-05-28T20:24:40Z"}}},
                    {"name": "sidecar", "ready": true, "restartCount": 0,
                     "state": {"running": {"startedAt": "2026-05-28T19:27:00Z"}}}
                ]
            }
        })
    }

    #[test]
    fn cells_are_printed_as_print_pod_prints_them() {
        assert_eq!(
            Pods.cells(&crash_looping(), NOW),
            vec![
                json!("web-7d4b9"),
                json!("1/2"),
                json!("CrashLoopBackOff"),
                json!("5 (2m ago)"),
                json!("60m"),
                json!("10.244.1.7"),
                json!("worker-1"),
                json!("<none>"),
                json!("1/1"),
            ]
        );
        let pending = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Pending"}});
        let cells = Pods.cells(&pending, NOW);
        assert_eq!(
            cells[1..4].to_vec(),
            vec![json!("0/1"), json!("Pending"), json!("0")]
        );
        assert_eq!(cells[5], json!("<none>"));
        assert_eq!(cells[8], json!("<none>"));
        let mut deleting = crash_looping();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-05-28T20:26:00Z");
        assert_eq!(Pods.cells(&deleting, NOW)[2], json!("Terminating"));
    }

    #[test]
    fn init_containers_and_completed_pods_read_as_kube_shows_them() {
        let init = json!({"spec": {"initContainers": [{"name": "i0"}, {"name": "i1"}],
                "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "i0", "state": {"terminated": {"exitCode": 0}}},
                {"name": "i1", "state": {"waiting": {"reason": "PodInitializing"}}}]}});
        assert_eq!(Pods.cells(&init, NOW)[2], json!("Init:1/2"));
        let failed = json!({"spec": {"initContainers": [{"name": "i0"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "i0", "restartCount": 2, "state": {"terminated": {"exitCode": 3}}}]}});
        let cells = Pods.cells(&failed, NOW);
        assert_eq!(
            (cells[2].clone(), cells[3].clone()),
            (json!("Init:ExitCode:3"), json!("2"))
        );
        let sidecar = json!({"spec": {"initContainers": [{"name": "proxy", "restartPolicy": "Always"}],
                "containers": [{"name": "a"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
                "initContainerStatuses": [{"name": "proxy", "started": true, "ready": true,
                    "state": {"running": {}}}],
                "containerStatuses": [{"name": "a", "ready": true, "state": {"running": {}}}]}});
        let cells = Pods.cells(&sidecar, NOW);
        assert_eq!(
            (cells[1].clone(), cells[2].clone()),
            (json!("2/2"), json!("Running"))
        );
        let done = json!({"spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Succeeded", "containerStatuses": [
                {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}});
        assert_eq!(Pods.cells(&done, NOW)[2], json!("Completed"));
    }

    #[test]
    fn a_new_pod_gets_defaults_a_pending_status_and_generation_one() {
        let mut pod = json!({"metadata": {"name": "web"}, "spec": {
            "containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                "readinessProbe": {"httpGet": {"port": 80}}},
                {"name": "pinned", "image": "registry.local:5000/app:1.2",
                 "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
            "volumes": [{"name": "scratch"}, {"name": "cfg", "configMap": {"name": "c"}}]},
            "status": {"phase": "Running"}});
        Pods.prepare_for_create(&mut pod);
        assert_eq!(pod["metadata"]["generation"], json!(1));
        assert_eq!(
            pod["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
        let spec = &pod["spec"];
        assert_eq!(spec["restartPolicy"], json!("Always"));
        assert_eq!(spec["dnsPolicy"], json!("ClusterFirst"));
        assert_eq!(spec["schedulerName"], json!("default-scheduler"));
        assert_eq!(spec["terminationGracePeriodSeconds"], json!(30));
        assert_eq!(spec["enableServiceLinks"], json!(true));
        assert_eq!(spec["securityContext"], json!({}));
        let app = &spec["containers"][0];
        assert_eq!(app["imagePullPolicy"], json!("Always"));
        assert_eq!(app["terminationMessagePath"], json!("/dev/termination-log"));
        assert_eq!(app["terminationMessagePolicy"], json!("File"));
        assert_eq!(app["ports"][0]["protocol"], json!("TCP"));
        assert_eq!(
            app["resources"]["requests"],
            json!({"cpu": "500m", "memory": "128Mi"})
        );
        assert_eq!(
            app["readinessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(
            spec["containers"][1]["imagePullPolicy"],
            json!("IfNotPresent")
        );
        assert_eq!(
            spec["volumes"][0],
            json!({"name": "scratch", "emptyDir": {}})
        );
        assert_eq!(spec["volumes"][1]["configMap"]["defaultMode"], json!(420));
        assert!(
            Pods.validate(&pod).is_empty(),
            "{:?}",
            messages(&Pods.validate(&pod))
        );

        let mut gated = json!({"spec": {"containers": [{"name": "a", "image": "x",
            "resources": {"requests": {"cpu": "1"}}}], "schedulingGates": [{"name": "g"}]}});
        Pods.prepare_for_create(&mut gated);
        assert_eq!(gated["status"]["qosClass"], json!("Burstable"));
        assert_eq!(
            gated["status"]["conditions"][0]["reason"],
            json!("SchedulingGated")
        );
        let mut best = json!({"spec": {"containers": [{"name": "a", "image": "x"}]}});
        Pods.prepare_for_create(&mut best);
        assert_eq!(best["status"]["qosClass"], json!("BestEffort"));
    }

    #[test]
    fn specs_are_validated_as_kube_words_it() {
        let mut empty = json!({"spec": {}});
        Pods.prepare_for_create(&mut empty);
        assert_eq!(
            messages(&Pods.validate(&empty)),
            vec!["spec.containers: Required value"]
        );
        let mut bad = json!({"spec": {"restartPolicy": "Sometimes", "containers": [
            {"name": "Web", "ports": [{"containerPort": 0}, {"containerPort": 70000, "protocol": "ICMP"}],
             "imagePullPolicy": "Often", "volumeMounts": [{"name": "data", "mountPath": "/d"}],
             "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}},
            {"name": "b", "image": "x"}, {"name": "b", "image": "y"}]}});
        Pods.prepare_for_create(&mut bad);
        assert_eq!(
            messages(&Pods.validate(&bad)),
            vec![
                format!(
                    "spec.containers[0].name: Invalid value: \"Web\": {}",
                    NameRule::Label.check("Web", false)[0]
                ),
                "spec.containers[0].image: Required value".to_string(),
                "spec.containers[0].ports[0].containerPort: Required value".to_string(),
                "spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be \
                 between 1 and 65535, inclusive"
                    .to_string(),
                "spec.containers[0].ports[1].protocol: Unsupported value: \"ICMP\": supported \
                 values: \"SCTP\", \"TCP\", \"UDP\""
                    .to_string(),
                "spec.containers[0].volumeMounts[0].name: Not found: \"data\"".to_string(),
                "spec.containers[0].imagePullPolicy: Unsupported value: \"Often\": supported \
                 values: \"Always\", \"IfNotPresent\", \"Never\""
                    .to_string(),
                "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than \
                 or equal to cpu limit of 1"
                    .to_string(),
                "spec.containers[2].name: Duplicate value: \"b\"".to_string(),
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \
                 \"Always\", \"OnFailure\", \"Never\""
                    .to_string(),
            ]
        );
    }

    #[test]
    fn updates_may_change_images_but_not_the_rest_of_the_spec() {
        let mut old = json!({"spec": {"containers": [{"name": "a", "image": "nginx:1.25"}],
            "schedulingGates": [{"name": "g"}]}});
        Pods.prepare_for_create(&mut old);
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("nginx:1.27");
        new["spec"]["schedulingGates"] = json!([]);
        assert!(Pods.validate_update(&new, &old).is_empty());
        new["spec"]["restartPolicy"] = json!("Never");
        new["spec"]["schedulingGates"] = json!([{"name": "h"}]);
        assert_eq!(
            messages(&Pods.validate_update(&new, &old)),
            vec![
                format!("spec: Forbidden: {UPDATABLE}"),
                "spec.schedulingGates: Forbidden: only deletion is allowed, but found new \
                 scheduling gate 'h'"
                    .to_string(),
            ]
        );
    }

    #[test]
    fn fields_quantities_and_image_tags() {
        let pod = crash_looping();
        assert_eq!(Pods.field(&pod, "spec.nodeName"), "worker-1");
        assert_eq!(Pods.field(&pod, "status.podIP"), "10.244.1.7");
        assert_eq!(Pods.field(&pod, "status.phase"), "Running");
        assert_eq!(Pods.field(&pod, "spec.hostNetwork"), "false");
        assert_eq!(Pods.field(&pod, "status.podIPs"), "");
        assert_eq!(quantity_nanos("500m"), Some(500_000_000));
        assert_eq!(quantity_nanos("0.5"), Some(500_000_000));
        assert_eq!(quantity_nanos("1Gi"), Some(1_073_741_824_000_000_000));
        assert_eq!(quantity_nanos("1e3"), Some(1_000_000_000_000));
        assert_eq!(quantity_nanos("x"), None);
        assert_eq!(image_tag("nginx"), "latest");
        assert_eq!(image_tag("registry.local:5000/app"), "latest");
        assert_eq!(image_tag("registry.local:5000/app:1.2"), "1.2");
        assert_eq!(image_tag("nginx@sha256:abc"), "");
    }
}
