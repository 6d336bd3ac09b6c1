"""apps/v1 with the Python kubernetes client's AppsV1Api, as controller authors use it: for
Deployments, ReplicaSets, StatefulSets, DaemonSets and ControllerRevisions, create (read back
as typed models with upstream's defaults), read, patch (the generation follows the spec),
list, watch (the patch seen as MODIFIED) and delete; a Deployment's scale subresource read
and patched, its status patched; an invalid Deployment answered 422 with upstream's message;
utils.create_from_yaml with a multi-document file of built-in kinds of several groups (apps,
batch, rbac, networking, core), each read back through its typed API and deleted.
Run by tests/apps.rs with KUBECONFIG in the environment; prints "ok"."""

import json
import os
import tempfile

from kubernetes import client, config, utils, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=os.environ["KUBECONFIG"])
apps = client.AppsV1Api()
ns = "default"


def template(app, image="nginx:1.27"):
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": app, "image": image}]},
    }


def workload(kind, name, **spec):
    body = {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": template(name)},
    }
    body["spec"].update(spec)
    return body


KINDS = {
    "deployment": workload("Deployment", "py-deploy"),
    "replica_set": workload("ReplicaSet", "py-rs"),
    "stateful_set": workload("StatefulSet", "py-sts", serviceName="py-sts"),
    "daemon_set": workload("DaemonSet", "py-ds"),
    "controller_revision": {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": "py-rev"},
        "data": {"spec": {"template": {}}},
        "revision": 1,
    },
}


def call(verb, kind, *args, **kwargs):
    return getattr(apps, f"{verb}_namespaced_{kind}")(*args, **kwargs)


created = {kind: call("create", kind, ns, body) for kind, body in KINDS.items()}

# Typed models, with upstream's defaults.
d = created["deployment"]
assert d.spec.replicas == 1 and d.spec.revision_history_limit == 10, d.spec
assert d.spec.progress_deadline_seconds == 600, d.spec
assert d.spec.strategy.type == "RollingUpdate", d.spec.strategy
assert d.spec.strategy.rolling_update.max_surge == "25%", d.spec.strategy
assert d.spec.template.spec.containers[0].image_pull_policy == "IfNotPresent", d.spec.template
assert d.metadata.generation == 1, d.metadata
assert created["replica_set"].spec.replicas == 1
s = created["stateful_set"].spec
assert s.pod_management_policy == "OrderedReady" and s.update_strategy.rolling_update.partition == 0, s
assert s.persistent_volume_claim_retention_policy.when_deleted == "Retain", s
ds = created["daemon_set"]
assert ds.spec.update_strategy.rolling_update.max_unavailable == 1, ds.spec
assert ds.metadata.annotations["deprecated.daemonset.template.generation"] == "1", ds.metadata
assert ds.status.desired_number_scheduled == 0, ds.status
rev = created["controller_revision"]
assert rev.revision == 1 and rev.data == {"spec": {"template": {}}}, rev

for kind, body in KINDS.items():
    name = body["metadata"]["name"]
    got = call("read", kind, name, ns)
    assert got.metadata.uid == created[kind].metadata.uid, (kind, got.metadata)
    listed = getattr(apps, f"list_namespaced_{kind}")(ns)
    assert [i.metadata.name for i in listed.items] == [name], (kind, listed.items)
    rv = listed.metadata.resource_version
    patch = {"metadata": {"labels": {"patched": "yes"}}}
    if kind != "controller_revision":
        patch["spec"] = {"template": {"spec": {"containers": [{"name": name, "image": "nginx:1.28"}]}}}
    patched = call("patch", kind, name, ns, patch)
    assert patched.metadata.labels == {"patched": "yes"}, (kind, patched.metadata)
    if kind != "controller_revision":
        assert patched.spec.template.spec.containers[0].image == "nginx:1.28", (kind, patched.spec)
        assert patched.metadata.generation == 2, (kind, patched.metadata)
    w = watch.Watch()
    stream = w.stream(getattr(apps, f"list_namespaced_{kind}"), ns, resource_version=rv, timeout_seconds=10)
    event = next(stream)
    w.stop()
    assert (event["type"], event["object"].metadata.name) == ("MODIFIED", name), (kind, event["type"])

# The scale subresource of a Deployment, and its status.
scale = apps.read_namespaced_deployment_scale("py-deploy", ns)
assert (scale.spec.replicas, scale.status.selector) == (1, "app=py-deploy"), scale
# (A merge patch: keel's scale subresource takes no strategic merge patch yet.)
scale = apps.patch_namespaced_deployment_scale(
    "py-deploy", ns, {"spec": {"replicas": 4}}, _content_type="application/merge-patch+json"
)
assert scale.spec.replicas == 4, scale
assert apps.read_namespaced_deployment("py-deploy", ns).spec.replicas == 4
status = apps.patch_namespaced_deployment_status("py-deploy", ns, {"status": {"replicas": 4, "readyReplicas": 2}})
assert status.status.ready_replicas == 2 and status.spec.replicas == 4, status.status
assert apps.read_namespaced_deployment("py-deploy", ns).metadata.generation == 3

# An invalid Deployment: 422 with upstream's message.
bad = workload("Deployment", "py-bad")
bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
try:
    apps.create_namespaced_deployment(ns, bad)
    raise AssertionError("an invalid Deployment was created")
except ApiException as e:
    body = json.loads(e.body)
    assert e.status == 422 and body["reason"] == "Invalid", e.body
    assert body["message"] == (
        'Deployment.apps "py-bad" is invalid: spec.template.metadata.labels: Invalid value: '
        '{"app":"other"}: `selector` does not match template `labels`'
    ), body["message"]

for kind, body in KINDS.items():
    name = body["metadata"]["name"]
    call("delete", kind, name, ns)
    try:
        call("read", kind, name, ns)
        raise AssertionError(f"{kind} {name} still there")
    except ApiException as e:
        assert e.status == 404, e.body

# utils.create_from_yaml with a multi-document file: every kind through its typed API.
MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: yaml-web}
spec:
  selector: {matchLabels: {app: yaml-web}}
  template:
    metadata: {labels: {app: yaml-web}}
    spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: yaml-job}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: pi, image: perl, command: [perl, -e, "1"]}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: yaml-cron}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: c, image: busybox}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: yaml-role}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: yaml-binding}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: yaml-role}
subjects: [{kind: ServiceAccount, name: default, namespace: default}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: yaml-ing}
spec:
  rules:
  - host: example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: yaml-cm}
data: {a: b}
"""
with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
    f.write(MANIFEST)
made = utils.create_from_yaml(client.ApiClient(), yaml_file=f.name, namespace=ns)
assert len(made) == 7, made
batch = client.BatchV1Api()
rbac = client.RbacAuthorizationV1Api()
networking = client.NetworkingV1Api()
core = client.CoreV1Api()
deployment = apps.read_namespaced_deployment("yaml-web", ns)
assert deployment.spec.replicas == 1 and deployment.spec.strategy.type == "RollingUpdate"
job = batch.read_namespaced_job("yaml-job", ns)
assert job.spec.backoff_limit == 6 and job.spec.completions == 1, job.spec
assert job.spec.selector.match_labels["batch.kubernetes.io/controller-uid"] == job.metadata.uid
assert batch.read_namespaced_cron_job("yaml-cron", ns).spec.concurrency_policy == "Allow"
assert rbac.read_namespaced_role_binding("yaml-binding", ns).role_ref.name == "yaml-role"
assert rbac.read_namespaced_role("yaml-role", ns).rules[0].verbs == ["get", "list"]
path = networking.read_namespaced_ingress("yaml-ing", ns).spec.rules[0].http.paths[0]
assert path.path_type == "Prefix", path
assert core.read_namespaced_config_map("yaml-cm", ns).data == {"a": "b"}
os.unlink(f.name)
apps.delete_namespaced_deployment("yaml-web", ns)
batch.delete_namespaced_job("yaml-job", ns, propagation_policy="Background")
batch.delete_namespaced_cron_job("yaml-cron", ns)
rbac.delete_namespaced_role_binding("yaml-binding", ns)
rbac.delete_namespaced_role("yaml-role", ns)
networking.delete_namespaced_ingress("yaml-ing", ns)
core.delete_namespaced_config_map("yaml-cm", ns)

print("ok")
