//! Reads what `keel bench watch` needs of an etcd `WatchResponse` straight from its protobuf
//! bytes, without building messages.
//!
//! Thousands of events a millisecond reach the benchmark; decoding each into a full `Event`
//! (key, value and prev_kv copied into fresh vectors) costs the load generator more CPU than
//! the server spends sending it, on a machine the two share. This reader borrows from the
//! received bytes and skips every field the benchmark does not look at.

use std::fmt;

/// A malformed protobuf message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(&'static str);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed watch answer: {}", self.0)
    }
}

impl std::error::Error for WireError {}

/// The fields of a `WatchResponse` the benchmark reads; its events are read on demand.
#[derive(Debug, Default)]
pub struct WatchAnswer<'a> {
    /// `watch_id`.
    pub watch_id: i64,
    /// `created`.
    pub created: bool,
    /// `canceled`.
    pub canceled: bool,
    /// `compact_revision`.
    pub compact_revision: i64,
    /// `cancel_reason`.
    pub cancel_reason: String,
    /// The whole message, to walk its events.
    bytes: &'a [u8],
}

/// The fields of one `mvccpb.Event` the benchmark reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventView<'a> {
    /// The event is a PUT (not a DELETE).
    pub put: bool,
    /// Whether the event carries its key-value.
    pub has_kv: bool,
    /// `kv.mod_revision`.
    pub mod_revision: i64,
    /// `kv.value`.
    pub value: &'a [u8],
}

/// Field numbers of `etcdserverpb.WatchResponse`.
const WATCH_ID: u32 = 2;
const CREATED: u32 = 3;
const CANCELED: u32 = 4;
const COMPACT_REVISION: u32 = 5;
const CANCEL_REASON: u32 = 6;
const EVENTS: u32 = 11;
/// Field numbers of `mvccpb.Event` and `mvccpb.KeyValue`.
const EVENT_TYPE: u32 = 1;
const EVENT_KV: u32 = 2;
const KV_MOD_REVISION: u32 = 3;
const KV_VALUE: u32 = 5;

impl<'a> WatchAnswer<'a> {
    /// Reads the answer's own fields.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, WireError> {
        let mut answer = WatchAnswer {
            bytes,
            ..WatchAnswer::default()
        };
        for field in Fields(bytes) {
            match field? {
                (WATCH_ID, Value::Varint(v)) => answer.watch_id = v as i64,
                (CREATED, Value::Varint(v)) => answer.created = v != 0,
                (CANCELED, Value::Varint(v)) => answer.canceled = v != 0,
                (COMPACT_REVISION, Value::Varint(v)) => answer.compact_revision = v as i64,
                (CANCEL_REASON, Value::Bytes(b)) => {
                    answer.cancel_reason = String::from_utf8_lossy(b).into_owned()
                }
                _ => {}
            }
        }
        Ok(answer)
    }

    /// The answer's events, in order.
    pub fn events(&self) -> impl Iterator<Item = Result<EventView<'a>, WireError>> + 'a {
        Fields(self.bytes).filter_map(|field| match field {
            Ok((EVENTS, Value::Bytes(event))) => Some(read_event(event)),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
    }
}

fn read_event(bytes: &[u8]) -> Result<EventView<'_>, WireError> {
    let mut event = EventView {
        put: true,
        has_kv: false,
        mod_revision: 0,
        value: &[],
    };
    for field in Fields(bytes) {
        match field? {
            (EVENT_TYPE, Value::Varint(t)) => event.put = t == 0,
            (EVENT_KV, Value::Bytes(kv)) => {
                event.has_kv = true;
                for field in Fields(kv) {
                    match field? {
                        (KV_MOD_REVISION, Value::Varint(r)) => event.mod_revision = r as i64,
                        (KV_VALUE, Value::Bytes(v)) => event.value = v,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(event)
}

/// One field's value, by wire type.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// A fixed32 or fixed64 (no field the benchmark reads has one).
    Fixed,
}

/// The fields of a message, in wire order.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn varint(&mut self) -> Result<u64, WireError> {
        // Keys, flags and small numbers take one byte.
        if let Some((&byte, rest)) = self.0.split_first()
            && byte < 0x80
        {
            self.0 = rest;
            return Ok(u64::from(byte));
        }
        let mut value = 0u64;
        for (i, &byte) in self.0.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.0 = &self.0[i + 1..];
                return Ok(value);
            }
        }
        Err(WireError("bad varint"))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], WireError> {
        if self.0.len() < len {
            return Err(WireError("field runs past the end"));
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(head)
    }

    fn field(&mut self) -> Result<(u32, Value<'a>), WireError> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| WireError("bad field number"))?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => self.take(8).map(|_| Value::Fixed)?,
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| WireError("bad length"))?;
                Value::Bytes(self.take(len)?)
            }
            5 => self.take(4).map(|_| Value::Fixed)?,
            _ => return Err(WireError("unsupported wire type")),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_err() {
            self.0 = &[];
        }
        Some(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_proto::etcdserverpb::{ResponseHeader, WatchResponse};
    use keel_proto::mvccpb::{Event, KeyValue, event::EventType};
    use prost::Message;

    fn kv(key: &str, value: &[u8], mod_revision: i64) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: value.to_vec(),
            create_revision: 3,
            mod_revision,
            version: 9,
            lease: 77,
        }
    }

    #[test]
    fn reads_what_prost_wrote() {
        let response = WatchResponse {
            header: Some(ResponseHeader {
                revision: 1 << 40,
                ..Default::default()
            }),
            watch_id: -1,
            created: true,
            canceled: true,
            compact_revision: 12,
            cancel_reason: "gone".into(),
            fragment: true,
            events: vec![
                Event {
                    r#type: EventType::Put as i32,
                    kv: Some(kv("a", b"one", 300)),
                    prev_kv: Some(kv("a", b"zero", 2)),
                },
                Event {
                    r#type: EventType::Delete as i32,
                    kv: Some(kv("b", b"", 301)),
                    prev_kv: None,
                },
                Event::default(),
            ],
        };
        let bytes = response.encode_to_vec();
        let answer = WatchAnswer::parse(&bytes).unwrap();
        assert_eq!(answer.watch_id, -1);
        assert!(answer.created && answer.canceled);
        assert_eq!(answer.compact_revision, 12);
        assert_eq!(answer.cancel_reason, "gone");
        let events: Vec<_> = answer.events().collect::<Result<_, _>>().unwrap();
        let view = |put, has_kv, mod_revision, value| EventView {
            put,
            has_kv,
            mod_revision,
            value,
        };
        assert_eq!(
            events,
            vec![
                view(true, true, 300, &b"one"[..]),
                view(false, true, 301, &b""[..]),
                view(true, false, 0, &b""[..]),
            ]
        );
    }

    #[test]
    fn truncated_or_garbled_bytes_are_errors() {
        // One field only, so that every cut falls inside it.
        let response = WatchResponse {
            events: vec![Event {
                kv: Some(kv("key", b"value", 7)),
                ..Default::default()
            }],
            ..Default::default()
        };
        let bytes = response.encode_to_vec();
        for cut in 1..bytes.len() {
            let outcome = WatchAnswer::parse(&bytes[..cut])
                .and_then(|a| a.events().collect::<Result<Vec<_>, _>>().map(drop));
            assert!(outcome.is_err(), "cut at {cut} of {}", bytes.len());
        }
        assert!(WatchAnswer::parse(&[0xff; 11]).is_err());
        assert!(WatchAnswer::parse(&[(1 << 3) | 3]).is_err());
    }
}
