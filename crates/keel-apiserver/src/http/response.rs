//! Responses: a `Status` as kube-apiserver answers one, a value or a body in the negotiated
//! form, a streamed body for watches, and an object or a list answered as asked (whole, as a
//! Table or as metadata). Every handler builds its answers here; this module builds on
//! [`super::negotiate`], [`super::table`] and [`super::metadata`] only.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use serde_json::{Value, json};

use super::field_validation;
use super::metadata;
use super::negotiate::{self, Conversion, Encoding, Output};
use super::table::{self, IncludeObject};
use crate::registry::served::List;
use crate::registry::{Strategy, meta_str};
use crate::storage::{Status, StorageError, Target};

/// Answers `status` as kube-apiserver does where no form was negotiated: JSON, its code as
/// the HTTP status.
pub fn status_response(status: &Status) -> Response {
    status_response_as(status, Output::Json)
}

/// Answers `status` in `output`'s encoding (kube-apiserver's `ErrorNegotiated`: a protobuf
/// client reads its errors in protobuf, a YAML one in YAML), its code as the HTTP status.
pub fn status_response_as(status: &Status, output: Output) -> Response {
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let output = Output::plain(output.encoding);
    let mut response = (
        code,
        [(header::CONTENT_TYPE, output.content_type())],
        negotiate::encode(status, output),
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
pub fn encoded_response(code: StatusCode, body: Vec<u8>, output: Output) -> Response {
    (code, [(header::CONTENT_TYPE, output.content_type())], body).into_response()
}

/// A streamed body, for watches (a protobuf stream says so in its media type, as
/// kube-apiserver's does).
pub fn streamed(output: Output, body: Body) -> Response {
    let mut response = Response::new(body);
    let content_type = match output.encoding {
        Encoding::Protobuf => "application/vnd.kubernetes.protobuf;stream=watch",
        _ => output.content_type(),
    };
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
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

/// Where an object of `kind` named `name` is, as a Status names it.
pub fn target(kind: &dyn Strategy, name: &str) -> Target {
    let info = kind.info();
    Target {
        group: info.group.to_string(),
        resource: info.resource.to_string(),
        name: name.to_string(),
    }
}

/// 404 for the object `name` of `kind`, worded as the store words it.
pub fn not_found_object(kind: &dyn Strategy, name: &str) -> Status {
    Status::from_storage(
        &StorageError::NotFound { key: String::new() },
        &target(kind, name),
    )
}

/// One object answered with `code` in the negotiated form: whole, as a one-row Table or as
/// its metadata.
pub fn respond_object(
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
pub fn respond_written(
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
pub fn respond_list(
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
