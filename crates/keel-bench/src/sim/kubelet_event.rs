//! The Events a simulated kubelet reports about its node, as client-go's event recorder
//! (`tools/record`) makes them for the kubelet: a core/v1 Event in namespace `default` (a
//! Node is not namespaced, so the recorder files its events there), `involvedObject` the
//! Node with its name as UID (the kubelet's `nodeRef`), `source` and the reporting fields
//! `kubelet` on the node, `count` 1, first and last timestamps now, and a name that is the
//! node's followed by a dot and a hexadecimal number, as the recorder's
//! `<name>.<UnixNano in hex>`. The reasons and messages are the kubelet's own node events,
//! taken in turn; an Event is about 500 bytes of JSON.
//!
//! [`EventNames`] keeps the numbers unique without a lock: writer `w` of `n` uses only
//! numbers equal to `w` modulo `n`, each above its last, from the clock's nanoseconds on.

use serde_json::{Value, json};

/// Where the Events are created.
pub const EVENTS_PATH: &str = "/api/v1/namespaces/default/events";

/// The kubelet's node events, taken in turn: type, reason, and the message (None: the
/// kubelet's `Node <name> status is now: <reason>`).
const REASONS: [(&str, &str, Option<&str>); 8] = [
    ("Normal", "Starting", Some("Starting kubelet.")),
    ("Normal", "NodeHasSufficientMemory", None),
    ("Normal", "NodeHasNoDiskPressure", None),
    ("Normal", "NodeHasSufficientPID", None),
    (
        "Normal",
        "NodeAllocatableEnforced",
        Some("Updated Node Allocatable limit across pods"),
    ),
    ("Normal", "NodeReady", None),
    (
        "Warning",
        "InvalidDiskCapacity",
        Some("invalid capacity 0 on image filesystem"),
    ),
    (
        "Warning",
        "ImageGCFailed",
        Some("failed to get imageFs info: unable to find data in memory cache"),
    ),
];

/// Event `turn` of node `node` as the kubelet's recorder creates it, named with `number`,
/// at `now` (a `metav1.Time`).
pub fn event(node: &str, number: u64, turn: u64, now: &str) -> Value {
    let (kind, reason, message) = REASONS[(turn % REASONS.len() as u64) as usize];
    let message = match message {
        Some(message) => message.to_string(),
        None => format!("Node {node} status is now: {reason}"),
    };
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": format!("{node}.{number:x}"), "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": node, "uid": node},
        "reason": reason,
        "message": message,
        "source": {"component": "kubelet", "host": node},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "type": kind,
        "eventTime": null,
        "reportingComponent": "kubelet",
        "reportingInstance": node,
    })
}

/// The numbers in one writer's event names (see the module comment).
#[derive(Debug, Clone)]
pub struct EventNames {
    writer: u64,
    writers: u64,
    last: Option<u64>,
}

impl EventNames {
    /// The names of writer `writer` of `writers`.
    pub fn new(writer: u32, writers: u32) -> Self {
        Self {
            writer: u64::from(writer),
            writers: u64::from(writers.max(1)),
            last: None,
        }
    }

    /// The next number, at `now_nanos` (nanoseconds since the Unix epoch): the first above
    /// both the last one and `now_nanos` less one that is this writer's.
    pub fn next(&mut self, now_nanos: u64) -> u64 {
        let floor = match self.last {
            Some(last) => now_nanos.max(last + 1),
            None => now_nanos,
        };
        let number = floor.div_ceil(self.writers) * self.writers + self.writer;
        self.last = Some(number);
        number
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_as_the_kubelet_records_it() {
        let e = event("sim-3", 0x17f0, 1, "2025-01-01T00:00:00Z");
        assert_eq!(e["metadata"]["name"], "sim-3.17f0");
        assert_eq!(e["metadata"]["namespace"], "default");
        assert_eq!(
            e["involvedObject"],
            json!({"kind": "Node", "name": "sim-3", "uid": "sim-3"})
        );
        assert_eq!(e["reason"], "NodeHasSufficientMemory");
        assert_eq!(
            e["message"],
            "Node sim-3 status is now: NodeHasSufficientMemory"
        );
        assert_eq!(e["source"]["host"], "sim-3");
        assert_eq!(e["count"], 1);
        assert_eq!(event("sim-3", 1, 6, "now")["type"], "Warning");
        assert_eq!(event("sim-3", 1, 8, "now")["reason"], "Starting");
        // About 500 bytes, with a realistic node name.
        let size = serde_json::to_vec(&event(
            "keel-sim-node-12345",
            1_750_000_000_123_456_789,
            2,
            "2025-06-15T12:00:00Z",
        ))
        .unwrap()
        .len();
        assert!((400..=600).contains(&size), "{size} bytes");
    }

    #[test]
    fn names_are_unique_across_writers_and_rising() {
        let mut seen = std::collections::HashSet::new();
        let mut writers: Vec<EventNames> = (0..3).map(|w| EventNames::new(w, 3)).collect();
        for (w, names) in writers.iter_mut().enumerate() {
            let mut last = 0;
            // The same clock reading, and one going backwards: still rising, still unique.
            for now in [100, 100, 100, 90, 200] {
                let n = names.next(now);
                assert!(n > last && n >= now, "{n} after {last} at {now}");
                assert_eq!(n % 3, w as u64);
                assert!(seen.insert(n), "{n} twice");
                last = n;
            }
        }
        assert_eq!(EventNames::new(0, 1).next(41), 41);
    }
}
