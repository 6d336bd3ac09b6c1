"""The built-in groups policy/v1, networking.k8s.io/v1, discovery.k8s.io/v1,
scheduling.k8s.io/v1 and node.k8s.io/v1 with the Python kubernetes client's typed APIs:
PolicyV1Api (PodDisruptionBudgets), NetworkingV1Api (Ingresses), DiscoveryV1Api
(EndpointSlices), SchedulingV1Api (PriorityClasses) and NodeV1Api (RuntimeClasses) each
create, read, patch, list, watch (the patch seen as MODIFIED from the list's
resourceVersion) and delete one object, whose defaults the client reads back. Run by
tests/api_groups.rs with KUBECONFIG in the environment; prints "ok"."""

import os

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=os.environ["KUBECONFIG"])
api_client = client.ApiClient()
ns = "default"


def exercise(name, create, read, patch, list_fn, delete, body, check, patched, namespaced=True):
    """Create, read, patch, list, watch and delete one object through a typed API."""
    args = [ns] if namespaced else []
    created = create(*args, body)
    assert created.metadata.name == name, created
    got = read(name, *args)
    check(got)
    listed = list_fn(*args)
    assert name in [item.metadata.name for item in listed.items], listed
    rv = listed.metadata.resource_version
    patch(name, *args, patched)
    events = []
    for event in watch.Watch().stream(list_fn, *args, resource_version=rv, timeout_seconds=5):
        events.append((event["type"], event["object"].metadata.name))
        if event["type"] == "MODIFIED" and event["object"].metadata.name == name:
            break
    assert ("MODIFIED", name) in events, events
    delete(name, *args)
    try:
        read(name, *args)
        raise AssertionError(f"{name} still there after delete")
    except ApiException as e:
        assert e.status == 404, e


def check_pdb(pdb):
    assert pdb.spec.min_available == 1, pdb
    assert pdb.status.disruptions_allowed == 0 and pdb.status.expected_pods == 0, pdb
    assert pdb.metadata.generation == 1, pdb


policy = client.PolicyV1Api(api_client)
exercise(
    "py-pdb",
    policy.create_namespaced_pod_disruption_budget,
    policy.read_namespaced_pod_disruption_budget,
    policy.patch_namespaced_pod_disruption_budget,
    policy.list_namespaced_pod_disruption_budget,
    policy.delete_namespaced_pod_disruption_budget,
    {"metadata": {"name": "py-pdb"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "py"}}}},
    check_pdb,
    {"spec": {"minAvailable": 2}},
)


def check_ingress(ing):
    path = ing.spec.rules[0].http.paths[0]
    assert path.path_type == "Prefix" and path.backend.service.port.number == 80, ing
    assert ing.status.load_balancer is not None, ing


networking = client.NetworkingV1Api(api_client)
rule = {"host": "py.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}
exercise(
    "py-ing",
    networking.create_namespaced_ingress,
    networking.read_namespaced_ingress,
    networking.patch_namespaced_ingress,
    networking.list_namespaced_ingress,
    networking.delete_namespaced_ingress,
    {"metadata": {"name": "py-ing"}, "spec": {"rules": [rule]}},
    check_ingress,
    {"metadata": {"labels": {"patched": "yes"}}},
)
try:
    networking.create_namespaced_ingress(ns, {"metadata": {"name": "py-bad"}, "spec": {}})
    raise AssertionError("an ingress without rules or a default backend was created")
except ApiException as e:
    assert e.status == 422, e
    assert "either `defaultBackend` or `rules` must be specified" in e.body, e.body


def check_slice(es):
    port = es.ports[0]
    assert port.name == "" and port.protocol == "TCP" and port.port == 8080, es
    assert es.address_type == "IPv4" and es.endpoints[0].addresses == ["10.9.8.7"], es


discovery = client.DiscoveryV1Api(api_client)
exercise(
    "py-es",
    discovery.create_namespaced_endpoint_slice,
    discovery.read_namespaced_endpoint_slice,
    discovery.patch_namespaced_endpoint_slice,
    discovery.list_namespaced_endpoint_slice,
    discovery.delete_namespaced_endpoint_slice,
    {"metadata": {"name": "py-es"}, "addressType": "IPv4",
     "endpoints": [{"addresses": ["10.9.8.7"]}], "ports": [{"port": 8080}]},
    check_slice,
    {"endpoints": [{"addresses": ["10.9.8.6"]}]},
)


def check_pc(pc):
    assert pc.value == 7 and pc.preemption_policy == "PreemptLowerPriority", pc
    assert pc.metadata.generation == 1, pc


scheduling = client.SchedulingV1Api(api_client)
names = [pc.metadata.name for pc in scheduling.list_priority_class().items]
assert "system-node-critical" in names and "system-cluster-critical" in names, names
exercise(
    "py-pc",
    scheduling.create_priority_class,
    scheduling.read_priority_class,
    scheduling.patch_priority_class,
    scheduling.list_priority_class,
    scheduling.delete_priority_class,
    {"metadata": {"name": "py-pc"}, "value": 7},
    check_pc,
    {"description": "patched"},
    namespaced=False,
)


def check_rc(rc):
    assert rc.handler == "runsc" and rc.scheduling.node_selector == {"sandbox": "gvisor"}, rc


node = client.NodeV1Api(api_client)
exercise(
    "py-rc",
    node.create_runtime_class,
    node.read_runtime_class,
    node.patch_runtime_class,
    node.list_runtime_class,
    node.delete_runtime_class,
    {"metadata": {"name": "py-rc"}, "handler": "runsc", "scheduling": {"nodeSelector": {"sandbox": "gvisor"}}},
    check_rc,
    {"metadata": {"labels": {"patched": "yes"}}},
    namespaced=False,
)

print("ok")
