//! HTTP endpoints on the client URL, as etcd serves them: `/health`, `/version`, `/metrics`;
//! and keel's `/debug/faults` for diagnosis drills (loopback clients only).

use std::sync::Arc;

use axum::Router;
use axum::extract::connect_info::ConnectInfo;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{any, get};
use keel_process::faults::{self, Reply};

use crate::server::Store;

/// The HTTP routes.
pub fn router(store: Arc<Store>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/version", get(version))
        .route("/metrics", get(metrics))
        .route(faults::PATH, any(serve_faults))
        .route(&format!("{}/{{name}}", faults::PATH), any(serve_faults))
        .fallback(not_found)
        .with_state(store)
}

type State = axum::extract::State<Arc<Store>>;

/// `{"health":"true","reason":""}` when the member can write, has a leader and no alarm, else
/// 503 with etcd's reason (a member that cannot write fails etcd's health range).
async fn health(axum::extract::State(store): State) -> impl IntoResponse {
    let reason = if store.failure().is_some() {
        format!("RANGE ERROR:{}", crate::error::EtcdError::Stopped)
    } else if store.leader() == 0 {
        "RAFT NO LEADER".to_string()
    } else if let Some(alarm) = store.alarms().first() {
        let name = keel_proto::etcdserverpb::AlarmType::try_from(alarm.alarm)
            .map_or("UNKNOWN", |t| t.as_str_name());
        format!("ALARM {name}")
    } else {
        String::new()
    };
    let healthy = reason.is_empty();
    let body = serde_json::json!({ "health": healthy.to_string(), "reason": reason });
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
}

/// `{"etcdserver":"…","etcdcluster":"…"}` with the emulated etcd version.
async fn version(axum::extract::State(store): State) -> impl IntoResponse {
    let v = &store.config().emulated_etcd_version;
    let cluster = v
        .rsplit_once('.')
        .map_or(v.as_str(), |(major_minor, _)| major_minor);
    let body = serde_json::json!({ "etcdserver": v, "etcdcluster": format!("{cluster}.0") });
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
}

/// Any other path: Go's `http.NotFound`, as etcd answers it.
async fn not_found() -> impl IntoResponse {
    (
        StatusCode::NOT_FOUND,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        "404 page not found\n",
    )
}

/// Every metric in the Prometheus text format.
async fn metrics(axum::extract::State(store): State) -> impl IntoResponse {
    let m = store.metrics();
    m.db_size.set(store.mvcc().db_size() as i64);
    m.db_size_in_use.set(store.mvcc().db_size_in_use() as i64);
    m.quota_backend_bytes
        .set(store.config().quota_bytes() as i64);
    m.proposals_committed.set(store.committed_index() as i64);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.render(),
    )
}

/// `/debug/faults` ([`keel_process::faults::Faults::answer`]) for a client on this machine:
/// the client port may face the network, a fault must not be set from it. A request whose
/// client address is unknown is refused too.
async fn serve_faults(
    axum::extract::State(store): State,
    req: axum::extract::Request,
) -> axum::response::Response {
    let local = req
        .extensions()
        .get::<ConnectInfo<std::net::SocketAddr>>()
        .is_some_and(|ConnectInfo(peer)| peer.ip().to_canonical().is_loopback());
    if !local {
        return reply(Reply::error(
            403,
            "faults are set from the member's own machine only (a loopback client)",
        ));
    }
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let body = axum::body::to_bytes(req.into_body(), faults::BODY_LIMIT).await;
    let registry = faults::process();
    registry.name_peers(store.members().into_iter().map(|m| (m.id, m.name)));
    reply(registry.answer_request(method.as_str(), &path, body.ok().as_deref()))
}

fn reply(reply: Reply) -> axum::response::Response {
    (
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "application/json")],
        reply.body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    async fn delete_faults(router: &Router, from: Option<&str>) -> StatusCode {
        let mut req = axum::extract::Request::builder()
            .method("DELETE")
            .uri("/debug/faults")
            .body(axum::body::Body::empty())
            .unwrap();
        if let Some(from) = from {
            let peer: std::net::SocketAddr = from.parse().unwrap();
            req.extensions_mut().insert(ConnectInfo(peer));
        }
        router.clone().oneshot(req).await.unwrap().status()
    }

    #[tokio::test]
    async fn faults_are_set_from_the_members_own_machine_only() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::config::parse_for_test(&[
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--listen-peer-urls",
            "http://127.0.0.1:0",
        ]);
        let store = Store::open(config).await.unwrap();
        let router = router(store.clone());
        assert_eq!(
            delete_faults(&router, Some("127.0.0.1:5000")).await,
            StatusCode::OK
        );
        assert_eq!(
            delete_faults(&router, Some("[::1]:5000")).await,
            StatusCode::OK
        );
        assert_eq!(
            delete_faults(&router, Some("[::ffff:127.0.0.1]:5000")).await,
            StatusCode::OK
        );
        // No client address: where it came from is unknown.
        assert_eq!(delete_faults(&router, None).await, StatusCode::FORBIDDEN);
        assert_eq!(
            delete_faults(&router, Some("10.1.2.3:5000")).await,
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            delete_faults(&router, Some("[2001:db8::1]:5000")).await,
            StatusCode::FORBIDDEN
        );
        store.shutdown().await;
    }
}
