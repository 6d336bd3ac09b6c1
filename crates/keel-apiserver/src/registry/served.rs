//! Objects as the API serves them, made once for every read: a stored object decoded into
//! its kind's JSON value ([`ServedObject`], kept in the watch cache, shared by every get,
//! list and watch event that sends it), and a page of a collection ([`List`]) whose items
//! are those objects, shared, not copied.
//!
//! A list's items leave out apiVersion and kind (the list names them once), as
//! kube-apiserver encodes a typed list; a custom resource's list (unstructured upstream)
//! keeps them in every item. An object keeps its encoding as such an item, made
//! by the first list that sends it in JSON, so a list the watch cache serves is a
//! concatenation of ready bytes: [`List::to_json`] writes the bytes `serde_json` writes for
//! [`List::to_value`], whose maps are sorted by key: `{"apiVersion":…,"items":[…],"kind":…,
//! "metadata":{…}}` and a newline.

use std::sync::{Arc, OnceLock};

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::stored::{MAX_STORED_DEPTH, decode, parse_stored};
use super::{ResourceInfo, Strategy, meta};
use crate::storage::cacher::handoff::Make;
use crate::storage::{Object, Status};

/// A stored object of a kind as the API serves it (see [`ServedObject`]); or why it could
/// not be decoded.
pub type Served = Result<Arc<ServedObject>, Status>;

/// A stored object of a kind as the API serves it: with apiVersion, kind and
/// resourceVersion, decoded once for every read, and its encoding as a list's item.
#[derive(Debug)]
pub struct ServedObject {
    value: Arc<Value>,
    /// The JSON of `value` without apiVersion and kind, made by the first list that sends it.
    item: OnceLock<Box<[u8]>>,
}

impl ServedObject {
    /// `value` (a JSON object with apiVersion and kind), served.
    pub fn new(value: Arc<Value>) -> ServedObject {
        ServedObject {
            value,
            item: OnceLock::new(),
        }
    }

    /// The object, with apiVersion and kind.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The object, shared.
    pub fn shared_value(&self) -> &Arc<Value> {
        &self.value
    }

    /// The object as a list's item: a copy without apiVersion and kind.
    fn to_item(&self) -> Value {
        let mut item = Value::clone(&self.value);
        if let Some(map) = item.as_object_mut() {
            map.remove("apiVersion");
            map.remove("kind");
        }
        item
    }

    /// The JSON of [`ServedObject::to_item`], made once.
    pub fn item_json(&self) -> &[u8] {
        self.item.get_or_init(|| {
            let json = match self.value.as_object() {
                Some(map) => serde_json::to_vec(&WithoutType(map)),
                None => serde_json::to_vec(&*self.value),
            };
            json.expect("a JSON value encodes").into_boxed_slice()
        })
    }
}

impl From<Value> for ServedObject {
    fn from(value: Value) -> ServedObject {
        ServedObject::new(Arc::new(value))
    }
}

/// An object's map, serialized without apiVersion and kind.
struct WithoutType<'a>(&'a Map<String, Value>);

impl Serialize for WithoutType<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = self
            .0
            .iter()
            .filter(|(k, _)| *k != "apiVersion" && *k != "kind");
        let mut map = serializer.serialize_map(None)?;
        for (k, v) in fields {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// A stored object as `kind` serves it: decoded, with the kind's apiVersion and kind.
pub fn served(kind: &dyn Strategy, object: &Object) -> Result<Value, Status> {
    let mut value = decode(kind, object)?;
    kind.info().set_type(&mut value);
    Ok(value)
}

/// What the watch cache makes of the bytes this apiserver writes for an object of the kind
/// `info` describes (see [`crate::storage::cacher::handoff`]), from `value`, `to_served` of
/// the value those bytes encode (which [`decodes_back`] from them): made at a revision, it
/// is what [`served`] decodes from the bytes at that revision.
pub fn written(info: &'static ResourceInfo, value: Value) -> Make<Served> {
    Box::new(move |revision| Ok(Arc::new(at(info, value, revision.to_string()).into())))
}

/// Whether decoding the JSON of `stored` (a value as stored, which `serde_json` writes) gives
/// `stored` back: it is an object, nested no deeper than a stored value may be, and has no
/// number `serde_json`'s parser reads back as another (a float whose shortest digits it
/// rounds differently, as it may without its `float_roundtrip` feature).
pub fn decodes_back(stored: &Value) -> bool {
    if !stored.is_object() {
        return false;
    }
    // Each value with the number of arrays and objects it is in, itself included.
    let mut stack = vec![(stored, 1)];
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::Object(_) | Value::Array(_) if depth > MAX_STORED_DEPTH => return false,
            Value::Object(map) => stack.extend(map.values().map(|v| (v, depth + 1))),
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Number(n) if n.is_f64() => {
                let back = serde_json::from_str::<Value>(&n.to_string());
                if !back.is_ok_and(|back| back == *value) {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// A stored value before an update (`prev`) as `kind` serves it, at the update's
/// resourceVersion `rv`; None when it does not decode.
pub fn served_before(kind: &dyn Strategy, prev: &[u8], rv: &str) -> Option<Value> {
    let old = kind.to_served(parse_stored(prev).ok()?);
    Some(at(kind.info(), old, rv.to_string()))
}

/// `value` (a stored value, made `to_served`) as the API serves it at resourceVersion `rv`:
/// with it, and with the kind's apiVersion and kind.
fn at(info: &ResourceInfo, mut value: Value, rv: String) -> Value {
    meta::metadata(&mut value).insert("resourceVersion".into(), rv.into());
    info.set_type(&mut value);
    value
}

/// One page of a collection: the `<Kind>List` object (see the module docs).
#[derive(Debug)]
pub struct List {
    /// `<Kind>List`.
    pub kind: String,
    /// The kind's apiVersion.
    pub api_version: String,
    /// resourceVersion, continue, remainingItemCount.
    pub metadata: Map<String, Value>,
    /// The objects, with apiVersion and kind (which the list's items leave out).
    pub items: Vec<Arc<ServedObject>>,
    /// Whether the items keep apiVersion and kind (a custom resource's list).
    pub unstructured: bool,
}

impl List {
    /// The resourceVersion the list was read at ("" for none).
    pub fn resource_version(&self) -> &str {
        self.metadata
            .get("resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The objects, with apiVersion and kind.
    pub fn objects(&self) -> impl Iterator<Item = &Value> {
        self.items.iter().map(|i| i.value())
    }

    /// The list as a JSON value, its items without apiVersion and kind unless
    /// [`List::unstructured`].
    pub fn to_value(&self) -> Value {
        let items = self
            .items
            .iter()
            .map(|i| match self.unstructured {
                true => i.value().clone(),
                false => i.to_item(),
            })
            .collect();
        let mut list = Map::new();
        list.insert("kind".into(), self.kind.clone().into());
        list.insert("apiVersion".into(), self.api_version.clone().into());
        list.insert("metadata".into(), Value::Object(self.metadata.clone()));
        list.insert("items".into(), Value::Array(items));
        Value::Object(list)
    }

    /// The JSON `serde_json` writes for [`List::to_value`], and a newline (as the API answers
    /// JSON), from the items' own encodings.
    pub fn to_json(&self) -> Vec<u8> {
        let items: usize = self.items.iter().map(|i| i.item_json().len() + 1).sum();
        let mut out = Vec::with_capacity(items + 256);
        out.extend_from_slice(b"{\"apiVersion\":");
        write_json(&mut out, &self.api_version);
        out.extend_from_slice(b",\"items\":[");
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match self.unstructured {
                true => write_json(&mut out, item.value()),
                false => out.extend_from_slice(item.item_json()),
            }
        }
        out.extend_from_slice(b"],\"kind\":");
        write_json(&mut out, &self.kind);
        out.extend_from_slice(b",\"metadata\":");
        write_json(&mut out, &self.metadata);
        out.extend_from_slice(b"}\n");
        out
    }
}

fn write_json(out: &mut Vec<u8>, value: &impl Serialize) {
    serde_json::to_writer(out, value).expect("a JSON value encodes");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Arc<ServedObject> {
        Arc::new(ServedObject::new(Arc::new(value)))
    }

    #[test]
    fn a_list_in_json_is_its_value_written_by_serde_json() {
        let items = vec![
            object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "resourceVersion": "7", "labels": {"z": "1", "a": "2"}},
                "data": {"k": "quote \" slash \\ tab \t unicode é \u{1F600} <>&", "n": ""}})),
            object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "b"}, "binaryData": {}, "immutable": true,
                "x": [1, 2.5, -3, null, {"b": [], "a": {}}]})),
            object(json!({"metadata": {"name": "untyped"}})),
        ];
        let mut metadata = Map::new();
        metadata.insert("resourceVersion".into(), "9".into());
        metadata.insert("continue".into(), "token\"/".into());
        metadata.insert("remainingItemCount".into(), 3.into());
        for (items, unstructured) in [(Vec::new(), false), (items.clone(), false), (items, true)] {
            let list = List {
                kind: "ConfigMapList".into(),
                api_version: "v1".into(),
                metadata: metadata.clone(),
                items,
                unstructured,
            };
            let mut expected = serde_json::to_vec(&list.to_value()).unwrap();
            expected.push(b'\n');
            assert_eq!(
                String::from_utf8(list.to_json()).unwrap(),
                String::from_utf8(expected).unwrap()
            );
            assert_eq!(list.resource_version(), "9");
            if let Some(first) = list.to_value()["items"].get(0) {
                assert_eq!(first.get("kind").is_some(), unstructured, "{first}");
            }
        }
    }

    #[test]
    fn only_values_whose_json_decodes_back_are_handed_over() {
        assert!(decodes_back(
            &json!({"a": [1, -2, 2.5, 0.1, 1e300, -0.0, "x", null,
            {"b": true, "u": 18446744073709551615u64}]})
        ));
        // serde_json writes this float's shortest digits and reads them back one bit off.
        let float = json!({"spec": {"x": 1.0715660391465826e-75}});
        assert!(!decodes_back(&float));
        let back = parse_stored(&serde_json::to_vec(&float).unwrap()).unwrap();
        assert_ne!(back, float);
        assert!(!decodes_back(&json!([{}])), "not an object");
        // As deep as parse_stored reads, and no deeper.
        let mut deep = json!({});
        for _ in 1..MAX_STORED_DEPTH {
            deep = json!({"a": deep});
        }
        assert!(decodes_back(&deep));
        assert!(parse_stored(&serde_json::to_vec(&deep).unwrap()).is_ok());
        let deeper = json!({"a": [deep]});
        assert!(!decodes_back(&deeper));
        assert!(parse_stored(&serde_json::to_vec(&deeper).unwrap()).is_err());
    }

    #[test]
    fn an_item_leaves_out_apiversion_and_kind_and_its_object_keeps_them() {
        let served = object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a"}}));
        assert_eq!(served.to_item(), json!({"metadata": {"name": "a"}}));
        assert_eq!(served.item_json(), br#"{"metadata":{"name":"a"}}"#);
        assert_eq!(served.value()["kind"], "ConfigMap");
    }
}
