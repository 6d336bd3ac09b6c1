//! A small controller built on kube-rs's runtime (watcher, reflector, `Controller`,
//! `finalizer`) against `keel up`: for every ConfigMap labelled as a source it keeps a
//! mirror ConfigMap with the same data, owned by the source; a mirror edited by hand is put
//! back, and a deleted source's finalizer removes its mirror before the source goes. The
//! controller keeps working across a kill -9 and restart of `keel up`, and its reflector's
//! store ends equal to a fresh list.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};

use keel_testkit::kube::{Kube, Stack};

mod common;
use common::{client, eventually};

const NAMESPACE: &str = "kube-rs";
const SOURCES: &str = "keel.test/role=source";
const MIRRORS: &str = "keel.test/role=mirror";
const FINALIZER: &str = "keel.test/mirror";
/// How long the controller may take to converge after a change.
const CONVERGE: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("source has no uid")]
    NoUid,
}

/// What the reconciler needs: the namespace's ConfigMaps.
struct Context {
    configmaps: Api<ConfigMap>,
}

fn mirror_name(source: &str) -> String {
    format!("{source}-mirror")
}

fn data(cm: &ConfigMap) -> BTreeMap<String, String> {
    cm.data.clone().unwrap_or_default()
}

/// The mirror `source` should have.
fn desired_mirror(source: &ConfigMap) -> Result<ConfigMap, Error> {
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: source.name_any(),
        uid: source.meta().uid.clone().ok_or(Error::NoUid)?,
        controller: Some(true),
        block_owner_deletion: None,
    };
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(mirror_name(&source.name_any())),
            namespace: source.namespace(),
            labels: Some(BTreeMap::from([(
                "keel.test/role".to_string(),
                "mirror".to_string(),
            )])),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(data(source)),
        ..Default::default()
    })
}

/// Creates the mirror, or replaces it (with its resourceVersion: a 409 requeues) when its
/// data differs.
async fn apply_mirror(source: &ConfigMap, ctx: &Context) -> Result<Action, Error> {
    let mut desired = desired_mirror(source)?;
    let name = mirror_name(&source.name_any());
    match ctx.configmaps.get_opt(&name).await? {
        None => {
            ctx.configmaps
                .create(&PostParams::default(), &desired)
                .await?;
        }
        Some(current) if data(&current) != data(&desired) => {
            desired.metadata.resource_version = current.resource_version();
            ctx.configmaps
                .replace(&name, &PostParams::default(), &desired)
                .await?;
        }
        Some(_) => {}
    }
    Ok(Action::await_change())
}

async fn delete_mirror(source: &ConfigMap, ctx: &Context) -> Result<Action, Error> {
    let name = mirror_name(&source.name_any());
    match ctx.configmaps.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Action::await_change()),
        Err(e) => Err(e.into()),
    }
}

async fn reconcile(
    source: Arc<ConfigMap>,
    ctx: Arc<Context>,
) -> Result<Action, kube::runtime::finalizer::Error<Error>> {
    finalizer(&ctx.configmaps, FINALIZER, source, |event| async {
        match event {
            Event::Apply(cm) => apply_mirror(&cm, &ctx).await,
            Event::Cleanup(cm) => delete_mirror(&cm, &ctx).await,
        }
    })
    .await
}

fn error_policy(
    _source: Arc<ConfigMap>,
    _error: &kube::runtime::finalizer::Error<Error>,
    _ctx: Arc<Context>,
) -> Action {
    Action::requeue(Duration::from_millis(300))
}

fn source(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([(
                "keel.test/role".to_string(),
                "source".to_string(),
            )])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("value".to_string(), value.to_string())])),
        ..Default::default()
    }
}

/// Waits until the mirror of `name` holds `value` and is owned by the source.
async fn mirrored(api: &Api<ConfigMap>, name: &str, value: &str) {
    eventually(
        &format!("{name} mirrored with {value}"),
        CONVERGE,
        || async {
            let src = api.get(name).await.map_err(|e| e.to_string())?;
            let Some(mirror) = api
                .get_opt(&mirror_name(name))
                .await
                .map_err(|e| e.to_string())?
            else {
                return Ok(false);
            };
            let owned = mirror
                .owner_references()
                .iter()
                .any(|o| Some(&o.uid) == src.meta().uid.as_ref());
            Ok(owned && data(&mirror).get("value").map(String::as_str) == Some(value))
        },
    )
    .await;
}

async fn set_value(api: &Api<ConfigMap>, name: &str, value: &str) {
    let mut cm = api.get(name).await.expect("get");
    cm.data = Some(BTreeMap::from([("value".to_string(), value.to_string())]));
    api.replace(name, &PostParams::default(), &cm)
        .await
        .expect("replace");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_rs_controller_keeps_mirrors_in_step_with_keel_up() {
    let mut kube = tokio::task::block_in_place(|| Kube::start(Stack::Up));
    let client = client(&kube).await;
    common::create_namespace(&client, NAMESPACE).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);

    let controller = Controller::new(api.clone(), watcher::Config::default().labels(SOURCES))
        .owns(api.clone(), watcher::Config::default().labels(MIRRORS));
    let store = controller.store();
    let ctx = Arc::new(Context {
        configmaps: api.clone(),
    });
    let running = tokio::spawn(controller.run(reconcile, error_policy, ctx).for_each(
        |result| async move {
            if let Err(e) = result {
                eprintln!("reconcile failed (retried): {e:?}");
            }
        },
    ));

    for (name, value) in [("a", "1"), ("b", "2"), ("c", "3")] {
        api.create(&PostParams::default(), &source(name, value))
            .await
            .expect("create a source");
    }
    for (name, value) in [("a", "1"), ("b", "2"), ("c", "3")] {
        mirrored(&api, name, value).await;
    }
    let a = api.get("a").await.expect("get a");
    assert_eq!(
        a.finalizers(),
        [FINALIZER.to_string()],
        "the finalizer was added"
    );

    // A change to a source reaches its mirror.
    set_value(&api, "a", "1b").await;
    mirrored(&api, "a", "1b").await;

    // A mirror edited by hand is put back (the controller watches what it owns).
    set_value(&api, "b-mirror", "tampered").await;
    mirrored(&api, "b", "2").await;

    // Deleting a source runs its finalizer: the mirror goes first, then the source.
    api.delete("c", &DeleteParams::default())
        .await
        .expect("delete c");
    eventually("c and its mirror deleted", CONVERGE, || async {
        let c = api.get_opt("c").await.map_err(|e| e.to_string())?;
        let mirror = api.get_opt("c-mirror").await.map_err(|e| e.to_string())?;
        Ok(c.is_none() && mirror.is_none())
    })
    .await;

    // kill -9 and restart keel up: the watches reconnect and the controller carries on.
    tokio::task::block_in_place(|| kube.kill_and_restart());
    set_value(&api, "b", "2b").await;
    mirrored(&api, "b", "2b").await;

    // The reflector's store ends equal to a fresh list of the sources.
    let listed: BTreeMap<String, Option<String>> = api
        .list(&ListParams::default().labels(SOURCES))
        .await
        .expect("list the sources")
        .items
        .into_iter()
        .map(|cm| (cm.name_any(), cm.resource_version()))
        .collect();
    assert_eq!(listed.keys().collect::<Vec<_>>(), ["a", "b"]);
    eventually(
        "the reflector's store matches a fresh list",
        CONVERGE,
        || async {
            let cached: BTreeMap<String, Option<String>> = store
                .state()
                .iter()
                .map(|cm| (cm.name_any(), cm.resource_version()))
                .collect();
            Ok(cached == listed)
        },
    )
    .await;
    running.abort();
}
