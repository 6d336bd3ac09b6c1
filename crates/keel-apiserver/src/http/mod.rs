//! The HTTP side of the apiserver: one router for every path, in kube-apiserver's filter
//! order: health and version (no authentication), then bearer-token authentication, the
//! in-flight limits and the request timeout, then discovery, metrics and the resource verbs
//! ([`handlers`], answering through [`response`]); every request is counted in
//! [`crate::metrics`].

pub mod aggregated_discovery;
pub mod app;
pub mod auth;
pub mod decode;
pub mod discovery;
pub mod field_validation;
pub mod handlers;
pub mod health;
pub mod inflight;
pub mod lane;
pub mod metadata;
pub mod negotiate;
pub mod openapi;
pub mod protobuf;
pub mod request_info;
pub mod response;
pub mod strategic_merge;
pub mod table;
pub mod tls;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{Method, StatusCode, header};

use crate::metrics::Labels;
use crate::storage::Status;
pub use app::App;
use handlers::{MAX_BODY, ResourceRequest};
use keel_process::AbortOnDrop;
use keel_process::faults::{self, Fault};
use lane::Lane;
use negotiate::Output;
use request_info::{Path, ResourcePath, is_watch};
use response::{method_not_allowed, not_found, status_response, value_response};

/// The router serving `app`.
pub fn router(app: Arc<App>) -> axum::Router {
    axum::Router::new().fallback(dispatch).with_state(app)
}

async fn dispatch(State(app): State<Arc<App>>, req: Request) -> Response {
    // As Go's net/http hands kube-apiserver `URL.Path`: percent-decoded (`system%3Anode`).
    let path = request_info::decode_path(req.uri().path());
    // Any request but an Event's moves a connection of Events home ([`lane`]).
    let parsed = request_info::parse(&path);
    let lane = req.extensions().get::<Arc<Lane>>().cloned();
    let event = app.events_apart && matches!(&parsed, Path::Resource(r) if inflight::is_event(r));
    if let (Some(lane), true) = (&lane, app.events_apart) {
        lane.note(event);
    }
    if let Some(response) = health::serve(&app, &path, req.uri().query()).await {
        return response;
    }
    if path == "/version" {
        return value_response(StatusCode::OK, &discovery::version(), Output::Json);
    }
    // Who sent the request goes with it (kube-apiserver's `request.WithUser`), for what the
    // registry records or answers about them (a CSR's requestor, a SelfSubjectReview).
    let user = match &app.tokens {
        Some(tokens) => {
            let header = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            let Some(user) = tokens.user_of(header) else {
                return status_response(&Status::failure(
                    401,
                    "Unauthorized",
                    "Unauthorized".into(),
                ));
            };
            user
        }
        None => auth::User::unsecured(),
    };
    if app.tokens.is_some()
        && faults::is_path(&path)
        && !user.groups.iter().any(|g| g == auth::MASTERS_GROUP)
    {
        return status_response(&Status::failure(
            403,
            "Forbidden",
            format!(
                "forbidden: User \"{}\" cannot set faults: only the {} group may",
                user.name,
                auth::MASTERS_GROUP
            ),
        ));
    }
    let mut req = req;
    req.extensions_mut().insert(user);
    if faults::is_path(&path) {
        return serve_faults(req).await;
    }
    let kinds = app.registry.kinds();
    if let Some(response) = openapi::serve(
        &kinds,
        kinds.generation(),
        &path,
        req.uri().query(),
        req.headers(),
    ) {
        return response;
    }
    if path == "/metrics" {
        // Only reads: `apiserver_storage_objects` is counted in the background
        // (`registry::object_count`), so a scrape never waits on the store.
        return (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            app.metrics.encode(),
        )
            .into_response();
    }
    if matches!(parsed, Path::CoreVersions | Path::Groups)
        && req.method() == Method::GET
        && let Some((version, encoding)) = negotiate::aggregated_discovery(
            req.headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok()),
        )
    {
        let core = matches!(parsed, Path::CoreVersions);
        let document = app.discovery.get(&kinds, core, version);
        return aggregated_discovery::respond(&document, version, encoding, req.headers());
    }
    let discovered = match parsed {
        Path::CoreVersions => Some(discovery::core_versions(&app.server_address)),
        Path::Groups => Some(discovery::group_list(&kinds)),
        Path::Group(group) => match discovery::group(&kinds, &group) {
            Some(group) => Some(group),
            None => return status_response(&not_found()),
        },
        Path::Resources { group, version } => discovery::resources(&kinds, &group, &version),
        Path::Resource(resource) => {
            return match Lane::handler_runtime(lane.as_deref(), event) {
                Some(runtime) => serve_on(runtime, app, resource, req).await,
                None => serve_resource(&app, resource, req).await,
            };
        }
        Path::Other => None,
    };
    match discovered {
        Some(value) if req.method() == Method::GET => {
            let accept = req.headers().get(header::ACCEPT);
            discovery_response(&value, accept.and_then(|v| v.to_str().ok()))
        }
        Some(_) => status_response(&method_not_allowed()),
        None => (StatusCode::NOT_FOUND, "404 page not found\n").into_response(),
    }
}

/// An unaggregated discovery document in the form `accept` asks for, as kube-apiserver's
/// discovery handlers negotiate theirs (`WriteObjectNegotiated` with the default endpoint
/// restrictions): JSON, YAML or protobuf (meta's messages), no conversion, else 406.
fn discovery_response(value: &serde_json::Value, accept: Option<&str>) -> Response {
    let text = |f: &str| value.get(f).and_then(|v| v.as_str()).unwrap_or_default();
    let protobuf = protobuf::has_message(text("apiVersion"), text("kind"));
    match negotiate::output_for(accept, negotiate::Answer::Plain, protobuf) {
        Ok(output) => value_response(StatusCode::OK, value, output),
        Err(refused) => status_response(&refused.status(protobuf)),
    }
}

/// Serves a request on `runtime`: an Events request on the low-priority one
/// ([`keel_process::background`]), so a flood of Events takes the CPU only when heartbeats
/// and every other request leave it; any other request back on the main one when its
/// connection was moved ([`lane`]). Events go apart only when they have a store of their own:
/// on the main store, a handler at the lowest priority could hold that store's locks while
/// the heartbeats wait for them.
async fn serve_on(
    runtime: tokio::runtime::Handle,
    app: Arc<App>,
    resource: ResourcePath,
    req: Request,
) -> Response {
    let serving = runtime.spawn(async move { serve_resource(&app, resource, req).await });
    // A client gone (its connection or stream dropped this future) stops the handler too.
    let _abort_on_drop = AbortOnDrop(serving.abort_handle());
    match serving.await {
        Ok(response) => response,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Cancelled: the process is shutting down.
        Err(_) => status_response(&Status::failure(
            503,
            "ServiceUnavailable",
            "the apiserver is shutting down".into(),
        )),
    }
}

/// `/debug/faults` ([`keel_process::faults::Faults::answer_request`]), for an administrator.
async fn serve_faults(req: Request) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let body = axum::body::to_bytes(req.into_body(), faults::BODY_LIMIT).await;
    let reply = faults::process().answer_request(method.as_str(), &path, body.ok().as_deref());
    (
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "application/json")],
        reply.body,
    )
        .into_response()
}

/// kube-apiserver's verb for a request (`LIST`, `WATCH`, `GET`, `POST`, `APPLY`, ...).
fn verb(
    method: &Method,
    path: &ResourcePath,
    query: &HashMap<String, String>,
    apply: bool,
) -> &'static str {
    match (method, path.name.is_some()) {
        (&Method::GET, false) if is_watch(path, query) => "WATCH",
        (&Method::GET, false) => "LIST",
        (&Method::GET, true) => "GET",
        (&Method::POST, _) => "POST",
        (&Method::PUT, _) => "PUT",
        (&Method::PATCH, _) if apply => "APPLY",
        (&Method::PATCH, _) => "PATCH",
        (&Method::DELETE, false) => "DELETECOLLECTION",
        (&Method::DELETE, true) => "DELETE",
        _ => "UNKNOWN",
    }
}

async fn serve_resource(app: &App, path: ResourcePath, req: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let query: HashMap<String, String> = parts
        .uri
        .query()
        .map(|q| {
            axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
                .map(|axum::extract::Query(pairs)| pairs.into_iter().collect())
                .unwrap_or_else(|_| {
                    let _ = q;
                    HashMap::new()
                })
        })
        .unwrap_or_default();
    let apply = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/apply-patch"));
    let verb = verb(&parts.method, &path, &query, apply);
    let scope = match (&path.name, &path.namespace) {
        (Some(_), _) => "resource",
        (None, Some(_)) => "namespace",
        (None, None) => "cluster",
    };
    let labels: Labels = vec![
        ("verb", verb.into()),
        ("dry_run", query.get("dryRun").cloned().unwrap_or_default()),
        ("group", path.group.clone()),
        ("version", path.version.clone()),
        ("resource", path.resource.clone()),
        ("subresource", path.subresource.clone().unwrap_or_default()),
        ("scope", scope.into()),
    ];
    let watch = verb == "WATCH";
    let mutating = !matches!(verb, "GET" | "LIST" | "WATCH");
    // Watches are long-running: not limited, not timed out, counted apart.
    let _slot = if watch {
        None
    } else {
        match app.limits.slot(&app.metrics, &path, mutating).await {
            Some(slot) => Some(slot),
            None => {
                let status = too_many_requests();
                app.metrics.request(&labels, status.code, started.elapsed());
                return status_response(&status);
            }
        }
    };
    // The body is read within the request timeout, as the handler runs: a client that
    // stalls mid-body gives its slot back.
    let read = tokio::time::timeout(app.request_timeout, axum::body::to_bytes(body, MAX_BODY));
    let body = match read.await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) => {
            let status = body_error(&e);
            app.metrics.request(&labels, status.code, started.elapsed());
            return status_response(&status);
        }
        Err(_) => {
            let status = request_timed_out();
            app.metrics.request(&labels, status.code, started.elapsed());
            return status_response(&status);
        }
    };
    let request = ResourceRequest {
        method: parts.method,
        path,
        query,
        headers: parts.headers,
        body,
        user: parts
            .extensions
            .get::<auth::User>()
            .cloned()
            .unwrap_or_else(auth::User::unsecured),
        tokens: app.tokens.clone(),
    };
    let registry = app.registry.clone();
    let response = if watch {
        let mut long = labels.clone();
        long.push(("component", "apiserver".into()));
        let mut gauges = vec![app.metrics.longrunning.get_or_create(&long).clone()];
        let path = &request.path;
        if let Some(kind) = registry.kind(&path.group, &path.version, &path.resource) {
            let info = kind.info();
            let watcher = vec![
                ("group", info.group.to_string()),
                ("kind", info.kind.to_string()),
                ("version", info.version.to_string()),
            ];
            gauges.push(app.metrics.watchers.get_or_create(&watcher).clone());
        }
        injected_delay().await;
        let response = handlers::serve(registry, request).await;
        if !response.status().is_success() {
            gauges.truncate(1);
        }
        for gauge in &gauges {
            gauge.inc();
        }
        let (parts, body) = response.into_parts();
        let counted = CountedBody {
            inner: body,
            gauges,
        };
        Response::from_parts(parts, Body::new(counted))
    } else {
        let serving = async {
            injected_delay().await;
            handlers::serve(registry, request).await
        };
        match tokio::time::timeout(app.request_timeout, serving).await {
            Ok(response) => response,
            Err(_) => status_response(&request_timed_out()),
        }
    };
    app.metrics
        .request(&labels, response.status().as_u16(), started.elapsed());
    response
}

/// The `apiserver.request.delay` fault: a slow admission or encoding, within the request's
/// slot and timeout.
async fn injected_delay() {
    faults::process().pause(Fault::ApiserverRequestDelay).await;
}

/// 504 past `--request-timeout`, as kube-apiserver's timeout filter answers.
fn request_timed_out() -> Status {
    Status::failure(
        504,
        "Timeout",
        "Timeout: request did not complete within requested timeout - context deadline exceeded"
            .into(),
    )
}

/// The answer to a body that could not be read: 413 past the size limit, else 400 (the
/// client went away or sent a broken body).
fn body_error(e: &axum::Error) -> Status {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cause {
        if err.is::<http_body_util::LengthLimitError>() {
            return Status::failure(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: limit is {}", MAX_BODY),
            );
        }
        cause = err.source();
    }
    Status::failure(
        400,
        "BadRequest",
        format!("error reading the request body: {e}"),
    )
}

/// 429 past the in-flight limits, with Retry-After, as kube-apiserver's max-in-flight
/// filter answers.
fn too_many_requests() -> Status {
    Status::too_many_requests("Too many requests, please try again later.".into())
}

/// A watch's body, counted in `apiserver_longrunning_requests` (and, once the watch is
/// established, `apiserver_registered_watchers`) until it ends.
struct CountedBody {
    inner: Body,
    gauges: Vec<prometheus_client::metrics::gauge::Gauge>,
}

impl Drop for CountedBody {
    fn drop(&mut self) {
        for gauge in &self.gauges {
            gauge.dec();
        }
    }
}

impl http_body::Body for CountedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }
}
