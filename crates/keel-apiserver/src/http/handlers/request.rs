//! A resource request as the verbs' handlers take it: its parts ([`ResourceRequest`]), the
//! query parameters every verb reads the same way, and the kind and answer form it was
//! matched to ([`Call`]).

use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, header};
use serde_json::Value;

use crate::http::auth::{Tokens, User};
use crate::http::negotiate::Output;
use crate::http::request_info::{Query, ResourcePath};
use crate::http::response::{respond_list, respond_object, respond_written};
use crate::http::table::IncludeObject;
use crate::json_pointer::At;
use crate::registry::selector::Selection;
use crate::registry::selector::{FieldSelector, LabelSelector};
use crate::registry::served::List;
use crate::registry::store::Registry;
use crate::registry::{Strategy, meta_str};
use crate::storage::Status;

/// The largest request body accepted (kube-apiserver's 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

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
    /// Who sent it, as authentication found them.
    pub user: User,
    /// The bearer tokens the server authenticates with (None: no authentication), for a
    /// TokenReview.
    pub tokens: Option<Arc<Tokens>>,
}

impl ResourceRequest {
    /// The query parameter `name`, if given.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }

    /// `dryRun`: only `All` (a dry run) or nothing (a real write).
    pub fn dry_run(&self) -> Result<bool, Status> {
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

    /// The header `name`, if it is given as text.
    pub fn header(&self, name: header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The namespace of the path, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.path.namespace.as_deref()
    }

    /// The subresource of the path, if any.
    pub fn subresource(&self) -> Option<&str> {
        self.path.subresource.as_deref()
    }
}

/// A request matched to the kind it names and the form its answer takes: what every verb's
/// handler is given.
pub struct Call<'a> {
    /// The objects.
    pub registry: &'a Registry,
    /// The kind the path names.
    pub kind: &'static dyn Strategy,
    /// The request.
    pub req: &'a ResourceRequest,
    /// The negotiated form of the answer.
    pub output: Output,
    /// `includeObject`, for Tables.
    pub include: IncludeObject,
}

impl Call<'_> {
    /// One object answered with `code` in the negotiated form.
    pub fn object(&self, code: StatusCode, obj: Value) -> Result<Response, Status> {
        respond_object(self.kind, code, obj, self.output, self.include)
    }

    /// The object a write stored (201 if `created`), with the field validation's `warnings`.
    pub fn written(
        &self,
        created: bool,
        obj: Value,
        warnings: &[String],
    ) -> Result<Response, Status> {
        respond_written(self.kind, created, obj, self.output, self.include, warnings)
    }

    /// A list answered in the negotiated form (`output`, this request's or another).
    pub fn list(&self, list: &List, output: Output) -> Result<Response, Status> {
        respond_list(self.kind, list, output, self.include)
    }
}

/// 400 for a query parameter that does not parse.
pub fn bad_query(name: &str, value: &str) -> Status {
    Status::failure(
        400,
        "BadRequest",
        format!("invalid value {value:?} for query parameter {name}"),
    )
}

/// The label and field selectors of a list or watch, as one selection (None: everything).
pub fn selection(
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
