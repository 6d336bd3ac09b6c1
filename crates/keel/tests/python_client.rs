//! The Python `kubernetes` client (PyPI) against `keel up` and against `keel apiserver` on
//! etcd 3.5.1: create and AlreadyExists, a value of the wrong type (400, and 422 from a
//! patch) and a ConfigMap above 1 MiB (422) refused, a paginated list, a watch from a resourceVersion,
//! a watch with `allow_watch_bookmarks` (its BOOKMARK kept as the resourceVersion to resume
//! from), a Service's delete read as the deleted Service, an apply of another apiVersion refused
//! 400, and a 410 after compaction handled by relisting (`tests/python/client.py`).

use keel_testkit::CtlVersion;
use keel_testkit::kube::{Kube, Stack};

fn run(stack: Stack) {
    let kube = Kube::start(stack);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/client.py");
    let etcdctl = format!(
        "{} --endpoints={}",
        CtlVersion::V35.bin().display(),
        kube.store_url
    );
    kube.python_ok(script, &[("KEEL_ETCDCTL", &etcdctl)]);
}

#[test]
fn the_python_client_works_with_keel_up() {
    run(Stack::Up);
}

#[test]
fn the_python_client_works_with_keel_apiserver_on_etcd() {
    run(Stack::OnEtcd);
}
