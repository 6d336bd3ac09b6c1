"""storage.k8s.io, autoscaling (v2 and v1), admissionregistration.k8s.io and
certificates.k8s.io with the Python kubernetes client: for one kind of each, create, read,
patch, list, watch (the ADDED of what was created, then the MODIFIED of a patch) and delete
through the typed API classes, with upstream's defaults read back, an invalid object answered
422 with upstream's message, and an HPA created as autoscaling/v2 read as autoscaling/v1.
Run by tests/api_groups_more.rs with KUBECONFIG and CSR_PEM (a PEM certificate request) in
the environment; prints "ok"."""

import base64
import os
import threading

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=os.environ["KUBECONFIG"])
api_client = client.ApiClient()
ns = "default"


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def cycle(name, create, read, patch, lister, delete, body, patch_body, kw):
    """Create, read, watch (ADDED then MODIFIED by a patch), list and delete one object."""
    created = create(body=body, **kw)
    check(created.metadata.name == name, f"created {created.metadata.name}")
    got = read(name=name, **kw)
    check(got.metadata.uid == created.metadata.uid, "read back the same object")
    w = watch.Watch()
    seen = []

    def follow():
        for event in w.stream(lister, field_selector=f"metadata.name={name}", timeout_seconds=20, **kw):
            seen.append((event["type"], event["object"]))
            if event["type"] == "MODIFIED":
                w.stop()

    t = threading.Thread(target=follow)
    t.start()
    import time

    deadline = time.time() + 10
    while not seen and time.time() < deadline:
        time.sleep(0.05)
    patched = patch(name=name, body=patch_body, **kw)
    t.join(20)
    check([s[0] for s in seen] == ["ADDED", "MODIFIED"], f"watch of {name}: {[s[0] for s in seen]}")
    listed = lister(**kw)
    check(name in [i.metadata.name for i in listed.items], f"{name} listed")
    delete(name=name, **kw)
    try:
        read(name=name, **kw)
        raise AssertionError(f"{name} still there")
    except ApiException as e:
        check(e.status == 404, f"read after delete: {e.status}")
    return created, patched


def refused(call, message):
    try:
        call()
    except ApiException as e:
        check(e.status == 422 and message in e.body, f"{e.status} {e.body}")
        return
    raise AssertionError(f"not refused: {message}")


# storage.k8s.io/v1 StorageClass
storage = client.StorageV1Api(api_client)
sc = client.V1StorageClass(metadata=client.V1ObjectMeta(name="py-fast"), provisioner="csi.example.com")
created, patched = cycle(
    "py-fast", storage.create_storage_class, storage.read_storage_class, storage.patch_storage_class,
    storage.list_storage_class, storage.delete_storage_class, sc,
    {"metadata": {"labels": {"tier": "fast"}}}, {},
)
check(created.reclaim_policy == "Delete" and created.volume_binding_mode == "Immediate", str(created))
check(patched.metadata.labels == {"tier": "fast"}, str(patched.metadata))
refused(
    lambda: storage.create_storage_class(body=client.V1StorageClass(
        metadata=client.V1ObjectMeta(name="py-bad"), provisioner="csi.example.com", reclaim_policy="Recycle")),
    'reclaimPolicy: Unsupported value: \\"Recycle\\": supported values: \\"Delete\\", \\"Retain\\"',
)

# autoscaling/v2 and v1 HorizontalPodAutoscaler
v2 = client.AutoscalingV2Api(api_client)
v1 = client.AutoscalingV1Api(api_client)
hpa = client.V2HorizontalPodAutoscaler(
    metadata=client.V1ObjectMeta(name="py-web"),
    spec=client.V2HorizontalPodAutoscalerSpec(
        scale_target_ref=client.V2CrossVersionObjectReference(api_version="apps/v1", kind="Deployment", name="web"),
        max_replicas=5,
    ),
)
made = v2.create_namespaced_horizontal_pod_autoscaler(namespace=ns, body=hpa)
check(made.spec.min_replicas == 1, str(made.spec))
check(made.spec.metrics[0].resource.target.average_utilization == 80, str(made.spec))
old = v1.read_namespaced_horizontal_pod_autoscaler(name="py-web", namespace=ns)
check(old.spec.target_cpu_utilization_percentage == 80, str(old.spec))
v1.patch_namespaced_horizontal_pod_autoscaler(name="py-web", namespace=ns, body={"spec": {"targetCPUUtilizationPercentage": 60}})
check(v2.read_namespaced_horizontal_pod_autoscaler(name="py-web", namespace=ns).spec.metrics[0].resource.target.average_utilization == 60, "v1 patch seen through v2")
v2.delete_namespaced_horizontal_pod_autoscaler(name="py-web", namespace=ns)
hpa1 = client.V1HorizontalPodAutoscaler(
    metadata=client.V1ObjectMeta(name="py-api"),
    spec=client.V1HorizontalPodAutoscalerSpec(
        scale_target_ref=client.V1CrossVersionObjectReference(api_version="apps/v1", kind="Deployment", name="api"),
        max_replicas=3,
    ),
)
_, patched = cycle(
    "py-api", v1.create_namespaced_horizontal_pod_autoscaler, v1.read_namespaced_horizontal_pod_autoscaler,
    v1.patch_namespaced_horizontal_pod_autoscaler, v1.list_namespaced_horizontal_pod_autoscaler,
    v1.delete_namespaced_horizontal_pod_autoscaler, hpa1, {"spec": {"maxReplicas": 4}}, {"namespace": ns},
)
check(patched.spec.max_replicas == 4 and patched.spec.min_replicas == 1, str(patched.spec))
refused(
    lambda: v2.create_namespaced_horizontal_pod_autoscaler(namespace=ns, body=client.V2HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name="py-bad"),
        spec=client.V2HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V2CrossVersionObjectReference(kind="Deployment", name="web"),
            min_replicas=3, max_replicas=2))),
    "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
)

# admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration
adm = client.AdmissionregistrationV1Api(api_client)
vwc = client.V1ValidatingWebhookConfiguration(
    metadata=client.V1ObjectMeta(name="py-check"),
    webhooks=[client.V1ValidatingWebhook(
        name="check.example.com", side_effects="None", admission_review_versions=["v1"],
        client_config=client.AdmissionregistrationV1WebhookClientConfig(url="https://check.example.com/validate"),
        rules=[client.V1RuleWithOperations(operations=["CREATE"], api_groups=["apps"], api_versions=["v1"], resources=["deployments"])],
    )],
)
created, patched = cycle(
    "py-check", adm.create_validating_webhook_configuration, adm.read_validating_webhook_configuration,
    adm.patch_validating_webhook_configuration, adm.list_validating_webhook_configuration,
    adm.delete_validating_webhook_configuration, vwc, {"metadata": {"labels": {"team": "a"}}}, {},
)
hook = created.webhooks[0]
check(hook.failure_policy == "Fail" and hook.match_policy == "Equivalent" and hook.timeout_seconds == 10, str(hook))
check(hook.rules[0].scope == "*", str(hook.rules))
vwc.metadata.name = "py-twice"
vwc.webhooks.append(vwc.webhooks[0])
refused(lambda: adm.create_validating_webhook_configuration(body=vwc), 'webhooks[1].name: Duplicate value: \\"check.example.com\\"')

# certificates.k8s.io/v1 CertificateSigningRequest
certs = client.CertificatesV1Api(api_client)
request = base64.b64encode(os.environ["CSR_PEM"].encode()).decode()
csr = client.V1CertificateSigningRequest(
    metadata=client.V1ObjectMeta(name="py-csr"),
    spec=client.V1CertificateSigningRequestSpec(request=request, signer_name="example.com/serving", usages=["server auth"]),
)
created, patched = cycle(
    "py-csr", certs.create_certificate_signing_request, certs.read_certificate_signing_request,
    certs.patch_certificate_signing_request, certs.list_certificate_signing_request,
    certs.delete_certificate_signing_request, csr, {"metadata": {"labels": {"app": "web"}}}, {},
)
check(created.spec.signer_name == "example.com/serving" and created.spec.request == request, str(created.spec))
csr.metadata.name = "py-nosigner"
csr.spec.signer_name = "nodots/x"
refused(lambda: certs.create_certificate_signing_request(body=csr), "should be a domain with at least two segments separated by dots")

print("ok")
