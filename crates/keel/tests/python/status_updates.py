"""The status subresource with the Python kubernetes client, as a controller writes it:
patch_namespaced_deployment_status with a negative count is answered 422 with upstream's
message and cause; one that also changes the spec and the labels changes neither;
replace_namespaced_deployment_status with a decremented collision count is refused;
patch_namespaced_service_status with a bad load balancer IP is refused and a good one gets
ipMode VIP. Run by tests/status_updates.rs with KUBECONFIG in the environment; prints "ok"."""

import json
import os

from kubernetes import client, config
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=os.environ["KUBECONFIG"])
apps = client.AppsV1Api()
core = client.CoreV1Api()
ns = "default"


def refused(call, message):
    try:
        call()
    except ApiException as e:
        assert e.status == 422, (e.status, e.body)
        body = json.loads(e.body)
        assert message in body["message"], (message, body["message"])
        return body
    raise AssertionError("accepted: " + message)


apps.create_namespaced_deployment(ns, {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {"selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}},
})

above = "Invalid value: 0: cannot be greater than status.replicas"
body = refused(
    lambda: apps.patch_namespaced_deployment_status("web", ns, {"status": {"replicas": -1}}),
    'Deployment.apps "web" is invalid: [status.replicas: Invalid value: -1: must be greater '
    "than or equal to 0, status.updatedReplicas: " + above + ", status.readyReplicas: " + above
    + ", status.availableReplicas: " + above + "]",
)
assert body["details"]["causes"][0] == {
    "reason": "FieldValueInvalid",
    "message": "Invalid value: -1: must be greater than or equal to 0",
    "field": "status.replicas",
}, body
assert len(body["details"]["causes"]) == 4, body

web = apps.patch_namespaced_deployment_status("web", ns, {
    "metadata": {"labels": {"extra": "x"}},
    "spec": {"replicas": 4},
    "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "collisionCount": 2},
})
assert web.spec.replicas == 1, web.spec
assert web.metadata.labels == {"app": "web"}, web.metadata.labels
assert web.status.ready_replicas == 1, web.status

web.status.collision_count = 1
refused(
    lambda: apps.replace_namespaced_deployment_status("web", ns, web),
    "status.collisionCount: Invalid value: 1: cannot be decremented",
)

core.create_namespaced_service(ns, {
    "apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb"},
    "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
})
refused(
    lambda: core.patch_namespaced_service_status(
        "lb", ns, {"status": {"loadBalancer": {"ingress": [{"ip": "300.1.1.1"}]}}}),
    'status.loadBalancer.ingress[0].ip: Invalid value: "300.1.1.1": must be a valid IP '
    "address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
)
lb = core.patch_namespaced_service_status(
    "lb", ns, {"status": {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}}})
point = lb.status.load_balancer.ingress[0]
assert (point.ip, point.ip_mode) == ("5.6.7.8", "VIP"), point

print("ok")
