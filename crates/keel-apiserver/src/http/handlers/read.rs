//! The reads: get (one object, at a resourceVersion or the newest) and list (a page of a
//! collection, with selectors, `limit` and `continue`), as kube-apiserver's `GetResource`
//! and `ListResource` serve them.

use axum::response::Response;
use http::StatusCode;

use super::request::{Call, bad_query, selection};
use crate::registry::served::List;
use crate::registry::store::ListQuery;
use crate::storage::Status;
use crate::storage::resource_version::validate_list_options;

/// GET of the object `name`.
pub async fn get(call: &Call<'_>, name: &str) -> Result<Response, Status> {
    let req = call.req;
    let rv = req.param("resourceVersion").unwrap_or("");
    let obj = call
        .registry
        .get(call.kind, req.namespace(), name, rv)
        .await?;
    call.object(StatusCode::OK, obj)
}

/// GET of a collection.
pub async fn list(call: &Call<'_>) -> Result<Response, Status> {
    let list = list_objects(call).await?;
    call.list(&list, call.output)
}

/// The objects a list asks for: its options checked as kube-apiserver's `ListOptions`
/// validation checks them, its selectors applied.
pub async fn list_objects(call: &Call<'_>) -> Result<List, Status> {
    let req = call.req;
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
    let selection = selection(call.kind, req, None)?;
    let query = ListQuery {
        resource_version: rv,
        resource_version_match: rvm,
        limit,
        continue_token: (!token.is_empty()).then_some(token),
        selection: selection.as_ref(),
    };
    call.registry.list(call.kind, req.namespace(), &query).await
}
