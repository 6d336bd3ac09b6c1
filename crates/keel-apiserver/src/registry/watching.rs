//! Watches of one kind as the API sends them: store events decoded into objects of the kind
//! ([`SharedEvent`], once per event for every watcher when the watch cache serves the watch),
//! filtered by each watcher's label and field selectors.
//!
//! A filter turns an update that moves an object into or out of the selection into ADDED or
//! DELETED (the old state, at the update's resourceVersion), as kube-apiserver's watchers do.
//! An event a watcher sends as it was decoded keeps a link to the shared event, so its encoding
//! ([`WatchEvent::shared_encoding`]) is made once for all the watchers that send it.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;

use super::store::{Filter, decode, parse_stored, target};
use super::{Strategy, meta, meta_str};
use crate::storage::cacher::{CacheWatch, Cached, Codec};
use crate::storage::{Event, Object, Status, Watch};

/// A store event decoded for every watcher of one kind, or why it could not be.
pub type Decoded = Result<SharedEvent, Status>;

/// A stored object of a kind as the API serves it (with apiVersion, kind and
/// resourceVersion), decoded once for every read; or why it could not be.
pub type Served = Result<Arc<Value>, Status>;

/// What a kind's storage and watch cache make of its stored values.
pub struct KindCodec(pub &'static dyn Strategy);

impl Codec for KindCodec {
    type Event = Decoded;
    type Object = Served;

    fn event(&self, event: Event) -> Decoded {
        decode_event(self.0, event)
    }

    fn object(&self, object: &Object) -> Served {
        served(self.0, object).map(Arc::new)
    }

    fn object_of(&self, event: &Decoded) -> Served {
        event
            .as_ref()
            .map(|e| e.object.clone())
            .map_err(Clone::clone)
    }

    fn indexed_fields(&self) -> &'static [&'static str] {
        self.0.indexed_fields()
    }

    fn field(&self, object: &Served, field: &str) -> String {
        object
            .as_ref()
            .map(|value| self.0.field(value, field))
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
    let (name, object, prev) = match event {
        Event::Added(o) => ("ADDED", o, Vec::new()),
        Event::Modified(o, prev) => ("MODIFIED", o, prev),
        Event::Deleted(o) => ("DELETED", o, Vec::new()),
    };
    Ok(SharedEvent {
        kind: name,
        object: Arc::new(served(kind, &object)?),
        prev,
        old: OnceLock::new(),
        encoded: OnceLock::new(),
    })
}

/// A stored object as a watch sends it: decoded, with the kind's apiVersion and kind.
fn served(kind: &dyn Strategy, object: &Object) -> Result<Value, Status> {
    let mut value = decode(kind, object)?;
    let info = kind.info();
    value["apiVersion"] = info.api_version().into();
    value["kind"] = info.kind.into();
    Ok(value)
}

impl SharedEvent {
    /// The object before a MODIFIED event, at the update's resourceVersion.
    fn old(&self, kind: &dyn Strategy) -> Option<&Value> {
        self.old
            .get_or_init(|| {
                if self.kind != "MODIFIED" || self.prev.is_empty() {
                    return None;
                }
                let mut old = kind.to_served(parse_stored(&self.prev).ok()?);
                let rv = meta_str(&self.object, "resourceVersion").to_string();
                meta::metadata(&mut old).insert("resourceVersion".into(), rv.into());
                let info = kind.info();
                old["apiVersion"] = info.api_version().into();
                old["kind"] = info.kind.into();
                Some(old)
            })
            .as_ref()
    }
}

/// One watch event as the API sends it.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: &'static str,
    /// The object, with apiVersion and kind (for DELETED its last state, at the deletion's
    /// resourceVersion).
    pub object: Arc<Value>,
    /// The shared event, when this is it unchanged.
    shared: Option<Arc<Cached<Decoded>>>,
}

impl WatchEvent {
    /// Where this event's encoding is kept for every watcher that sends it unchanged; None
    /// when this watcher's event is its own (its filter changed the event's type).
    pub fn shared_encoding(&self) -> Option<&OnceLock<Bytes>> {
        let shared = self.shared.as_ref()?.value.as_ref().ok()?;
        Some(&shared.encoded)
    }
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
    filter: Option<Box<Filter>>,
    /// Events ready to hand out.
    pending: VecDeque<WatchEvent>,
    /// The error to hand out once the pending events are.
    failed: Option<Status>,
    ended: bool,
}

impl Watching {
    /// A watch that first sends `initial` (the current objects, as ADDED) and then the
    /// events from the kind's watch cache.
    pub(super) fn cached(
        kind: &'static dyn Strategy,
        initial: Vec<Object>,
        watch: CacheWatch<Decoded>,
        filter: Option<Box<Filter>>,
    ) -> Watching {
        Watching::new(kind, initial, Source::Cache(watch), filter)
    }

    /// A watch that first sends `initial` and then the events of its own store watch.
    pub(super) fn store(
        kind: &'static dyn Strategy,
        initial: Vec<Object>,
        watch: Watch,
        filter: Option<Box<Filter>>,
    ) -> Watching {
        Watching::new(kind, initial, Source::Store(watch), filter)
    }

    /// A watch that sends only `status`, as an ERROR event (a start the store compacted).
    pub(super) fn failed(kind: &'static dyn Strategy, status: Status) -> Watching {
        Watching {
            kind,
            source: Source::Ended,
            filter: None,
            pending: VecDeque::new(),
            failed: Some(status),
            ended: false,
        }
    }

    fn new(
        kind: &'static dyn Strategy,
        initial: Vec<Object>,
        source: Source,
        filter: Option<Box<Filter>>,
    ) -> Watching {
        let mut watching = Watching {
            kind,
            source,
            filter,
            pending: VecDeque::new(),
            failed: None,
            ended: false,
        };
        for object in initial {
            let event = decode_event(kind, Event::Added(object));
            if !watching.accept(Arc::new(Cached {
                revision: 0,
                key: String::new(),
                value: event,
            })) {
                break;
            }
        }
        watching
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
                        self.failed = Some(Status::from_storage(&e, &target(self.kind.info(), "")));
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
