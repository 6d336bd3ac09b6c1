//! Splitting one large watch response into fragments, exactly as etcd's `sendFragments`: a
//! response of a watcher created with `fragment` that is at least `max_bytes` long and holds
//! two or more events is cut into responses with `fragment = true`, each below `max_bytes`
//! (or holding a single event), the last one with `fragment = false`.

use keel_proto::encoded::PreEncoded;
use keel_proto::etcdserverpb::WatchResponse;
use prost::Message;

use super::event::{SharedEvent, encode_response, encoded_len};

/// The encoded responses to send for `base` (a response without events) carrying `events`:
/// one response when it needs no splitting.
pub fn fragments(
    base: &WatchResponse,
    events: &[SharedEvent],
    prev_kv: bool,
    max_bytes: usize,
) -> Vec<PreEncoded> {
    if events.len() < 2 || encoded_len(base, events, prev_kv) < max_bytes {
        return vec![encode_response(base, events, prev_kv)];
    }
    let part = WatchResponse {
        fragment: true,
        ..base.clone()
    };
    let head = part.encoded_len();
    let mut out = Vec::new();
    let mut start = 0;
    let mut size = head;
    for (i, event) in events.iter().enumerate() {
        let len = event.field(prev_kv).len();
        if i > start && size + len >= max_bytes {
            out.push(encode_response(&part, &events[start..i], prev_kv));
            start = i;
            size = head;
        }
        size += len;
    }
    let last = WatchResponse {
        fragment: false,
        ..part
    };
    out.push(encode_response(&last, &events[start..], prev_kv));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_proto::mvccpb::{Event, KeyValue};

    fn event(i: usize) -> SharedEvent {
        SharedEvent::new(Event {
            kv: Some(KeyValue {
                key: format!("key{i:04}").into_bytes(),
                value: vec![b'x'; 100],
                mod_revision: 2,
                create_revision: 2,
                version: 1,
                lease: 0,
            }),
            ..Default::default()
        })
    }

    fn decode(parts: &[PreEncoded]) -> Vec<WatchResponse> {
        parts
            .iter()
            .map(|p| WatchResponse::decode(p.to_vec().as_slice()).unwrap())
            .collect()
    }

    #[test]
    fn small_or_single_event_responses_are_kept_whole() {
        let base = WatchResponse::default();
        let three: Vec<SharedEvent> = (0..3).map(event).collect();
        assert_eq!(fragments(&base, &three, false, 1 << 20).len(), 1);
        let one = fragments(&base, &three[..1], false, 10);
        assert_eq!(one.len(), 1);
        assert!(!decode(&one)[0].fragment);
    }

    #[test]
    fn large_responses_are_split_in_order_below_the_limit() {
        let events: Vec<SharedEvent> = (0..100).map(event).collect();
        let base = WatchResponse {
            watch_id: 7,
            ..Default::default()
        };
        let parts = fragments(&base, &events, false, 1000);
        assert!(parts.len() > 1);
        assert!(parts.iter().all(|p| p.len() < 1000));
        let parts = decode(&parts);
        let (last, init) = parts.split_last().unwrap();
        assert!(init.iter().all(|p| p.fragment && p.watch_id == 7));
        assert!(!last.fragment);
        let joined: Vec<Event> = parts.into_iter().flat_map(|p| p.events).collect();
        let want: Vec<Event> = events.iter().map(|e| e.event().clone()).collect();
        assert_eq!(joined, want);
    }
}
