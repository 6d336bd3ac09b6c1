//! authentication.k8s.io/v1: SelfSubjectReviews and TokenReviews ([`reviews`]); and what
//! every kind that is created but never stored (these and authorization.k8s.io's access
//! reviews) shares: [`Review`], what answers its create, and [`Requester`], who asked, as
//! keel's authentication (`crate::http::auth`) identifies them.

pub mod reviews;

use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

use super::Strategy;
use super::store::Registry;
use crate::http::auth::{Tokens, User};
use crate::storage::Status;

/// The group every authenticated user is in (apiserver's `user.AllAuthenticated`).
pub const ALL_AUTHENTICATED: &str = "system:authenticated";

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

/// The bearer tokens each registry's server authenticates with.
static AUTHENTICATORS: Mutex<Vec<(Weak<Registry>, Arc<Tokens>)>> = Mutex::new(Vec::new());

/// Makes `tokens` what requests to `registry`'s server are authenticated with, for the
/// reviews (the server's own copy authenticates every request before it is served).
pub fn authenticate_with(registry: &Arc<Registry>, tokens: Tokens) {
    let mut all = AUTHENTICATORS.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(r, _)| r.strong_count() > 0 && !std::ptr::eq(r.as_ptr(), Arc::as_ptr(registry)));
    all.push((Arc::downgrade(registry), Arc::new(tokens)));
}

fn tokens_of(registry: &Registry) -> Option<Arc<Tokens>> {
    let all = AUTHENTICATORS.lock().unwrap_or_else(|e| e.into_inner());
    all.iter()
        .find(|(r, _)| std::ptr::eq(r.as_ptr(), registry))
        .map(|(_, tokens)| tokens.clone())
}

/// The user a token names, with `system:authenticated` added as apiserver's
/// `AuthenticatedGroupAdder` adds it.
fn authenticated(user: &User) -> User {
    let mut user = user.clone();
    if !user
        .groups
        .iter()
        .any(|g| g == ALL_AUTHENTICATED || g == "system:unauthenticated")
    {
        user.groups.push(ALL_AUTHENTICATED.to_string());
    }
    user
}

impl Requester {
    /// Who sent a request to `registry`'s server with this `Authorization` header. A server
    /// without authentication (`--plain-http`) serves everyone as kube-apiserver's insecure
    /// port did: `system:unsecured`, in `system:masters` (`InsecureSuperuser`).
    pub fn of(registry: &Registry, authorization: Option<&str>, namespace: Option<&str>) -> Self {
        let tokens = tokens_of(registry);
        let user = tokens
            .as_ref()
            .and_then(|t| t.authenticate(authorization).map(authenticated));
        let user = user.unwrap_or_else(|| User {
            name: "system:unsecured".into(),
            uid: String::new(),
            groups: vec![
                crate::http::auth::MASTERS_GROUP.into(),
                ALL_AUTHENTICATED.into(),
            ],
        });
        Requester {
            user,
            namespace: namespace.map(str::to_string),
            tokens,
        }
    }

    /// A requester `user` (for tests and in-process callers), authenticating tokens with
    /// `tokens`, if any.
    pub fn new(user: User, namespace: Option<&str>, tokens: Option<Tokens>) -> Self {
        Requester {
            user,
            namespace: namespace.map(str::to_string),
            tokens: tokens.map(Arc::new),
        }
    }

    /// How the server's authenticators judge a bearer token: None when the server has none
    /// (`--plain-http`), else the user it names (Err: why not, as apiserver words it).
    pub fn authenticate_token(&self, token: &str) -> Option<Result<User, String>> {
        let tokens = self.tokens.as_ref()?;
        Some(
            tokens
                .authenticate(Some(&format!("Bearer {token}")))
                .map(authenticated)
                .ok_or_else(|| "invalid bearer token".to_string()),
        )
    }
}

/// `status.userInfo` / `status.user` as `authentication.UserInfo` serializes: username, uid
/// (if any), groups (if any); `extra` is empty and left out.
pub fn user_info(user: &User) -> Value {
    let mut info = serde_json::Map::new();
    info.insert("username".into(), user.name.clone().into());
    if !user.uid.is_empty() {
        info.insert("uid".into(), user.uid.clone().into());
    }
    if !user.groups.is_empty() {
        info.insert("groups".into(), user.groups.clone().into());
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
