//! The one verb of a kind that is never stored (the access and token reviews): a POST,
//! decoded and checked as any create's body is, answered by the kind's
//! [`Review`](crate::registry::authentication::Review) with 201, as kube-apiserver's
//! `CreateResource` answers a `rest.Creater` without storage. Every other verb is 405.

use axum::response::Response;

use super::Verb;
use super::request::Call;
use super::write::read_object;
use crate::http::field_validation::Directive;
use crate::registry::authentication::{Requester, Review};
use crate::storage::Status;

/// Serves `verb` on a review kind.
pub(super) fn serve(call: &Call<'_>, review: &dyn Review, verb: Verb) -> Result<Response, Status> {
    if verb != Verb::Create || call.req.subresource().is_some() {
        return Err(Status::method_not_allowed());
    }
    let req = call.req;
    let directive = Directive::parse(req.param("fieldValidation"), "CreateOptions")?;
    let (body, warnings) = read_object(call.registry, call.kind, req, None, directive)?;
    let requester = Requester::new(req.user.clone(), req.namespace(), req.tokens.clone());
    let answer = review.answer(body, &requester)?;
    call.written(true, answer, &warnings)
}
