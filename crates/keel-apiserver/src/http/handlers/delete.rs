//! The deletes: delete (one object) and deletecollection (every object a list selects), as
//! kube-apiserver's `DeleteResource` and `DeleteCollection` serve them, with their
//! `DeleteOptions` read from the query and the body ([`delete_options`]).

use std::sync::Arc;

use axum::response::Response;
use http::{StatusCode, header};
use serde_json::Value;

use super::read::list_objects;
use super::request::{Call, ResourceRequest, bad_query};
use crate::http::negotiate::{self, Conversion};
use crate::http::request_info::query_bool;
use crate::http::response::{target, value_response};
use crate::registry::meta_str;
use crate::registry::served::ServedObject;
use crate::registry::store::{DeleteOptions, Propagation};
use crate::storage::{FieldError, Status};

/// DELETE of the object `name`: the object as it went (or, while finalizers or a grace
/// period keep it, as it stays), or a `Success` Status for a kind that answers that.
pub async fn delete(call: &Call<'_>, name: &str) -> Result<Response, Status> {
    let (kind, req) = (call.kind, call.req);
    let options = delete_options(req)?;
    if let Some(refused) = kind.refuses_delete(name) {
        return Err(refused);
    }
    let deleted = call
        .registry
        .delete(kind, req.namespace(), name, &options)
        .await?;
    if !deleted.finished {
        // 202 only when asked for with `orphanDependents: false`, as kube-apiserver's
        // delete handler answers.
        let code = if options.orphan_dependents == Some(false) {
            StatusCode::ACCEPTED
        } else {
            StatusCode::OK
        };
        return call.object(code, deleted.object);
    }
    if kind.returns_deleted_object() {
        return call.object(StatusCode::OK, deleted.object);
    }
    let status = Status::deleted(&target(kind, name), meta_str(&deleted.object, "uid"));
    Ok(value_response(
        StatusCode::OK,
        &serde_json::to_value(&status).unwrap_or_default(),
        call.output.unconverted(),
    ))
}

/// DELETE of a collection: every object the list selects, answered as the list of the
/// objects deleted. A namespaced kind's deletecollection is served only within a namespace
/// (405 across all of them).
pub async fn delete_collection(call: &Call<'_>) -> Result<Response, Status> {
    let options = delete_options(call.req)?;
    let mut list = list_objects(call).await?;
    let mut deleted = Vec::new();
    for item in std::mem::take(&mut list.items) {
        let ns = meta_str(item.value(), "namespace");
        let ns = (!ns.is_empty()).then_some(ns);
        match call
            .registry
            .delete(call.kind, ns, meta_str(item.value(), "name"), &options)
            .await
        {
            Ok(gone) => deleted.push(Arc::new(ServedObject::from(gone.object))),
            Err(status) if status.code == 404 => {}
            Err(status) => return Err(status),
        }
    }
    list.items = deleted;
    let output = match call.output.conversion {
        Some((Conversion::Table, _)) => call.output.unconverted(),
        _ => call.output,
    };
    call.list(&list, output)
}

/// `DeleteOptions` from the body (JSON, YAML or protobuf) and the query.
pub fn delete_options(req: &ResourceRequest) -> Result<DeleteOptions, Status> {
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
        let body = match negotiate::body(req.header(header::CONTENT_TYPE), false, false) {
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
    if let Some(policy) = policy {
        options.propagation = Propagation::parse(&policy);
        if options.propagation.is_some() {
            if options.orphan_dependents.is_some() {
                return Err(Status::invalid(
                    "",
                    "DeleteOptions",
                    "",
                    &[FieldError::invalid(
                        "propagationPolicy",
                        policy.as_str(),
                        "orphanDependents and deletionPropagation cannot be both set",
                    )],
                ));
            }
            return Ok(options);
        }
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
