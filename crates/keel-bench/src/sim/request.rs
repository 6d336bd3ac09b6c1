//! One request of a simulated kubelet, sent as client-go sends it: within the request
//! timeout, and when the server answers 429 (or a 5xx) with `Retry-After`, sent again after
//! that many seconds (capped at [`MAX_RETRY_AFTER`]), up to [`MAX_RETRIES`] times, as
//! client-go's `request.go` does before giving the caller the error. Every 429 counts as
//! throttled; every other failure (answer, timeout, connection) counts as an error, with its
//! message, in the [`Tally`] of the kind of request (the nodes' in [`call`], the event
//! writers' apart, through [`call_counted`]).

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};

use super::shared::{Shared, Tally};
use crate::https::{Answer, Conn};

/// client-go's `maxRetries` for answers with `Retry-After`.
pub const MAX_RETRIES: u32 = 10;

/// The longest `Retry-After` honoured.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

/// The JSON content type.
pub const JSON: &str = "application/json";

/// A strategic merge patch.
pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";

/// What a request came to: an answer (any status), or none (`Err`, with why).
pub type Outcome = Result<Answer, String>;

/// Sends `method path` with `body` of `content_type` for a node (see the module comment).
/// Returns the last answer, whatever its status, or why there was none; the nodes' counters
/// are updated. `expected` says which failure statuses the caller handles itself and are not
/// errors (a 404 to a GET that will create, a 409 that means re-read).
pub async fn call(
    shared: &Shared,
    conn: &mut Conn,
    method: Method,
    path: &str,
    body: Option<(Bytes, &'static str)>,
    expected: &[StatusCode],
) -> Outcome {
    let timeout = shared.request_timeout;
    call_counted(
        &shared.requests,
        timeout,
        conn,
        method,
        path,
        body,
        expected,
    )
    .await
}

/// [`call`] counted in `tally`, each try within `timeout`.
pub async fn call_counted(
    tally: &Tally,
    timeout: Duration,
    conn: &mut Conn,
    method: Method,
    path: &str,
    body: Option<(Bytes, &'static str)>,
    expected: &[StatusCode],
) -> Outcome {
    let mut retries = 0;
    loop {
        let (payload, content_type) = match &body {
            Some((bytes, kind)) => (Some(bytes.clone()), *kind),
            None => (None, JSON),
        };
        let sent = conn.call_typed(method.clone(), path, payload, content_type);
        let answer = match tokio::time::timeout(timeout, sent).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                let message = format!("{method} {}: {e:#}", kind_of(path));
                tally.error(message.clone());
                return Err(message);
            }
            Err(_) => {
                conn.recover().await;
                let message = format!("{method} {}: timed out after {timeout:?}", kind_of(path));
                tally.error(message.clone());
                return Err(message);
            }
        };
        let status = answer.status;
        if status.is_success() || expected.contains(&status) {
            return Ok(answer);
        }
        if status == StatusCode::TOO_MANY_REQUESTS {
            tally.throttled();
        } else {
            tally.error(format!("{method} {}: {}", kind_of(path), answer.error()));
        }
        let retry = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
        match answer.retry_after {
            Some(wait) if retry && retries < MAX_RETRIES => {
                retries += 1;
                tokio::time::sleep(wait.min(MAX_RETRY_AFTER)).await;
            }
            _ => return Ok(answer),
        }
    }
}

/// The kind of object a path is about, for error messages that group well (`lease`,
/// `node`, `node status`, `nodes`, `events`).
fn kind_of(path: &str) -> &'static str {
    let path = path.split('?').next().unwrap_or(path);
    if path.ends_with("/events") {
        "events"
    } else if path.contains("/leases/") {
        "lease"
    } else if path.ends_with("/leases") {
        "leases"
    } else if path.ends_with("/status") {
        "node status"
    } else if path.contains("/nodes/") {
        "node"
    } else {
        "nodes"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(
            kind_of("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n-1"),
            "lease"
        );
        assert_eq!(kind_of("/api/v1/nodes/n-1/status"), "node status");
        assert_eq!(kind_of("/api/v1/nodes/n-1?resourceVersion=0"), "node");
        assert_eq!(kind_of("/api/v1/nodes"), "nodes");
        assert_eq!(kind_of("/api/v1/namespaces/default/events"), "events");
    }
}
