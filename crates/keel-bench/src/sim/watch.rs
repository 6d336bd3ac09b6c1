//! The one watch of the simulated Nodes (label `type=keel-sim`) that feeds [`Readiness`]:
//! the I/O shell around it, kept open by [`kube_watch::follow`].
//!
//! It starts from the resourceVersion of a one-item list, reads the stream a line at a time
//! and, for each event of a simulated node, reports its Ready condition's status. A watch that
//! ends is opened again from the last resourceVersion seen (bookmarks included), as an
//! informer does; one answered 410 Expired starts again from a fresh list's resourceVersion
//! (transitions in between are not seen, and the restart is counted as an error).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

use http::{Method, StatusCode};
use serde::Deserialize;
use serde::de::IgnoredAny;
use tokio::sync::watch;

use super::objects::{Fleet, SIM_SELECTOR};
use super::readiness::Readiness;
use super::shared::{Phase, Shared, lock};
use crate::https::Conn;
use crate::json_lines::LineBuffer;
use crate::kube_watch::{self, Event, OpenFailure};
use crate::microtime;

/// What the watch reads of a node's status.
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
        let event: Event<IgnoredAny, Status> = match serde_json::from_slice(line) {
            Ok(event) => event,
            Err(e) => return Next::Error(format!("watch nodes: malformed event: {e}")),
        };
        if let Some((code, message)) = event.error() {
            let message = format!("watch nodes: {code}: {message}");
            return if code == 410 {
                Next::Relist(message)
            } else {
                Next::Error(message)
            };
        }
        let object = event.object;
        match event.kind.as_ref() {
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
        let messages = lock(&shared.requests.messages);
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
    let mut nodes = Watching {
        state: NodeWatch {
            fleet: shared.fleet.clone(),
            rv,
        },
        shared,
        lines: LineBuffer::default(),
    };
    kube_watch::follow(&mut conn, &mut nodes, None, stop).await;
}

/// The node watch as the [`kube_watch::Watch`] [`kube_watch::follow`] keeps open: its errors
/// counted in [`Shared`], an expired resourceVersion replaced by a fresh list's.
struct Watching {
    shared: Arc<Shared>,
    state: NodeWatch,
    /// The event line not complete yet.
    lines: LineBuffer,
}

impl kube_watch::Watch for Watching {
    fn path(&self) -> String {
        format!(
            "/api/v1/nodes?watch=1&labelSelector={SIM_SELECTOR}&resourceVersion={}&allowWatchBookmarks=true",
            self.state.rv
        )
    }

    fn on_data(&mut self, data: &[u8]) -> Result<(), String> {
        let at = microtime::micros(SystemTime::now());
        let mut errors = Vec::new();
        let fed = {
            let mut readiness = lock(&self.shared.readiness);
            self.lines.feed(data, |line| {
                match self.state.on_event(line, at, &mut readiness) {
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
            self.shared.error(message);
        }
        fed.map(drop)
    }

    fn open_failed(&mut self, failure: OpenFailure) -> Result<(), String> {
        let message = match failure {
            OpenFailure::Request(e) => format!("watch nodes: {e:#}"),
            OpenFailure::Refused(answer) => {
                let message = format!("watch nodes: {}", answer.status.as_u16());
                if answer.status == StatusCode::GONE {
                    return Err(message);
                }
                message
            }
        };
        self.shared.error(message);
        Ok(())
    }

    fn stream_failed(&mut self, err: hyper::Error) {
        self.shared
            .error(format!("watch nodes: stream failed: {err}"));
    }

    fn reopening(&mut self) {
        self.lines.clear();
    }

    /// Moves the watch to a fresh list's resourceVersion.
    async fn expired(&mut self, message: String, conn: &mut Conn) -> bool {
        self.shared.error(message);
        if let Some(rv) = list_rv(&self.shared, conn).await {
            self.state.rv = rv;
        }
        true
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
