//! What the kube-rs tests share: a kube-rs client for a started `keel`, a namespace made,
//! and waiting for a condition.

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use keel_testkit::kube::Kube;
use kube::api::{ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};

/// A kube-rs client from `kube`'s admin kubeconfig.
pub async fn client(kube: &Kube) -> Client {
    let kubeconfig = Kubeconfig::read_from(&kube.kubeconfig).expect("read the kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a kube-rs config from keel's kubeconfig");
    Client::try_from(config).expect("a kube-rs client")
}

/// Creates the namespace `name`.
pub async fn create_namespace(client: &Client, name: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create the namespace");
}

/// Polls `check` until it holds, failing the test when `limit` passes first.
#[allow(dead_code, reason = "not every test binary waits")]
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, String>>,
{
    let started = Instant::now();
    loop {
        let last = match check().await {
            Ok(true) => return,
            Ok(false) => "not yet".to_string(),
            Err(e) => e,
        };
        assert!(
            started.elapsed() < limit,
            "{what}: not within {limit:?} ({last})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
