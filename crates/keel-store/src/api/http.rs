//! HTTP endpoints on the client URL, as etcd serves them: `/health`, `/version`, `/metrics`.

use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::server::Store;

/// The HTTP routes.
pub fn router(store: Arc<Store>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/version", get(version))
        .route("/metrics", get(metrics))
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
    m.proposals_committed.set(store.committed_index() as i64);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.render(),
    )
}
