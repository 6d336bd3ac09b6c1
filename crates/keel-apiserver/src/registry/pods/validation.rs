//! A pod's validation: the commonest rules of kube's `ValidatePod` (volumes, containers and
//! their ports, mounts, pull policies and resources, restart and DNS policies) and of
//! `ValidatePodUpdate` (what an update may change), worded as kube words them.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{list, text};
use crate::apimachinery::quantity::quantity_nanos;
use crate::apimachinery::validation::is_valid_port_name;
use crate::json_pointer::At;
use crate::registry::endpoints::PROTOCOLS;
use crate::registry::names::NameRule;
use crate::registry::rules::{port_number, required_one_of};
use crate::storage::FieldError;

/// The restart policies a pod may have.
const RESTART_POLICIES: [&str; 3] = ["Always", "OnFailure", "Never"];
/// The DNS policies a pod may have.
const DNS_POLICIES: [&str; 4] = ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
/// The image pull policies a container may have.
const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];
/// The termination message policies a container may have.
const MESSAGE_POLICIES: [&str; 2] = ["File", "FallbackToLogsOnError"];
/// The fields of a pod's spec an update may change, as kube's error lists them.
const UPDATABLE: &str = "pod updates may not change fields other than \
    `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,\
    `spec.tolerations` (only additions to existing tolerations),\
    `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// The containers (or init containers) at `<path>.<field>` of `spec`: names (unique across
/// both, in `names`), images, ports, volume mounts, policies and resources.
fn validate_containers(
    spec: &Value,
    path: &str,
    field: &str,
    names: &mut BTreeSet<String>,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let containers = list(spec, &format!("/{field}"));
    if field == "containers" && containers.is_empty() {
        errors.push(FieldError::required(&format!("{path}.containers"), ""));
    }
    let volumes: BTreeSet<&str> = list(spec, "/volumes")
        .iter()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .collect();
    for (i, c) in containers.iter().enumerate() {
        let at = format!("{path}.{field}[{i}]");
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
        errors.extend(required_one_of(
            &format!("{at}.terminationMessagePolicy"),
            text(c, "/terminationMessagePolicy"),
            &MESSAGE_POLICIES,
        ));
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
            } else {
                errors.extend(port_number(&format!("{pat}.containerPort"), port));
            }
            let host = p.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
            if host != 0 {
                errors.extend(port_number(&format!("{pat}.hostPort"), host));
            }
            errors.extend(required_one_of(
                &format!("{pat}.protocol"),
                text(p, "/protocol"),
                &PROTOCOLS,
            ));
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
        errors.extend(required_one_of(
            &format!("{at}.imagePullPolicy"),
            text(c, "/imagePullPolicy"),
            &PULL_POLICIES,
        ));
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

/// `ValidatePod`'s commonest rules.
pub(super) fn validate(obj: &Value) -> Vec<FieldError> {
    validate_pod_spec(obj.get("spec").unwrap_or(&Value::Null), "spec")
}

/// `ValidatePodSpec`'s commonest rules for the spec at `path` (`spec`,
/// `spec.template.spec`): volumes, containers, restart and DNS policies, the active
/// deadline.
pub fn validate_pod_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut volume_names = BTreeSet::new();
    for (i, v) in list(spec, "/volumes").into_iter().enumerate() {
        let at = format!("{path}.volumes[{i}].name");
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
    errors.extend(validate_containers(spec, path, "containers", &mut names));
    errors.extend(validate_containers(
        spec,
        path,
        "initContainers",
        &mut names,
    ));
    errors.extend(required_one_of(
        &format!("{path}.restartPolicy"),
        text(spec, "/restartPolicy"),
        &RESTART_POLICIES,
    ));
    errors.extend(required_one_of(
        &format!("{path}.dnsPolicy"),
        text(spec, "/dnsPolicy"),
        &DNS_POLICIES,
    ));
    if let Some(d) = spec.at("/activeDeadlineSeconds").and_then(Value::as_i64)
        && !(1..=i64::from(i32::MAX)).contains(&d)
    {
        errors.push(FieldError::invalid(
            &format!("{path}.activeDeadlineSeconds"),
            d,
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    errors
}

/// `ValidatePodUpdate`: a valid pod whose spec changes only where kube lets a running pod
/// change, and whose scheduling gates are only removed.
pub(super) fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = validate(new);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Strategy;
    use crate::registry::pods::Pods;
    use crate::registry::rules::messages;

    #[test]
    fn specs_are_validated_as_kube_words_it() {
        // What a new pod's validation finds, its defaults set first.
        let created = |mut pod: Value| {
            Pods.prepare_for_create(&mut pod);
            messages(&validate(&pod))
        };
        assert_eq!(
            created(json!({"spec": {}})),
            vec!["spec.containers: Required value"]
        );
        let bad = json!({"spec": {"restartPolicy": "Sometimes", "containers": [
            {"name": "Web", "ports": [{"containerPort": 0}, {"containerPort": 70000, "protocol": "ICMP"}],
             "imagePullPolicy": "Often", "volumeMounts": [{"name": "data", "mountPath": "/d"}],
             "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}},
            {"name": "b", "image": "x"}, {"name": "b", "image": "y"}]}});
        assert_eq!(
            created(bad),
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
}
