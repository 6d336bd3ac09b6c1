//! authentication.k8s.io/v1: SelfSubjectReviews and TokenReviews ([`reviews`]); and what
//! every kind that is created but never stored (these and authorization.k8s.io's access
//! reviews) shares: [`Review`], what answers its create, and [`Requester`], who asked, as
//! keel's authentication (`crate::http::auth`) identified them for the request.

pub mod reviews;

use std::sync::Arc;

use serde_json::Value;

use super::Strategy;
use crate::http::auth::{Tokens, User};
use crate::storage::Status;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![&reviews::SelfSubjectReviews, &reviews::TokenReviews]
}

/// What answers a create of a kind that is never stored: the object to answer (201), or why
/// not.
pub trait Review: Sync {
    /// The answer to `obj`, a decoded body of the kind (in the request's namespace, for a
    /// namespaced kind), sent by `requester`.
    fn answer(&self, obj: Value, requester: &Requester) -> Result<Value, Status>;
}

/// Who sent a request, and the authenticator that identified them.
pub struct Requester {
    /// The user, with the groups authentication gives them.
    pub user: User,
    /// The namespace of the request's path, if any.
    pub namespace: Option<String>,
    tokens: Option<Arc<Tokens>>,
}

impl Requester {
    /// A requester `user`, whose server authenticates bearer tokens with `tokens` (None: it
    /// has no authentication, `--plain-http`).
    pub fn new(user: User, namespace: Option<&str>, tokens: Option<Arc<Tokens>>) -> Self {
        Requester {
            user,
            namespace: namespace.map(str::to_string),
            tokens,
        }
    }

    /// How the server's authenticators judge a bearer token: None when the server has none
    /// (`--plain-http`), else the user it names (Err: why not, as apiserver words it).
    pub fn authenticate_token(&self, token: &str) -> Option<Result<User, String>> {
        let tokens = self.tokens.as_ref()?;
        Some(
            tokens
                .user_of(Some(&format!("Bearer {token}")))
                .ok_or_else(|| "invalid bearer token".to_string()),
        )
    }
}

/// `status.userInfo` / `status.user` as `authentication.UserInfo` serializes: username, uid,
/// groups and extra, each left out when empty.
pub fn user_info(user: &User) -> Value {
    let mut info = serde_json::Map::new();
    info.insert("username".into(), user.name.clone().into());
    if !user.uid.is_empty() {
        info.insert("uid".into(), user.uid.clone().into());
    }
    if !user.groups.is_empty() {
        info.insert("groups".into(), user.groups.clone().into());
    }
    if !user.extra.is_empty() {
        info.insert("extra".into(), serde_json::json!(user.extra));
    }
    Value::Object(info)
}

/// A review's Table columns (kube-apiserver's default table convertor: NAME, CREATED AT);
/// a create's answer is never a Table, but a kind has columns.
pub static REVIEW_COLUMNS: [super::Column; 2] =
    [super::NAME_COLUMN, super::rbac::CREATED_AT_COLUMN];

/// A review's Table row: its name and creation time.
pub fn review_cells(obj: &Value) -> Vec<Value> {
    vec![
        Value::from(super::meta_str(obj, "name")),
        Value::from(super::meta_str(obj, "creationTimestamp")),
    ]
}

/// The Strategy of a review kind `$kind` (authentication's and authorization's): its info
/// (`$info`, a `static ResourceInfo`), the review columns and cells, and itself as the answer.
macro_rules! review_strategy {
    ($kind:ty, $info:expr) => {
        impl $crate::registry::Strategy for $kind {
            fn info(&self) -> &'static $crate::registry::ResourceInfo {
                &$info
            }

            fn columns(&self) -> &'static [$crate::registry::Column] {
                &$crate::registry::authentication::REVIEW_COLUMNS
            }

            fn cells(
                &self,
                obj: &serde_json::Value,
                _now: $crate::apimachinery::time::Time,
            ) -> Vec<serde_json::Value> {
                $crate::registry::authentication::review_cells(obj)
            }

            fn review(&self) -> Option<&dyn $crate::registry::authentication::Review> {
                Some(self)
            }
        }
    };
}
pub(crate) use review_strategy;

/// `obj` answered as a review of kind `info` with `status`: its apiVersion and kind set, and
/// `metadata.creationTimestamp` null unless set (Go's zero `metav1.Time`).
pub fn answered(info: &super::ResourceInfo, mut obj: Value, status: Value) -> Value {
    info.set_type(&mut obj);
    let metadata = super::meta::metadata(&mut obj);
    metadata.entry("creationTimestamp").or_insert(Value::Null);
    obj["status"] = status;
    obj
}
