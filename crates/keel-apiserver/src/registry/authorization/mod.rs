//! authorization.k8s.io/v1: SelfSubjectAccessReviews, SelfSubjectRulesReviews,
//! SubjectAccessReviews and LocalSubjectAccessReviews, created and answered, never stored
//! (`pkg/registry/authorization/*/rest.go`), validated as `pkg/apis/authorization/validation`
//! does ([`validation`]). They are answered as kube-apiserver with the AlwaysAllow
//! authorizer answers them (keel enforces no authorization yet): every access allowed, and
//! every rule (`*`) the rules of anyone, complete.

pub mod validation;

use serde_json::{Value, json};

use super::authentication::{Requester, Review, answered, review_strategy};
use super::{ResourceInfo, Strategy};
use crate::storage::{FieldError, Status};

/// The LocalSubjectAccessReview strategy.
pub struct LocalSubjectAccessReviews;

/// The SelfSubjectAccessReview strategy.
pub struct SelfSubjectAccessReviews;

/// The SelfSubjectRulesReview strategy.
pub struct SelfSubjectRulesReviews;

/// The SubjectAccessReview strategy.
pub struct SubjectAccessReviews;

const GROUP: &str = "authorization.k8s.io";

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![
        &LocalSubjectAccessReviews,
        &SelfSubjectAccessReviews,
        &SelfSubjectRulesReviews,
        &SubjectAccessReviews,
    ]
}

const fn info(
    kind: &'static str,
    resource: &'static str,
    singular: &'static str,
    namespaced: bool,
) -> ResourceInfo {
    ResourceInfo {
        namespaced,
        ..ResourceInfo::new(GROUP, "v1", kind, resource, singular)
    }
}

static LOCAL: ResourceInfo = info(
    "LocalSubjectAccessReview",
    "localsubjectaccessreviews",
    "localsubjectaccessreview",
    true,
);
static SELF_ACCESS: ResourceInfo = info(
    "SelfSubjectAccessReview",
    "selfsubjectaccessreviews",
    "selfsubjectaccessreview",
    false,
);
static SELF_RULES: ResourceInfo = info(
    "SelfSubjectRulesReview",
    "selfsubjectrulesreviews",
    "selfsubjectrulesreview",
    false,
);
static SUBJECT: ResourceInfo = info(
    "SubjectAccessReview",
    "subjectaccessreviews",
    "subjectaccessreview",
    false,
);

review_strategy!(LocalSubjectAccessReviews, LOCAL);
review_strategy!(SelfSubjectAccessReviews, SELF_ACCESS);
review_strategy!(SelfSubjectRulesReviews, SELF_RULES);
review_strategy!(SubjectAccessReviews, SUBJECT);

/// 422 for a review that does not validate (`NewInvalid(Kind(...), "", errs)`).
fn invalid(info: &ResourceInfo, errors: Vec<FieldError>) -> Result<(), Status> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Status::invalid(info.group, info.kind, "", &errors))
    }
}

/// The AlwaysAllow authorizer's decision: allowed, no reason.
fn allowed() -> Value {
    json!({"allowed": true})
}

impl Review for SubjectAccessReviews {
    fn answer(&self, obj: Value, _requester: &Requester) -> Result<Value, Status> {
        invalid(&SUBJECT, validation::subject_access_review(&obj))?;
        Ok(answered(&SUBJECT, obj, allowed()))
    }
}

impl Review for SelfSubjectAccessReviews {
    fn answer(&self, obj: Value, _requester: &Requester) -> Result<Value, Status> {
        invalid(&SELF_ACCESS, validation::self_subject_access_review(&obj))?;
        Ok(answered(&SELF_ACCESS, obj, allowed()))
    }
}

impl Review for LocalSubjectAccessReviews {
    fn answer(&self, obj: Value, requester: &Requester) -> Result<Value, Status> {
        invalid(&LOCAL, validation::local_subject_access_review(&obj))?;
        let namespace = requester.namespace.as_deref().unwrap_or("");
        if namespace.is_empty() {
            return Err(Status::failure(
                400,
                "BadRequest",
                format!("namespace is required on this type: {namespace}"),
            ));
        }
        if super::meta_str(&obj, "namespace") != namespace {
            return Err(Status::failure(
                400,
                "BadRequest",
                format!("spec.resourceAttributes.namespace must match namespace: {namespace}"),
            ));
        }
        Ok(answered(&LOCAL, obj, allowed()))
    }
}

impl Review for SelfSubjectRulesReviews {
    /// The AlwaysAllow authorizer's `RulesFor`: every verb on every resource and URL,
    /// complete. The answer carries the status alone, as upstream's does.
    fn answer(&self, obj: Value, _requester: &Requester) -> Result<Value, Status> {
        let namespace = obj
            .pointer("/spec/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        if namespace.is_empty() {
            return Err(Status::failure(
                400,
                "BadRequest",
                "no namespace on request".into(),
            ));
        }
        let status = json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        });
        Ok(answered(&SELF_RULES, json!({"spec": {}}), status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::auth::User;

    fn requester(namespace: Option<&str>) -> Requester {
        let user = User {
            name: "alice".into(),
            uid: String::new(),
            groups: vec!["system:authenticated".into()],
            ..User::default()
        };
        Requester::new(user, namespace, None)
    }

    #[test]
    fn access_reviews_are_allowed_as_always_allow_answers() {
        let sar = json!({"spec": {"resourceAttributes": {"verb": "create", "group": "apps",
            "resource": "deployments", "namespace": "default"}}});
        let answer = SelfSubjectAccessReviews
            .answer(sar.clone(), &requester(None))
            .unwrap();
        assert_eq!(answer["status"], json!({"allowed": true}));
        assert_eq!(answer["spec"], sar["spec"]);
        assert_eq!(answer["kind"], "SelfSubjectAccessReview");
        assert_eq!(answer["metadata"], json!({"creationTimestamp": null}));
        let refused = SubjectAccessReviews
            .answer(sar, &requester(None))
            .unwrap_err();
        assert_eq!(refused.code, 422);
        assert_eq!(
            refused.message,
            "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
        );
        let local = json!({"metadata": {"namespace": "ns"}, "spec": {"user": "bob",
            "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "ns"}}});
        let answer = LocalSubjectAccessReviews
            .answer(local.clone(), &requester(Some("ns")))
            .unwrap();
        assert_eq!(answer["status"], json!({"allowed": true}));
        let elsewhere = LocalSubjectAccessReviews
            .answer(local, &requester(Some("other")))
            .unwrap_err();
        assert_eq!(
            elsewhere.message,
            "spec.resourceAttributes.namespace must match namespace: other"
        );
    }

    #[test]
    fn rules_reviews_list_every_rule_and_need_a_namespace() {
        let answer = SelfSubjectRulesReviews
            .answer(json!({"spec": {"namespace": "default"}}), &requester(None))
            .unwrap();
        assert_eq!(
            answer["status"],
            json!({"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false})
        );
        let refused = SelfSubjectRulesReviews
            .answer(json!({"spec": {}}), &requester(None))
            .unwrap_err();
        assert_eq!(
            (refused.code, refused.message.as_str()),
            (400, "no namespace on request")
        );
    }
}
