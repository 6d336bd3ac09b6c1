//! The one watch of the simulated Nodes (label `type=keel-sim`) that feeds [`Readiness`]:
//! the I/O shell around it.
//!
//! It starts from the resourceVersion of a one-item list, reads the stream a line at a time
//! and, for each event of a simulated node, reports its Ready condition's status. A watch that
//! ends is opened again from the last resourceVersion seen (bookmarks included), as an
//! informer does; one answered 410 Expired starts again from a fresh list's resourceVersion
//! (transitions in between are not seen, and the restart is counted as an error).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde::Deserialize;
use tokio::sync::watch;

use super::objects::{Fleet, SIM_SELECTOR};
use super::readiness::Readiness;
use super::shared::{Phase, Shared, lock};
use crate::https::Conn;
use crate::json_lines::LineBuffer;
use crate::microtime;

/// How long to wait before opening a failed watch again.
const RETRY: Duration = Duration::from_secs(1);

/// One watch event, as far as it is read.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    object: Object<'a>,
}

#[derive(Default, Deserialize)]
struct Object<'a> {
    #[serde(default, borrow)]
    metadata: Meta<'a>,
    #[serde(default, borrow)]
    status: Status<'a>,
    /// A Status's code (ERROR events).
    code: Option<u16>,
    #[serde(default, borrow)]
    message: Cow<'a, str>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta<'a> {
    #[serde(default, borrow)]
    name: Cow<'a, str>,
    #[serde(default, borrow)]
    resource_version: Cow<'a, str>,
}

#[derive(Default, Deserialize)]
struct Status<'a> {
    #[serde(default, borrow)]
    conditions: Vec<Condition<'a>>,
}

#[derive(Deserialize)]
struct Condition<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    status: Cow<'a, str>,
}

/// What one event line asks of the watch.
#[derive(Debug, PartialEq)]
enum Next {
    /// Go on.
    Continue,
    /// Go on, counting this error.
    Error(String),
    /// The resourceVersion expired (this error): start from a fresh list.
    Relist(String),
}

/// Where the watch is: the sans-I/O half.
struct NodeWatch {
    fleet: Fleet,
    rv: String,
}

impl NodeWatch {
    /// Handles one event line received at `at` (µs).
    fn on_event(&mut self, line: &[u8], at: i64, readiness: &mut Readiness) -> Next {
        let event: Event = match serde_json::from_slice(line) {
            Ok(event) => event,
            Err(e) => return Next::Error(format!("watch nodes: malformed event: {e}")),
        };
        let object = event.object;
        match event.kind.as_ref() {
            "ERROR" => {
                let code = object.code.unwrap_or(0);
                let message = format!("watch nodes: {code}: {}", object.message);
                return if code == 410 {
                    Next::Relist(message)
                } else {
                    Next::Error(message)
                };
            }
            "ADDED" | "MODIFIED" => {
                if let Some(node) = self.fleet.index(&object.metadata.name) {
                    let ready = object
                        .status
                        .conditions
                        .iter()
                        .find(|c| c.kind == "Ready")
                        .map(|c| c.status.as_ref());
                    readiness.observe(node, ready, at);
                }
            }
            _ => {}
        }
        if !object.metadata.resource_version.is_empty() {
            self.rv = object.metadata.resource_version.into_owned();
        }
        Next::Continue
    }
}

/// The resourceVersion to watch the simulated nodes from.
async fn list_rv(shared: &Shared, conn: &mut Conn) -> Option<String> {
    #[derive(Deserialize)]
    struct List {
        metadata: ListMeta,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ListMeta {
        resource_version: String,
    }
    let path = format!("/api/v1/nodes?labelSelector={SIM_SELECTOR}&limit=1");
    let answer = super::request::call(shared, conn, Method::GET, &path, None, &[])
        .await
        .ok()?;
    if answer.status != StatusCode::OK {
        return None;
    }
    serde_json::from_slice::<List>(&answer.body)
        .ok()
        .map(|l| l.metadata.resource_version)
}

/// The resourceVersion the watch starts from, read before the first node registers (so every
/// node's ADDED event is seen).
pub async fn start_rv(shared: &Shared, conn: &mut Conn) -> anyhow::Result<String> {
    list_rv(shared, conn).await.ok_or_else(|| {
        let messages = lock(&shared.messages);
        let why = messages.keys().next().cloned().unwrap_or_default();
        anyhow::anyhow!("cannot list the nodes: {why}")
    })
}

/// Watches the simulated nodes from `rv` until the phase is `Stop`.
pub async fn run(
    shared: Arc<Shared>,
    mut conn: Conn,
    rv: String,
    mut phase: watch::Receiver<Phase>,
) {
    let stop = async move {
        let _ = phase.wait_for(|p| *p == Phase::Stop).await;
    };
    tokio::pin!(stop);
    let mut state = NodeWatch {
        fleet: shared.fleet.clone(),
        rv,
    };
    let mut lines = LineBuffer::default();
    loop {
        let path = format!(
            "/api/v1/nodes?watch=1&labelSelector={SIM_SELECTOR}&resourceVersion={}&allowWatchBookmarks=true",
            state.rv
        );
        let opened = tokio::select! {
            biased;
            _ = &mut stop => return,
            opened = conn.send(Method::GET, &path, None) => opened,
        };
        let mut body = match opened {
            Ok(response) if response.status() == StatusCode::OK => response.into_body(),
            Ok(response) => {
                let status = response.status();
                shared.error(format!("watch nodes: {}", status.as_u16()));
                if status == StatusCode::GONE {
                    relist(&shared, &mut state, &mut conn).await;
                }
                tokio::select! {
                    biased;
                    _ = &mut stop => return,
                    _ = tokio::time::sleep(RETRY) => continue,
                }
            }
            Err(e) => {
                shared.error(format!("watch nodes: {e:#}"));
                tokio::select! {
                    biased;
                    _ = &mut stop => return,
                    _ = tokio::time::sleep(RETRY) => continue,
                }
            }
        };
        lines.clear();
        loop {
            let frame = tokio::select! {
                biased;
                _ = &mut stop => return,
                frame = body.frame() => frame,
            };
            let data = match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(_) => continue,
                },
                Some(Err(e)) => {
                    shared.error(format!("watch nodes: stream failed: {e}"));
                    break;
                }
                None => break,
            };
            let at = microtime::micros(SystemTime::now());
            let mut errors = Vec::new();
            let fed = {
                let mut readiness = lock(&shared.readiness);
                lines.feed(&data, |line| {
                    match state.on_event(line, at, &mut readiness) {
                        Next::Continue => Ok(()),
                        Next::Error(message) => {
                            errors.push(message);
                            Ok(())
                        }
                        Next::Relist(message) => Err(message),
                    }
                })
            };
            for message in errors {
                shared.error(message);
            }
            if let Err(message) = fed {
                shared.error(message);
                relist(&shared, &mut state, &mut conn).await;
                break;
            }
        }
    }
}

/// Moves the watch to a fresh list's resourceVersion (after 410 Expired).
async fn relist(shared: &Shared, state: &mut NodeWatch, conn: &mut Conn) {
    if let Some(rv) = list_rv(shared, conn).await {
        state.rv = rv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, name: &str, rv: u32, ready: &str) -> String {
        format!(
            "{{\"type\":\"{kind}\",\"object\":{{\"kind\":\"Node\",\"metadata\":{{\"name\":\"{name}\",\"resourceVersion\":\"{rv}\"}},\
             \"status\":{{\"conditions\":[{{\"type\":\"MemoryPressure\",\"status\":\"False\"}},{{\"type\":\"Ready\",\"status\":\"{ready}\",\"reason\":\"NodeStatusUnknown\"}}]}}}}}}"
        )
    }

    #[test]
    fn events_feed_the_readiness() {
        let fleet = Fleet {
            prefix: "sim-".into(),
            zones: 1,
            lease_duration: 40,
        };
        let mut w = NodeWatch {
            fleet,
            rv: "1".into(),
        };
        let mut r = Readiness::new([1]);
        for line in [
            event("ADDED", "sim-0", 2, "True"),
            event("ADDED", "sim-1", 3, "True"),
            event("ADDED", "other", 4, "True"),
            event("MODIFIED", "sim-0", 5, "Unknown"),
            "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"resourceVersion\":\"9\"}}}".into(),
        ] {
            assert_eq!(w.on_event(line.as_bytes(), 10, &mut r), Next::Continue);
        }
        assert_eq!(w.rv, "9");
        r.stopped(1, 0);
        let unknown = event("MODIFIED", "sim-1", 10, "Unknown");
        assert_eq!(
            w.on_event(unknown.as_bytes(), 40_000_000, &mut r),
            Next::Continue
        );
        let s = r.summary();
        assert_eq!((s.false_not_ready, s.not_ready_nodes), (1, 1));
        assert_eq!(s.not_ready_seconds_p50, Some(40.0));

        let expired = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"message\":\"too old resource version: 1 (5)\",\"code\":410}}";
        assert_eq!(
            w.on_event(expired.as_bytes(), 0, &mut r),
            Next::Relist("watch nodes: 410: too old resource version: 1 (5)".into())
        );
        assert!(matches!(w.on_event(b"not json", 0, &mut r), Next::Error(_)));
    }
}
