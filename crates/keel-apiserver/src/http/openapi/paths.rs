//! The `paths` of the OpenAPI documents: every route keel serves for a kind, with the
//! operation ids, descriptions, parameters and `x-kubernetes-action` /
//! `x-kubernetes-group-version-kind` extensions kube-apiserver's route builder gives them
//! (`list{Group}{Version}Namespaced{Kind}`, `patch...`, the deprecated `watch/` routes, the
//! `status` and `finalize` subresources). The create, update and patch operations list the
//! `fieldValidation` parameter among their own: kubectl looks for it on the PATCH operation of
//! a kind to know that the server validates fields, and then validates nothing itself.
//!
//! The routes are built once as [`PathItem`]s and rendered for OpenAPI v3 or Swagger 2.0. Only
//! the media types keel produces and reads are listed (JSON and YAML, the watch stream, the
//! three patch types): no protobuf.

use serde_json::{Map, Value, json};

use super::parameters::{Param, path_param, query};
use super::schemas::{self, Flavor};
use crate::registry::Strategy;

/// The parameters of a list or watch.
const LIST: [&str; 10] = [
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];

/// What an operation's body is.
#[derive(Debug, Clone)]
enum RequestBody {
    /// The object (create, replace).
    Object(String),
    /// `DeleteOptions`.
    DeleteOptions,
    /// A patch, in the three forms keel applies (`true`: of a custom resource, which takes
    /// no strategic merge patch and says it takes apply patches, as apiextensions-apiserver's
    /// OpenAPI builder says).
    Patch(bool),
}

/// One operation of a path.
#[derive(Debug, Clone)]
struct Operation {
    method: &'static str,
    id: String,
    description: String,
    action: &'static str,
    tag: String,
    gvk: Option<(String, String, String)>,
    params: Vec<Param>,
    body: Option<RequestBody>,
    responses: Vec<(u16, String)>,
    stream: bool,
}

/// One path with its operations.
#[derive(Debug, Clone)]
pub struct PathItem {
    /// `/api/v1/namespaces/{namespace}/configmaps`.
    pub path: String,
    params: Vec<Param>,
    operations: Vec<Operation>,
}

/// `Core`, `Coordination`, `Events`: a group as operation ids name it.
fn group_id(group: &str) -> String {
    if group.is_empty() {
        return "Core".into();
    }
    group
        .trim_end_matches(".k8s.io")
        .split('.')
        .map(capitalize)
        .collect()
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `core_v1`, `coordination_v1`: a group version's tag.
fn tag(group: &str, version: &str) -> String {
    let id = group_id(group);
    let mut chars = id.chars();
    let lower: String = match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    };
    format!("{lower}_{version}")
}

/// The URL prefix of a group version (`/api/v1`, `/apis/coordination.k8s.io/v1`).
pub fn prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// The paths of one group version: its resources list, then each kind's routes.
pub fn group_version(kinds: &[&'static dyn Strategy], group: &str, version: &str) -> Vec<PathItem> {
    let gv = format!("{}{}", group_id(group), capitalize(version));
    let mut items = vec![PathItem {
        path: format!("{}/", prefix(group, version)),
        params: vec![],
        operations: vec![Operation {
            method: "get",
            id: format!("get{gv}APIResources"),
            description: "get available resources".into(),
            action: "",
            tag: tag(group, version),
            gvk: None,
            params: vec![],
            body: None,
            responses: vec![(200, schemas::API_RESOURCE_LIST.into())],
            stream: false,
        }],
    }];
    for kind in kinds {
        let info = kind.info();
        if info.group != group || info.version != version {
            continue;
        }
        if let Some(name) = schemas::kind_definition(*kind) {
            items.extend(kind_paths(*kind, &gv, &name));
        }
    }
    items.sort_by(|a, b| a.path.cmp(&b.path));
    items
}

fn kind_paths(kind: &dyn Strategy, gv: &str, definition: &str) -> Vec<PathItem> {
    let info = kind.info();
    let custom = kind.custom_schema().is_some();
    let k = info.kind;
    let base = prefix(info.group, info.version);
    let (ns_path, ns_id) = if info.namespaced {
        ("/namespaces/{namespace}", "Namespaced")
    } else {
        ("", "")
    };
    let list_def = format!("{definition}List");
    let gvk = Some((
        info.group.to_string(),
        info.version.to_string(),
        k.to_string(),
    ));
    let op = |method: &'static str,
              verb: &str,
              suffix: &str,
              description: String,
              action: &'static str,
              params: &[&'static str],
              body: Option<RequestBody>,
              responses: Vec<(u16, String)>| Operation {
        method,
        id: format!("{verb}{gv}{suffix}"),
        description,
        action,
        tag: tag(info.group, info.version),
        gvk: gvk.clone(),
        params: params.iter().map(|p| query(p)).collect(),
        body,
        responses,
        stream: matches!(action, "list" | "watch" | "watchlist"),
    };
    let namespace = || {
        path_param(
            "namespace",
            "object name and auth scope, such as for teams and projects".into(),
        )
    };
    let name = |what: &str| path_param("name", format!("name of the {what}"));
    let scoped = |mut params: Vec<Param>| {
        if info.namespaced {
            params.push(namespace());
        }
        params.push(query("pretty"));
        params
    };
    let list_params = |mut params: Vec<Param>| {
        let mut all: Vec<Param> = LIST.iter().map(|p| query(p)).collect();
        all.append(&mut params);
        all.push(query("pretty"));
        all.sort_by(|a, b| a.name.cmp(b.name));
        all
    };
    let object = |codes: &[u16]| codes.iter().map(|c| (*c, definition.to_string())).collect();
    let write = ["dryRun", "fieldManager", "fieldValidation"];
    let delete_params = [
        "dryRun",
        "gracePeriodSeconds",
        "orphanDependents",
        "propagationPolicy",
    ];
    let deleted = if kind.returns_deleted_object() && k != "Namespace" {
        definition.to_string()
    } else {
        schemas::STATUS.to_string()
    };
    let collection = format!("{base}{ns_path}/{}", info.resource);
    let item = format!("{collection}/{{name}}");
    let mut paths = vec![
        PathItem {
            path: collection.clone(),
            params: scoped(vec![]),
            operations: vec![
                op(
                    "delete",
                    "delete",
                    &format!("Collection{ns_id}{k}"),
                    format!("delete collection of {k}"),
                    "deletecollection",
                    &[
                        "continue",
                        "dryRun",
                        "fieldSelector",
                        "gracePeriodSeconds",
                        "labelSelector",
                        "limit",
                        "orphanDependents",
                        "propagationPolicy",
                        "resourceVersion",
                        "resourceVersionMatch",
                        "sendInitialEvents",
                        "timeoutSeconds",
                    ],
                    Some(RequestBody::DeleteOptions),
                    vec![(200, schemas::STATUS.into())],
                ),
                op(
                    "get",
                    "list",
                    &format!("{ns_id}{k}"),
                    format!("list or watch objects of kind {k}"),
                    "list",
                    &LIST,
                    None,
                    vec![(200, list_def.clone())],
                ),
                op(
                    "post",
                    "create",
                    &format!("{ns_id}{k}"),
                    format!("create a {k}"),
                    "post",
                    &write,
                    Some(RequestBody::Object(definition.to_string())),
                    object(&[200, 201, 202]),
                ),
            ],
        },
        PathItem {
            path: item.clone(),
            params: scoped(vec![name(k)]),
            operations: vec![
                op(
                    "delete",
                    "delete",
                    &format!("{ns_id}{k}"),
                    format!("delete a {k}"),
                    "delete",
                    &delete_params,
                    Some(RequestBody::DeleteOptions),
                    vec![(200, deleted.clone()), (202, deleted)],
                ),
                op(
                    "get",
                    "read",
                    &format!("{ns_id}{k}"),
                    format!("read the specified {k}"),
                    "get",
                    &[],
                    None,
                    object(&[200]),
                ),
                op(
                    "patch",
                    "patch",
                    &format!("{ns_id}{k}"),
                    format!("partially update the specified {k}"),
                    "patch",
                    &["dryRun", "fieldManager", "fieldValidation", "force"],
                    Some(RequestBody::Patch(custom)),
                    object(&[200, 201]),
                ),
                op(
                    "put",
                    "replace",
                    &format!("{ns_id}{k}"),
                    format!("replace the specified {k}"),
                    "put",
                    &write,
                    Some(RequestBody::Object(definition.to_string())),
                    object(&[200, 201]),
                ),
            ],
        },
        PathItem {
            path: format!("{base}/watch{ns_path}/{}", info.resource),
            params: list_params(if info.namespaced {
                vec![namespace()]
            } else {
                vec![]
            }),
            operations: vec![op(
                "get",
                "watch",
                &format!("{ns_id}{k}List"),
                format!(
                    "watch individual changes to a list of {k}. deprecated: use the 'watch' \
                     parameter with a list operation instead."
                ),
                "watchlist",
                &[],
                None,
                vec![(200, schemas::WATCH_EVENT.into())],
            )],
        },
        PathItem {
            path: format!("{base}/watch{ns_path}/{}/{{name}}", info.resource),
            params: list_params({
                let mut p = vec![name(k)];
                if info.namespaced {
                    p.push(namespace());
                }
                p
            }),
            operations: vec![op(
                "get",
                "watch",
                &format!("{ns_id}{k}"),
                format!(
                    "watch changes to an object of kind {k}. deprecated: use the 'watch' \
                     parameter with a list operation instead, filtered to a single item with \
                     the 'fieldSelector' parameter."
                ),
                "watch",
                &[],
                None,
                vec![(200, schemas::WATCH_EVENT.into())],
            )],
        },
    ];
    if info.namespaced {
        paths.push(PathItem {
            path: format!("{base}/{}", info.resource),
            params: list_params(vec![]),
            operations: vec![op(
                "get",
                "list",
                &format!("{k}ForAllNamespaces"),
                format!("list or watch objects of kind {k}"),
                "list",
                &[],
                None,
                vec![(200, list_def)],
            )],
        });
        paths.push(PathItem {
            path: format!("{base}/watch/{}", info.resource),
            params: list_params(vec![]),
            operations: vec![op(
                "get",
                "watch",
                &format!("{k}ListForAllNamespaces"),
                format!(
                    "watch individual changes to a list of {k}. deprecated: use the 'watch' \
                     parameter with a list operation instead."
                ),
                "watchlist",
                &[],
                None,
                vec![(200, schemas::WATCH_EVENT.into())],
            )],
        });
    }
    let mut subresource = |sub: &str, verbs: &[&str]| {
        let title = capitalize(sub);
        let mut operations = Vec::new();
        for verb in verbs {
            operations.push(match *verb {
                "get" => op(
                    "get",
                    "read",
                    &format!("{ns_id}{k}{title}"),
                    format!("read {sub} of the specified {k}"),
                    "get",
                    &[],
                    None,
                    object(&[200]),
                ),
                "patch" => op(
                    "patch",
                    "patch",
                    &format!("{ns_id}{k}{title}"),
                    format!("partially update {sub} of the specified {k}"),
                    "patch",
                    &["dryRun", "fieldManager", "fieldValidation", "force"],
                    Some(RequestBody::Patch(custom)),
                    object(&[200, 201]),
                ),
                _ => op(
                    "put",
                    "replace",
                    &format!("{ns_id}{k}{title}"),
                    format!("replace {sub} of the specified {k}"),
                    "put",
                    &write,
                    Some(RequestBody::Object(definition.to_string())),
                    object(&[200, 201]),
                ),
            });
        }
        paths.push(PathItem {
            path: format!("{item}/{sub}"),
            params: scoped(vec![name(k)]),
            operations,
        });
    };
    if info.status {
        subresource("status", &["get", "patch", "put"]);
    }
    if info.resource == "namespaces" {
        subresource("finalize", &["put"]);
    }
    if kind.review().is_some() {
        // Create alone, on the collection: a review is never stored.
        paths.retain(|p| !p.path.contains("/watch/") && !p.path.ends_with("{name}"));
        for p in &mut paths {
            p.operations.retain(|o| o.method == "post");
        }
        paths.retain(|p| !p.operations.is_empty());
    }
    if kind.read_only() {
        // Get and list alone, as kube-apiserver documents a read-only resource.
        paths.retain(|p| !p.path.contains("/watch/"));
        for p in &mut paths {
            p.operations.retain(|o| o.method == "get");
        }
    }
    paths
}

impl PathItem {
    /// The path item as `flavor` writes it.
    pub fn render(&self, flavor: Flavor) -> Value {
        let mut item = Map::new();
        for operation in &self.operations {
            item.insert(operation.method.into(), operation.render(flavor));
        }
        if !self.params.is_empty() {
            let params = self.params.iter().map(|p| p.render(flavor)).collect();
            item.insert("parameters".into(), Value::Array(params));
        }
        Value::Object(item)
    }
}

/// What keel answers in, by operation: JSON and YAML, and the watch stream for lists and
/// watches.
fn produces(stream: bool) -> Vec<&'static str> {
    let mut types = vec!["application/json", "application/yaml"];
    if stream {
        types.push("application/json;stream=watch");
    }
    types
}

const PATCH_TYPES: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

/// The patches a custom resource takes, as its OpenAPI says.
const CUSTOM_PATCH_TYPES: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

fn response_description(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        _ => "Unauthorized",
    }
}

impl Operation {
    fn render(&self, flavor: Flavor) -> Value {
        let mut op = json!({
            "description": self.description,
            "operationId": self.id,
            "tags": [self.tag],
        });
        let mut params: Vec<Value> = self.params.iter().map(|p| p.render(flavor)).collect();
        let body = self.body.as_ref().map(|b| match b {
            RequestBody::Object(name) => (name.as_str(), vec!["*/*"]),
            RequestBody::DeleteOptions => (schemas::DELETE_OPTIONS, vec!["*/*"]),
            RequestBody::Patch(false) => (schemas::PATCH, PATCH_TYPES.to_vec()),
            RequestBody::Patch(true) => (schemas::PATCH, CUSTOM_PATCH_TYPES.to_vec()),
        });
        let mut responses = Map::new();
        match flavor {
            Flavor::V3 => {
                if let Some((name, types)) = &body {
                    let content: Map<String, Value> = types
                        .iter()
                        .map(|t| (t.to_string(), json!({"schema": flavor.reference(name)})))
                        .collect();
                    op["requestBody"] = json!({"content": content, "required": true});
                }
                for (code, name) in &self.responses {
                    let content: Map<String, Value> = produces(self.stream)
                        .into_iter()
                        .map(|t| (t.to_string(), json!({"schema": flavor.reference(name)})))
                        .collect();
                    responses.insert(
                        code.to_string(),
                        json!({"description": response_description(*code), "content": content}),
                    );
                }
            }
            Flavor::V2 => {
                let consumes = body.as_ref().map_or(vec!["*/*"], |(_, t)| t.clone());
                op["consumes"] = json!(consumes);
                op["produces"] = json!(produces(self.stream));
                op["schemes"] = json!(["https"]);
                if let Some((name, _)) = &body {
                    params.push(json!({
                        "in": "body",
                        "name": "body",
                        "required": true,
                        "schema": flavor.reference(name),
                    }));
                }
                for (code, name) in &self.responses {
                    responses.insert(
                        code.to_string(),
                        json!({"description": response_description(*code), "schema": flavor.reference(name)}),
                    );
                }
            }
        }
        responses.insert("401".into(), json!({"description": "Unauthorized"}));
        op["responses"] = Value::Object(responses);
        if !params.is_empty() {
            op["parameters"] = Value::Array(params);
        }
        if let Some((group, version, kind)) = &self.gvk {
            op["x-kubernetes-action"] = self.action.into();
            op["x-kubernetes-group-version-kind"] =
                json!({"group": group, "kind": kind, "version": version});
        }
        op
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;

    fn rendered(group: &str) -> Map<String, Value> {
        group_version(&registry::kinds(), group, "v1")
            .iter()
            .map(|p| (p.path.clone(), p.render(Flavor::V3)))
            .collect()
    }

    #[test]
    fn every_write_lists_field_validation_and_names_its_kind() {
        let paths = rendered("");
        let item = &paths["/api/v1/namespaces/{namespace}/configmaps/{name}"];
        let patch = &item["patch"];
        assert_eq!(patch["operationId"], "patchCoreV1NamespacedConfigMap");
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "", "kind": "ConfigMap", "version": "v1"})
        );
        assert_eq!(patch["x-kubernetes-action"], "patch");
        for (path, item) in &paths {
            for method in ["post", "put", "patch"] {
                if let Some(op) = item.get(method) {
                    let names: Vec<&str> = op["parameters"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| p["name"].as_str().unwrap())
                        .collect();
                    assert!(names.contains(&"fieldValidation"), "{path} {method}");
                }
            }
        }
        assert_eq!(
            paths["/api/v1/pods"]["get"]["operationId"],
            "listCoreV1PodForAllNamespaces"
        );
        assert_eq!(
            paths["/api/v1/namespaces/{name}/finalize"]["put"]["operationId"],
            "replaceCoreV1NamespaceFinalize"
        );
        assert_eq!(
            paths["/api/v1/namespaces/{namespace}/pods/{name}/status"]["patch"]["operationId"],
            "patchCoreV1NamespacedPodStatus"
        );
        assert_eq!(paths["/api/v1/"]["get"]["tags"], json!(["core_v1"]));
        assert!(paths.contains_key("/api/v1/watch/nodes/{name}"));
        let leases = rendered("coordination.k8s.io");
        let create = &leases["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"]["post"];
        assert_eq!(create["operationId"], "createCoordinationV1NamespacedLease");
        assert_eq!(create["tags"], json!(["coordination_v1"]));
        assert_eq!(
            create.pointer("/requestBody/content/*~1*/schema/$ref"),
            Some(&json!(
                "#/components/schemas/io.k8s.api.coordination.v1.Lease"
            ))
        );
    }
}
