//! SelfSubjectReviews and TokenReviews, created and answered, never stored
//! (`pkg/registry/authentication/selfsubjectreview/rest.go`,
//! `pkg/registry/authentication/tokenreview/storage.go`): a SelfSubjectReview tells the
//! requester who they are; a TokenReview tells who a bearer token names, as the server's
//! authenticators judge it.

use serde_json::{Value, json};

use super::{Requester, Review, answered, review_strategy, user_info};
use crate::apimachinery::time::Time;
use crate::registry::ResourceInfo;
use crate::storage::Status;

/// The SelfSubjectReview strategy.
pub struct SelfSubjectReviews;

/// The TokenReview strategy.
pub struct TokenReviews;

const GROUP: &str = "authentication.k8s.io";

static SELF_SUBJECT_REVIEW: ResourceInfo = ResourceInfo {
    namespaced: false,
    ..ResourceInfo::new(
        GROUP,
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        "selfsubjectreview",
    )
};

static TOKEN_REVIEW: ResourceInfo = ResourceInfo {
    namespaced: false,
    ..ResourceInfo::new(GROUP, "v1", "TokenReview", "tokenreviews", "tokenreview")
};

review_strategy!(SelfSubjectReviews, SELF_SUBJECT_REVIEW);

impl Review for SelfSubjectReviews {
    /// The requester's user, name, uid and groups, created now.
    fn answer(&self, _obj: Value, requester: &Requester) -> Result<Value, Status> {
        let obj = json!({"metadata": {"creationTimestamp": Time::now().rfc3339()}});
        let status = json!({"userInfo": user_info(&requester.user)});
        Ok(answered(&SELF_SUBJECT_REVIEW, obj, status))
    }
}

review_strategy!(TokenReviews, TOKEN_REVIEW);

impl Review for TokenReviews {
    /// `spec.token` judged: `authenticated` with the user it names, or the authenticator's
    /// `error`. Audiences asked for are never met: keel's tokens are audience-agnostic and
    /// it has no API audiences, so the intersection is empty, as upstream's wrapper finds.
    fn answer(&self, obj: Value, requester: &Requester) -> Result<Value, Status> {
        let token = obj
            .pointer("/spec/token")
            .and_then(Value::as_str)
            .unwrap_or("");
        if token.is_empty() {
            return Err(Status::failure(
                400,
                "BadRequest",
                "token is required for TokenReview in authentication".into(),
            ));
        }
        let Some(judged) = requester.authenticate_token(token) else {
            let status = obj.get("status").cloned().unwrap_or_else(|| json!({}));
            return Ok(answered(&TOKEN_REVIEW, obj, status));
        };
        let audiences = obj
            .pointer("/spec/audiences")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        let status = match judged {
            _ if audiences => json!({}),
            Ok(user) => json!({"authenticated": true, "user": user_info(&user)}),
            Err(error) => json!({"error": error}),
        };
        Ok(answered(&TOKEN_REVIEW, obj, status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::auth::{Tokens, User};

    fn tokens() -> Tokens {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "s3cret,alice,a1,\"devs,ops\"\n").unwrap();
        Tokens::load(&path).unwrap()
    }

    fn alice() -> User {
        User {
            name: "alice".into(),
            uid: "a1".into(),
            groups: vec!["devs".into(), "ops".into(), "system:authenticated".into()],
            ..User::default()
        }
    }

    #[test]
    fn a_self_subject_review_names_the_requester() {
        let requester = Requester::new(alice(), None, None);
        let answer = SelfSubjectReviews.answer(json!({}), &requester).unwrap();
        assert_eq!(answer["kind"], "SelfSubjectReview");
        assert_eq!(answer["apiVersion"], "authentication.k8s.io/v1");
        assert_eq!(
            answer["status"],
            json!({"userInfo": {"username": "alice", "uid": "a1",
                "groups": ["devs", "ops", "system:authenticated"]}})
        );
        assert!(Time::parse(answer["metadata"]["creationTimestamp"].as_str().unwrap()).is_some());
    }

    #[test]
    fn a_token_review_judges_the_token_as_the_server_does() {
        let requester = Requester::new(alice(), None, Some(std::sync::Arc::new(tokens())));
        let review = |spec: Value| TokenReviews.answer(json!({"spec": spec}), &requester);
        assert_eq!(
            review(json!({"token": "s3cret"})).unwrap()["status"],
            json!({"authenticated": true, "user": {"username": "alice", "uid": "a1",
                "groups": ["devs", "ops", "system:authenticated"]}})
        );
        assert_eq!(
            review(json!({"token": "nope"})).unwrap()["status"],
            json!({"error": "invalid bearer token"})
        );
        assert_eq!(
            review(json!({"token": "s3cret", "audiences": ["api"]})).unwrap()["status"],
            json!({})
        );
        let missing = review(json!({})).unwrap_err();
        assert_eq!(
            (missing.code, missing.message.as_str()),
            (400, "token is required for TokenReview in authentication")
        );
        // Without authenticators (plain HTTP) the review comes back as sent.
        let open = Requester::new(alice(), None, None);
        let answer = TokenReviews
            .answer(json!({"spec": {"token": "x"}}), &open)
            .unwrap();
        assert_eq!(answer["status"], json!({}));
    }
}
