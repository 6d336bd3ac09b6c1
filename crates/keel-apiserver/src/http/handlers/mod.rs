//! The resource verbs on a [`ResourcePath`], one file per verb as kube-apiserver's
//! `endpoints/handlers` has them: [`read`] (get, list), [`watch`], [`write`](mod@write) (create,
//! update), [`patch`] (patches and server-side apply), [`delete`] (delete, deletecollection)
//! and [`review`] (the create of a kind never stored). Query parameters and bodies are read
//! and checked as kube-apiserver's handlers do, the work done by the [`Registry`], the answer
//! encoded in the negotiated form ([`crate::http::response`]); every failure a `Status`. This file only dispatches: the
//! path checked against the kind it names, the verb chosen, the answer's form negotiated.

pub mod delete;
pub mod patch;
pub mod read;
pub mod request;
pub mod review;
pub mod scale;
pub mod watch;
pub mod write;

use std::sync::Arc;

use axum::response::Response;
use http::{Method, header};

use super::field_validation;
use super::negotiate::{self, Answer};
use super::request_info::{ResourcePath, is_watch};
use super::response::{method_not_allowed, not_found, status_response_as};
use super::table::IncludeObject;
use crate::registry::Strategy;
use crate::registry::store::Registry;
use crate::storage::Status;
pub use request::{Call, MAX_BODY, ResourceRequest};

/// Serves one resource request.
pub async fn serve(registry: Arc<Registry>, req: ResourceRequest) -> Response {
    let path = &req.path;
    let deprecated = registry
        .kind(&path.group, &path.version, &path.resource)
        .and_then(|k| k.deprecation());
    let mut response = match handle(&registry, &req).await {
        Ok(response) => response,
        Err(status) => status_response_as(&status, error_output(&registry, &req)),
    };
    if let Some(warning) = deprecated {
        field_validation::add_warnings(&mut response, &[warning.to_string()]);
    }
    response
}

/// The form an error answers `req` in, as kube-apiserver's `ErrorNegotiated` chooses it: the
/// one the client accepts among the kind's (protobuf for a built-in kind), else JSON.
fn error_output(registry: &Registry, req: &ResourceRequest) -> negotiate::Output {
    let path = &req.path;
    let protobuf = registry
        .kind(&path.group, &path.version, &path.resource)
        .is_some_and(has_protobuf);
    negotiate::output_for(req.header(header::ACCEPT), Answer::Plain, protobuf)
        .unwrap_or(negotiate::Output::Json)
}

/// Whether `kind` is answered in protobuf to a client that asks: a built-in kind with a
/// message, never a custom resource.
fn has_protobuf(kind: &dyn Strategy) -> bool {
    let info = kind.info();
    kind.custom_schema().is_none()
        && crate::http::protobuf::has_message(&info.api_version(), info.kind)
}

/// A resource verb, with the object it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb<'a> {
    Get(&'a str),
    List,
    Watch,
    Create,
    Update(&'a str),
    Patch(&'a str),
    Delete(&'a str),
    DeleteCollection,
}

impl<'a> Verb<'a> {
    /// The verb of `req` (None: a method the path does not serve, 405).
    fn of(req: &'a ResourceRequest) -> Option<Verb<'a>> {
        let path = &req.path;
        // A watch of one object is served under `watch/` only; `?watch` on a name is a get.
        let watch = is_watch(path, &req.query) && (path.name.is_none() || path.watch_path);
        Some(match (&req.method, path.name.as_deref()) {
            (&Method::GET, _) if watch => Verb::Watch,
            (&Method::GET, None) => Verb::List,
            (&Method::GET, Some(name)) => Verb::Get(name),
            (&Method::POST, None) => Verb::Create,
            (&Method::PUT, Some(name)) => Verb::Update(name),
            (&Method::PATCH, Some(name)) => Verb::Patch(name),
            (&Method::DELETE, Some(name)) => Verb::Delete(name),
            (&Method::DELETE, None) => Verb::DeleteCollection,
            _ => return None,
        })
    }
}

/// What the answer to `verb` is, for content negotiation (a method not served answers as a
/// write would, so a refused Accept header comes before its 405).
fn answer(verb: Option<Verb>) -> Answer {
    match verb {
        Some(Verb::Watch) => Answer::Watch,
        Some(Verb::Get(_)) => Answer::Object,
        Some(Verb::List | Verb::DeleteCollection) => Answer::List,
        _ => Answer::Written,
    }
}

/// Serves `req`: its path checked, its verb chosen, its answer's form negotiated, the verb's
/// handler called.
async fn handle(registry: &Registry, req: &ResourceRequest) -> Result<Response, Status> {
    let kind = served_kind(registry, req)?;
    let verb = Verb::of(req);
    let protobuf = has_protobuf(kind);
    let output = negotiate::output_for(req.header(header::ACCEPT), answer(verb), protobuf)
        .map_err(|r| r.status(protobuf))?;
    let include = IncludeObject::parse(req.param("includeObject"))?;
    let call = Call {
        registry,
        kind,
        req,
        output,
        include,
    };
    let verb = verb.ok_or_else(method_not_allowed)?;
    if let Some(review) = kind.review() {
        return review::serve(&call, review, verb);
    }
    if req.subresource() == Some("scale") {
        return match verb {
            Verb::Get(name) => scale::get(&call, name).await,
            Verb::Update(name) => scale::write(&call, name, false).await,
            Verb::Patch(name) => scale::write(&call, name, true).await,
            _ => Err(method_not_allowed()),
        };
    }
    match verb {
        Verb::Get(name) => read::get(&call, name).await,
        Verb::List => read::list(&call).await,
        Verb::Watch => watch::watch(&call).await,
        Verb::Create => write::create(&call).await,
        Verb::Update(name) => write::update(&call, name).await,
        Verb::Patch(name) => patch::patch(&call, name).await,
        Verb::Delete(name) => delete::delete(&call, name).await,
        Verb::DeleteCollection => delete::delete_collection(&call).await,
    }
}

/// The kind `req`'s path names, if the path is one kube-apiserver serves for it with this
/// method (404 or 405 otherwise).
fn served_kind(
    registry: &Registry,
    req: &ResourceRequest,
) -> Result<&'static dyn Strategy, Status> {
    let path: &ResourcePath = &req.path;
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
    // kube-apiserver's installer registers `status`, `scale` and a kind's own subresources (a
    // CSR's `approval`) for get, update and patch alone, and a namespace's `finalize` for
    // update alone: any other method on them is its router's 405.
    let served = match path.subresource.as_deref() {
        None => true,
        Some(sub)
            if (sub == "status" && info.status)
                || (sub == "scale" && kind.scale().is_some())
                || kind.subresources().contains(&sub) =>
        {
            [Method::GET, Method::PUT, Method::PATCH].contains(&req.method)
        }
        Some("finalize") if info.resource == "namespaces" => req.method == Method::PUT,
        Some(_) if req.method == Method::POST || path.subresource.as_deref() == Some("binding") => {
            false
        }
        Some(_) => return Err(not_found()),
    };
    if !served {
        return Err(method_not_allowed());
    }
    Ok(kind)
}
