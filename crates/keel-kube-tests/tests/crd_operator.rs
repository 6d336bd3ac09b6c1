//! An operator built with kube-rs on a custom resource of its own, against `keel up`: the CRD
//! that kube's `#[derive(CustomResource)]` generates from a Rust struct (its schemars schema
//! with nullable, enum, map, range and CEL parts, the status and scale subresources, a printer
//! column and a short name) is accepted and established (`is_crd_established`); a
//! `Controller` reconciles each `Widget` by server-side applying a ConfigMap owned by it and
//! the Widget's status (through the status subresource, with `observedGeneration`), and comes
//! to rest (a no-op apply writes nothing). After a kill -9 and restart of `keel up` the old
//! Widgets, their status and their ConfigMaps are all there, and a restarted controller
//! reconciles the Widgets created since and the changes made since.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::watcher;
use kube::{Api, Client, CustomResource, CustomResourceExt, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::task::JoinHandle;

use keel_testkit::kube::{Kube, Stack};

mod common;
use common::{client, eventually};

const NAMESPACE: &str = "operator";
const MANAGER: &str = "widget-operator";
/// How long the controller may take to converge after a change.
const CONVERGE: Duration = Duration::from_secs(20);

/// A Widget: how many of what color, and what else to put in its ConfigMap.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wd",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas"
    ),
    printcolumn(name = "Color", type_ = "string", json_path = ".spec.color")
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "self.replicas <= 10"}]))]
struct WidgetSpec {
    color: Color,
    #[schemars(range(min = 0))]
    replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    extra: BTreeMap<String, String>,
}

#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Color {
    Red,
    Green,
    Blue,
}

/// What the operator last did for a Widget.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct WidgetStatus {
    observed_generation: Option<i64>,
    config_map: Option<String>,
    replicas: Option<i32>,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

struct Context {
    widgets: Api<Widget>,
    configmaps: Api<ConfigMap>,
    reconciles: AtomicUsize,
}

fn config_name(widget: &str) -> String {
    format!("{widget}-config")
}

/// Applies the Widget's ConfigMap (owned by it), then its status.
async fn reconcile(widget: Arc<Widget>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.reconciles.fetch_add(1, Ordering::Relaxed);
    let name = widget.name_any();
    let apply = PatchParams::apply(MANAGER).force();
    let mut data = widget.spec.extra.clone();
    data.insert("color".into(), format!("{:?}", widget.spec.color));
    data.insert("replicas".into(), widget.spec.replicas.to_string());
    let configmap = ConfigMap {
        metadata: ObjectMeta {
            name: Some(config_name(&name)),
            owner_references: widget.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    };
    ctx.configmaps
        .patch(&config_name(&name), &apply, &Patch::Apply(&configmap))
        .await?;
    let status = json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "status": WidgetStatus {
            observed_generation: widget.metadata.generation,
            config_map: Some(config_name(&name)),
            replicas: Some(widget.spec.replicas),
        },
    });
    ctx.widgets
        .patch_status(&name, &apply, &Patch::Apply(&status))
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_widget: Arc<Widget>, error: &Error, _ctx: Arc<Context>) -> Action {
    eprintln!("reconcile failed (retried): {error:?}");
    Action::requeue(Duration::from_millis(300))
}

/// Runs the operator's controller on `client` until the task is aborted.
fn start_controller(client: &Client) -> (JoinHandle<()>, Arc<Context>) {
    let widgets: Api<Widget> = Api::namespaced(client.clone(), NAMESPACE);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let ctx = Arc::new(Context {
        widgets: widgets.clone(),
        configmaps: configmaps.clone(),
        reconciles: AtomicUsize::new(0),
    });
    let controller = Controller::new(widgets, watcher::Config::default())
        .owns(configmaps, watcher::Config::default())
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                eprintln!("controller: {e:?}");
            }
        });
    (tokio::spawn(controller), ctx)
}

fn widget(name: &str, color: Color, replicas: i32) -> Widget {
    let mut widget = Widget::new(
        name,
        WidgetSpec {
            color,
            replicas,
            note: None,
            extra: BTreeMap::from([("owner".to_string(), "test".to_string())]),
        },
    );
    widget.metadata.namespace = Some(NAMESPACE.into());
    widget
}

/// Whether the Widget's status and ConfigMap show its current spec.
async fn is_reconciled(
    client: &Client,
    name: &str,
    color: &str,
    replicas: i32,
) -> Result<bool, kube::Error> {
    let widgets: Api<Widget> = Api::namespaced(client.clone(), NAMESPACE);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let widget = widgets.get(name).await?;
    let want = WidgetStatus {
        observed_generation: widget.metadata.generation,
        config_map: Some(config_name(name)),
        replicas: Some(replicas),
    };
    if widget.status.as_ref() != Some(&want) {
        return Ok(false);
    }
    let Some(configmap) = configmaps.get_opt(&config_name(name)).await? else {
        return Ok(false);
    };
    let owned = configmap.owner_references().iter().any(|o| {
        Some(&o.uid) == widget.meta().uid.as_ref()
            && o.kind == "Widget"
            && o.controller == Some(true)
    });
    let data = configmap.data.unwrap_or_default();
    Ok(owned
        && data.get("color").map(String::as_str) == Some(color)
        && data.get("replicas") == Some(&replicas.to_string())
        && data.get("owner").map(String::as_str) == Some("test"))
}

/// Waits until the Widget's status and ConfigMap show its current spec.
async fn reconciled(client: &Client, name: &str, color: &str, replicas: i32) {
    eventually(&format!("{name} reconciled"), CONVERGE, || async {
        is_reconciled(client, name, color, replicas)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
}

/// A merge patch of the Widget's spec.
async fn patch_spec(widgets: &Api<Widget>, name: &str, spec: serde_json::Value) {
    let patch = Patch::Merge(json!({ "spec": spec }));
    widgets
        .patch(name, &PatchParams::default(), &patch)
        .await
        .unwrap_or_else(|e| panic!("patch {name}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_rs_operator_reconciles_its_custom_resources_across_a_restart() {
    let mut kube = tokio::task::block_in_place(|| Kube::start(Stack::Up));
    let client = client(&kube).await;
    common::create_namespace(&client, NAMESPACE).await;

    // The CRD kube derives from the struct is accepted and established.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = Widget::crd();
    crds.create(&PostParams::default(), &crd)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "create {}: {e}\n{}",
                serde_json::to_string_pretty(&crd).unwrap_or_default(),
                kube.log()
            )
        });
    let name = crd.metadata.name.clone().unwrap_or_default();
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(crds.clone(), &name, conditions::is_crd_established()),
    )
    .await
    .expect("established within 10 s")
    .expect("watch the CRD");

    // The schema's parts are enforced: the enum, the range and the CEL rule.
    let widgets: Api<Widget> = Api::namespaced(client.clone(), NAMESPACE);
    for (bad, message) in [
        (
            json!({"color": "pink", "replicas": 1}),
            r#"spec.color: Unsupported value: "pink": supported values: "red", "green", "blue""#,
        ),
        (
            json!({"color": "red", "replicas": -1}),
            "spec.replicas in body should be greater than or equal to 0",
        ),
        (
            json!({"color": "red", "replicas": 11}),
            "failed rule: self.replicas <= 10",
        ),
    ] {
        let object = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "bad"}, "spec": bad,
        });
        let raw: Api<kube::api::DynamicObject> = Api::namespaced_with(
            client.clone(),
            NAMESPACE,
            &kube::api::ApiResource::erase::<Widget>(&()),
        );
        let refused = raw
            .create(
                &PostParams::default(),
                &serde_json::from_value(object).expect("an object"),
            )
            .await;
        match refused {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{status:?}");
                assert!(status.message.contains(message), "{}", status.message);
            }
            other => panic!("{bad} was not refused: {other:?}"),
        }
    }

    let (running, ctx) = start_controller(&client);
    for (name, color, replicas) in [("a", Color::Red, 1), ("b", Color::Blue, 2)] {
        widgets
            .create(&PostParams::default(), &widget(name, color, replicas))
            .await
            .expect("create a widget");
    }
    reconciled(&client, "a", "Red", 1).await;
    reconciled(&client, "b", "Blue", 2).await;
    // A change of the spec is reconciled (a new generation); so is a scale.
    patch_spec(&widgets, "a", json!({"color": "green"})).await;
    reconciled(&client, "a", "Green", 1).await;
    widgets
        .patch_scale(
            "b",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("scale b");
    reconciled(&client, "b", "Blue", 3).await;
    // The controller comes to rest: its applies that change nothing write nothing, so they
    // start no more reconciles.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let resting = ctx.reconciles.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        ctx.reconciles.load(Ordering::Relaxed),
        resting,
        "the controller does not rest"
    );
    let a = widgets.get("a").await.expect("get a");
    running.abort();

    // kill -9 and restart keel up, and the operator with it.
    tokio::task::block_in_place(|| kube.kill_and_restart());
    let client = common::client(&kube).await;
    let widgets: Api<Widget> = Api::namespaced(client.clone(), NAMESPACE);
    let after = widgets.get("a").await.expect("a survived");
    assert_eq!(after.resource_version(), a.resource_version());
    assert_eq!(after.status, a.status);
    assert_eq!(after.spec.color, Color::Green);
    let (running, _ctx) = start_controller(&client);
    reconciled(&client, "a", "Green", 1).await;
    reconciled(&client, "b", "Blue", 3).await;
    widgets
        .create(&PostParams::default(), &widget("c", Color::Red, 5))
        .await
        .expect("create c");
    reconciled(&client, "c", "Red", 5).await;
    let extra = json!({"owner": "test", "k": "v"});
    patch_spec(&widgets, "b", json!({"note": "x", "extra": extra})).await;
    reconciled(&client, "b", "Blue", 3).await;
    let b = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .get(&config_name("b"))
        .await
        .expect("b's ConfigMap");
    assert_eq!(
        b.data.unwrap_or_default().get("k").map(String::as_str),
        Some("v")
    );
    // kubectl sees the printer column and the short name.
    let table = tokio::task::block_in_place(|| kube.kubectl_ok(&["get", "wd", "-n", NAMESPACE]));
    assert!(
        table.starts_with("NAME") && table.contains("COLOR") && table.contains("green"),
        "{table}"
    );
    running.abort();
}
