//! `/healthz`, `/livez` and `/readyz`, as kube-apiserver answers them: `ok`, or with
//! `?verbose` one `[+]name ok` line per check; a failing check is `[-]name failed: reason
//! withheld` and the answer is 500. Each check is also served alone (`/readyz/etcd`).
//! `etcd` is the store's health ([`crate::storage::health`]); `/readyz` also waits for the system
//! namespaces to exist.

use std::sync::atomic::Ordering;

use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

use super::App;

/// The answer for a health path (None: not a health path).
pub async fn serve(app: &App, path: &str, query: Option<&str>) -> Option<Response> {
    let (endpoint, only) = match path.trim_end_matches('/').split_once('/').map(|(_, p)| p) {
        Some(p) => match p.split_once('/') {
            Some((e, check)) => (e, Some(check)),
            None => (p, None),
        },
        None => return None,
    };
    if !matches!(endpoint, "healthz" | "livez" | "readyz") {
        return None;
    }
    let mut checks: Vec<(&str, bool)> = vec![("ping", true), ("log", true)];
    let etcd = app.registry.storage().healthy().await;
    checks.push(("etcd", etcd));
    if endpoint == "readyz" {
        checks.push(("etcd-readiness", etcd));
        checks.push((
            "poststarthook/start-system-namespaces-controller",
            app.started.load(Ordering::Acquire),
        ));
    }
    if let Some(only) = only {
        if !checks.iter().any(|(name, _)| *name == only) {
            return Some((StatusCode::NOT_FOUND, "404 page not found\n").into_response());
        }
        checks.retain(|(name, _)| *name == only);
    }
    let passed = checks.iter().all(|(_, ok)| *ok);
    let verbose = query.is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    });
    let body = if passed && !verbose {
        "ok".to_string()
    } else {
        let mut out = String::new();
        for (name, ok) in &checks {
            if *ok {
                out.push_str(&format!("[+]{name} ok\n"));
            } else {
                out.push_str(&format!("[-]{name} failed: reason withheld\n"));
            }
        }
        let verdict = if passed { "passed" } else { "failed" };
        out.push_str(&format!("{endpoint} check {verdict}\n"));
        out
    };
    let code = if passed {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    Some(
        (
            code,
            [
                (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            body,
        )
            .into_response(),
    )
}
