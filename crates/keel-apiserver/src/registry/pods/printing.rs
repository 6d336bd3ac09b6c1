//! What kubectl shows of a pod, as kube's `printPod` computes it: READY, STATUS and
//! RESTARTS from the container statuses, the pod's IP, and its QoS class
//! (`ComputePodQOS`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{list, text};
use crate::apimachinery::quantity::quantity_nanos;
use crate::apimachinery::time::{Time, human_duration_secs};
use crate::json_pointer::At;

/// kube's `ComputePodQOS` (containers and init containers; cpu and memory).
pub(super) fn qos_class(obj: &Value) -> &'static str {
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

/// Whether the init container `name` is a sidecar (`restartPolicy: Always`).
fn is_restartable_init(obj: &Value, name: &str) -> bool {
    list(obj, "/spec/initContainers").iter().any(|c| {
        c.get("name").and_then(Value::as_str) == Some(name)
            && c.get("restartPolicy").and_then(Value::as_str) == Some("Always")
    })
}

/// Whether the pod's condition `kind` is `True`.
fn condition_true(obj: &Value, kind: &str) -> bool {
    list(obj, "/status/conditions").iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some(kind)
            && c.get("status").and_then(Value::as_str) == Some("True")
    })
}

/// When a container last terminated.
fn terminated_at(container: &Value) -> Option<Time> {
    Time::parse(text(container, "/lastState/terminated/finishedAt"))
}

/// The READY, STATUS and RESTARTS cells of `printPod`.
pub(super) fn pod_status(obj: &Value, now: Time) -> (String, String, String) {
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
    let deleting = !crate::registry::meta_str(obj, "deletionTimestamp").is_empty();
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

/// `s`, or `<none>` when it is empty.
pub(super) fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s.into()
    }
}

/// The pod's first IP (`status.podIPs[0].ip`), or "".
pub(super) fn pod_ip(obj: &Value) -> &str {
    list(obj, "/status/podIPs")
        .first()
        .map_or("", |ip| ip.get("ip").and_then(Value::as_str).unwrap_or(""))
}
