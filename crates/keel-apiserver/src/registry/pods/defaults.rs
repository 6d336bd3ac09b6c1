//! A pod's defaults, as `SetDefaults_Pod` and its helpers set them: restart and DNS
//! policies, scheduler, grace period, image pull policy, termination message, probe timings,
//! host ports, volume sources and modes, and requests from limits.

use serde_json::{Map, Value, json};

use crate::json_pointer::At;
use crate::registry::defaults::{default_str, default_value, object_entry};

/// The tag `parsers.ParseImageName` finds (`latest` when there is neither tag nor digest).
pub(super) fn image_tag(image: &str) -> &str {
    if image.contains('@') {
        return "";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag,
        None => "latest",
    }
}

/// A probe's timings and its HTTP GET's path and scheme.
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

/// `SetDefaults_Container` and the defaults of a container's ports, probes and env.
fn default_container(c: &mut Value) {
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
    object_entry(c, "resources");
}

/// `SetDefaults_Pod`'s own part, which a pod template does not get (kube applies it to
/// `v1.Pod` only): service links, host-network ports and requests from limits.
fn pod_only_defaults(spec: &mut Map<String, Value>) {
    default_value(spec, "enableServiceLinks", json!(true));
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    for field in ["containers", "initContainers"] {
        let Some(cs) = spec.get_mut(field).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in cs.iter_mut().filter_map(Value::as_object_mut) {
            if host_network && let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    if p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
                        && let Some(cp) = p.get("containerPort").cloned()
                    {
                        p.insert("hostPort".into(), cp);
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
    }
}

/// The defaults of the volume sources that have them (`SetDefaults_HostPathVolumeSource`,
/// `_ServiceAccountTokenProjection`, `_ObjectFieldSelector` in downward API files,
/// `_PersistentVolumeClaimSpec` in ephemeral claim templates, `_ISCSIVolumeSource`,
/// `_RBDVolumeSource`, `_AzureDiskVolumeSource`).
fn volume_source_defaults(v: &mut Map<String, Value>) {
    if let Some(h) = v.get_mut("hostPath").and_then(Value::as_object_mut) {
        default_value(h, "type", json!(""));
    }
    let field_refs = |files: Option<&mut Value>| {
        for file in files.and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(f) = file.get_mut("fieldRef").and_then(Value::as_object_mut) {
                default_str(f, "apiVersion", "v1");
            }
        }
    };
    if let Some(d) = v.get_mut("downwardAPI") {
        field_refs(d.get_mut("items"));
    }
    let sources = v
        .get_mut("projected")
        .and_then(|p| p.get_mut("sources"))
        .and_then(Value::as_array_mut);
    for source in sources.into_iter().flatten() {
        if let Some(t) = source
            .get_mut("serviceAccountToken")
            .and_then(Value::as_object_mut)
        {
            default_value(t, "expirationSeconds", json!(3600));
        }
        if let Some(d) = source.get_mut("downwardAPI") {
            field_refs(d.get_mut("items"));
        }
    }
    if let Some(spec) = v
        .get_mut("ephemeral")
        .and_then(|e| e.at_mut("/volumeClaimTemplate/spec"))
        .and_then(Value::as_object_mut)
    {
        default_value(spec, "volumeMode", json!("Filesystem"));
    }
    if let Some(i) = v.get_mut("iscsi").and_then(Value::as_object_mut) {
        default_str(i, "iscsiInterface", "default");
    }
    if let Some(r) = v.get_mut("rbd").and_then(Value::as_object_mut) {
        default_str(r, "pool", "rbd");
        default_str(r, "user", "admin");
        default_str(r, "keyring", "/etc/ceph/keyring");
    }
    if let Some(a) = v.get_mut("azureDisk").and_then(Value::as_object_mut) {
        default_value(a, "cachingMode", json!("ReadWrite"));
        default_value(a, "fsType", json!("ext4"));
        default_value(a, "readOnly", json!(false));
        default_value(a, "kind", json!("Shared"));
    }
}

/// `SetDefaults_PodSpec` and the defaults of its containers and volumes: what a pod and a
/// pod template (a Deployment's, a Job's, ...) alike get.
pub fn pod_spec_defaults(spec: &mut Map<String, Value>) {
    default_str(spec, "dnsPolicy", "ClusterFirst");
    default_str(spec, "restartPolicy", "Always");
    default_str(spec, "schedulerName", "default-scheduler");
    default_value(spec, "terminationGracePeriodSeconds", json!(30));
    default_value(spec, "securityContext", json!({}));
    for field in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(field).and_then(Value::as_array_mut) {
            for c in cs {
                default_container(c);
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
            volume_source_defaults(v);
        }
    }
}

/// `SetDefaults_Pod`: a pod spec's defaults and the pod's own.
pub(super) fn set_defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let spec = object_entry(o, "spec");
    pod_spec_defaults(spec);
    pod_only_defaults(spec);
}
