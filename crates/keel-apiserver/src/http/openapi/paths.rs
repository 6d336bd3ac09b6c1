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

use super::schemas::{self, Flavor};
use crate::registry::Strategy;

/// One query or path parameter.
#[derive(Debug, Clone)]
struct Param {
    name: &'static str,
    location: &'static str,
    kind: &'static str,
    description: String,
}

fn query(name: &'static str) -> Param {
    let (kind, description) = PARAMETERS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, kind, d)| (*kind, d.to_string()))
        .unwrap_or_else(|| panic!("parameter {name} is described"));
    Param {
        name,
        location: "query",
        kind,
        description,
    }
}

fn path_param(name: &'static str, description: String) -> Param {
    Param {
        name,
        location: "path",
        kind: "string",
        description,
    }
}

/// The query parameters of kube-apiserver's routes, with its descriptions.
const PARAMETERS: &[(&str, &str, &str)] = &[
    (
        "allowWatchBookmarks",
        "boolean",
        "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server's discretion. Clients should not assume bookmarks are returned at any specific interval, nor may they assume the server will send any BOOKMARK event during a session. If this is not a watch, this field is ignored.",
    ),
    (
        "continue",
        "string",
        "The continue option should be set when retrieving more results from the server. Since this value is server defined, clients may only use the continue value from a previous query result with identical query parameters (except for the value of continue) and the server may reject a continue value it does not recognize. If the specified continue value is no longer valid whether due to expiration (generally five to fifteen minutes) or a configuration change on the server, the server will respond with a 410 ResourceExpired error together with a continue token. If the client needs a consistent list, it must restart their list without the continue field. Otherwise, the client may send another list request with the token received with the 410 error, the server will respond with a list starting from the next key, but from the latest snapshot, which is inconsistent from the previous list results - objects that are created, modified, or deleted after the first list request will be included in the response, as long as their keys are after the \"next key\".\n\nThis field is not supported when watch is true. Clients may start a watch from the last resourceVersion value returned by the server and not miss any modifications.",
    ),
    (
        "dryRun",
        "string",
        "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed",
    ),
    (
        "fieldManager",
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.",
    ),
    (
        "fieldSelector",
        "string",
        "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
    ),
    (
        "fieldValidation",
        "string",
        "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.",
    ),
    (
        "force",
        "boolean",
        "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
    ),
    (
        "gracePeriodSeconds",
        "integer",
        "The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately. If this value is nil, the default grace period for the specified type will be used. Defaults to a per object value if not specified. zero means delete immediately.",
    ),
    (
        "labelSelector",
        "string",
        "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
    ),
    (
        "limit",
        "integer",
        "limit is a maximum number of responses to return for a list call. If more items exist, the server will set the `continue` field on the list metadata to a value that can be used with the same initial query to retrieve the next set of results. Setting a limit may return fewer than the requested amount of items (up to zero items) in the event all requested objects are filtered out and clients should only use the presence of the continue field to determine whether more results are available. Servers may choose not to support the limit argument and will return all of the available results. If limit is specified and the continue field is empty, clients may assume that no more results are available. This field is not supported if watch is true.\n\nThe server guarantees that the objects returned when using continue will be identical to issuing a single list call without a limit - that is, no objects created, modified, or deleted after the first request is issued will be included in any subsequent continued requests. This is sometimes referred to as a consistent snapshot, and ensures that a client that is using limit to receive smaller chunks of a very large result can ensure they see all possible objects. If objects are updated during a chunked list the version of the object that was present at the time the first list result was calculated is returned.",
    ),
    (
        "orphanDependents",
        "boolean",
        "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned. If true/false, the \"orphan\" finalizer will be added to/removed from the object's finalizers list. Either this field or PropagationPolicy may be set, but not both.",
    ),
    (
        "pretty",
        "string",
        "If 'true', then the output is pretty printed.",
    ),
    (
        "propagationPolicy",
        "string",
        "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be set, but not both. The default policy is decided by the existing finalizer set in the metadata.finalizers and the resource-specific default policy. Acceptable values are: 'Orphan' - orphan the dependents; 'Background' - allow the garbage collector to delete the dependents in the background; 'Foreground' - a cascading policy that deletes all dependents in the foreground.",
    ),
    (
        "resourceVersion",
        "string",
        "resourceVersion sets a constraint on what resource versions a request may be served from. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset",
    ),
    (
        "resourceVersionMatch",
        "string",
        "resourceVersionMatch determines how resourceVersion is applied to list calls. It is highly recommended that resourceVersionMatch be set for list calls where resourceVersion is set See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset",
    ),
    (
        "sendInitialEvents",
        "boolean",
        "`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will begin with synthetic events to produce the current state of objects in the collection. Once all such events have been sent, a synthetic \"Bookmark\" event  will be sent. The bookmark will report the ResourceVersion (RV) corresponding to the set of objects, and be marked with `\"k8s.io/initial-events-end\": \"true\"` annotation. Afterwards, the watch stream will proceed as usual, sending watch events corresponding to changes (subsequent to the RV) to objects watched.\n\nWhen `sendInitialEvents` option is set, we require `resourceVersionMatch` option to also be set. The semantic of the watch request is as following: - `resourceVersionMatch` = NotOlderThan\n  is interpreted as \"data at least as new as the provided `resourceVersion`\"\n  and the bookmark event is send when the state is synced\n  to a `resourceVersion` at least as fresh as the one provided by the ListOptions.\n  If `resourceVersion` is unset, this is interpreted as \"consistent read\" and the\n  bookmark event is send when the state is synced at least to the moment\n  when request started being processed.\n- `resourceVersionMatch` set to any other value or unset\n  Invalid error is returned.\n\nDefaults to true if `resourceVersion=\"\"` or `resourceVersion=\"0\"` (for backward compatibility reasons) and to false otherwise.",
    ),
    (
        "timeoutSeconds",
        "integer",
        "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.",
    ),
    (
        "watch",
        "boolean",
        "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.",
    ),
];

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
    /// A patch, in the three forms keel applies.
    Patch,
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
        if let Some(name) = schemas::definition_name(info.group, info.version, info.kind) {
            items.extend(kind_paths(*kind, &gv, &name));
        }
    }
    items.sort_by(|a, b| a.path.cmp(&b.path));
    items
}

fn kind_paths(kind: &dyn Strategy, gv: &str, definition: &str) -> Vec<PathItem> {
    let info = kind.info();
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
                    Some(RequestBody::Patch),
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
                    Some(RequestBody::Patch),
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

impl Param {
    fn render(&self, flavor: Flavor) -> Value {
        let mut param = json!({
            "description": self.description,
            "in": self.location,
            "name": self.name,
        });
        match flavor {
            Flavor::V3 => param["schema"] = json!({"type": self.kind, "uniqueItems": true}),
            Flavor::V2 => {
                param["type"] = self.kind.into();
                param["uniqueItems"] = true.into();
            }
        }
        if self.location == "path" {
            param["required"] = true.into();
        }
        param
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
            RequestBody::Patch => (schemas::PATCH, PATCH_TYPES.to_vec()),
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
