//! Watch responses: a chunked stream of `{"type": ..., "object": ...}` documents, one compact
//! JSON document per line (the Python client splits on newlines; client-go decodes a JSON
//! stream), each flushed as it happens. A failure after the stream started is sent in-band
//! as an `ERROR` event whose object is the Status (e.g. 410 Expired for a compacted
//! resourceVersion), as kube-apiserver does. The stream ends after `timeoutSeconds`, or
//! without one after a random time between 30 and 60 minutes (kube-apiserver's
//! `--min-request-timeout` 1800 s, jittered up to twice that).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::handlers::streamed;
use super::metadata;
use super::negotiate::{Conversion, Output};
use super::table::{self, IncludeObject};
use crate::registry::watching::{WatchEvent, Watching};
use crate::registry::{Strategy, meta_str};
use crate::storage::Status;

/// kube-apiserver's `--min-request-timeout` default.
const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);

/// How long a watch runs: `timeoutSeconds`, or (unset or 0, as kube-apiserver reads 0) the
/// jittered default.
pub fn timeout(param: Option<&str>) -> Result<Duration, Status> {
    match param.filter(|p| !p.is_empty() && *p != "0") {
        Some(p) => p.parse::<u64>().map(Duration::from_secs).map_err(|_| {
            Status::failure(
                400,
                "BadRequest",
                format!("invalid value {p:?} for query parameter timeoutSeconds"),
            )
        }),
        None => {
            let jitter = uuid::Uuid::new_v4().as_u128() as u64 % MIN_REQUEST_TIMEOUT.as_secs();
            Ok(MIN_REQUEST_TIMEOUT + Duration::from_secs(jitter))
        }
    }
}

/// A chunk of the stream gathers events up to about this many bytes: fewer, larger writes
/// when events come fast, and never more than this (plus one event) copied for one watcher.
const CHUNK: usize = 64 << 10;

struct State {
    kind: &'static dyn Strategy,
    watching: Watching,
    /// Events taken from the watch and not sent yet.
    queue: VecDeque<WatchEvent>,
    output: Output,
    include: IncludeObject,
    deadline: Instant,
    first: bool,
    done: bool,
}

/// The streamed response of a watch: the events ready at one time go out in chunks of up to
/// [`CHUNK`] bytes.
pub fn stream(
    kind: &'static dyn Strategy,
    watching: Watching,
    output: Output,
    include: IncludeObject,
    timeout: Duration,
) -> Response {
    let state = State {
        kind,
        watching,
        queue: VecDeque::new(),
        output,
        include,
        deadline: Instant::now() + timeout,
        first: true,
        done: false,
    };
    let events = futures::stream::unfold(state, |mut state| async move {
        if state.done {
            return None;
        }
        if state.queue.is_empty() {
            let next = tokio::time::timeout_at(state.deadline, state.watching.next_batch()).await;
            match next {
                Err(_) | Ok(None) => return None,
                Ok(Some(Ok(events))) => state.queue.extend(events),
                Ok(Some(Err(status))) => {
                    state.done = true;
                    let error = line("ERROR", &status);
                    return Some((Ok::<Bytes, std::convert::Infallible>(error), state));
                }
            }
        }
        let chunk = state.chunk();
        Some((Ok::<Bytes, std::convert::Infallible>(chunk), state))
    });
    streamed(output, Body::from_stream(events))
}

/// One event as a line of the stream: `{"type":...,"object":...}` and a newline.
fn line(kind: &str, object: &impl serde::Serialize) -> Bytes {
    let mut bytes = Vec::with_capacity(256);
    bytes.extend_from_slice(b"{\"type\":\"");
    bytes.extend_from_slice(kind.as_bytes());
    bytes.extend_from_slice(b"\",\"object\":");
    serde_json::to_writer(&mut bytes, object).expect("a JSON value encodes");
    bytes.extend_from_slice(b"}\n");
    Bytes::from(bytes)
}

impl State {
    /// The next chunk: queued events' lines up to [`CHUNK`] bytes (at least one). An event
    /// sent as the watch cache decoded it is encoded once for every watcher that sends it in
    /// JSON.
    fn chunk(&mut self) -> Bytes {
        let mut lines = Vec::new();
        let mut size = 0;
        while size < CHUNK {
            let Some(event) = self.queue.pop_front() else {
                break;
            };
            let line = match (self.output.conversion, event.shared_encoding()) {
                (None, Some(shared)) => shared
                    .get_or_init(|| line(event.kind, &*event.object))
                    .clone(),
                _ => {
                    let kind = event.kind;
                    line(kind, &self.render(Arc::unwrap_or_clone(event.object)))
                }
            };
            size += line.len();
            lines.push(line);
        }
        if lines.len() == 1 {
            return lines.pop().expect("one line");
        }
        let mut chunk = Vec::with_capacity(size);
        for line in &lines {
            chunk.extend_from_slice(line);
        }
        Bytes::from(chunk)
    }

    /// An event's object as the client asked for it: whole, as metadata only, or as a
    /// one-row Table (column definitions with the first event only), in the meta.k8s.io
    /// version asked for.
    fn render(&mut self, object: Value) -> Value {
        let version = match self.output.conversion {
            Some((Conversion::Table, version)) => version,
            Some((Conversion::Metadata, version)) => {
                return metadata::partial_object_in(&object, version);
            }
            _ => return object,
        };
        let metadata = json!({"resourceVersion": meta_str(&object, "resourceVersion")});
        let headers = std::mem::replace(&mut self.first, false);
        table::table_in(
            version,
            self.kind,
            &[object],
            metadata,
            self.include,
            headers,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_runs_for_timeout_seconds_and_zero_or_unset_is_the_default() {
        assert_eq!(timeout(Some("7")).unwrap(), Duration::from_secs(7));
        for unset in [None, Some(""), Some("0")] {
            let t = timeout(unset).unwrap();
            assert!(
                t >= MIN_REQUEST_TIMEOUT && t < 2 * MIN_REQUEST_TIMEOUT,
                "{unset:?}"
            );
        }
        assert_eq!(timeout(Some("-1")).unwrap_err().code, 400);
    }
}
