//! kube-rs's `watcher` with `InitialListStrategy::StreamingList` (a streaming list,
//! `sendInitialEvents=true`, as client-go 1.35 and later list by default) against
//! `keel up` and `keel apiserver` on etcd 3.5.1: the objects there are come as `InitApply`,
//! the initial-events-end bookmark makes `InitDone`, and a change made afterwards comes as
//! `Apply` on the same watch.

use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use keel_testkit::kube::{Kube, Stack};
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};

mod common;

const NAMESPACE: &str = "streaming";
const LABEL: &str = "keel.test/role";
/// How long the watcher may take to bring the next event.
const PATIENCE: Duration = Duration::from_secs(30);

fn labelled(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([(LABEL.to_string(), "streamed".to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The watcher's next event, which must come within [`PATIENCE`] and be no error.
async fn next<S>(events: &mut S) -> Event<ConfigMap>
where
    S: Stream<Item = watcher::Result<Event<ConfigMap>>> + Unpin,
{
    tokio::time::timeout(PATIENCE, events.next())
        .await
        .expect("the watcher's next event in time")
        .expect("the watcher goes on")
        .expect("no watcher error")
}

async fn run(stack: Stack) {
    let kube = tokio::task::block_in_place(|| Kube::start(stack));
    let client = common::client(&kube).await;
    common::create_namespace(&client, NAMESPACE).await;
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &labelled(name))
            .await
            .expect("create a configmap");
    }

    let config = watcher::Config::default()
        .labels(&format!("{LABEL}=streamed"))
        .streaming_lists();
    let mut events = watcher::watcher(api.clone(), config).boxed();
    assert!(
        matches!(next(&mut events).await, Event::Init),
        "{stack:?}: the watcher starts with Init"
    );
    let mut initial = Vec::new();
    loop {
        match next(&mut events).await {
            Event::InitApply(cm) => initial.push(cm.name_any()),
            Event::InitDone => break,
            other => panic!("{stack:?}: {other} before InitDone"),
        }
    }
    initial.sort();
    assert_eq!(initial, ["a", "b"], "{stack:?}");

    api.create(&PostParams::default(), &labelled("c"))
        .await
        .expect("create a configmap");
    match next(&mut events).await {
        Event::Apply(cm) => assert_eq!(cm.name_any(), "c", "{stack:?}"),
        other => panic!("{stack:?}: {other} instead of the new configmap"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_watcher_works_with_keel_up() {
    run(Stack::Up).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_watcher_works_with_keel_apiserver_on_etcd() {
    run(Stack::OnEtcd).await;
}
