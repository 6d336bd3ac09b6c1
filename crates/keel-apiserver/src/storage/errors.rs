//! The one table of Kubernetes errors: [`StorageError`] (what went wrong, in storage terms),
//! field errors made one 422 Invalid ([`Status::invalid`]), and [`Status`] (the `Status` object a client gets: code, reason, message and details worded
//! exactly as kube-apiserver words them, because clients match on reason and code).

use serde::Serialize;

use super::field::{FieldError, aggregate};
use crate::apimachinery::quote::go_quote;

/// What an error is about: the object's group, resource and name, for the messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// API group ("" for core).
    pub group: String,
    /// Resource, plural (`configmaps`).
    pub resource: String,
    /// Object name.
    pub name: String,
}

impl Target {
    /// `configmaps` or `leases.coordination.k8s.io`, as Kubernetes names a group's resource.
    fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// A storage failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// No object at the key.
    #[error("key not found: {key}")]
    NotFound {
        /// The key.
        key: String,
    },
    /// A create found an object at the key.
    #[error("key exists: {key}")]
    KeyExists {
        /// The key.
        key: String,
    },
    /// The object changed since the caller read it (a resourceVersion or uid precondition).
    #[error("the object at {key} has been modified")]
    Conflict {
        /// The key.
        key: String,
    },
    /// A read asked for a revision newer than the store's.
    #[error("too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The revision asked for.
        requested: i64,
        /// The store's revision.
        current: i64,
    },
    /// A read at a revision the store compacted.
    #[error("the resourceVersion for the provided {of} is too old")]
    Expired {
        /// `list` or `watch`.
        of: &'static str,
    },
    /// A paged list whose pinned revision the store compacted: it may go on, inconsistently,
    /// from the latest revision with `token`.
    #[error("the provided continue parameter is too old")]
    ContinueExpired {
        /// The token continuing where the expired one would have, at the latest revision.
        token: String,
    },
    /// A request the caller got wrong (a bad continue token, a resourceVersion with one).
    #[error("{0}")]
    BadRequest(String),
    /// The store sheds load (etcd's `etcdserver: too many requests`): answered 429 with
    /// Retry-After, as the apiserver's own in-flight limits answer, so clients back off and
    /// retry instead of failing on a 500.
    #[error("{0}")]
    TooManyRequests(String),
    /// The store failed or could not be reached.
    #[error("{0}")]
    Internal(String),
    /// The caller's update refused the change with this Status (a validation failure, a
    /// precondition), answered as it is.
    #[error("{}", .0.message)]
    Rejected(Box<Status>),
}

/// A Kubernetes `Status` object (`kind: Status, apiVersion: v1`), as every error is answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Always `Status`.
    pub kind: &'static str,
    /// Always `v1`.
    pub api_version: &'static str,
    /// Empty, but for the fresh continue token of an expired paged list.
    pub metadata: StatusMeta,
    /// `Failure` (or `Success` for a delete answered with a Status).
    pub status: &'static str,
    /// The human-readable message, Kubernetes' wording.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The machine-readable reason (`NotFound`, `AlreadyExists`, `Conflict`, ...; empty
    /// for a Success).
    #[serde(skip_serializing_if = "str::is_empty")]
    pub reason: &'static str,
    /// The object and causes, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Box<Details>>,
    /// The HTTP status code (0, left out, for a Success answered with 200).
    #[serde(skip_serializing_if = "is_zero")]
    pub code: u16,
}

/// kube-apiserver's message for a continue token whose revision was compacted.
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a \
    consistent list result. You can start a new list without the continue parameter, or use \
    the continue token in this response to retrieve the remainder of the results. Continuing \
    with the provided token results in an inconsistent list - objects that were created, \
    modified, or deleted between the time the first chunk was returned and now may show up in \
    the list.";

/// A Status's `metadata` (a ListMeta): `{}`, or `{"continue": ...}` when a list's continue
/// token expired and the list may go on, inconsistently, from the latest revision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatusMeta {
    /// The token continuing at the latest revision.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<Box<str>>,
}

fn is_zero(code: &u16) -> bool {
    *code == 0
}

/// `Status.details`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Details {
    /// The object's name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's group.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The object's resource (Kubernetes calls the field `kind`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Field-level causes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
    /// The object's uid (in the Status of a finished delete).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// When to retry, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u32>,
}

/// One `Status.details.causes` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cause {
    /// The cause type (`FieldValueInvalid`, `ResourceVersionTooLarge`, ...).
    #[serde(rename = "reason")]
    pub kind: String,
    /// What is wrong.
    pub message: String,
    /// The field, if any.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl Status {
    /// 429 TooManyRequests with `message` and a Retry-After of one second: the answer to a
    /// request shed under load, by the in-flight limits or by the store.
    pub fn too_many_requests(message: String) -> Status {
        Status {
            details: Some(Box::new(Details {
                retry_after_seconds: Some(1),
                ..Details::default()
            })),
            ..Status::failure(429, "TooManyRequests", message)
        }
    }

    /// A failure with no details.
    pub fn failure(code: u16, reason: &'static str, message: String) -> Status {
        Status {
            kind: "Status",
            api_version: "v1",
            metadata: StatusMeta::default(),
            status: "Failure",
            message,
            reason,
            details: None,
            code,
        }
    }

    /// 405 MethodNotAllowed, as kube-apiserver's router answers a method a path is not
    /// registered for (`serviceErrorHandler`: `NewGenericServerResponse` with no resource
    /// and no name, so empty `details`, and no `Allow` header).
    pub fn method_not_allowed() -> Status {
        Status {
            details: Some(Box::default()),
            ..Status::failure(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource".to_string(),
            )
        }
    }

    /// 500 InternalError: `Internal error occurred: <message>`.
    pub fn internal(message: String) -> Status {
        Status::from_storage(&StorageError::Internal(message), &Target::default())
    }

    /// 409 Conflict: `Operation cannot be fulfilled on <resource> "<name>": <why>`.
    pub fn conflict(target: &Target, why: &str) -> Status {
        Status::about(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {}: {why}",
                target.qualified(),
                go_quote(&target.name)
            ),
            target,
        )
    }

    /// 403 Forbidden, for `why` (apimachinery's `NewForbidden`).
    pub fn forbidden(target: &Target, why: &str) -> Status {
        Status::about(
            403,
            "Forbidden",
            format!(
                "{} {} is forbidden: {why}",
                target.qualified(),
                go_quote(&target.name)
            ),
            target,
        )
    }

    /// 403 Forbidden for a create in a namespace being deleted, as the NamespaceLifecycle
    /// admission plugin words it.
    pub fn namespace_terminating(target: &Target, namespace: &str) -> Status {
        let mut status = Status::forbidden(
            target,
            &format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            ),
        );
        if let Some(details) = status.details.as_mut() {
            details.causes.push(Cause {
                kind: "NamespaceTerminating".into(),
                message: format!("namespace {namespace} is being terminated"),
                field: "metadata.namespace".into(),
            });
        }
        status
    }

    /// A `Success` Status for a finished delete (`details` name, kind, uid).
    pub fn deleted(target: &Target, uid: &str) -> Status {
        let mut status = Status::about(0, "", String::new(), target);
        status.status = "Success";
        if let Some(details) = status.details.as_mut() {
            details.uid = uid.to_string();
        }
        status
    }

    /// A failure about `target`.
    pub(crate) fn about(
        code: u16,
        reason: &'static str,
        message: String,
        target: &Target,
    ) -> Status {
        Status {
            details: Some(Box::new(Details {
                name: target.name.clone(),
                group: target.group.clone(),
                kind: target.resource.clone(),
                ..Details::default()
            })),
            ..Status::failure(code, reason, message)
        }
    }

    /// 422 Invalid: `<Kind>[.<group>] "<name>" is invalid: <errors>`, one cause per error,
    /// as apimachinery's `NewInvalid` words it.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Status {
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let message = if errors.is_empty() {
            format!("{qualified} {} is invalid", go_quote(name))
        } else {
            format!(
                "{qualified} {} is invalid: {}",
                go_quote(name),
                aggregate(errors)
            )
        };
        let causes = errors
            .iter()
            .map(|e| Cause {
                kind: e.kind.cause_type().to_string(),
                message: e.body(),
                field: e.field.clone(),
            })
            .collect();
        Status {
            details: Some(Box::new(Details {
                name: name.to_string(),
                group: group.to_string(),
                kind: kind.to_string(),
                causes,
                ..Details::default()
            })),
            ..Status::failure(422, "Invalid", message)
        }
    }

    /// The Status answering `error` for a request about `target`.
    pub fn from_storage(error: &StorageError, target: &Target) -> Status {
        let (resource, name) = (target.qualified(), &target.name);
        match error {
            StorageError::NotFound { .. } => Status::about(
                404,
                "NotFound",
                format!("{resource} \"{name}\" not found"),
                target,
            ),
            StorageError::KeyExists { .. } => Status::about(
                409,
                "AlreadyExists",
                format!("{resource} \"{name}\" already exists"),
                target,
            ),
            StorageError::Conflict { .. } => Status::about(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {resource} \"{name}\": the object has been \
                     modified; please apply your changes to the latest version and try again"
                ),
                target,
            ),
            StorageError::TooLargeResourceVersion { requested, current } => Status {
                details: Some(Box::new(Details {
                    causes: vec![Cause {
                        kind: "ResourceVersionTooLarge".to_string(),
                        message: "Too large resource version".to_string(),
                        field: String::new(),
                    }],
                    retry_after_seconds: Some(1),
                    ..Details::default()
                })),
                ..Status::failure(
                    504,
                    "Timeout",
                    format!("Too large resource version: {requested}, current: {current}"),
                )
            },
            StorageError::Expired { of } => Status::failure(
                410,
                "Expired",
                format!("The resourceVersion for the provided {of} is too old."),
            ),
            StorageError::ContinueExpired { token } => Status {
                metadata: StatusMeta {
                    continue_token: Some(token.as_str().into()),
                },
                ..Status::failure(410, "Expired", CONTINUE_EXPIRED.to_string())
            },
            StorageError::BadRequest(message) => {
                Status::failure(400, "BadRequest", message.clone())
            }
            StorageError::Rejected(status) => (**status).clone(),
            StorageError::TooManyRequests(message) => Status::too_many_requests(format!(
                "Too many requests, please try again later: {message}"
            )),
            StorageError::Internal(message) => Status {
                details: Some(Box::new(Details {
                    causes: vec![Cause {
                        kind: String::new(),
                        message: message.clone(),
                        field: String::new(),
                    }],
                    ..Details::default()
                })),
                ..Status::failure(
                    500,
                    "InternalError",
                    format!("Internal error occurred: {message}"),
                )
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str) -> Target {
        Target {
            group: String::new(),
            resource: "configmaps".to_string(),
            name: name.to_string(),
        }
    }

    #[test]
    fn statuses_are_worded_as_kubernetes_words_them() {
        let key = String::from("/registry/configmaps/default/x");
        let s = Status::from_storage(&StorageError::NotFound { key: key.clone() }, &cm("x"));
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "configmaps \"x\" not found", "reason": "NotFound",
                "details": { "name": "x", "kind": "configmaps" }, "code": 404
            })
        );
        let lease = Target {
            group: "coordination.k8s.io".to_string(),
            resource: "leases".to_string(),
            name: "n1".to_string(),
        };
        let s = Status::from_storage(&StorageError::KeyExists { key: key.clone() }, &lease);
        assert_eq!(
            (s.code, s.reason, s.message.as_str()),
            (
                409,
                "AlreadyExists",
                "leases.coordination.k8s.io \"n1\" already exists"
            )
        );
        let s = Status::from_storage(&StorageError::Conflict { key }, &cm("x"));
        assert_eq!(
            s.message,
            "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; \
             please apply your changes to the latest version and try again"
        );
        let s = Status::from_storage(&StorageError::Expired { of: "list" }, &cm(""));
        assert_eq!(
            (s.code, s.reason, s.message.as_str()),
            (
                410,
                "Expired",
                "The resourceVersion for the provided list is too old."
            )
        );
        let token = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0IjoicDJcdTAwMDAifQ";
        let s = Status::from_storage(
            &StorageError::ContinueExpired {
                token: token.into(),
            },
            &cm(""),
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            (json["code"].as_u64(), &json["reason"]),
            (Some(410), &"Expired".into())
        );
        assert_eq!(json["metadata"], serde_json::json!({ "continue": token }));
        assert!(
            s.message
                .starts_with("The provided continue parameter is too old")
        );
        let plain = serde_json::to_value(Status::from_storage(
            &StorageError::Expired { of: "list" },
            &cm(""),
        ))
        .unwrap();
        assert_eq!(plain["metadata"], serde_json::json!({}));
        let too_large = StorageError::TooLargeResourceVersion {
            requested: 10,
            current: 7,
        };
        let s = serde_json::to_value(Status::from_storage(&too_large, &cm(""))).unwrap();
        assert_eq!(s["code"], 504);
        assert_eq!(s["message"], "Too large resource version: 10, current: 7");
        assert_eq!(s["details"]["retryAfterSeconds"], 1);
        assert_eq!(
            s["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge"
        );
    }
}
