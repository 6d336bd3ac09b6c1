//! Watching a key or a collection as kube-apiserver's etcd3 watcher does: one etcd Watch
//! from resourceVersion + 1 with `prev_kv` and `hasleader`, each event told apart as
//! ADDED (created at its revision), MODIFIED or DELETED (the last value, its resourceVersion
//! the revision of the deletion). A watch from resourceVersion "" or "0" first lists the
//! current objects as ADDED events ("get state and start at most recent") and then watches
//! from the revision of that list. A start the store has compacted ends the watch with
//! [`StorageError::Expired`] (the HTTP layer sends it as an ERROR event with a 410 Status).
//!
//! A watch can ask the store for its progress ([`ProgressRequester`], etcd's
//! `WatchProgressRequest`): the store answers with its revision once every event up to it has
//! been sent on the stream ([`Received::Progress`]), which is how the watch cache learns that it
//! is fresh without a write to its own resource.

use std::collections::VecDeque;

use futures::StreamExt;
use futures::channel::mpsc;
use keel_proto::etcdserverpb::watch_client::WatchClient;
use keel_proto::etcdserverpb::watch_request::RequestUnion;
use keel_proto::etcdserverpb::{
    WatchCreateRequest, WatchProgressRequest, WatchRequest, WatchResponse,
};
use keel_proto::mvccpb::event::EventType;
use keel_proto::prefix_end;
use tonic::Streaming;

use super::etcd3::{Etcd3, ListOptions, Object};
use super::{StorageError, resource_version};

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The object was created (or was there when a watch from "0" started).
    Added(Object),
    /// The object was updated; with the value it had before (empty if the store did not say).
    Modified(Object, Vec<u8>),
    /// The object was deleted: its last value, with the deletion's revision.
    Deleted(Object),
}

/// What a watch received from the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Events (appended to the caller's batch).
    Events,
    /// A progress notification: every event up to this revision has been received, and every
    /// later one will have a higher revision.
    Progress(i64),
}

/// Asks a running watch's store for a progress notification; cloned freely, harmless once
/// the watch is gone.
#[derive(Debug, Clone)]
pub struct ProgressRequester(mpsc::UnboundedSender<WatchRequest>);

impl ProgressRequester {
    /// Sends one `WatchProgressRequest` on the watch's stream.
    pub fn request(&self) {
        let progress = WatchRequest {
            request_union: Some(RequestUnion::ProgressRequest(WatchProgressRequest {})),
        };
        // A watch that ended has no one to answer.
        let _ = self.0.unbounded_send(progress);
    }
}

/// A running watch; [`Watch::next`] gives its events in revision order.
pub struct Watch {
    /// Events known but not handed out yet (the initial list, the rest of a response).
    ready: VecDeque<Event>,
    responses: Streaming<WatchResponse>,
    /// The request stream, kept open for as long as the watch runs.
    requests: mpsc::UnboundedSender<WatchRequest>,
    /// A progress notification received and not handed out yet.
    progress: Option<i64>,
    /// The watch ended (an error was handed out, or the store closed the stream).
    ended: bool,
}

impl Watch {
    /// The next event; None once the store ends the watch, an error once for why.
    pub async fn next(&mut self) -> Option<Result<Event, StorageError>> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(Ok(event));
            }
            if let Some(end) = self.receive().await {
                return end.map(Err);
            }
        }
    }

    /// Every event known now, at least one (appended to `out`): the events of one store
    /// response come in one batch; or a progress notification. None once the store ends the
    /// watch, an error once for why. Cancel-safe: nothing received is lost when the future is
    /// dropped.
    pub async fn next_batch(
        &mut self,
        out: &mut Vec<Event>,
    ) -> Option<Result<Received, StorageError>> {
        while self.ready.is_empty() {
            if let Some(revision) = self.progress.take() {
                return Some(Ok(Received::Progress(revision)));
            }
            if let Some(end) = self.receive().await {
                return end.map(Err);
            }
        }
        out.extend(self.ready.drain(..));
        Some(Ok(Received::Events))
    }

    /// A handle that asks the store for this watch's progress.
    pub fn progress_requester(&self) -> ProgressRequester {
        ProgressRequester(self.requests.clone())
    }

    /// Waits for the store's next response and queues its events; Some when the watch
    /// ended (with the error to hand out once, if any).
    async fn receive(&mut self) -> Option<Option<StorageError>> {
        if self.ended {
            return Some(None);
        }
        let resp = match self.responses.next().await {
            Some(Ok(resp)) => resp,
            Some(Err(e)) => return Some(self.end(StorageError::Internal(e.message().to_string()))),
            None => {
                self.ended = true;
                return Some(None);
            }
        };
        if resp.compact_revision > 0 {
            return Some(self.end(StorageError::Expired { of: "watch" }));
        }
        if resp.canceled {
            return Some(self.end(StorageError::Internal(resp.cancel_reason)));
        }
        // etcd's `IsProgressNotify`: no events, not a creation, with a revision.
        if resp.events.is_empty() && !resp.created {
            if let Some(header) = &resp.header
                && header.revision > 0
            {
                self.progress = Some(self.progress.unwrap_or(0).max(header.revision));
            }
            return None;
        }
        for e in resp.events {
            let Some(kv) = e.kv else { continue };
            let event = if e.r#type == EventType::Delete as i32 {
                let prev = e.prev_kv.map(|p| p.value).unwrap_or_default();
                Event::Deleted(Object {
                    key: String::from_utf8_lossy(&kv.key).into_owned(),
                    value: prev,
                    mod_revision: kv.mod_revision,
                })
            } else if kv.create_revision == kv.mod_revision {
                Event::Added(object(kv))
            } else {
                let prev = e.prev_kv.map(|p| p.value).unwrap_or_default();
                Event::Modified(object(kv), prev)
            };
            self.ready.push_back(event);
        }
        None
    }

    fn end(&mut self, error: StorageError) -> Option<StorageError> {
        self.ended = true;
        self.ready.clear();
        Some(error)
    }
}

fn object(kv: keel_proto::mvccpb::KeyValue) -> Object {
    Object {
        key: String::from_utf8_lossy(&kv.key).into_owned(),
        value: kv.value,
        mod_revision: kv.mod_revision,
    }
}

impl Etcd3 {
    /// Watches the object at `key`, or with `recursive` every object under the prefix `key`
    /// (ending in `/`), from `resource_version` (see the module docs).
    pub async fn watch(
        &self,
        key: &str,
        recursive: bool,
        resource_version: &str,
    ) -> Result<Watch, StorageError> {
        let rv = resource_version::parse(resource_version)?;
        let (ready, after) = if rv > 0 {
            (VecDeque::new(), rv)
        } else if recursive {
            let all = self.list(key, ListOptions::default()).await?;
            (
                all.items.into_iter().map(Event::Added).collect(),
                all.revision,
            )
        } else {
            let (found, revision) = self.get(key, "").await?;
            (found.into_iter().map(Event::Added).collect(), revision)
        };
        let mut watch = self.watch_after(key, recursive, after).await?;
        watch.ready = ready;
        Ok(watch)
    }

    /// Watches the object at `key`, or with `recursive` every object under the prefix `key`,
    /// for the changes after `revision`: the store's watch alone, with no initial state.
    pub async fn watch_after(
        &self,
        key: &str,
        recursive: bool,
        revision: i64,
    ) -> Result<Watch, StorageError> {
        let create = WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                key: key.as_bytes().to_vec(),
                range_end: if recursive {
                    prefix_end(key.as_bytes())
                } else {
                    Vec::new()
                },
                start_revision: revision.saturating_add(1),
                prev_kv: true,
                ..Default::default()
            })),
        };
        // The request stream stays open for as long as the watch runs (its sender lives in
        // the watch), carrying the progress requests after the create.
        let (sender, more) = mpsc::unbounded();
        let requests = futures::stream::once(async { create }).chain(more);
        let mut request = tonic::Request::new(requests);
        // etcd's `WithRequireLeader`: a member without a leader ends the watch.
        request.metadata_mut().insert(
            "hasleader",
            tonic::metadata::MetadataValue::from_static("true"),
        );
        let mut responses = WatchClient::new(self.watch_channel())
            .max_decoding_message_size(usize::MAX)
            .watch(request)
            .await
            .map_err(|e| StorageError::Internal(format!("etcd watch: {}", e.message())))?
            .into_inner();
        // The first answer says whether the watch was created (or why not).
        let first = match responses.next().await {
            Some(Ok(first)) => first,
            Some(Err(e)) => {
                return Err(StorageError::Internal(format!(
                    "etcd watch: {}",
                    e.message()
                )));
            }
            None => {
                return Err(StorageError::Internal(
                    "etcd watch: the stream ended".into(),
                ));
            }
        };
        if first.compact_revision > 0 {
            return Err(StorageError::Expired { of: "watch" });
        }
        if first.canceled {
            return Err(StorageError::Internal(format!(
                "etcd watch: {}",
                first.cancel_reason
            )));
        }
        Ok(Watch {
            ready: VecDeque::new(),
            responses,
            requests: sender,
            progress: None,
            ended: false,
        })
    }
}
