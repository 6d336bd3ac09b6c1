//! What the fault tests of the new API groups and the garbage collector share
//! (`apiserver_follower_gc`, `apiserver_power_loss_gc`, `overload_gc`): objects of apps/v1,
//! rbac.authorization.k8s.io/v1, core/v1 and a custom resource, each carrying a value of the
//! test's in an annotation, written and read back through kubectl ([`Api`]), with owner
//! references as the deployment and replicaset controllers write them; every acknowledged
//! write checked against the store ([`check_kept`]); a resumable watch recording the
//! resourceVersions it delivers (`keel_testkit::rv_watch`, reading [`value_of`]); and the collector's end state ([`leftovers`]:
//! no dependent whose owner is gone, no owner held by `foregroundDeletion`).

#![allow(dead_code)]

pub mod load;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use keel_testkit::configmap_writer::{Api, rv_of};
use keel_testkit::kube::Kube;
use keel_testkit::rv_watch::Watched;
use serde_json::{Value, json};

/// The annotation holding the test's value.
pub const VALUE: &str = "keel.test/v";

/// The kinds the tests write, in the `default` namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Deployment,
    ReplicaSet,
    Pod,
    ConfigMap,
    RoleBinding,
    /// `widgets.example.com/v1`, the custom resource of [`WIDGETS_CRD`].
    Widget,
}

/// Every kind, owners before their dependents.
pub const KINDS: [Kind; 6] = [
    Kind::Deployment,
    Kind::ReplicaSet,
    Kind::Pod,
    Kind::ConfigMap,
    Kind::RoleBinding,
    Kind::Widget,
];

impl Kind {
    /// `apiVersion` and `kind`.
    pub fn type_meta(self) -> (&'static str, &'static str) {
        match self {
            Kind::Deployment => ("apps/v1", "Deployment"),
            Kind::ReplicaSet => ("apps/v1", "ReplicaSet"),
            Kind::Pod => ("v1", "Pod"),
            Kind::ConfigMap => ("v1", "ConfigMap"),
            Kind::RoleBinding => ("rbac.authorization.k8s.io/v1", "RoleBinding"),
            Kind::Widget => ("example.com/v1", "Widget"),
        }
    }

    /// The collection's path in `default`.
    pub fn path(self) -> String {
        let (api_version, kind) = self.type_meta();
        let prefix = if api_version == "v1" {
            "/api/v1".to_string()
        } else {
            format!("/apis/{api_version}")
        };
        let plural = format!("{}s", kind.to_lowercase());
        format!("{prefix}/namespaces/default/{plural}")
    }

    /// A valid object of this kind named `name`, with `value` in [`VALUE`], owned by
    /// `owners`.
    pub fn manifest(self, name: &str, value: &str, owners: &[Owner]) -> Value {
        let (api_version, kind) = self.type_meta();
        let mut metadata = json!({"name": name, "namespace": "default",
            "labels": {"app": name}, "annotations": {VALUE: value}});
        if !owners.is_empty() {
            let refs: Vec<Value> = owners.iter().map(Owner::reference).collect();
            metadata["ownerReferences"] = refs.into();
        }
        let pod_spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
        let workload = json!({"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}});
        let mut obj = json!({"apiVersion": api_version, "kind": kind, "metadata": metadata});
        match self {
            Kind::Deployment | Kind::ReplicaSet => obj["spec"] = workload,
            Kind::Pod => obj["spec"] = pod_spec,
            Kind::ConfigMap => obj["data"] = json!({"v": value}),
            Kind::RoleBinding => {
                obj["roleRef"] = json!({"apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole", "name": "view"});
                obj["subjects"] = json!([{"apiGroup": "rbac.authorization.k8s.io",
                    "kind": "User", "name": value}]);
            }
            Kind::Widget => obj["spec"] = json!({"size": value}),
        }
        obj
    }
}

/// An owner, as its dependents' ownerReferences name it.
#[derive(Clone, Debug)]
pub struct Owner {
    pub kind: Kind,
    pub name: String,
    pub uid: String,
}

impl Owner {
    /// The owner an answer to a create is.
    pub fn of(kind: Kind, answer: &Value) -> Owner {
        Owner {
            kind,
            name: answer["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .into(),
            uid: uid_of(answer).into(),
        }
    }

    /// The ownerReference a controller writes: `controller` and `blockOwnerDeletion`.
    pub fn reference(&self) -> Value {
        let (api_version, kind) = self.kind.type_meta();
        json!({"apiVersion": api_version, "kind": kind, "name": self.name, "uid": self.uid,
            "controller": true, "blockOwnerDeletion": true})
    }
}

/// An object's uid.
pub fn uid_of(obj: &Value) -> &str {
    obj["metadata"]["uid"].as_str().unwrap_or_default()
}

/// The custom resource definition of `widgets.example.com`.
pub fn widgets_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}})
}

/// Creates the widgets CRD through `api` and waits until widgets can be listed.
pub fn create_widgets_crd(api: &Api) {
    api.run(
        &[
            "create",
            "--raw",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "-f",
            "-",
        ],
        Some(&widgets_crd()),
    )
    .unwrap_or_else(|e| panic!("create the widgets CRD: {e}"));
    eventually("widgets can be listed", Duration::from_secs(30), || {
        api.run(&["get", "--raw", &Kind::Widget.path()], None)
            .is_ok()
    });
}

/// Creates `body`, an object of `kind`: the answer.
pub fn create(api: &Api, kind: Kind, body: &Value) -> Result<Value, String> {
    api.run(&["create", "--raw", &kind.path(), "-f", "-"], Some(body))
}

/// Replaces the object of `kind` named in `body` (which carries the resourceVersion).
pub fn replace(api: &Api, kind: Kind, body: &Value) -> Result<Value, String> {
    let name = body["metadata"]["name"].as_str().unwrap_or_default();
    let path = format!("{}/{name}", kind.path());
    api.run(&["replace", "--raw", &path, "-f", "-"], Some(body))
}

/// Deletes the object of `kind` named `name` with `policy` (`Foreground`, `Background`).
pub fn delete(api: &Api, kind: Kind, name: &str, policy: &str) -> Result<Value, String> {
    let path = format!("{}/{name}", kind.path());
    let options = json!({"kind": "DeleteOptions", "apiVersion": "v1",
        "propagationPolicy": policy});
    api.run(&["delete", "--raw", &path, "-f", "-"], Some(&options))
}

/// Every object of `kind`, and the list's resourceVersion.
pub fn list(api: &Api, kind: Kind) -> Result<(i64, Vec<Value>), String> {
    let list = api.run(&["get", "--raw", &kind.path()], None)?;
    let items = list["items"].as_array().cloned().unwrap_or_default();
    Ok((rv_of(&list), items))
}

/// Waits until `check` holds; fails after `limit`.
pub fn eventually(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not after {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One write and what came of it.
#[derive(Clone, Debug)]
pub struct Write {
    pub kind: Kind,
    pub name: String,
    /// The value in [`VALUE`], unique to this write.
    pub value: String,
    /// The resourceVersion of a 2xx answer; None if the answer was lost, so the write may or
    /// may not have happened.
    pub acked: Option<i64>,
}

impl Write {
    /// Creates (`update`: None) or replaces on `update` the object `kind`/`name` with
    /// `value`, recording what came of it.
    pub fn make(api: &Api, kind: Kind, name: &str, value: &str, update: Option<i64>) -> Write {
        let mut body = kind.manifest(name, value, &[]);
        let answer = match update {
            None => create(api, kind, &body),
            Some(rv) => {
                body["metadata"]["resourceVersion"] = json!(rv.to_string());
                replace(api, kind, &body)
            }
        };
        if let Ok(answer) = &answer {
            assert_eq!(
                answer["metadata"]["annotations"][VALUE].as_str(),
                Some(value),
                "the answer to a write: {answer}"
            );
        }
        Write {
            kind,
            name: name.to_string(),
            value: value.to_string(),
            acked: answer.ok().map(|a| rv_of(&a)),
        }
    }
}

/// Checks that every object written holds its last acknowledged write with that
/// resourceVersion, or a later write whose answer was lost, above it; none of the written
/// objects is deleted by the tests, so each with an acknowledged write must be there.
pub fn check_kept(api: &Api, writes: &[Write], context: &str) {
    let mut by_name: BTreeMap<(Kind, &str), Vec<&Write>> = BTreeMap::new();
    for w in writes {
        by_name.entry((w.kind, &w.name)).or_default().push(w);
    }
    let kinds: BTreeSet<Kind> = by_name.keys().map(|(k, _)| *k).collect();
    let mut stored: BTreeMap<(Kind, String), (String, i64)> = BTreeMap::new();
    for kind in kinds {
        let (_, items) = list(api, kind).unwrap_or_else(|e| panic!("{context}: list: {e}"));
        for o in items {
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let value = o["metadata"]["annotations"][VALUE]
                .as_str()
                .unwrap_or_default();
            stored.insert((kind, name), (value.to_string(), rv_of(&o)));
        }
    }
    for ((kind, name), tries) in &by_name {
        let got = stored.get(&(*kind, name.to_string()));
        let Some(i) = tries.iter().rposition(|w| w.acked.is_some()) else {
            assert!(
                got.is_none_or(|(v, _)| tries.iter().any(|w| w.value == *v)),
                "{context}: {kind:?} {name} holds {got:?}, never written ({tries:?})"
            );
            continue;
        };
        let (acked, rv) = (tries[i], tries[i].acked.unwrap());
        let Some((value, stored_rv)) = got else {
            panic!("{context}: {kind:?} {name} is gone; acknowledged: {acked:?}");
        };
        let later = tries[i + 1..].iter().any(|w| w.value == *value);
        assert!(
            (*value == acked.value && *stored_rv == rv) || (later && *stored_rv > rv),
            "{context}: {kind:?} {name} holds {value} at resourceVersion {stored_rv}; \
             acknowledged: {acked:?}, tried after it: {:?}",
            &tries[i + 1..]
        );
    }
}

/// What keeps the collector from being done, among the objects of `kinds` (whose owners
/// are all of those kinds too): objects naming an owner uid that does not exist, and
/// objects held by the `foregroundDeletion` finalizer. Err if a list failed.
pub fn leftovers(api: &Api, kinds: &[Kind]) -> Result<Vec<String>, String> {
    let mut objects = Vec::new();
    for &kind in kinds {
        for o in list(api, kind)?.1 {
            objects.push((kind, o));
        }
    }
    let uids: BTreeSet<&str> = objects.iter().map(|(_, o)| uid_of(o)).collect();
    let mut left = Vec::new();
    for (kind, o) in &objects {
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let refs = o["metadata"]["ownerReferences"].as_array();
        for r in refs.into_iter().flatten() {
            let owner = r["uid"].as_str().unwrap_or_default();
            if !uids.contains(owner) {
                left.push(format!(
                    "{kind:?} {name} names the owner {} {owner}, gone",
                    r["name"]
                ));
            }
        }
        let finalizers = o["metadata"]["finalizers"].as_array();
        if finalizers.is_some_and(|f| f.iter().any(|f| f == "foregroundDeletion")) {
            let uid = uid_of(o);
            let named_by: Vec<String> = objects
                .iter()
                .filter(|(_, d)| d["metadata"]["ownerReferences"].to_string().contains(uid))
                .map(|(k, d)| format!("{k:?} {}", d["metadata"]["name"]))
                .collect();
            left.push(format!(
                "{kind:?} {name} is held by foregroundDeletion (named by {named_by:?})"
            ));
        }
    }
    Ok(left)
}

/// Waits until the collector of `kube` is done with `kinds` ([`leftovers`] finds nothing);
/// fails after `limit` with what is left and the end of the server's log.
pub fn wait_collected(kube: &Kube, kinds: &[Kind], limit: Duration, context: &str) {
    let api = Api::of(kube, Duration::from_secs(10));
    let api = &api;
    let deadline = Instant::now() + limit;
    loop {
        let left = leftovers(api, kinds);
        if left.as_ref().is_ok_and(Vec::is_empty) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{context}: the garbage collector did not finish in {limit:?}: {left:?}\n{}",
            log_tail(kube)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The last lines of the server's log.
pub fn log_tail(kube: &Kube) -> String {
    let log = kube.log();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

/// The [`VALUE`] annotation of `object`, what an [`RvWatch`] of these kinds reads.
pub fn value_of(object: &Value) -> Option<&str> {
    object["metadata"]["annotations"][VALUE].as_str()
}

/// Checks `watched`: never told 410, no resourceVersion delivered at or below an earlier
/// one, and every acknowledged write among `writes` delivered with its resourceVersion.
pub fn check_watch(watched: &Watched, writes: &[Write], what: &str) {
    assert!(
        !watched.gone,
        "{what}: told 410 Gone ({} watches)",
        watched.watches
    );
    assert!(
        watched.backwards.is_empty(),
        "{what}: resourceVersions went backwards: {:?}",
        watched.backwards
    );
    let seen: BTreeMap<(&str, &str), i64> = watched
        .events
        .iter()
        .map(|e| ((e.name.as_str(), e.value.as_str()), e.rv))
        .collect();
    let missing: Vec<&Write> = writes
        .iter()
        .filter(|w| w.acked.is_some())
        .filter(|w| seen.get(&(w.name.as_str(), w.value.as_str())) != w.acked.as_ref())
        .collect();
    assert!(
        missing.is_empty(),
        "{what}: {} acknowledged writes not delivered with their resourceVersion ({} watches, \
         errors {:?}): {missing:?}",
        missing.len(),
        watched.watches,
        watched.errors
    );
}
