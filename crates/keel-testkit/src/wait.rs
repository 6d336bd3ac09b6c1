//! Waiting for a condition instead of sleeping for a guess.
//!
//! A test that sleeps "long enough" for something to happen passes or fails on how busy the
//! machine is. These helpers poll the condition itself (a metric on `/metrics`, a revision, a
//! log line, a file) with a short pause between looks, and fail loudly after a generous
//! deadline, saying what was awaited and what was last seen. The pause only paces the polling;
//! nothing depends on its length.

use std::time::{Duration, Instant};

use crate::{Server, try_http_get};

/// The default deadline: generous, because the machine running the tests is shared.
pub const LIMIT: Duration = Duration::from_secs(30);

/// The pause between two looks.
const POLL: Duration = Duration::from_millis(50);

/// Polls `check` until it returns `Ok`, and returns that. `check` answers `Err(now)` with what
/// it sees meanwhile; after `limit` the test fails with `what` and the last `now`.
pub fn until<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let now = match check() {
            Ok(v) => return v,
            Err(now) => now,
        };
        assert!(
            Instant::now() < deadline,
            "waited {limit:?} for {what}; last seen: {now}"
        );
        std::thread::sleep(POLL);
    }
}

/// [`until`] for an async `check` (a closure returning a future, so the wait can run in a
/// spawned task), pausing without blocking the runtime.
pub async fn until_async<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + limit;
    loop {
        let now = match check().await {
            Ok(v) => return v,
            Err(now) => now,
        };
        assert!(
            Instant::now() < deadline,
            "waited {limit:?} for {what}; last seen: {now}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// The value of the sample `series` (a metric name with its labels, exactly as exported) on
/// the `/metrics` of `endpoint` (`host:port`), if it can be fetched and is there. For a task
/// that holds an endpoint rather than a [`Server`]; blocking.
pub fn metric_at(endpoint: &str, series: &str) -> Option<f64> {
    let (code, body) = try_http_get(endpoint, "/metrics").ok()?;
    if code != 200 {
        return None;
    }
    body.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Waits until the sample `series` on `server` satisfies `want`; its value then.
pub fn metric(server: &Server, series: &str, limit: Duration, want: impl Fn(f64) -> bool) -> f64 {
    until(
        &format!(
            "{series} on {} to reach the expected value",
            server.endpoint
        ),
        limit,
        || match server.metric(series) {
            Some(v) if want(v) => Ok(v),
            other => Err(format!("{other:?}")),
        },
    )
}

/// Waits until the counter `series` on `server` has not moved for `quiet`, measured from the
/// last change this function saw (so a late update restarts the count), and returns its
/// value. For "the member has heard nothing from X for a period": the counter of what came
/// from X stops, and the period runs from its last increment. Fails after `limit`.
pub fn metric_quiet_for(server: &Server, series: &str, quiet: Duration, limit: Duration) -> f64 {
    let deadline = Instant::now() + limit;
    let mut last = server.metric(series);
    let mut since = Instant::now();
    loop {
        std::thread::sleep(POLL);
        let now = server.metric(series);
        if now != last {
            last = now;
            since = Instant::now();
        } else if let Some(v) = now
            && since.elapsed() >= quiet
        {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "waited {limit:?} for {series} on {} to stay unchanged for {quiet:?}; it is {now:?}, \
             last changed {:?} ago",
            server.endpoint,
            since.elapsed()
        );
    }
}
