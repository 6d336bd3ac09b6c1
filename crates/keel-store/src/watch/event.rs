//! [`SharedEvent`]: one committed event, shared by every watcher that receives it and encoded
//! at most once per shape; [`EventRun`], a run of such events shared by every response that
//! carries it; and [`encode_response`], which writes a watch response around such events
//! without building or encoding an `Event` per watcher.

use std::ops::{Deref, Range};
use std::sync::{Arc, OnceLock};

use bytes::{Bytes, BytesMut};
use keel_proto::encoded::PreEncoded;
use keel_proto::etcdserverpb::WatchResponse;
use keel_proto::mvccpb::Event;
use keel_proto::mvccpb::event::EventType;
use prost::Message;

/// The field number of `WatchResponse.events`.
const EVENTS_TAG: u32 = 11;

/// One event of a committed revision, cheap to clone.
#[derive(Debug, Clone)]
pub struct SharedEvent(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    event: Event,
    /// The `events` field as sent to a watcher that asked for `prev_kv`.
    with_prev: OnceLock<Bytes>,
    /// The `events` field without `prev_kv`.
    bare: OnceLock<Bytes>,
}

impl SharedEvent {
    /// Wraps an event as the store produced it (with `prev_kv` where there is one).
    pub fn new(event: Event) -> SharedEvent {
        SharedEvent(Arc::new(Inner {
            event,
            with_prev: OnceLock::new(),
            bare: OnceLock::new(),
        }))
    }

    /// The event as the store produced it.
    pub fn event(&self) -> &Event {
        &self.0.event
    }

    /// The event's key.
    pub fn key(&self) -> &[u8] {
        self.0.event.kv.as_ref().map_or(&[], |kv| &kv.key)
    }

    /// The event's revision.
    pub fn revision(&self) -> i64 {
        self.0.event.kv.as_ref().map_or(0, |kv| kv.mod_revision)
    }

    /// Whether it is a PUT (else a DELETE).
    pub fn is_put(&self) -> bool {
        self.0.event.r#type == EventType::Put as i32
    }

    /// Whether it creates its key (a create has no previous value).
    fn is_create(&self) -> bool {
        self.is_put()
            && self
                .0
                .event
                .kv
                .as_ref()
                .is_some_and(|kv| kv.create_revision == kv.mod_revision)
    }

    /// Whether a watcher that asked for `prev_kv` gets it with this event: a create carries
    /// none, as in etcd.
    fn keeps_prev(&self, prev_kv: bool) -> bool {
        prev_kv && !self.is_create() && self.0.event.prev_kv.is_some()
    }

    /// Whether the event replaced a value it does not carry: the store left it out because
    /// no watcher wanted `prev_kv` when the event was applied.
    pub fn lacks_prev(&self) -> bool {
        self.is_put() && !self.is_create() && self.0.event.prev_kv.is_none()
    }

    /// The event as a watcher with (or without) `prev_kv` sees it.
    pub fn shaped(&self, prev_kv: bool) -> Event {
        let mut e = self.0.event.clone();
        if !self.keeps_prev(prev_kv) {
            e.prev_kv = None;
        }
        e
    }

    /// The event as one encoded `WatchResponse.events` field (tag, length, message), for a
    /// watcher with (or without) `prev_kv`; encoded on first use.
    pub fn field(&self, prev_kv: bool) -> &Bytes {
        let keep = self.keeps_prev(prev_kv);
        let cell = if keep {
            &self.0.with_prev
        } else {
            &self.0.bare
        };
        cell.get_or_init(|| {
            let event = self.shaped(keep);
            let len = prost::encoding::message::encoded_len(EVENTS_TAG, &event);
            let mut buf = BytesMut::with_capacity(len);
            prost::encoding::message::encode(EVENTS_TAG, &event, &mut buf);
            buf.freeze()
        })
    }
}

/// The events of one response: a window on a list that many responses may share, so that
/// watchers receiving the same events hold one list between them.
#[derive(Debug, Clone, Default)]
pub struct EventRun {
    list: Arc<[SharedEvent]>,
    window: Range<usize>,
}

impl EventRun {
    /// The events of `list` in `window`.
    ///
    /// # Panics
    /// If `window` is not within `list`.
    pub fn new(list: Arc<[SharedEvent]>, window: Range<usize>) -> EventRun {
        assert!(window.start <= window.end && window.end <= list.len());
        EventRun { list, window }
    }
}

impl From<Vec<SharedEvent>> for EventRun {
    fn from(events: Vec<SharedEvent>) -> EventRun {
        let window = 0..events.len();
        EventRun {
            list: events.into(),
            window,
        }
    }
}

impl Deref for EventRun {
    type Target = [SharedEvent];

    fn deref(&self) -> &[SharedEvent] {
        &self.list[self.window.clone()]
    }
}

/// Encodes `base` (a response whose `events` are empty) followed by `events` as a watcher
/// with (or without) `prev_kv` receives them: the same bytes prost writes for the whole
/// response, since `events` is its last field.
pub fn encode_response(base: &WatchResponse, events: &[SharedEvent], prev_kv: bool) -> PreEncoded {
    debug_assert!(base.events.is_empty());
    let mut parts = Vec::with_capacity(events.len() + 1);
    parts.push(Bytes::from(base.encode_to_vec()));
    parts.extend(events.iter().map(|e| e.field(prev_kv).clone()));
    PreEncoded(parts)
}

/// The encoded length of [`encode_response`]'s result, without encoding.
pub fn encoded_len(base: &WatchResponse, events: &[SharedEvent], prev_kv: bool) -> usize {
    base.encoded_len() + events.iter().map(|e| e.field(prev_kv).len()).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_proto::etcdserverpb::ResponseHeader;
    use keel_proto::mvccpb::KeyValue;

    fn kv(key: &str, create: i64, rev: i64) -> KeyValue {
        KeyValue {
            key: key.as_bytes().to_vec(),
            value: b"value".to_vec(),
            create_revision: create,
            mod_revision: rev,
            version: rev - create + 1,
            lease: 0,
        }
    }

    fn event(key: &str, create: i64, rev: i64) -> Event {
        Event {
            r#type: EventType::Put as i32,
            kv: Some(kv(key, create, rev)),
            prev_kv: (create != rev).then(|| kv(key, create, rev - 1)),
        }
    }

    #[test]
    fn encoding_matches_prost_for_the_whole_response() {
        let events = [event("a", 2, 2), event("a", 2, 3), event("b", 4, 4)];
        let shared: Vec<SharedEvent> = events.iter().cloned().map(SharedEvent::new).collect();
        for prev_kv in [false, true] {
            let base = WatchResponse {
                header: Some(ResponseHeader {
                    revision: 4,
                    member_id: 7,
                    ..Default::default()
                }),
                watch_id: 3,
                ..Default::default()
            };
            let whole = WatchResponse {
                events: shared.iter().map(|e| e.shaped(prev_kv)).collect(),
                ..base.clone()
            };
            let encoded = encode_response(&base, &shared, prev_kv);
            assert_eq!(encoded.to_vec(), whole.encode_to_vec());
            assert_eq!(encoded_len(&base, &shared, prev_kv), whole.encoded_len());
            let decoded = WatchResponse::decode(encoded.to_vec().as_slice()).unwrap();
            assert_eq!(decoded.events[1].prev_kv.is_some(), prev_kv);
        }
    }

    #[test]
    fn a_create_never_carries_prev_kv() {
        let mut e = event("a", 5, 5);
        e.prev_kv = Some(kv("a", 1, 3));
        let shared = SharedEvent::new(e);
        assert!(shared.shaped(true).prev_kv.is_none());
        assert_eq!(shared.field(true), shared.field(false));
    }
}
