"""The Python kubernetes client against keel: create, values of the wrong type and data too
large refused, list with pagination, watch from a resourceVersion, a watch with bookmarks, a
Service delete read as the Service it answers, an apply of another apiVersion refused 400, and
a 410 after compaction handled by relisting. Run by tests/python_client.rs with KUBECONFIG and
KEEL_ETCDCTL (a command line reaching the store) in the environment."""

import json
import os
import subprocess
import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=os.environ["KUBECONFIG"])
v1 = client.CoreV1Api()
ns = "py"

v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
for i in range(5):
    v1.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"c{i}"), data={"i": str(i)})
    )

# A cluster that publishes its root CA (kube-controller-manager's root-ca-cert-publisher)
# has kube-root-ca.crt in every namespace, this one too once the publisher has seen it.
published = []
if any(cm.metadata.name == "kube-root-ca.crt" for cm in v1.list_namespaced_config_map("default").items):
    published = ["kube-root-ca.crt"]
    for _ in range(600):
        if any(cm.metadata.name == "kube-root-ca.crt" for cm in v1.list_namespaced_config_map(ns).items):
            break
        time.sleep(0.1)
    else:
        sys.exit(f"kube-root-ca.crt is published in default but not in {ns}")

try:
    v1.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="c0")))
    sys.exit("a second create of c0 succeeded")
except ApiException as e:
    assert e.status == 409 and "AlreadyExists" in e.body, e


def refused(call, code, reason, message):
    """Runs call, which must fail with a Status of this code, reason and message."""
    try:
        call()
    except ApiException as e:
        status = json.loads(e.body)
        assert (e.status, status["reason"], status["message"]) == (code, reason, message), e.body
        return status
    sys.exit(f"{call} succeeded")


def raw(method, path, body, content_type="application/json"):
    """A request the client's models would refuse to send: its code and decoded answer."""
    api = v1.api_client
    method, url, headers, data, _ = api.param_serialize(
        method,
        path,
        body=body,
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method, url, headers, data)
    response.read()
    return response.status, json.loads(response.data)


# A value its field's Go type does not take, and data above 1 MiB: refused as
# kube-apiserver refuses them, nothing stored or changed.
code, answer = raw("POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "typed"}, "data": {"y": 5}})
assert (code, answer["reason"], answer["message"]) == (
    400,
    "BadRequest",
    'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number '
    "into Go struct field ConfigMap.data of type string",
), answer
refused(
    lambda: v1.patch_namespaced_config_map("c0", ns, {"data": {"i": 7}}),
    422,
    "Invalid",
    ' "" is invalid: patch: Invalid value: "map[data:map[i:7]]": cannot convert int64 to string',
)
status = refused(
    lambda: v1.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="big"), data={"a": "x" * (1024 * 1024 + 1)})
    ),
    422,
    "Invalid",
    'ConfigMap "big" is invalid: []: Too long: may not be more than 1048576 bytes',
)
assert status["details"]["causes"] == [
    {"reason": "FieldValueTooLong", "message": "Too long: may not be more than 1048576 bytes", "field": "[]"}
], status
assert v1.read_namespaced_config_map("c0", ns).data == {"i": "0"}

# Pagination: 2 per page, the continue token pinned to the first page's revision.
names, token, pages = [], None, 0
while True:
    page = v1.list_namespaced_config_map(ns, limit=2, _continue=token)
    pages += 1
    names += [cm.metadata.name for cm in page.items]
    if pages == 1:
        assert page.metadata.remaining_item_count == 3 + len(published), page.metadata
    token = page.metadata._continue
    if not token:
        break
assert names == [f"c{i}" for i in range(5)] + published, names
assert pages == 3, pages

# A watch from a list's resourceVersion sees exactly the changes after it.
rv = v1.list_namespaced_config_map(ns).metadata.resource_version
v1.patch_namespaced_config_map("c1", ns, {"data": {"i": "changed"}})
v1.delete_namespaced_config_map("c2", ns)
seen = []
w = watch.Watch()
for event in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=5):
    seen.append((event["type"], event["object"].metadata.name))
    if len(seen) == 2:
        w.stop()
assert seen == [("MODIFIED", "c1"), ("DELETED", "c2")], seen

# A filtered watch: an update into the selector is ADDED, out of it DELETED.
since = v1.list_namespaced_config_map(ns).metadata.resource_version
v1.patch_namespaced_config_map("c3", ns, {"metadata": {"labels": {"sel": "yes"}}})
v1.patch_namespaced_config_map("c3", ns, {"data": {"x": "1"}})
v1.patch_namespaced_config_map("c3", ns, {"metadata": {"labels": {"sel": None}}})
v1.patch_namespaced_config_map("c4", ns, {"data": {"x": "1"}})
seen = []
w = watch.Watch()
for event in w.stream(
    v1.list_namespaced_config_map, ns, resource_version=since, label_selector="sel=yes", timeout_seconds=5
):
    seen.append((event["type"], event["object"].metadata.name))
    if len(seen) == 3:
        w.stop()
assert seen == [("ADDED", "c3"), ("MODIFIED", "c3"), ("DELETED", "c3")], seen

# Bookmarks: a watch with allow_watch_bookmarks gets one 2 s before it ends, after the change
# it sent and not older than it; the client keeps its resourceVersion to resume from.
since = v1.list_namespaced_config_map(ns).metadata.resource_version
changed = v1.patch_namespaced_config_map("c0", ns, {"data": {"i": "b"}}).metadata.resource_version
w = watch.Watch()
seen = [
    (event["type"], event["raw_object"]["metadata"].get("name"))
    for event in w.stream(
        v1.list_namespaced_config_map, ns, resource_version=since, allow_watch_bookmarks=True, timeout_seconds=3
    )
]
assert seen == [("MODIFIED", "c0"), ("BOOKMARK", None)], seen
assert int(w.resource_version) >= int(changed), (w.resource_version, changed)

# Deleting a Service answers the deleted Service (its registry's ReturnDeletedObject), which
# the typed client reads, as do ServiceAccounts and ResourceQuotas; a ConfigMap's delete
# answers a Status.
v1.create_namespaced_service(
    ns,
    client.V1Service(
        metadata=client.V1ObjectMeta(name="s"), spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)])
    ),
)
deleted = v1.delete_namespaced_service("s", ns)
assert (deleted.kind, deleted.metadata.name, deleted.spec.ports[0].port) == ("Service", "s", 80), deleted
v1.create_namespaced_service_account(ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="sa")))
assert v1.delete_namespaced_service_account("sa", ns).metadata.name == "sa"
v1.create_namespaced_resource_quota(
    ns, client.V1ResourceQuota(metadata=client.V1ObjectMeta(name="q"), spec=client.V1ResourceQuotaSpec(hard={"pods": "9"}))
)
assert v1.delete_namespaced_resource_quota("q", ns).spec.hard == {"pods": "9"}
assert v1.delete_namespaced_config_map("c4", ns)["status"] == "Success"

# An apply of another apiVersion than the endpoint's is refused before anything is made of it.
code, answer = raw(
    "PATCH",
    f"/api/v1/namespaces/{ns}/configmaps/c0?fieldManager=py",
    {"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "c0"}, "spec": {"replicas": 1}},
    content_type="application/apply-patch+yaml",
)
assert (code, answer["reason"], answer["message"]) == (
    400,
    "BadRequest",
    "invalid object type: apps/v1, Kind=ConfigMap",
), answer

# Compact past rv: a watch from it gets 410 Gone, and a relist recovers.
latest = v1.list_namespaced_config_map(ns).metadata.resource_version
subprocess.run(os.environ["KEEL_ETCDCTL"].split() + ["compact", latest], check=True, capture_output=True)
try:
    for event in watch.Watch().stream(
        v1.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=5
    ):
        sys.exit(f"a watch from a compacted resourceVersion gave {event['type']}")
    sys.exit("a watch from a compacted resourceVersion ended without an error")
except ApiException as e:
    assert e.status == 410, e
relisted = v1.list_namespaced_config_map(ns)
assert [cm.metadata.name for cm in relisted.items] == ["c0", "c1", "c3"] + published
assert int(relisted.metadata.resource_version) >= int(latest)
try:
    v1.list_namespaced_config_map(ns, resource_version=rv, resource_version_match="Exact")
    sys.exit("an exact list at a compacted resourceVersion succeeded")
except ApiException as e:
    assert e.status == 410 and "Expired" in e.body, e
print("ok")
