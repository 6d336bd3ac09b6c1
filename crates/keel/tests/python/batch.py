"""batch/v1 Jobs and CronJobs, and core/v1 PersistentVolumes, PersistentVolumeClaims,
ReplicationControllers and PodTemplates, with the Python kubernetes client as controllers
use it: BatchV1Api creates, reads, merge-patches, lists (by label and field selector),
watches and deletes Jobs and CronJobs, which come back with upstream's defaults (a Job's
selector generated from its uid) and are refused with upstream's words (422); CoreV1Api
does the same for the four core kinds, and reads and patches an RC's scale subresource.
Run by tests/batch.rs with KUBECONFIG in the environment; prints "ok"."""

import json
import os
import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=os.environ["KUBECONFIG"])
api_client = client.ApiClient()
batch = client.BatchV1Api(api_client)
core = client.CoreV1Api(api_client)
ns = "default"


def container(name, image="busybox:1.36"):
    return {"name": name, "image": image, "command": ["true"]}


def job(name, restart="Never"):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"suite": "batch"}},
        "spec": {"template": {"spec": {"restartPolicy": restart, "containers": [container("work")]}}},
    }


def refused(call, *args):
    """The 422 message of a call that must be refused."""
    try:
        call(*args)
    except ApiException as e:
        assert e.status == 422, (e.status, e.body)
        return json.loads(e.body)["message"]
    sys.exit(f"{call.__name__} was not refused")


# Jobs: created with defaults and a generated selector, read, patched, listed, watched.
created = batch.create_namespaced_job(ns, job("py-job"))
uid = created.metadata.uid
spec = created.spec
assert (spec.completions, spec.parallelism, spec.backoff_limit) == (1, 1, 6), spec
assert spec.completion_mode == "NonIndexed" and spec.suspend is False, spec
assert spec.pod_replacement_policy == "TerminatingOrFailed" and spec.manual_selector is False, spec
assert spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}, spec.selector
labels = spec.template.metadata.labels
assert labels["job-name"] == "py-job" and labels["controller-uid"] == uid, labels
assert labels["batch.kubernetes.io/job-name"] == "py-job", labels
assert created.metadata.labels == {"suite": "batch"}, created.metadata.labels
assert created.metadata.generation == 1, created.metadata

read = batch.read_namespaced_job("py-job", ns)
assert read.metadata.resource_version == created.metadata.resource_version
patched = batch.patch_namespaced_job("py-job", ns, {"spec": {"parallelism": 3}})
assert patched.spec.parallelism == 3 and patched.metadata.generation == 2, patched.spec
status = batch.read_namespaced_job_status("py-job", ns)
assert status.status.active is None, status.status
listed = batch.list_namespaced_job(ns, label_selector="suite=batch")
assert [j.metadata.name for j in listed.items] == ["py-job"], listed.items
by_field = batch.list_namespaced_job(ns, field_selector="status.successful=0")
assert "py-job" in [j.metadata.name for j in by_field.items], by_field.items

w = watch.Watch()
stream = w.stream(
    batch.list_namespaced_job, ns, resource_version=listed.metadata.resource_version, timeout_seconds=10
)
batch.create_namespaced_job(ns, job("py-job-2"))
event = next(stream)
w.stop()
assert (event["type"], event["object"].metadata.name) == ("ADDED", "py-job-2"), event

message = refused(batch.create_namespaced_job, ns, job("py-always", restart="Always"))
assert (
    'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"' in message
), message
message = refused(
    batch.patch_namespaced_job,
    "py-job",
    ns,
    {"spec": {"template": {"spec": {"containers": [container("work", "busybox:1.37")]}}}},
)
assert "spec.template: Invalid value: " in message and "field is immutable" in message, message

for name in ["py-job", "py-job-2"]:
    batch.delete_namespaced_job(name, ns, propagation_policy="Background")
assert batch.list_namespaced_job(ns, label_selector="suite=batch").items == []

# CronJobs.
cron = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {"name": "py-cron"},
    "spec": {
        "schedule": "0 3 * * mon-fri",
        "timeZone": "Europe/Berlin",
        "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [container("tick")]}}}},
    },
}
created = batch.create_namespaced_cron_job(ns, cron)
spec = created.spec
assert (spec.concurrency_policy, spec.suspend) == ("Allow", False), spec
assert (spec.successful_jobs_history_limit, spec.failed_jobs_history_limit) == (3, 1), spec
assert spec.time_zone == "Europe/Berlin", spec
patched = batch.patch_namespaced_cron_job("py-cron", ns, {"spec": {"suspend": True}})
assert patched.spec.suspend is True and patched.metadata.generation == 2, patched
assert [c.metadata.name for c in batch.list_namespaced_cron_job(ns).items] == ["py-cron"]
w = watch.Watch()
events = []
for event in w.stream(batch.list_namespaced_cron_job, ns, timeout_seconds=10):
    events.append((event["type"], event["object"].metadata.name, event["object"].spec.suspend))
    w.stop()
assert events == [("ADDED", "py-cron", True)], events
bad = dict(cron, metadata={"name": "py-bad"})
bad["spec"] = dict(cron["spec"], schedule="*/5 * * *", timeZone="Mars/Base")
message = refused(batch.create_namespaced_cron_job, ns, bad)
assert 'spec.schedule: Invalid value: "*/5 * * *": expected exactly 5 fields, found 4: [*/5 * * *]' in message, message
assert 'spec.timeZone: Invalid value: "Mars/Base": unknown time zone Mars/Base' in message, message
batch.delete_namespaced_cron_job("py-cron", ns)
assert batch.list_namespaced_cron_job(ns).items == []

# PersistentVolumes and claims.
pv = core.create_persistent_volume(
    {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "py-pv"},
        "spec": {
            "capacity": {"storage": "5Gi"},
            "accessModes": ["ReadWriteMany"],
            "nfs": {"server": "nfs.example.com", "path": "/exports/py"},
        },
    }
)
assert pv.spec.persistent_volume_reclaim_policy == "Retain" and pv.spec.volume_mode == "Filesystem", pv.spec
assert pv.status.phase == "Pending", pv.status
pv = core.patch_persistent_volume("py-pv", {"spec": {"persistentVolumeReclaimPolicy": "Delete"}})
assert pv.spec.persistent_volume_reclaim_policy == "Delete", pv.spec
assert "py-pv" in [p.metadata.name for p in core.list_persistent_volume().items]
message = refused(core.patch_persistent_volume, "py-pv", {"spec": {"nfs": {"path": "/exports/other"}}})
assert "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation" in message, message
core.delete_persistent_volume("py-pv")

claim = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "py-claim"},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
}
pvc = core.create_namespaced_persistent_volume_claim(ns, claim)
assert pvc.spec.volume_mode == "Filesystem" and pvc.status.phase == "Pending", pvc
assert core.read_namespaced_persistent_volume_claim("py-claim", ns).metadata.uid == pvc.metadata.uid
pvc = core.patch_namespaced_persistent_volume_claim("py-claim", ns, {"metadata": {"labels": {"tier": "db"}}})
assert pvc.metadata.labels == {"tier": "db"}, pvc.metadata
assert [c.metadata.name for c in core.list_namespaced_persistent_volume_claim(ns).items] == ["py-claim"]
message = refused(
    core.create_namespaced_persistent_volume_claim,
    ns,
    dict(claim, metadata={"name": "py-empty"}, spec={"accessModes": ["ReadWriteOnce"]}),
)
assert "spec.resources[storage]: Required value" in message, message
core.delete_namespaced_persistent_volume_claim("py-claim", ns)

# ReplicationControllers, and their scale subresource.
rc = core.create_namespaced_replication_controller(
    ns,
    {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "py-rc"},
        "spec": {"template": {"metadata": {"labels": {"app": "py"}}, "spec": {"containers": [container("web")]}}},
    },
)
assert rc.spec.replicas == 1 and rc.spec.selector == {"app": "py"}, rc.spec
assert rc.metadata.labels == {"app": "py"} and rc.status.replicas == 0, rc
scale = core.read_namespaced_replication_controller_scale("py-rc", ns)
assert scale.spec.replicas == 1, scale
# A JSON merge patch: keel's scale subresource does not take strategic merge patches yet.
scale = core.patch_namespaced_replication_controller_scale(
    "py-rc", ns, {"spec": {"replicas": 4}}, _content_type="application/merge-patch+json"
)
assert scale.spec.replicas == 4, scale
rc = core.read_namespaced_replication_controller("py-rc", ns)
assert rc.spec.replicas == 4 and rc.metadata.generation == 2, rc
message = refused(
    core.patch_namespaced_replication_controller, "py-rc", ns, {"spec": {"selector": {"app": "other"}}}
)
assert "spec.template.metadata.labels: Invalid value: " in message and "`selector` does not match template `labels`" in message, message
assert [r.metadata.name for r in core.list_namespaced_replication_controller(ns).items] == ["py-rc"]
core.delete_namespaced_replication_controller("py-rc", ns)

# PodTemplates.
pt = core.create_namespaced_pod_template(
    ns,
    {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "py-template"},
        "template": {"metadata": {"labels": {"app": "py"}}, "spec": {"containers": [container("main")]}},
    },
)
assert pt.template.spec.restart_policy == "Always" and pt.template.spec.dns_policy == "ClusterFirst", pt
assert pt.template.spec.containers[0].image_pull_policy == "IfNotPresent", pt
pt = core.patch_namespaced_pod_template("py-template", ns, {"template": {"metadata": {"labels": {"app": "py2"}}}})
assert pt.template.metadata.labels == {"app": "py2"} and pt.metadata.generation == 2, pt
assert [p.metadata.name for p in core.list_namespaced_pod_template(ns).items] == ["py-template"]
core.delete_namespaced_pod_template("py-template", ns)
assert core.list_namespaced_pod_template(ns).items == []

print("ok")
