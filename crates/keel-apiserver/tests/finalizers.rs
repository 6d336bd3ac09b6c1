//! The update that removes the last finalizer of an object marked for deletion, on a keel
//! store: as kube-apiserver's `Store.Update` (errEmptiedFinalizers, then
//! deleteWithoutFinalizers, in staging/src/k8s.io/apiserver/pkg/registry/generic/registry/
//! store.go), the object is deleted as stored, in one write; the object without its
//! finalizers is never written, so a crash cannot leave it behind, marked for deletion with
//! nothing left that would ever remove it.

use std::sync::Arc;
use std::time::Duration;

use keel_apiserver::metrics::Metrics;
use keel_apiserver::registry::store::{DeleteOptions, Registry};
use keel_apiserver::storage::{Etcd3, KeyLayout};
use keel_testkit::{Flavor, Server};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_last_finalizer_deletes_in_one_write() {
    let server = Server::start(Flavor::Keel);
    let storage = Etcd3::new(server.channel().await);
    let kinds = keel_apiserver::registry::kinds()
        .into_iter()
        .filter(|k| ["configmaps", "namespaces"].contains(&k.info().resource))
        .collect();
    let registry = Registry::new(
        storage.clone().into(),
        KeyLayout::default(),
        kinds,
        Duration::from_secs(3600),
        true,
        Arc::new(Metrics::new()),
    );
    let (namespaces, configmaps) = (registry.core("namespaces"), registry.core("configmaps"));
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}});
    registry.create(namespaces, None, ns, false).await.unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    registry
        .create(configmaps, Some("default"), cm, false)
        .await
        .unwrap();
    let marked = registry
        .delete(
            configmaps,
            Some("default"),
            "held",
            &DeleteOptions::default(),
        )
        .await
        .unwrap();
    assert!(
        !marked.finished,
        "held by its finalizer: {:?}",
        marked.object
    );
    let key = KeyLayout::default().object("configmaps", Some("default"), "held");
    let (_, marked_at) = storage.get(&key, "").await.unwrap();

    let (answer, _) = registry
        .update(configmaps, Some("default"), "held", None, false, |now| {
            let mut obj = now.cloned().unwrap();
            obj["metadata"]["finalizers"] = Value::Array(Vec::new());
            Ok(obj)
        })
        .await
        .unwrap();
    assert_eq!(answer["metadata"]["name"], "held");
    // The answer is the request's object, without the finalizer, as kube-apiserver's.
    assert!(
        answer["metadata"]["finalizers"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{answer}"
    );
    let (gone, now) = storage.get(&key, "").await.unwrap();
    assert!(gone.is_none(), "still stored: {gone:?}");
    assert_eq!(
        now,
        marked_at + 1,
        "one write, the delete: the object without its finalizer was never stored"
    );
}
