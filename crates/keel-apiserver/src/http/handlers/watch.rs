//! Watch ([`watch`], as kube-apiserver's `ListResource` serves a watch) and its response: a
//! chunked stream of `{"type": ..., "object": ...}` documents, one compact
//! JSON document per line (the Python client splits on newlines; client-go decodes a JSON
//! stream), each flushed as it happens. A failure after the stream started is sent in-band
//! as an `ERROR` event whose object is the Status (e.g. 410 Expired for a compacted
//! resourceVersion), as kube-apiserver does. The stream ends after `timeoutSeconds`, or
//! without one after a random time between 30 and 60 minutes (kube-apiserver's
//! `--min-request-timeout` 1800 s, jittered up to twice that).
//!
//! With `allowWatchBookmarks=true` the stream also sends the `BOOKMARK`s the watch has
//! (see [`crate::registry::watching`]) when [`bookmarks::next_bookmark`] says, after every
//! event handed out before. Every event sent is counted in `apiserver_watch_events_total`
//! and its size in bytes in `apiserver_watch_events_sizes`; a watch ended by a 410 Expired
//! event (its start compacted, whether the watch cache or the store serves it) also in
//! `keel_apiserver_watch_expired_total`, once, as its request is a 200.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::request::{Call, selection};
use crate::http::metadata;
use crate::http::negotiate::{Conversion, Encoding, Output};
use crate::http::request_info::{Query, query_bool};
use crate::http::response::streamed;
use crate::http::table::{self, IncludeObject};
use crate::metrics::WatchEventMetrics;
use crate::registry::watching::{WatchEvent, WatchQuery, Watching};
use crate::registry::{Strategy, meta_str};
use crate::storage::Status;
use crate::storage::cacher::bookmarks;
use crate::storage::resource_version::{
    default_watch_options, validate_list_options, validate_watch_options,
};

/// GET of a collection with `watch=true` (or under `watch/`): the registry's watch, streamed
/// by [`stream`]. A watch of one object (`watch/namespaces/<ns>/<resource>/<name>`) is a
/// watch of the collection by the name's field selector, as kube-apiserver serves it.
pub async fn watch(call: &Call<'_>) -> Result<Response, Status> {
    let (kind, req) = (call.kind, call.req);
    let watched_name = req.path.name.as_deref().filter(|_| req.path.watch_path);
    let options = Options::parse(&req.query)?;
    let filter = selection(kind, req, watched_name)?.map(|s| s.filter);
    let watching = call
        .registry
        .watch_with(kind, req.namespace(), &options.query(), filter)
        .await?;
    let info = kind.info();
    let how = Stream {
        output: call.output,
        include: call.include,
        timeout: timeout(req.param("timeoutSeconds"))?,
        bookmarks: options.allow_bookmarks,
        metrics: call
            .registry
            .metrics()
            .watch_events(info.group, info.version, info.resource),
    };
    Ok(stream(kind, watching, how))
}

/// A watch's options from its query, defaulted and validated as kube-apiserver's
/// `listOptions` reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `resourceVersion`.
    pub resource_version: String,
    /// `sendInitialEvents`, after the WatchList defaults.
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
}

impl Options {
    /// Reads `query`. The WatchList defaults and the watch's own validation apply to a
    /// request that says `watch=true`; one under `watch/` that does not is validated as a
    /// list, as kube-apiserver validates it (so `sendInitialEvents` is refused there).
    pub fn parse(query: &Query) -> Result<Options, Status> {
        let param = |name: &str| query.get(name).map(String::as_str);
        let resource_version = param("resourceVersion").unwrap_or("");
        let continue_token = param("continue").unwrap_or("");
        let mut send_initial_events = param("sendInitialEvents").map(query_bool);
        let mut resource_version_match = param("resourceVersionMatch").unwrap_or("");
        let errors = if param("watch").is_some_and(query_bool) {
            (resource_version_match, send_initial_events) = default_watch_options(
                resource_version,
                resource_version_match,
                send_initial_events,
            );
            validate_watch_options(
                resource_version_match,
                continue_token,
                send_initial_events.is_some(),
            )
        } else {
            validate_list_options(
                resource_version,
                resource_version_match,
                continue_token,
                send_initial_events.is_some(),
            )
        };
        if !errors.is_empty() {
            return Err(Status::invalid("meta.k8s.io", "ListOptions", "", &errors));
        }
        Ok(Options {
            resource_version: resource_version.to_string(),
            send_initial_events,
            allow_bookmarks: param("allowWatchBookmarks").is_some_and(query_bool),
        })
    }

    /// The registry's view of these options.
    pub fn query(&self) -> WatchQuery<'_> {
        WatchQuery {
            resource_version: &self.resource_version,
            send_initial_events: self.send_initial_events,
            allow_bookmarks: self.allow_bookmarks,
        }
    }
}

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
    /// When the next bookmark is due (None: no more, or none asked for).
    next_bookmark: Option<Instant>,
    metrics: WatchEventMetrics,
    first: bool,
    done: bool,
}

/// What waiting on a watch brought.
enum Woken {
    /// Events to send.
    Events(Vec<WatchEvent>),
    /// A bookmark is due.
    Bookmark(Instant),
    /// The watch failed: its Status goes out as an ERROR event.
    Failed(Status),
    /// The watch ended (or its time is up).
    Ended,
}

/// How a watch's stream is sent.
pub struct Stream {
    /// The encoding asked for.
    pub output: Output,
    /// `includeObject`, for Tables.
    pub include: IncludeObject,
    /// How long the watch runs.
    pub timeout: Duration,
    /// Whether the client takes bookmarks (`allowWatchBookmarks`).
    pub bookmarks: bool,
    /// Where the events sent are counted.
    pub metrics: WatchEventMetrics,
}

/// The streamed response of a watch: the events ready at one time go out in chunks of up to
/// `CHUNK` bytes.
pub fn stream(kind: &'static dyn Strategy, watching: Watching, how: Stream) -> Response {
    let now = Instant::now();
    let deadline = now + how.timeout;
    let state = State {
        kind,
        watching,
        queue: VecDeque::new(),
        output: how.output,
        include: how.include,
        deadline,
        next_bookmark: how
            .bookmarks
            .then(|| bookmarks::next_bookmark(now, deadline))
            .flatten(),
        metrics: how.metrics,
        first: true,
        done: false,
    };
    let events = futures::stream::unfold(state, |mut state| async move {
        if state.done {
            return None;
        }
        while state.queue.is_empty() {
            match state.wait().await {
                Woken::Events(events) => state.queue.extend(events),
                Woken::Bookmark(due) => {
                    state.queue.extend(state.watching.bookmark());
                    state.next_bookmark = bookmarks::next_bookmark(Instant::now(), state.deadline)
                        .filter(|&next| next > due);
                }
                Woken::Failed(status) => {
                    state.done = true;
                    if status.code == 410 {
                        state.metrics.expired.inc();
                    }
                    let error = state.count(state.event("ERROR", &status));
                    return Some((Ok::<Bytes, std::convert::Infallible>(error), state));
                }
                Woken::Ended => return None,
            }
        }
        let chunk = state.chunk();
        Some((Ok::<Bytes, std::convert::Infallible>(chunk), state))
    });
    streamed(how.output, Body::from_stream(events))
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
    /// Waits for the watch's next events, until the deadline or the next bookmark.
    async fn wait(&mut self) -> Woken {
        let next = tokio::time::timeout_at(self.deadline, self.watching.next_batch());
        let next = match self.next_bookmark {
            None => next.await,
            Some(due) => tokio::select! {
                next = next => next,
                () = tokio::time::sleep_until(due) => return Woken::Bookmark(due),
            },
        };
        match next {
            Err(_) | Ok(None) => Woken::Ended,
            Ok(Some(Ok(events))) => Woken::Events(events),
            Ok(Some(Err(status))) => Woken::Failed(status),
        }
    }

    /// Counts `line` as one event sent.
    fn count(&self, line: Bytes) -> Bytes {
        self.metrics.sent.inc();
        self.metrics.sizes.observe(line.len() as f64);
        line
    }

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
            let json = self.output.encoding == Encoding::Json;
            let line = match (self.output.conversion, event.shared_encoding()) {
                (None, Some(shared)) if json => shared
                    .get_or_init(|| line(event.kind, &*event.object))
                    .clone(),
                _ => {
                    let kind = event.kind;
                    let object = self.render(Arc::unwrap_or_clone(event.object));
                    self.event(kind, &object)
                }
            };
            size += line.len();
            lines.push(self.count(line));
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

    /// One event in the stream's encoding: a JSON line, or a protobuf frame.
    fn event(&self, kind: &str, object: &impl serde::Serialize) -> Bytes {
        if self.output.encoding != Encoding::Protobuf {
            return line(kind, object);
        }
        let object = serde_json::to_value(object).expect("a JSON value encodes");
        match crate::http::protobuf::watch_frame(kind, &object) {
            Some(frame) => Bytes::from(frame),
            None => {
                tracing::error!(kind = %object["kind"], "no protobuf form: event sent in JSON");
                line(kind, &object)
            }
        }
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
