//! core/v1 Pods: NAME, READY, STATUS, RESTARTS, AGE and, wide, IP, NODE, NOMINATED NODE,
//! READINESS GATES, as kube's `printPod` shows them. Defaults as `SetDefaults_Pod` and its
//! helpers set them (restart and DNS policies, scheduler, image pull policy, termination
//! message, probe timings, volume modes, requests from limits); a new pod's status is
//! `{phase: Pending, qosClass}` (with the `SchedulingGated` condition when it has gates)
//! and its generation 1; the commonest spec rules are validated, and an update may change
//! only what kube lets a running pod change.
//!
//! The kind is here; `defaults`, `validation`, `status` (the status subresource) and
//! `printing` (the table's cells and the QoS class) are its parts.

pub mod defaults;
mod printing;
pub mod status;
pub mod validation;

use serde_json::{Value, json};

use super::text;
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::storage::FieldError;

/// The Pod strategy.
pub struct Pods;

static INFO: ResourceInfo = ResourceInfo {
    returns_deleted_object: true,
    short_names: &["po"],
    categories: &["all"],
    status: true,
    ..ResourceInfo::new("", "v1", "Pod", "pods", "pod")
};

static COLUMNS: [Column; 9] = [
    NAME_COLUMN,
    Column::string(
        "Ready",
        0,
        "The aggregate readiness state of this pod for accepting traffic.",
    ),
    Column::string(
        "Status",
        0,
        "The aggregate status of the containers in this pod.",
    ),
    Column::string(
        "Restarts",
        0,
        "The number of times the containers in this pod have been restarted and when the last \
         container in this pod has restarted.",
    ),
    AGE_COLUMN,
    Column::string(
        "IP",
        1,
        "podIP address allocated to the pod. Routable at least within the cluster. Empty if not \
         yet allocated.",
    ),
    Column::string(
        "Node",
        1,
        "NodeName indicates in which node this pod is scheduled. If empty, this pod is a \
         candidate for scheduling by the scheduler defined in schedulerName. Once this field is \
         set, the kubelet for this node becomes responsible for the lifecycle of this pod. This \
         field should not be used to express a desire for the pod to be scheduled on a specific \
         node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
    ),
    Column::string(
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
    Column::string(
        "Readiness Gates",
        1,
        "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready \
         when all its containers are ready AND all conditions specified in the readiness gates \
         have status equal to \"True\" More info: \
         https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
    ),
];

/// The items of the list at `pointer` in `obj` (none if it is not a list).
fn list<'a>(obj: &'a Value, pointer: &str) -> Vec<&'a Value> {
    let l = obj.at(pointer).and_then(Value::as_array);
    l.into_iter().flatten().collect()
}

impl Strategy for Pods {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        defaults::set_defaults(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.set_defaults(obj);
        let qos = printing::qos_class(obj);
        let gated = !list(obj, "/spec/schedulingGates").is_empty();
        let Some(o) = obj.as_object_mut() else {
            return;
        };
        crate::registry::defaults::object_entry(o, "metadata")
            .insert("generation".into(), json!(1));
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
        validation::validate(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validation::validate_update(new, old)
    }

    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        status::prepare(new, old);
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        status::validate(new, old)
    }

    fn status_reset_fields(&self) -> &'static [&'static [&'static str]] {
        &[
            &["spec"],
            &["metadata", "deletionTimestamp"],
            &["metadata", "ownerReferences"],
        ]
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let (ready, status, restarts) = printing::pod_status(obj, now);
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
            Value::from(printing::or_none(printing::pod_ip(obj))),
            Value::from(printing::or_none(text(obj, "/spec/nodeName"))),
            Value::from(printing::or_none(text(obj, "/status/nominatedNodeName"))),
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
            "status.podIP" => printing::pod_ip(obj).into(),
            // Accepted by kube's field label conversion but never set by its
            // PodToSelectableFields, so it reads as "".
            "status.podIPs" => String::new(),
            "spec.nodeName"
            | "spec.restartPolicy"
            | "spec.schedulerName"
            | "spec.serviceAccountName"
            | "status.phase"
            | "status.nominatedNodeName" => super::field_text(obj, field),
            _ => String::new(),
        }
    }

    fn tracks_generation(&self) -> bool {
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
    use super::defaults::image_tag;
    use super::*;
    use crate::registry::rules::messages;

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
    fn fields_and_image_tags() {
        let pod = crash_looping();
        assert_eq!(Pods.field(&pod, "spec.nodeName"), "worker-1");
        assert_eq!(Pods.field(&pod, "status.podIP"), "10.244.1.7");
        assert_eq!(Pods.field(&pod, "status.phase"), "Running");
        assert_eq!(Pods.field(&pod, "spec.hostNetwork"), "false");
        assert_eq!(Pods.field(&pod, "status.podIPs"), "");
        assert_eq!(image_tag("nginx"), "latest");
        assert_eq!(image_tag("registry.local:5000/app"), "latest");
        assert_eq!(image_tag("registry.local:5000/app:1.2"), "1.2");
        assert_eq!(image_tag("nginx@sha256:abc"), "");
    }
}
