//! What the kube-rs tests share: a kube-rs client for a started `keel`.

use keel_testkit::kube::Kube;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A kube-rs client from `kube`'s admin kubeconfig.
pub async fn client(kube: &Kube) -> Client {
    let kubeconfig = Kubeconfig::read_from(&kube.kubeconfig).expect("read the kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a kube-rs config from keel's kubeconfig");
    Client::try_from(config).expect("a kube-rs client")
}
