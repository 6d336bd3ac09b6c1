//! A Kubernetes watch kept open as an informer keeps it: the one loop behind `keel bench
//! apiserver`'s lease watchers ([`crate::apiserver_watch`]) and `keel sim nodes`' node watch
//! (`sim/watch.rs`), and the shape of the watch events both read.
//!
//! [`follow`] opens the watch at the path its [`Watch`] names (from the last resourceVersion
//! seen) and hands every frame of the body to [`Watch::on_data`]. A watch that ends or whose
//! stream fails is opened again at once; one that cannot be opened is tried again after
//! [`RETRY`]. A resourceVersion the server says has expired (410, refusing the watch or in
//! an ERROR event) goes to [`Watch::expired`], which resyncs or gives up. [`follow`] returns
//! when its `stop` fires, wherever it is (opening, reading or waiting), or when the [`Watch`]
//! gives up.

use std::borrow::Cow;
use std::time::Duration;

use http::{Method, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::https::{Answer, Conn};

/// How long to wait before opening a watch that could not be opened again.
pub const RETRY: Duration = Duration::from_secs(1);

/// Why a watch was not opened.
#[derive(Debug)]
pub enum OpenFailure {
    /// The request failed (no connection, no answer).
    Request(anyhow::Error),
    /// The server answered, but not 200.
    Refused(Answer),
}

/// The caller's half of a watch [`follow`] keeps open: where to open it and what to make of
/// what it receives. The synchronous methods decide and record; only [`Watch::expired`] may
/// talk to the server (to list again).
pub trait Watch {
    /// The path (below the server URL, with its query) to open the watch at: from the last
    /// resourceVersion seen.
    fn path(&self) -> String;

    /// Handles one frame of the open watch's body. `Err` (with its message): the events say
    /// the resourceVersion expired.
    fn on_data(&mut self, data: &[u8]) -> Result<(), String>;

    /// Records that the watch could not be opened (it is tried again after [`RETRY`]).
    /// `Err` (with its message): the server refused it because the resourceVersion expired.
    fn open_failed(&mut self, failure: OpenFailure) -> Result<(), String>;

    /// Records that the open watch's stream failed (it is opened again).
    fn stream_failed(&mut self, err: hyper::Error);

    /// The watch ended or failed and is about to be opened again: forget any partial event.
    fn reopening(&mut self);

    /// The resourceVersion expired (`message` says so): resync, with `conn`, and return true
    /// to go on, or return false to stop watching.
    fn expired(&mut self, message: String, conn: &mut Conn) -> impl Future<Output = bool> + Send;
}

/// Sends the watch request at `path`: the streaming body of a 200 answer.
pub async fn open(conn: &mut Conn, path: &str) -> Result<Incoming, OpenFailure> {
    let response = conn
        .send(Method::GET, path, None)
        .await
        .map_err(OpenFailure::Request)?;
    if response.status() == StatusCode::OK {
        return Ok(response.into_body());
    }
    match Answer::read(response).await {
        Ok(answer) => Err(OpenFailure::Refused(answer)),
        Err(e) => Err(OpenFailure::Request(e.into())),
    }
}

/// Keeps `watch` open on `conn` until `stop` fires or `watch` gives up after an expiry (see
/// the module docs). `body`: a watch already opened (with [`open`]) to read first.
pub async fn follow(
    conn: &mut Conn,
    watch: &mut impl Watch,
    mut body: Option<Incoming>,
    stop: impl Future<Output = ()>,
) {
    // One stop future for the whole watch (not one per frame); it is never polled again once
    // it has fired.
    tokio::pin!(stop);
    loop {
        let mut stream = match body.take() {
            Some(body) => body,
            None => {
                let path = watch.path();
                let opened = tokio::select! {
                    biased;
                    _ = &mut stop => return,
                    opened = open(conn, &path) => opened,
                };
                match opened {
                    Ok(body) => body,
                    Err(failure) => {
                        if let Err(message) = watch.open_failed(failure)
                            && !watch.expired(message, conn).await
                        {
                            return;
                        }
                        tokio::select! {
                            biased;
                            _ = &mut stop => return,
                            _ = tokio::time::sleep(RETRY) => continue,
                        }
                    }
                }
            }
        };
        loop {
            let frame = tokio::select! {
                biased;
                _ = &mut stop => return,
                frame = stream.frame() => frame,
            };
            match frame {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if let Err(message) = watch.on_data(&data) {
                        if !watch.expired(message, conn).await {
                            return;
                        }
                        break;
                    }
                }
                Some(Err(err)) => {
                    watch.stream_failed(err);
                    break;
                }
                None => break,
            }
        }
        watch.reopening();
    }
}

/// One watch event, as far as a watcher reads it: its type and, of its object, the name, the
/// resourceVersion, an ERROR's Status code and message, and what `Spec` and `Status` read of
/// the object's `spec` and `status` (nothing, by default).
#[derive(Deserialize)]
pub struct Event<'a, Spec = IgnoredAny, Status = IgnoredAny> {
    /// ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    /// The object (a Status for ERROR).
    #[serde(default, borrow)]
    pub object: Object<'a, Spec, Status>,
}

/// The object of an [`Event`], as far as it is read.
#[derive(Default, Deserialize)]
pub struct Object<'a, Spec, Status> {
    /// Its name and resourceVersion.
    #[serde(default, borrow)]
    pub metadata: Meta<'a>,
    /// What is read of its spec.
    #[serde(default)]
    pub spec: Spec,
    /// What is read of its status.
    #[serde(default)]
    pub status: Status,
    /// A Status's code (ERROR events).
    pub code: Option<u16>,
    /// A Status's message (ERROR events).
    #[serde(default, borrow)]
    pub message: Cow<'a, str>,
}

/// The metadata of an [`Object`], as far as it is read.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta<'a> {
    /// `metadata.name`.
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    /// `metadata.resourceVersion`.
    #[serde(default, borrow)]
    pub resource_version: Cow<'a, str>,
}

impl<Spec, Status> Event<'_, Spec, Status> {
    /// For an ERROR event, the Status's code (0 if it has none) and message.
    pub fn error(&self) -> Option<(u16, &str)> {
        (self.kind == "ERROR").then(|| (self.object.code.unwrap_or(0), &*self.object.message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Deserialize)]
    struct Spec {
        replicas: u32,
    }

    #[test]
    fn events_read_what_is_asked() {
        let line = br#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"7","uid":"u"},"spec":{"replicas":3},"status":{"x":1}}}"#;
        let event: Event<Spec> = serde_json::from_slice(line).unwrap();
        assert_eq!(event.kind, "MODIFIED");
        assert_eq!(event.object.metadata.name, "a");
        assert_eq!(event.object.metadata.resource_version, "7");
        assert_eq!(event.object.spec.replicas, 3);
        assert!(event.error().is_none());

        let error =
            br#"{"type":"ERROR","object":{"kind":"Status","message":"too old","code":410}}"#;
        let event: Event = serde_json::from_slice(error).unwrap();
        assert_eq!(event.error(), Some((410, "too old")));
        let bookmark = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#;
        let event: Event<Spec> = serde_json::from_slice(bookmark).unwrap();
        assert_eq!(event.object.metadata.resource_version, "9");
        assert_eq!(event.object.spec.replicas, 0);
    }
}
