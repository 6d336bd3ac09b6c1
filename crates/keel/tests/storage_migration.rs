//! A storage migration's no-op update (kube-storage-version-migrator's, or `kubectl replace`
//! of an unchanged object) writes again an object the store holds under another apiVersion,
//! in the one the apiserver stores now, and leaves alone an object already stored that way, as
//! kube-apiserver does (the update starts from the watch cache's object). On keel store, or on
//! etcd 3.5.1 with `KEEL_TEST_TARGET=etcd`.

use std::fs;
use std::time::{Duration, Instant};

use keel_apiserver::storage::{Etcd3, Object};
use keel_proto::etcdserverpb::PutRequest;
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_testkit::kube::Kube;
use keel_testkit::{Server, target_flavor};

/// Where kube-apiserver's storage layout keeps the test's Lease.
const KEY: &str = "/registry/leases/default/migrated";

/// The Lease as the store holds it.
async fn stored(store: &Server) -> Object {
    let (found, _) = Etcd3::new(store.channel().await)
        .get(KEY, "")
        .await
        .expect("get");
    found.expect("the lease is stored")
}

/// `kubectl get` of the Lease and `kubectl replace` of what it got: an update that changes
/// nothing the client sees.
fn replace_unchanged(kube: &Kube, scratch: &std::path::Path) {
    let got = kube.kubectl_ok(&["get", "lease", "migrated", "-o", "json"]);
    let file = scratch.join("lease.json");
    fs::write(&file, got).unwrap();
    kube.kubectl_ok(&["replace", "-f", file.to_str().unwrap()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_op_update_rewrites_an_object_stored_under_another_api_version() {
    let store = Server::start(target_flavor());
    let kube = Kube::start_on(&store.client_url);
    let scratch = tempfile::tempdir().unwrap();
    let manifest = scratch.path().join("create.yaml");
    fs::write(
        &manifest,
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: migrated\n  \
         namespace: default\nspec:\n  holderIdentity: a\n  leaseDurationSeconds: 40\n",
    )
    .unwrap();
    kube.kubectl_ok(&["create", "-f", manifest.to_str().unwrap()]);

    // The store holds it as an older version wrote it.
    let created = stored(&store).await;
    let text = String::from_utf8(created.value).unwrap();
    assert!(text.contains("\"coordination.k8s.io/v1\""), "{text}");
    let older = text.replace(
        "\"coordination.k8s.io/v1\"",
        "\"coordination.k8s.io/v1beta1\"",
    );
    let put = KvClient::new(store.channel().await)
        .put(PutRequest {
            key: KEY.into(),
            value: older.into_bytes(),
            ..Default::default()
        })
        .await
        .expect("put")
        .into_inner();
    let rewritten_at = put.header.expect("header").revision;
    // The apiserver serves it (from its watch cache) at that revision, in v1.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let rv = kube.kubectl_ok(&[
            "get",
            "lease",
            "migrated",
            "-o",
            "jsonpath={.apiVersion} {.metadata.resourceVersion}",
        ]);
        if rv.trim() == format!("coordination.k8s.io/v1 {rewritten_at}") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never served at {rewritten_at}: {rv}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // An unchanged update writes it again, in v1.
    replace_unchanged(&kube, scratch.path());
    let migrated = stored(&store).await;
    assert!(migrated.mod_revision > rewritten_at, "not written again");
    let text = String::from_utf8(migrated.value).unwrap();
    assert!(text.contains("\"coordination.k8s.io/v1\""), "{text}");
    assert!(!text.contains("v1beta1"), "{text}");

    // Stored in v1, an unchanged update writes nothing.
    replace_unchanged(&kube, scratch.path());
    assert_eq!(stored(&store).await.mod_revision, migrated.mod_revision);
}
