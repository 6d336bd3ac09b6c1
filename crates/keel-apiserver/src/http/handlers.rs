//! The resource verbs (get, list, watch, create, update, patch, delete, deletecollection) on
//! a [`ResourcePath`]: query parameters and bodies read and checked as kube-apiserver's
//! `endpoints/handlers` do, the work done by the [`Registry`], the answer encoded in the
//! negotiated form; every failure a `Status`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, header};
use serde_json::{Value, json};

use super::field_manager::{self, Verb};
use super::field_validation::{self, Directive};
use super::metadata;
use super::negotiate::{self, Answer, Conversion, Encoding, Output};
use super::openapi;
use super::request_info::ResourcePath;
use super::table::{self, IncludeObject};
use super::watch;
use super::{apply, patch};
use crate::apimachinery::go_value::GoType;
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::registry::managed_fields::FieldManager;
use crate::registry::selector::{FieldSelector, LabelSelector, Selection};
use crate::registry::served::{List, ServedObject};
use crate::registry::store::{DeleteOptions, ListQuery, Registry};
use crate::registry::{Strategy, meta_str};
use crate::storage::resource_version::validate_list_options;
use crate::storage::{FieldError, Status};

/// The largest request body accepted (kube-apiserver's 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// A request's query parameters (the last value of each).
pub type Query = HashMap<String, String>;

/// Answers `status` as kube-apiserver does: JSON, its code as the HTTP status.
pub fn status_response(status: &Status) -> Response {
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        negotiate::encode(status, Output::Json),
    )
        .into_response();
    if let Some(seconds) = status.details.as_ref().and_then(|d| d.retry_after_seconds) {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, seconds.into());
    }
    response
}

/// A value answered in the negotiated form with `code`.
pub fn value_response(code: StatusCode, value: &Value, output: Output) -> Response {
    encoded_response(code, negotiate::encode(value, output), output)
}

/// A body already encoded in the negotiated form, answered with `code`.
fn encoded_response(code: StatusCode, body: Vec<u8>, output: Output) -> Response {
    (code, [(header::CONTENT_TYPE, output.content_type())], body).into_response()
}

/// 405 MethodNotAllowed.
pub fn method_not_allowed() -> Status {
    Status::method_not_allowed()
}

/// 404 for a resource or path this server does not serve.
pub fn not_found() -> Status {
    Status::failure(
        404,
        "NotFound",
        "the server could not find the requested resource".to_string(),
    )
}

/// A request about a resource, with everything the handlers need.
pub struct ResourceRequest {
    /// The method.
    pub method: Method,
    /// The path, read.
    pub path: ResourcePath,
    /// The query parameters.
    pub query: Query,
    /// The headers.
    pub headers: HeaderMap,
    /// The body (empty for reads).
    pub body: Bytes,
}

impl ResourceRequest {
    fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }

    fn dry_run(&self) -> Result<bool, Status> {
        match self.param("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(Status::failure(
                400,
                "BadRequest",
                format!("Invalid dryRun value {other:?}: only \"All\" is supported"),
            )),
        }
    }

    fn header(&self, name: header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Whether this request is a watch (a long-running request).
pub fn is_watch(path: &ResourcePath, query: &Query) -> bool {
    path.watch_path
        || matches!(
            query.get("watch").map(String::as_str),
            Some("true") | Some("1")
        )
}

/// Serves one resource request.
pub async fn serve(registry: Arc<Registry>, req: ResourceRequest) -> Response {
    let path = &req.path;
    let deprecated = registry
        .kind(&path.group, &path.version, &path.resource)
        .and_then(|k| k.deprecation());
    let mut response = match handle(registry, req).await {
        Ok(response) => response,
        Err(status) => status_response(&status),
    };
    if let Some(warning) = deprecated {
        field_validation::add_warnings(&mut response, &[warning.to_string()]);
    }
    response
}

async fn handle(registry: Arc<Registry>, req: ResourceRequest) -> Result<Response, Status> {
    let path = &req.path;
    let kind = registry
        .kind(&path.group, &path.version, &path.resource)
        .ok_or_else(not_found)?;
    let info = kind.info();
    if path.namespace.is_some() && !info.namespaced {
        return Err(not_found());
    }
    // As kube-apiserver's installer registers a namespaced kind: across all namespaces
    // (`/api/v1/configmaps`) there is list and watch alone, so any other method there is
    // 405 (its router's answer for a path it serves with other methods); create,
    // deletecollection and every named path live under `namespaces/<ns>/`, so a name
    // without a namespace (`/api/v1/configmaps/x`) is a path it does not serve: 404.
    // Under `watch/` kube-apiserver registers GET alone: a write there is 405, never a write.
    if path.watch_path && req.method != Method::GET {
        return Err(method_not_allowed());
    }
    if info.namespaced && path.namespace.is_none() {
        if path.name.is_some() {
            return Err(not_found());
        }
        if req.method != Method::GET {
            return Err(method_not_allowed());
        }
    }
    match path.subresource.as_deref() {
        None => {}
        Some("status") if info.status => {}
        Some("finalize") if info.resource == "namespaces" && req.method == Method::PUT => {}
        Some(_) if req.method == Method::POST || path.subresource.as_deref() == Some("binding") => {
            return Err(method_not_allowed());
        }
        Some(_) => return Err(not_found()),
    }
    let namespace = path.namespace.as_deref();
    let answer = match (&req.method, path.name.is_some()) {
        (&Method::GET, _) if path.watch_path => Answer::Watch,
        (&Method::GET, true) => Answer::Object,
        (&Method::GET, false) if is_watch(path, &req.query) => Answer::Watch,
        (&Method::GET | &Method::DELETE, false) => Answer::List,
        _ => Answer::Written,
    };
    let output = negotiate::output(req.header(header::ACCEPT), answer).map_err(|r| r.status())?;
    let include = IncludeObject::parse(req.param("includeObject"))?;
    // A watch of one object (`watch/namespaces/<ns>/<resource>/<name>`) is a watch of the
    // collection by the name's field selector, as kube-apiserver serves it.
    let watched_name = path.name.as_deref().filter(|_| path.watch_path);
    match (&req.method, path.name.as_deref()) {
        (&Method::GET, _)
            if is_watch(path, &req.query) && (path.name.is_none() || watched_name.is_some()) =>
        {
            let options = watch::Options::parse(&req.query)?;
            let filter = selection(kind, &req, watched_name)?.map(|s| s.filter);
            let watching = registry
                .watch_with(kind, namespace, &options.query(), filter)
                .await?;
            let how = watch::Stream {
                output,
                include,
                timeout: watch::timeout(req.param("timeoutSeconds"))?,
                bookmarks: options.allow_bookmarks,
                metrics: registry
                    .metrics()
                    .watch_events(info.group, info.version, info.resource),
            };
            Ok(watch::stream(kind, watching, how))
        }
        (&Method::GET, None) => {
            let list = list(&registry, kind, namespace, &req).await?;
            respond_list(kind, &list, output, include)
        }
        (&Method::GET, Some(name)) => {
            let rv = req.param("resourceVersion").unwrap_or("");
            let obj = registry.get(kind, namespace, name, rv).await?;
            respond_object(kind, StatusCode::OK, obj, output, include)
        }
        (&Method::POST, None) => {
            let directive = Directive::parse(req.param("fieldValidation"), "CreateOptions")?;
            let options = field_manager::options(&req.query, &req.headers, Verb::Create)?;
            let (mut body, warnings) =
                read_object(&registry, kind, &req, namespace, None, directive)?;
            FieldManager::new(kind, None, Time::now()).update(None, &mut body, &options.manager);
            let created = registry
                .create(kind, namespace, body, req.dry_run()?)
                .await?;
            respond_written(kind, true, created, output, include, &warnings)
        }
        (&Method::PUT, Some(name)) => {
            let directive = Directive::parse(req.param("fieldValidation"), "UpdateOptions")?;
            let options = field_manager::options(&req.query, &req.headers, Verb::Update)?;
            let (body, warnings) =
                read_object(&registry, kind, &req, namespace, Some(name), directive)?;
            let subresource = path.subresource.as_deref();
            let fields = FieldManager::new(kind, subresource, Time::now());
            let mut first = Some(body);
            let (obj, created) = registry
                .update(
                    kind,
                    namespace,
                    name,
                    subresource,
                    req.dry_run()?,
                    |current| {
                        // The body read once serves the first try; a retry (the cached
                        // object was stale) reads it again rather than every try copying it.
                        let mut new = match first.take() {
                            Some(body) => body,
                            None => {
                                read_object(
                                    &registry,
                                    kind,
                                    &req,
                                    namespace,
                                    Some(name),
                                    directive,
                                )?
                                .0
                            }
                        };
                        fields.update(current, &mut new, &options.manager);
                        Ok(new)
                    },
                )
                .await?;
            respond_written(kind, created, obj, output, include, &warnings)
        }
        (&Method::PATCH, Some(name)) => {
            let directive = Directive::parse(req.param("fieldValidation"), "PatchOptions")?;
            let form = negotiate::body(req.header(header::CONTENT_TYPE), true)?;
            let subresource = path.subresource.as_deref();
            let mut warnings = Vec::new();
            let (obj, created) = if form == negotiate::Body::ApplyPatch {
                let options = field_manager::options(&req.query, &req.headers, Verb::Apply)?;
                let dry_run = req.dry_run()?;
                let applied = apply::patch(
                    &registry,
                    kind,
                    namespace,
                    name,
                    subresource,
                    dry_run,
                    &req.body,
                    &options,
                    directive,
                )
                .await?;
                warnings = applied.warnings;
                (applied.object, applied.created)
            } else {
                let options = field_manager::options(&req.query, &req.headers, Verb::Patch)?;
                let patch_doc = patch::read(form, &req.body)?;
                let defs = openapi::documents(registry.kinds()).definitions();
                let fields = FieldManager::new(kind, subresource, Time::now());
                registry
                    .update(
                        kind,
                        namespace,
                        name,
                        subresource,
                        req.dry_run()?,
                        |current| {
                            let Some(current) = current else {
                                return Err(not_found_object(kind, name));
                            };
                            let mut patched = patch::apply(kind, form, current, &patch_doc)?;
                            warnings = field_validation::check_patch(
                                kind,
                                defs,
                                form,
                                &req.body,
                                &patch_doc,
                                &mut patched,
                                directive,
                            )?;
                            fields.update(Some(current), &mut patched, &options.manager);
                            Ok(patched)
                        },
                    )
                    .await?
            };
            respond_written(kind, created, obj, output, include, &warnings)
        }
        (&Method::DELETE, Some(name)) => {
            let options = delete_options(&req)?;
            let deleted = registry.delete(kind, namespace, name, &options).await?;
            if !deleted.finished {
                // 202 only when asked for with `orphanDependents: false`, as
                // kube-apiserver's delete handler answers.
                let code = if options.orphan_dependents == Some(false) {
                    StatusCode::ACCEPTED
                } else {
                    StatusCode::OK
                };
                return respond_object(kind, code, deleted.object, output, include);
            }
            if kind.returns_deleted_object() {
                return respond_object(kind, StatusCode::OK, deleted.object, output, include);
            }
            let target = crate::storage::Target {
                group: info.group.to_string(),
                resource: info.resource.to_string(),
                name: name.to_string(),
            };
            let status = Status::deleted(&target, meta_str(&deleted.object, "uid"));
            Ok(value_response(
                StatusCode::OK,
                &serde_json::to_value(&status).unwrap_or_default(),
                output.unconverted(),
            ))
        }
        (&Method::DELETE, None) => {
            // A namespaced kind's deletecollection is served only within a namespace (405
            // above across all of them).
            let options = delete_options(&req)?;
            let mut list = list(&registry, kind, namespace, &req).await?;
            let mut deleted = Vec::new();
            for item in std::mem::take(&mut list.items) {
                let ns = meta_str(item.value(), "namespace");
                let ns = (!ns.is_empty()).then_some(ns);
                match registry
                    .delete(kind, ns, meta_str(item.value(), "name"), &options)
                    .await
                {
                    Ok(gone) => deleted.push(Arc::new(ServedObject::from(gone.object))),
                    Err(status) if status.code == 404 => {}
                    Err(status) => return Err(status),
                }
            }
            list.items = deleted;
            let output = match output.conversion {
                Some((Conversion::Table, _)) => output.unconverted(),
                _ => output,
            };
            respond_list(kind, &list, output, include)
        }
        _ => Err(method_not_allowed()),
    }
}

fn not_found_object(kind: &dyn Strategy, name: &str) -> Status {
    let info = kind.info();
    let target = crate::storage::Target {
        group: info.group.to_string(),
        resource: info.resource.to_string(),
        name: name.to_string(),
    };
    Status::from_storage(
        &crate::storage::StorageError::NotFound { key: String::new() },
        &target,
    )
}

async fn list(
    registry: &Registry,
    kind: &'static dyn Strategy,
    namespace: Option<&str>,
    req: &ResourceRequest,
) -> Result<List, Status> {
    let rv = req.param("resourceVersion").unwrap_or("");
    let rvm = req.param("resourceVersionMatch").unwrap_or("");
    let token = req.param("continue").unwrap_or("");
    let send_initial_events = req.param("sendInitialEvents").is_some();
    let errors = validate_list_options(rv, rvm, token, send_initial_events);
    if !errors.is_empty() {
        return Err(Status::invalid("meta.k8s.io", "ListOptions", "", &errors));
    }
    let limit = match req.param("limit") {
        None | Some("") => 0,
        Some(l) => l.parse::<i64>().map_err(|_| bad_query("limit", l))?,
    };
    let selection = selection(kind, req, None)?;
    let query = ListQuery {
        resource_version: rv,
        resource_version_match: rvm,
        limit,
        continue_token: (!token.is_empty()).then_some(token),
        selection: selection.as_ref(),
    };
    registry.list(kind, namespace, &query).await
}

/// A boolean query parameter as apimachinery converts one: "0" and "false" (in any case)
/// are false, anything else (even "") true.
pub fn query_bool(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}

fn bad_query(name: &str, value: &str) -> Status {
    Status::failure(
        400,
        "BadRequest",
        format!("invalid value {value:?} for query parameter {name}"),
    )
}

/// The label and field selectors of a list or watch, as one selection (None: everything).
fn selection(
    kind: &'static dyn Strategy,
    req: &ResourceRequest,
    name: Option<&str>,
) -> Result<Option<Selection>, Status> {
    let bad = |message: String| Status::failure(400, "BadRequest", message);
    let labels = match req.param("labelSelector").filter(|s| !s.is_empty()) {
        Some(s) => Some(LabelSelector::parse(s).map_err(bad)?),
        None => None,
    };
    let given = req.param("fieldSelector").filter(|s| !s.is_empty());
    // `name` (a watch of one object) adds `metadata.name=<name>` to the given selector.
    let fields = match (name, given) {
        (Some(name), Some(s)) => Some(format!("metadata.name={name},{s}")),
        (Some(name), None) => Some(format!("metadata.name={name}")),
        (None, s) => s.map(str::to_string),
    };
    let fields = match fields.as_deref() {
        Some(s) => {
            let selector = FieldSelector::parse(s).map_err(bad)?;
            selector
                .check_supported(kind.selectable_fields())
                .map_err(bad)?;
            Some(selector)
        }
        None => None,
    };
    if labels.is_none() && fields.is_none() {
        return Ok(None);
    }
    let exact = fields
        .iter()
        .flat_map(|f| f.exact())
        .map(|(f, v)| (f.to_string(), v.to_string()))
        .collect();
    let filter = Box::new(move |obj: &Value| {
        let empty = serde_json::Map::new();
        let object_labels = obj
            .at("/metadata/labels")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        labels.as_ref().is_none_or(|l| l.matches(object_labels))
            && fields.as_ref().is_none_or(|f| {
                f.matches(|field| match field {
                    "metadata.name" => meta_str(obj, "name").to_string(),
                    "metadata.namespace" => meta_str(obj, "namespace").to_string(),
                    other => kind.field(obj, other),
                })
            })
    });
    Ok(Some(Selection { filter, exact }))
}

/// The body of a create or update: JSON, YAML or protobuf, of this kind and version, its
/// values of its fields' types, checked for unknown and duplicate fields as `directive`
/// says and pruned to the kind's schema (as kube-apiserver's decoder does all that), then
/// in this namespace, with this name (for an update); with the warnings to answer.
fn read_object(
    registry: &Registry,
    kind: &dyn Strategy,
    req: &ResourceRequest,
    namespace: Option<&str>,
    name: Option<&str>,
    directive: Directive,
) -> Result<(Value, Vec<String>), Status> {
    let info = kind.info();
    let form = negotiate::body(req.header(header::CONTENT_TYPE), false)?;
    let defs = openapi::documents(registry.kinds()).definitions();
    // A JSON body is read strictly and decoded in one pass; what that cannot read is
    // decoded alone, for the decoder's error.
    let read = match form {
        negotiate::Body::Json => field_validation::read_json(kind, defs, &req.body),
        _ => None,
    };
    let (mut obj, read) = match read {
        Some((read, obj)) => (obj, Some(read)),
        None => {
            let obj = negotiate::decode_object(&req.body, form, &info.api_version(), info.kind)?;
            (obj, None)
        }
    };
    if !obj.is_object() {
        return Err(Status::failure(
            400,
            "BadRequest",
            "couldn't get version/kind; json parse error: the body is not a JSON object".into(),
        ));
    }
    check_type(kind, &obj, &req.body)?;
    let warnings =
        field_validation::check_body(kind, defs, &req.body, form, &mut obj, directive, read)?;
    let bad = |message: String| Status::failure(400, "BadRequest", message);
    if info.namespaced {
        let given = meta_str(&obj, "namespace");
        if !given.is_empty() && Some(given) != namespace {
            return Err(bad(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        // Left out, it is the request's (as kube-apiserver's BeforeCreate and BeforeUpdate
        // fill it in).
        if let (true, Some(namespace)) = (given.is_empty(), namespace) {
            crate::registry::meta::metadata(&mut obj).insert("namespace".into(), namespace.into());
        }
    }
    if let Some(name) = name {
        let given = meta_str(&obj, "name");
        if given != name {
            return Err(bad(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
    }
    Ok((obj, warnings))
}

/// A body's apiVersion and kind must be strings, this kind's (or left out), as
/// kube-apiserver's decoder requires (`body`: the request's, as sent).
pub fn check_type(kind: &dyn Strategy, obj: &Value, body: &[u8]) -> Result<(), Status> {
    let info = kind.info();
    // Go reads them into a struct of two strings first, to learn what the body is.
    for field in ["apiVersion", "kind"] {
        let got = GoType::of(obj.get(field).unwrap_or(&Value::Null));
        if !matches!(got, GoType::Nil | GoType::String) {
            return Err(Status::failure(
                400,
                "BadRequest",
                format!(
                    "the object provided is unrecognized (must be of type {}): couldn't get \
                     version/kind; json parse error: json: cannot unmarshal {} into Go struct \
                     field .{field} of type string ({})",
                    info.kind,
                    got.json_kind(),
                    super::protobuf::summary(body)
                ),
            ));
        }
    }
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let body_kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let expected = info.api_version();
    if !api_version.is_empty() && api_version != expected {
        return Err(Status::failure(
            400,
            "BadRequest",
            format!(
                "the API version in the data ({api_version}) does not match the expected API version ({expected})"
            ),
        ));
    }
    if !body_kind.is_empty() && body_kind != info.kind {
        return Err(Status::failure(
            400,
            "BadRequest",
            format!(
                "the kind in the data ({body_kind}) does not match the expected kind ({})",
                info.kind
            ),
        ));
    }
    Ok(())
}

/// `DeleteOptions` from the body (JSON, YAML or protobuf) and the query.
fn delete_options(req: &ResourceRequest) -> Result<DeleteOptions, Status> {
    let mut options = DeleteOptions {
        dry_run: req.dry_run()?,
        ..DeleteOptions::default()
    };
    if let Some(g) = req.param("gracePeriodSeconds") {
        options.grace_period_seconds =
            Some(g.parse().map_err(|_| bad_query("gracePeriodSeconds", g))?);
    }
    if let Some(o) = req.param("orphanDependents") {
        options.orphan_dependents = Some(query_bool(o));
    }
    let propagation = req.param("propagationPolicy").map(str::to_string);
    let mut policy = propagation;
    if !req.body.is_empty() {
        let body = match negotiate::body(req.header(header::CONTENT_TYPE), false) {
            Ok(form @ negotiate::Body::Protobuf) => {
                negotiate::decode_object(&req.body, form, "meta.k8s.io/v1", "DeleteOptions")?
            }
            _ => negotiate::decode(&req.body, false)
                .or_else(|_| negotiate::decode(&req.body, true))?,
        };
        if let Some(p) = body.get("preconditions") {
            options.uid = p.get("uid").and_then(Value::as_str).map(str::to_string);
            options.resource_version = p
                .get("resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        if let Some(g) = body.get("gracePeriodSeconds").and_then(Value::as_i64) {
            options.grace_period_seconds = Some(g);
        }
        if let Some(o) = body.get("orphanDependents").and_then(Value::as_bool) {
            options.orphan_dependents = Some(o);
        }
        if let Some(p) = body.get("propagationPolicy").and_then(Value::as_str) {
            policy = Some(p.to_string());
        }
        if body
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|v| v == "All"))
        {
            options.dry_run = true;
        }
    }
    if let Some(policy) = policy
        && !["Orphan", "Background", "Foreground"].contains(&policy.as_str())
    {
        return Err(Status::invalid(
            "",
            "DeleteOptions",
            "",
            &[FieldError::not_supported(
                "propagationPolicy",
                &policy,
                &["Foreground", "Background", "Orphan", "nil"],
            )],
        ));
    }
    Ok(options)
}

fn respond_object(
    kind: &dyn Strategy,
    code: StatusCode,
    obj: Value,
    output: Output,
    include: IncludeObject,
) -> Result<Response, Status> {
    if let Some(refused) = output.refusal(kind.info(), false) {
        return Err(refused);
    }
    let answer = match output.conversion {
        Some((Conversion::Table, version)) => {
            let metadata = json!({"resourceVersion": meta_str(&obj, "resourceVersion")});
            let objects = std::slice::from_ref(&obj);
            table::table_in(version, kind, objects, metadata, include, true)
        }
        Some((Conversion::Metadata, version)) => metadata::partial_object_in(&obj, version),
        _ => obj,
    };
    Ok(value_response(code, &answer, output))
}

/// The object a create, update or patch wrote: 201 if it was created, else 200, with the
/// field validation's warnings.
fn respond_written(
    kind: &dyn Strategy,
    created: bool,
    obj: Value,
    output: Output,
    include: IncludeObject,
    warnings: &[String],
) -> Result<Response, Status> {
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut response = respond_object(kind, code, obj, output, include)?;
    field_validation::add_warnings(&mut response, warnings);
    Ok(response)
}

/// A list answered in the negotiated form; in JSON as is, from its items' own encodings.
fn respond_list(
    kind: &dyn Strategy,
    list: &List,
    output: Output,
    include: IncludeObject,
) -> Result<Response, Status> {
    if let Some(refused) = output.refusal(kind.info(), true) {
        return Err(refused);
    }
    let metadata = || Value::Object(list.metadata.clone());
    let answer = match output.conversion {
        Some((Conversion::Table, version)) => {
            let items: Vec<&Value> = list.objects().collect();
            table::table_in(version, kind, &items, metadata(), include, true)
        }
        Some((Conversion::MetadataList, version)) => {
            metadata::partial_list_in(list.objects(), metadata(), version)
        }
        None if output.encoding == Encoding::Json => {
            return Ok(encoded_response(StatusCode::OK, list.to_json(), output));
        }
        _ => list.to_value(),
    };
    Ok(value_response(StatusCode::OK, &answer, output))
}

/// A streamed body, for watches.
pub fn streamed(output: Output, body: Body) -> Response {
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(output.content_type()),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_version_or_kind_that_is_not_a_string_leaves_the_body_unrecognized() {
        let cm = &crate::registry::configmaps::ConfigMaps;
        let body = br#"{"apiVersion":5,"kind":"ConfigMap","metadata":{"name":"x"}}"#;
        let obj: Value = serde_json::from_slice(body).unwrap();
        let refused = check_type(cm, &obj, body).unwrap_err();
        assert_eq!((refused.code, refused.reason), (400, "BadRequest"));
        assert_eq!(
            refused.message,
            "the object provided is unrecognized (must be of type ConfigMap): couldn't get \
             version/kind; json parse error: json: cannot unmarshal number into Go struct \
             field .apiVersion of type string ({\"apiVersion\":5,\"kind\":\"Config ...)"
        );
        let yaml = b"kind: [ConfigMap]\n";
        let obj = negotiate::decode(yaml, true).unwrap();
        assert!(check_type(cm, &obj, yaml).unwrap_err().message.ends_with(
            "array into Go struct field .kind of type string (6b696e643a205b436f6e6669674d61705d0a)"
        ));
        let fine = serde_json::json!({"apiVersion": "v1", "kind": null});
        assert!(check_type(cm, &fine, b"{}").is_ok());
        let other = serde_json::json!({"apiVersion": "v2"});
        assert!(
            check_type(cm, &other, b"{}")
                .unwrap_err()
                .message
                .starts_with("the API version")
        );
    }
}
