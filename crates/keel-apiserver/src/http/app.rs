//! [`App`]: what every request is served with (the registry, the tokens, the limits and the
//! metrics), shared by the router's filters and handlers.

use std::sync::Arc;
use std::time::Duration;

use super::auth::Tokens;
use super::inflight;
use crate::metrics::Metrics;
use crate::registry::store::Registry;

/// Everything a request needs.
pub struct App {
    /// The objects.
    pub registry: Arc<Registry>,
    /// Who may call (None: everyone; only for plain HTTP on loopback).
    pub tokens: Option<Arc<Tokens>>,
    /// This server's address as clients reach it (`host:port`), for `/api`.
    pub server_address: String,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// `--max-requests-inflight` and `--max-mutating-requests-inflight`.
    pub limits: inflight::Limits,
    /// `--request-timeout`.
    pub request_timeout: Duration,
    /// The system namespaces exist (what `/readyz` waits for).
    pub started: std::sync::atomic::AtomicBool,
    /// The `rbac/bootstrap-roles` post-start hook has reconciled the bootstrap policy.
    pub rbac_bootstrapped: std::sync::atomic::AtomicBool,
    /// Events have a store of their own: their requests run at the lowest CPU priority.
    pub events_apart: bool,
    /// The aggregated discovery documents made for the kinds served now.
    pub discovery: super::aggregated_discovery::Cache,
}
