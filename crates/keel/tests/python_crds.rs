//! CustomResourceDefinitions with the Python `kubernetes` client (PyPI), against `keel up` and
//! against `keel apiserver` on etcd 3.5.1 (`tests/python/crds.py`): a CRD created with
//! `ApiextensionsV1Api` is Established; `CustomObjectsApi` creates, reads, lists, merge-patches,
//! replaces (a stale resourceVersion conflicts), watches (MODIFIED and ADDED) and deletes its
//! objects, reads and patches their status and scale subresources, and gets a schema error as
//! a 422 `ApiException` with upstream's message; the dynamic client finds the kind by
//! apiVersion and kind and creates, reads and deletes through it; `utils.create_from_yaml`
//! creates a CRD from a multi-document file, and a CRD with its objects with `apply=True`
//! (its typed path has no API class for a custom resource, which the script checks too).

use keel_testkit::kube::{Kube, Stack};

fn crds_with_python(stack: Stack) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/crds.py");
    Kube::start(stack).python_ok(script, &[]);
}

#[test]
fn python_crds_on_keel_up() {
    crds_with_python(Stack::Up);
}

#[test]
fn python_crds_on_keel_apiserver_on_etcd() {
    crds_with_python(Stack::OnEtcd);
}
