//! Watches of one kind as the API sends them: store events decoded into objects of the kind
//! ([`SharedEvent`], once per event for every watcher when the watch cache serves the watch),
//! filtered by each watcher's label and field selectors.
//!
//! A filter turns an update that moves an object into or out of the selection into ADDED or
//! DELETED (the old state, at the update's resourceVersion), as kube-apiserver's watchers do.
//! An event a watcher sends as it was decoded keeps a link to the shared event, so its encoding
//! ([`WatchEvent::shared_encoding`]) is made once for all the watchers that send it.
//!
//! Bookmarks: a `BOOKMARK` event's object is an object of the kind at its zero value with
//! only `metadata.resourceVersion` set, as kube-apiserver makes it from the kind's `New()`.
//! A streaming list (`sendInitialEvents=true` with `allowWatchBookmarks=true`) ends its
//! initial ADDED events with one annotated `k8s.io/initial-events-end: "true"` at the
//! revision of the initial state; a watch served by the watch cache gets the others from
//! [`Watching::bookmark`] (see [`crate::storage::cacher::bookmarks`]). A watch of its own
//! store watch gets none but that first one, as kube-apiserver's etcd3 watcher sends none.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;

use super::selector::Filter;
use super::served::{Served, ServedObject, served, served_before};
use super::{Strategy, meta_str};
use crate::schema::schema_of;
use crate::storage::cacher::{CacheWatch, Cached, Codec};
use crate::storage::{Event, Object, Status, Watch};

/// The annotation of the bookmark that ends a streaming list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Where a watch starts and what it sends besides changes (the watch fields of
/// `ListOptions`, defaulted and validated).
#[derive(Debug, Default, Clone, Copy)]
pub struct WatchQuery<'a> {
    /// `resourceVersion` ("" when unset).
    pub resource_version: &'a str,
    /// `sendInitialEvents`: Some(true) sends the current objects first (a streaming list),
    /// Some(false) none (the changes from the resourceVersion, or from now); None as before
    /// it existed (the current objects first only from "" or "0").
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
}

/// A store event decoded for every watcher of one kind, or why it could not be.
pub type Decoded = Result<SharedEvent, Status>;

/// What a kind's storage and watch cache make of its stored values.
pub struct KindCodec(pub &'static dyn Strategy);

impl Codec for KindCodec {
    type Event = Decoded;
    type Object = Served;

    fn event(&self, event: Event) -> Decoded {
        decode_event(self.0, event)
    }

    fn object(&self, object: &Object) -> Served {
        served(self.0, object).map(|value| Arc::new(value.into()))
    }

    fn object_of(&self, event: &Decoded) -> Served {
        event
            .as_ref()
            .map(|e| Arc::new(ServedObject::new(e.object.clone())))
            .map_err(Clone::clone)
    }

    fn event_with(&self, event: Event, object: &Served) -> Decoded {
        let (Ok(handed), Event::Added(stored) | Event::Modified(stored, _)) = (object, &event)
        else {
            return self.event(event);
        };
        debug_assert_eq!(
            served(self.0, stored).ok().as_ref(),
            Some(handed.value()),
            "what was handed over for {} at {} is what decoding gives",
            stored.key,
            stored.mod_revision
        );
        let (name, _, prev) = parts(event);
        Ok(SharedEvent::new(name, handed.shared_value().clone(), prev))
    }

    fn indexed_fields(&self) -> &'static [&'static str] {
        self.0.indexed_fields()
    }

    fn field(&self, object: &Served, field: &str) -> String {
        object
            .as_ref()
            .map(|object| self.0.field(object.value(), field))
            .unwrap_or_default()
    }
}

/// One store event as objects of a kind, shared by the watchers that read it.
#[derive(Debug)]
pub struct SharedEvent {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    kind: &'static str,
    /// The object with apiVersion, kind and resourceVersion (for DELETED its last state, at
    /// the deletion's resourceVersion).
    object: Arc<Value>,
    /// The stored value before a MODIFIED event (empty if the store did not say).
    prev: Vec<u8>,
    /// `prev` decoded, at the update's resourceVersion, once a filter needed it.
    old: OnceLock<Option<Value>>,
    /// The event as a watch stream sends it, made by the first watcher that sends it as is.
    encoded: OnceLock<Bytes>,
}

/// Decodes one store event into `kind`'s objects.
pub fn decode_event(kind: &dyn Strategy, event: Event) -> Decoded {
    let (name, object, prev) = parts(event);
    Ok(SharedEvent::new(
        name,
        Arc::new(served(kind, &object)?),
        prev,
    ))
}

/// A store event's type, object and stored value before it (empty but for MODIFIED).
fn parts(event: Event) -> (&'static str, Object, Vec<u8>) {
    match event {
        Event::Added(o) => ("ADDED", o, Vec::new()),
        Event::Modified(o, prev) => ("MODIFIED", o, prev),
        Event::Deleted(o) => ("DELETED", o, Vec::new()),
    }
}

impl SharedEvent {
    fn new(kind: &'static str, object: Arc<Value>, prev: Vec<u8>) -> SharedEvent {
        SharedEvent {
            kind,
            object,
            prev,
            old: OnceLock::new(),
            encoded: OnceLock::new(),
        }
    }

    /// The object before a MODIFIED event, at the update's resourceVersion.
    fn old(&self, kind: &dyn Strategy) -> Option<&Value> {
        self.old
            .get_or_init(|| {
                if self.kind != "MODIFIED" || self.prev.is_empty() {
                    return None;
                }
                let rv = meta_str(&self.object, "resourceVersion");
                served_before(kind, &self.prev, rv)
            })
            .as_ref()
    }
}

/// One watch event as the API sends it.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED` or `BOOKMARK`.
    pub kind: &'static str,
    /// The object, with apiVersion and kind (for DELETED its last state, at the deletion's
    /// resourceVersion).
    pub object: Arc<Value>,
    /// The shared event, when this is it unchanged.
    shared: Option<Arc<Cached<Decoded>>>,
}

impl WatchEvent {
    /// A `BOOKMARK` at `revision`: an object of `kind` with only its resourceVersion (and,
    /// for the end of a streaming list's initial events, [`INITIAL_EVENTS_END`]).
    pub fn bookmark(kind: &dyn Strategy, revision: i64, initial_events_end: bool) -> WatchEvent {
        let info = kind.info();
        let mut object = schema_of(info.group, info.kind).zero().clone();
        info.set_type(&mut object);
        let mut metadata = serde_json::json!({
            "resourceVersion": revision.to_string(),
            "creationTimestamp": null,
        });
        if initial_events_end {
            metadata["annotations"] = serde_json::json!({INITIAL_EVENTS_END: "true"});
        }
        object["metadata"] = metadata;
        WatchEvent {
            kind: "BOOKMARK",
            object: Arc::new(object),
            shared: None,
        }
    }

    /// Where this event's encoding is kept for every watcher that sends it unchanged; None
    /// when this watcher's event is its own (its filter changed the event's type).
    pub fn shared_encoding(&self) -> Option<&OnceLock<Bytes>> {
        let shared = self.shared.as_ref()?.value.as_ref().ok()?;
        Some(&shared.encoded)
    }
}

/// How a watch starts: the objects it sends first, as ADDED, the revision the changes come
/// after, and whether the initial objects end with the initial-events-end bookmark.
pub(super) struct Start {
    /// The current objects (empty when the watch sends none).
    pub initial: Vec<Object>,
    /// The revision of `initial`, or the resourceVersion the watch starts from.
    pub after: i64,
    /// Whether a bookmark at `after` follows `initial`.
    pub initial_events_end: bool,
}

/// Where a watch's events come from.
enum Source {
    /// The kind's watch cache.
    Cache(CacheWatch<Decoded>),
    /// A store watch of this client's own.
    Store(Watch),
    /// None: the watch only sends its error.
    Ended,
}

/// A running watch of one kind.
pub struct Watching {
    kind: &'static dyn Strategy,
    source: Source,
    /// The revision the changes are sent after.
    start: i64,
    filter: Option<Box<Filter>>,
    /// Events ready to hand out.
    pending: VecDeque<WatchEvent>,
    /// The error to hand out once the pending events are.
    failed: Option<Status>,
    ended: bool,
}

impl Watching {
    /// A watch that first sends `start`'s initial objects and then the events from the
    /// kind's watch cache.
    pub(super) fn cached(
        kind: &'static dyn Strategy,
        start: Start,
        watch: CacheWatch<Decoded>,
        filter: Option<Box<Filter>>,
    ) -> Watching {
        Watching::new(kind, start, Source::Cache(watch), filter)
    }

    /// A watch that first sends `start`'s initial objects and then the events of its own
    /// store watch.
    pub(super) fn store(
        kind: &'static dyn Strategy,
        start: Start,
        watch: Watch,
        filter: Option<Box<Filter>>,
    ) -> Watching {
        Watching::new(kind, start, Source::Store(watch), filter)
    }

    /// A watch that sends only `status`, as an ERROR event (a start the store compacted).
    pub(super) fn failed(kind: &'static dyn Strategy, status: Status) -> Watching {
        Watching {
            kind,
            source: Source::Ended,
            start: 0,
            filter: None,
            pending: VecDeque::new(),
            failed: Some(status),
            ended: false,
        }
    }

    fn new(
        kind: &'static dyn Strategy,
        start: Start,
        source: Source,
        filter: Option<Box<Filter>>,
    ) -> Watching {
        let mut watching = Watching {
            kind,
            source,
            start: start.after,
            filter,
            pending: VecDeque::new(),
            failed: None,
            ended: false,
        };
        for object in start.initial {
            let event = decode_event(kind, Event::Added(object));
            if !watching.accept(Arc::new(Cached {
                revision: 0,
                key: String::new(),
                value: event,
            })) {
                return watching;
            }
        }
        if start.initial_events_end {
            let end = WatchEvent::bookmark(kind, start.after, true);
            watching.pending.push_back(end);
        }
        watching
    }

    /// A bookmark of everything this watch has handed out, when it is past the watch's
    /// start; only a watch the watch cache serves knows (see the module docs).
    pub fn bookmark(&self) -> Option<WatchEvent> {
        let Source::Cache(watch) = &self.source else {
            return None;
        };
        let progress = watch.progress();
        (progress > self.start).then(|| WatchEvent::bookmark(self.kind, progress, false))
    }

    /// The next event the filter lets through; None when the watch ends.
    pub async fn next(&mut self) -> Option<Result<WatchEvent, Status>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(Ok(event));
            }
            if let Some(status) = self.failed.take() {
                self.ended = true;
                return Some(Err(status));
            }
            if self.ended || !self.receive().await {
                return None;
            }
        }
    }

    /// Every event ready now, at least one; None when the watch ends.
    pub async fn next_batch(&mut self) -> Option<Result<Vec<WatchEvent>, Status>> {
        loop {
            if !self.pending.is_empty() {
                return Some(Ok(self.pending.drain(..).collect()));
            }
            if let Some(status) = self.failed.take() {
                self.ended = true;
                return Some(Err(status));
            }
            if self.ended || !self.receive().await {
                return None;
            }
        }
    }

    /// Waits for the source's next events and queues what the filter lets through; false
    /// when the source ended without an error.
    async fn receive(&mut self) -> bool {
        let mut batch = Vec::new();
        match &mut self.source {
            Source::Ended => {
                self.ended = true;
                return false;
            }
            Source::Cache(watch) => {
                // A watcher the cache can no longer serve ends; its client watches again
                // from the last resourceVersion it saw.
                if watch.next_batch(&mut batch).await.is_err() {
                    self.ended = true;
                    return false;
                }
            }
            Source::Store(watch) => {
                let mut events = Vec::new();
                match watch.next_batch(&mut events).await {
                    None => {
                        self.ended = true;
                        return false;
                    }
                    Some(Err(e)) => {
                        self.failed = Some(Status::from_storage(&e, &self.kind.info().target("")));
                        return true;
                    }
                    Some(Ok(_)) => {}
                }
                batch.extend(events.into_iter().map(|event| {
                    Arc::new(Cached {
                        revision: 0,
                        key: String::new(),
                        value: decode_event(self.kind, event),
                    })
                }));
            }
        }
        for event in batch {
            if !self.accept(event) {
                break;
            }
        }
        true
    }

    /// Queues `event` as this watcher's filter sees it; false (and the error kept) when it
    /// could not be decoded.
    fn accept(&mut self, cached: Arc<Cached<Decoded>>) -> bool {
        let event = match &cached.value {
            Ok(event) => event,
            Err(status) => {
                self.failed = Some(status.clone());
                return false;
            }
        };
        let Some(filter) = &self.filter else {
            self.pending.push_back(WatchEvent {
                kind: event.kind,
                object: event.object.clone(),
                shared: Some(cached.clone()),
            });
            return true;
        };
        let passes = filter(&event.object);
        let old = event.old(self.kind);
        let out = match (passes, old) {
            (true, Some(old)) if !filter(old) => WatchEvent {
                kind: "ADDED",
                object: event.object.clone(),
                shared: None,
            },
            (false, Some(old)) if filter(old) => WatchEvent {
                kind: "DELETED",
                object: Arc::new(old.clone()),
                shared: None,
            },
            (true, _) => WatchEvent {
                kind: event.kind,
                object: event.object.clone(),
                shared: Some(cached.clone()),
            },
            (false, _) => return true,
        };
        self.pending.push_back(out);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(name: &str, revision: i64) -> Object {
        let value = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "d"}});
        Object {
            key: format!("/registry/configmaps/d/{name}"),
            value: serde_json::to_vec(&value).unwrap(),
            mod_revision: revision,
        }
    }

    #[test]
    fn a_streaming_list_sends_its_objects_then_the_bookmark_at_their_revision() {
        let cm = &crate::registry::configmaps::ConfigMaps;
        let start = Start {
            initial: vec![stored("a", 3), stored("b", 5)],
            after: 9,
            initial_events_end: true,
        };
        let mut watching = Watching::new(cm, start, Source::Ended, None);
        let events = futures::executor::block_on(watching.next_batch())
            .unwrap()
            .unwrap();
        let seen: Vec<_> = events
            .iter()
            .map(|e| {
                (
                    e.kind,
                    meta_str(&e.object, "name"),
                    meta_str(&e.object, "resourceVersion"),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("ADDED", "a", "3"),
                ("ADDED", "b", "5"),
                ("BOOKMARK", "", "9")
            ]
        );
        assert_eq!(
            *events[2].object,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                "resourceVersion": "9", "creationTimestamp": null,
                "annotations": {INITIAL_EVENTS_END: "true"}}})
        );
        // No more bookmarks from a watch the cache does not serve.
        assert!(watching.bookmark().is_none());
    }

    #[test]
    fn what_a_writer_hands_over_is_what_decoding_gives() {
        let kinds: [(&'static dyn Strategy, Value); 3] = [
            (
                &crate::registry::configmaps::ConfigMaps,
                // Stored without apiVersion and kind: both are the kind's when served.
                json!({"metadata": {"name": "a", "namespace": "d", "labels": {"x": "1"}},
                    "data": {"k": "v"}}),
            ),
            (
                &crate::registry::leases::Leases,
                json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": "n", "namespace": "kube-node-lease"},
                    "spec": {"holderIdentity": "n", "leaseDurationSeconds": 40,
                        "renewTime": "2024-01-01T00:00:00.000000Z"}}),
            ),
            (
                &crate::registry::pods::Pods,
                json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "d"},
                    "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n"},
                    "status": {"phase": "Running"}}),
            ),
        ];
        for (kind, stored) in kinds {
            let codec = KindCodec(kind);
            let mut prev = stored.clone();
            prev["metadata"]["labels"] = json!({"x": "0"});
            let object = Object {
                key: "/registry/k/d/a".into(),
                value: serde_json::to_vec(&stored).unwrap(),
                mod_revision: 42,
            };
            assert!(crate::registry::served::decodes_back(&stored));
            let make = crate::registry::served::written(kind.info(), kind.to_served(stored));
            let handed = make(42);
            let object_value = codec.object(&object);
            assert_eq!(
                handed.as_ref().unwrap().value(),
                object_value.unwrap().value()
            );
            let modified = || Event::Modified(object.clone(), serde_json::to_vec(&prev).unwrap());
            let with = codec.event_with(modified(), &handed).unwrap();
            let decoded = codec.event(modified()).unwrap();
            assert_eq!(with.kind, decoded.kind);
            assert_eq!(with.object, decoded.object);
            assert!(Arc::ptr_eq(
                &with.object,
                handed.as_ref().unwrap().shared_value()
            ));
            // The object before the update, for a selector's filter, is the same too.
            assert_eq!(with.old(kind), decoded.old(kind));
            assert_eq!(meta_str(with.old(kind).unwrap(), "resourceVersion"), "42");
            // A deletion is decoded whatever is handed over.
            let deleted = codec.event_with(Event::Deleted(object.clone()), &handed);
            assert_eq!(deleted.unwrap().kind, "DELETED");
        }
    }

    #[test]
    fn a_bookmark_is_an_object_of_the_kind_at_its_zero_value() {
        let pods = &crate::registry::pods::Pods;
        let bookmark = WatchEvent::bookmark(pods, 12, false);
        assert_eq!(bookmark.kind, "BOOKMARK");
        assert_eq!(
            *bookmark.object,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"resourceVersion": "12", "creationTimestamp": null},
                "spec": {"containers": null}, "status": {}})
        );
    }
}
