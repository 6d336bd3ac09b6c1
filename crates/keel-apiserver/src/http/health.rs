//! `/healthz`, `/livez` and `/readyz`, as kube-apiserver answers them: `ok`, or with
//! `?verbose` one `[+]name ok` line per check; a failing check is `[-]name failed: reason
//! withheld` and the answer is 500. Each check is also served alone (`/readyz/etcd`), and
//! `?exclude=name` (repeatable) skips one (`[+]name excluded: ok`). `etcd` is the main store's
//! health ([`crate::storage::health`]), `etcd-override-<index>` each override store's (both
//! skipped by `?exclude=etcd`); `/readyz` adds their `-readiness` twins and waits for the
//! `rbac/bootstrap-roles` post-start hook and the system namespaces.

use std::sync::atomic::Ordering;

use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

use super::app::App;

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
    let readyz = endpoint == "readyz";
    let backends = app.registry.backends();
    let health = futures::future::join_all(
        backends
            .all()
            .iter()
            .map(|backend| backend.storage.healthy()),
    )
    .await;
    // (name, the group `?exclude` names it by, passed)
    let mut checks: Vec<(String, &str, bool)> =
        vec![("ping".into(), "ping", true), ("log".into(), "log", true)];
    for ((name, readiness, _), healthy) in backends.checks().zip(health) {
        checks.push((name, "etcd", healthy));
        if readyz {
            checks.push((readiness, "etcd-readiness", healthy));
        }
    }
    if readyz {
        checks.push((
            "poststarthook/rbac/bootstrap-roles".into(),
            "poststarthook/rbac/bootstrap-roles",
            app.rbac_bootstrapped.load(Ordering::Acquire),
        ));
        checks.push((
            "poststarthook/start-system-namespaces-controller".into(),
            "poststarthook/start-system-namespaces-controller",
            app.started.load(Ordering::Acquire),
        ));
    }
    if let Some(only) = only {
        if !checks.iter().any(|(name, ..)| name == only) {
            return Some((StatusCode::NOT_FOUND, "404 page not found\n").into_response());
        }
        checks.retain(|(name, ..)| name == only);
    }
    let params = || query.into_iter().flat_map(|q| q.split('&'));
    let excluded: Vec<&str> = params()
        .filter_map(|p| p.strip_prefix("exclude="))
        .collect();
    let is_excluded = |name: &str, group: &str| excluded.iter().any(|e| *e == name || *e == group);
    let passed = checks
        .iter()
        .all(|(name, group, ok)| *ok || is_excluded(name, group));
    let verbose = params().any(|p| p == "verbose" || p.starts_with("verbose="));
    let body = if passed && !verbose {
        "ok".to_string()
    } else {
        let mut out = String::new();
        for (name, group, ok) in &checks {
            if is_excluded(name, group) {
                out.push_str(&format!("[+]{name} excluded: ok\n"));
            } else if *ok {
                out.push_str(&format!("[+]{name} ok\n"));
            } else {
                out.push_str(&format!("[-]{name} failed: reason withheld\n"));
            }
        }
        let unmatched: Vec<String> = excluded
            .iter()
            .filter(|e| !checks.iter().any(|(n, g, _)| n == *e || g == *e))
            .map(|e| format!("{e:?}"))
            .collect();
        if !unmatched.is_empty() {
            out.push_str(&format!(
                "warn: some health checks cannot be excluded: no matches for {}\n",
                unmatched.join(",")
            ));
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
