//! Splitting one large watch response into fragments, exactly as etcd's `sendFragments`: a
//! response of a watcher created with `fragment` that is at least `max_bytes` long and holds
//! two or more events is cut into responses with `fragment = true`, each below `max_bytes`
//! (or holding a single event), the last one with `fragment = false`.

use keel_proto::etcdserverpb::WatchResponse;
use prost::Message;

/// The field number of `WatchResponse.events`.
const EVENTS_TAG: u32 = 11;

/// The responses to send for `resp` (itself when it needs no splitting).
pub fn fragments(mut resp: WatchResponse, max_bytes: usize) -> Vec<WatchResponse> {
    if resp.events.len() < 2 || resp.encoded_len() < max_bytes {
        return vec![resp];
    }
    let events = std::mem::take(&mut resp.events);
    resp.fragment = true;
    let base = resp.encoded_len();
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut size = base;
    for event in events {
        let len = prost::encoding::message::encoded_len(EVENTS_TAG, &event);
        if !cur.is_empty() && size + len >= max_bytes {
            out.push(WatchResponse {
                events: std::mem::take(&mut cur),
                ..resp.clone()
            });
            size = base;
        }
        size += len;
        cur.push(event);
    }
    out.push(WatchResponse {
        events: cur,
        fragment: false,
        ..resp
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_proto::mvccpb::{Event, KeyValue};

    fn event(i: usize) -> Event {
        Event {
            kv: Some(KeyValue {
                key: format!("key{i:04}").into_bytes(),
                value: vec![b'x'; 100],
                mod_revision: 2,
                create_revision: 2,
                version: 1,
                lease: 0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn small_or_single_event_responses_are_kept_whole() {
        let resp = WatchResponse {
            events: (0..3).map(event).collect(),
            ..Default::default()
        };
        assert_eq!(fragments(resp.clone(), 1 << 20), vec![resp]);
        let one = WatchResponse {
            events: vec![event(0)],
            ..Default::default()
        };
        assert_eq!(fragments(one.clone(), 10), vec![one]);
    }

    #[test]
    fn large_responses_are_split_in_order_below_the_limit() {
        let events: Vec<Event> = (0..100).map(event).collect();
        let resp = WatchResponse {
            watch_id: 7,
            events: events.clone(),
            ..Default::default()
        };
        let parts = fragments(resp, 1000);
        assert!(parts.len() > 1);
        let (last, init) = parts.split_last().unwrap();
        assert!(init.iter().all(|p| p.fragment && p.watch_id == 7));
        assert!(!last.fragment);
        assert!(parts.iter().all(|p| p.encoded_len() < 1000));
        let joined: Vec<Event> = parts.into_iter().flat_map(|p| p.events).collect();
        assert_eq!(joined, events);
    }
}
