//! A JSON body read as `sigs.k8s.io/json`'s `UnmarshalStrict` reads it into the kind's Go
//! type, in document order: every field the type lacks is `unknown field "spec.foo"`
//! (paths joined with `.`, list items as `[0]`), every field given twice `duplicate field
//! "data.a"` (map keys count as fields for duplicates), and nothing is looked into where Go
//! keeps a value raw or reads it itself. Values of the wrong type are judged by
//! [`fit::json`] as the decoder meets them; the first one noted, or the first one that
//! stops the decoder, is the error the body fails with.

use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::fit::{self, Got, Refusal};
use super::{Place, Scalar, Shape};
use crate::apimachinery::quantity;
use crate::apimachinery::quote::go_quote;

/// What a strict read of a body found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Read {
    /// The unknown and duplicate fields, in document order.
    pub strict: Vec<String>,
    /// The error decoding fails with: a value the field's type does not take.
    pub error: Option<String>,
    /// Whether the read saw the whole body and nothing [`super::prune::prune`] would change
    /// in the value it holds: no unknown field, no number that may be a whole float where an
    /// integer belongs. False when in doubt.
    pub nothing_to_prune: bool,
}

/// The JSON `bytes` read as the definition `root` (nothing found when the bytes are not
/// JSON: the decoder that read them first reports that).
pub fn read(bytes: &[u8], root: &str, defs: &Map<String, Value>) -> Read {
    let Some(shape) = Shape::root(root, defs) else {
        return Read::default();
    };
    walk(bytes, shape, defs, false)
        .map(|(read, _, _)| read)
        .unwrap_or_default()
}

/// [`read`], and the JSON value the bytes hold (as `serde_json` reads it: a key given twice
/// keeps its last value), made in the same pass. None when `root` is no definition, or the
/// bytes are not one JSON value, or the pass could not be sure to make `serde_json`'s value:
/// a structure where a scalar belongs (read apart, it would escape the nesting limit), or
/// `serde_json`'s private raw-value key (which its own reading treats apart); the caller
/// then decodes as usual and reads with [`read`].
pub fn read_value(bytes: &[u8], root: &str, defs: &Map<String, Value>) -> Option<(Read, Value)> {
    if bytes
        .windows(RAW_VALUE_TOKEN.len())
        .any(|w| w == RAW_VALUE_TOKEN.as_bytes())
    {
        return None;
    }
    match walk(bytes, Shape::root(root, defs)?, defs, true)? {
        (read, value, true) => Some((read, value)),
        (_, _, false) => None,
    }
}

/// The duplicate fields of a patch body, read as Go reads it into untyped maps.
pub fn duplicate_errors(bytes: &[u8]) -> Vec<String> {
    walk(bytes, Shape::Untyped, &Map::new(), false)
        .map(|(read, _, _)| read.strict)
        .unwrap_or_default()
}

/// The key `serde_json` (with its `raw_value` feature) reads a map's first key as a raw
/// value's wrapper by.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// The strict read of the first JSON value in `bytes`, the value if `build` (else null), and
/// whether nothing but white space follows it.
fn walk(
    bytes: &[u8],
    shape: Shape<'_>,
    defs: &Map<String, Value>,
    build: bool,
) -> Option<(Read, Value, bool)> {
    let mut found = Found::default();
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let walk = Walk {
        shape,
        defs,
        place: Place::default(),
        found: &mut found,
        build,
    };
    let value = walk.deserialize(&mut deserializer).ok()?;
    let whole = deserializer.end().is_ok();
    let read = Read {
        strict: found.strict,
        error: found.stopped.or(found.noted),
        nothing_to_prune: !found.prunable && whole,
    };
    Some((read, value, whole))
}

/// What the keys of an object are.
#[derive(Clone, Copy)]
enum Fields<'s> {
    /// A struct's fields (its definition, its properties).
    Struct(&'s str, &'s Map<String, Value>),
    /// A map's keys, all with values of this shape.
    Values(Shape<'s>),
}

#[derive(Default)]
struct Found {
    strict: Vec<String>,
    /// The first type error noted (the decoder went on).
    noted: Option<String>,
    /// The error the decoder stopped at.
    stopped: Option<String>,
    /// Something pruning removes or converts may be in the value.
    prunable: bool,
}

/// One value of a strict read: a [`DeserializeSeed`] that notes unknown and duplicate
/// fields and values of the wrong type as it goes, and makes the value when `build` (else
/// null, skipping what it does not look into as `serde_json` skips it: at any depth).
struct Walk<'s, 'f> {
    shape: Shape<'s>,
    defs: &'s Map<String, Value>,
    place: Place<'s>,
    found: &'f mut Found,
    build: bool,
}

impl Walk<'_, '_> {
    /// The next value of `seq`, made or skipped.
    fn any_element<'de, A: SeqAccess<'de>>(&self, seq: &mut A) -> Result<Option<Value>, A::Error> {
        if self.build {
            seq.next_element::<Value>()
        } else {
            Ok(seq.next_element::<IgnoredAny>()?.map(|_| Value::Null))
        }
    }

    /// The next value of `map`, made or skipped.
    fn any_value<'de, A: MapAccess<'de>>(&self, map: &mut A) -> Result<Value, A::Error> {
        if self.build {
            map.next_value::<Value>()
        } else {
            map.next_value::<IgnoredAny>().map(|_| Value::Null)
        }
    }
}

impl Walk<'_, '_> {
    /// Judges `got` for this value's type, keeping what the decoder would report.
    fn judge(&mut self, got: Got<'_>) {
        if self.found.stopped.is_some() {
            return;
        }
        let Some(refusal) = fit::json(self.shape, &self.place, got, self.defs) else {
            return;
        };
        let (message, stops) = match refusal {
            Refusal::Type {
                value,
                go_type,
                stops,
            } => (self.place.type_error(&value, &go_type), stops),
            Refusal::Other { message, stops } => (message, stops),
        };
        if stops {
            self.found.stopped = Some(message);
        } else if self.found.noted.is_none() {
            self.found.noted = Some(message);
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(mut self, deserializer: D) -> Result<Value, D::Error> {
        match self.shape {
            Shape::Raw if self.build => Value::deserialize(deserializer),
            Shape::Raw => deserializer
                .deserialize_ignored_any(IgnoredAny)
                .map(|_| Value::Null),
            Shape::Scalar(scalar) => {
                let raw: &RawValue = serde::Deserialize::deserialize(deserializer)?;
                self.judge(Got::of(raw.get()));
                // A fraction or exponent, or `-0` (which serde_json reads as a float).
                if matches!(scalar, Scalar::Int32 | Scalar::Int64 | Scalar::IntOrString)
                    && (raw.get().contains(['.', 'e', 'E']) || raw.get().trim() == "-0")
                {
                    self.found.prunable = true;
                }
                match raw.get().as_bytes().first() {
                    _ if !self.build => Ok(Value::Null),
                    Some(b'[' | b'{') => Err(serde::de::Error::custom("a structure in a scalar")),
                    // A number `Quantity.UnmarshalJSON` reads by its text (`1e3` stays `1e3`,
                    // where the float it stands for would be written `1k`).
                    Some(b'-' | b'0'..=b'9') if scalar == Scalar::Quantity => {
                        match quantity::canonical(raw.get()) {
                            Ok(text) => Ok(Value::String(text)),
                            Err(_) => {
                                serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)
                            }
                        }
                    }
                    _ => serde_json::from_str(raw.get()).map_err(serde::de::Error::custom),
                }
            }
            _ => deserializer.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for Walk<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(mut self, v: bool) -> Result<Value, E> {
        self.judge(Got::Bool(""));
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(mut self, v: i64) -> Result<Value, E> {
        self.judge(Got::Number(""));
        Ok(Value::from(v))
    }
    fn visit_u64<E>(mut self, v: u64) -> Result<Value, E> {
        self.judge(Got::Number(""));
        Ok(Value::from(v))
    }
    fn visit_f64<E>(mut self, v: f64) -> Result<Value, E> {
        self.judge(Got::Number(""));
        Ok(Value::from(v))
    }
    fn visit_str<E>(mut self, v: &str) -> Result<Value, E> {
        self.judge(Got::String(""));
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(mut self, v: String) -> Result<Value, E> {
        self.judge(Got::String(""));
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        let item = match self.shape {
            Shape::Slice(items) => Shape::of(items, self.defs),
            Shape::Untyped => Shape::Untyped,
            _ => {
                self.judge(Got::Array(""));
                while let Some(item) = self.any_element(&mut seq)? {
                    items.extend(self.build.then_some(item));
                }
                return Ok(Value::Array(items));
            }
        };
        let mut i = 0;
        loop {
            let walk = Walk {
                shape: item,
                defs: self.defs,
                place: self.place.item(i),
                found: &mut *self.found,
                build: self.build,
            };
            match seq.next_element_seed(walk)? {
                Some(value) => items.extend(self.build.then_some(value)),
                None => return Ok(Value::Array(items)),
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        let fields = match self.shape {
            Shape::Struct(name, properties) => Fields::Struct(name, properties),
            Shape::Map(values) => Fields::Values(Shape::of(values, self.defs)),
            Shape::Untyped => Fields::Values(Shape::Untyped),
            _ => {
                self.judge(Got::Object);
                while let Some(key) = map.next_key::<String>()? {
                    let value = self.any_value(&mut map)?;
                    if self.build {
                        object.insert(key, value);
                    }
                }
                return Ok(Value::Object(object));
            }
        };
        while let Some(key) = map.next_key::<String>()? {
            let (shape, place) = match fields {
                Fields::Struct(name, properties) => {
                    let place = self.place.field(name, &key);
                    let Some(schema) = properties.get(&key) else {
                        self.found.prunable = true;
                        self.found
                            .strict
                            .push(format!("unknown field {}", go_quote(&place.path())));
                        let value = self.any_value(&mut map)?;
                        if self.build {
                            object.insert(key, value);
                        }
                        continue;
                    };
                    (Shape::of(schema, self.defs), place)
                }
                Fields::Values(shape) => (shape, self.place.value(&key)),
            };
            if object.contains_key(&key) {
                self.found
                    .strict
                    .push(format!("duplicate field {}", go_quote(&place.path())));
            }
            // Without `build`, the keys are kept (with null) to find those given twice.
            let value = map.next_value_seed(Walk {
                shape,
                defs: self.defs,
                place,
                found: &mut *self.found,
                build: self.build,
            })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::openapi;
    use crate::registry;

    fn defs() -> &'static Map<String, Value> {
        openapi::documents(&registry::kinds()).definitions()
    }

    fn pod(body: &[u8]) -> Read {
        read(body, "io.k8s.api.core.v1.Pod", defs())
    }

    #[test]
    fn a_read_that_finds_nothing_to_prune_leaves_pruning_nothing_to_do() {
        let bodies: [(&[u8], bool); 8] = [
            (br#"{"spec":{"priority":-0}}"#, false),
            (br#"{"metadata":{"name":"p","labels":{"a":"1"}},"spec":{"priority":3,"containers":[{"name":"c","ports":[{"containerPort":80}]}]}}"#, true),
            (br#"{"metadata":{"name":"p"},"spec":{"overhead":{"cpu":"1.5"},"containers":[{"name":"c","resources":{"limits":{"cpu":0.5}}}]}}"#, true),
            (br#"{"metadata":{"name":"p","bogus":1}}"#, false),
            (br#"{"spec":{"containers":[{"name":"c","x":{}}]}}"#, false),
            (br#"{"spec":{"priority":3.0}}"#, false),
            (br#"{"spec":{"containers":[{"name":"c","ports":[{"containerPort":8e1}]}]}}"#, false),
            (br#"{"spec":{"priority":3} } x"#, false),
        ];
        for (body, clean) in bodies {
            let shown = String::from_utf8_lossy(body);
            let read = pod(body);
            assert_eq!(read.nothing_to_prune, clean, "{shown}");
            if let Ok(value) = serde_json::from_slice::<Value>(body) {
                let mut pruned = value.clone();
                super::super::prune::prune(&mut pruned, "io.k8s.api.core.v1.Pod", defs());
                assert_eq!(pruned == value, clean, "{shown}");
            }
        }
    }

    #[test]
    fn quantities_given_as_numbers_are_read_by_their_text() {
        let body =
            br#"{"spec":{"overhead":{"cpu":1e3,"memory":1.500,"a":0.5,"b":"0.5","c":null}}}"#;
        let (_, value) = read_value(body, "io.k8s.api.core.v1.Pod", defs()).unwrap();
        // `Quantity.UnmarshalJSON` reads the text: `1e3` and `1.500` pass its fast path's
        // test and are kept; `0.5` is written canonically. Strings are left to the registry.
        assert_eq!(
            value["spec"]["overhead"],
            serde_json::json!({"cpu": "1e3", "memory": "1.500", "a": "500m", "b": "0.5", "c": null})
        );
    }

    #[test]
    fn the_value_read_in_the_same_pass_is_the_one_serde_json_reads() {
        let bodies: [&[u8]; 5] = [
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"1","a":"2"},"foo":[1,{"x":null}]},
                "spec":{"containers":[{"name":"c","image":"i","bogus":{"x":1.5},"ports":[{"containerPort":80}]}],
                "zzz":true,"priority":-3},"bar":[1],"status":{"phase":"\u00e9t\u00e9"}}"#,
            br#"{"metadata":{"managedFields":[{"fieldsV1":{"f:data":{},"f:data":{"k":1}}}]},"spec":{"overhead":{"cpu":"1"}}}"#,
            br#"{"spec":{"containers":"not a list","nodeName":7,"hostNetwork":"yes"}, "kind":7}"#,
            b" {\n\"metadata\": {\"name\": \"x\"}}\n ",
            b"{}",
        ];
        for body in bodies {
            let (read, value) = read_value(body, "io.k8s.api.core.v1.Pod", defs()).unwrap();
            let expected: Value = serde_json::from_slice(body).unwrap();
            assert_eq!(value, expected, "{}", String::from_utf8_lossy(body));
            assert_eq!(read, pod(body));
        }
        for bad in [&b"{} {}"[..], b"{\"a\":", b"[1,]", b""] {
            assert!(read_value(bad, "io.k8s.api.core.v1.Pod", defs()).is_none());
        }
        assert!(read_value(b"{}", "no.such.Definition", defs()).is_none());
        // What the pass cannot be sure to read as serde_json does is left to it.
        let raw = br#"{"spec":{"nodeSelector":{"$serde_json::private::RawValue":"1"}}}"#;
        assert!(read_value(raw, "io.k8s.api.core.v1.Pod", defs()).is_none());
        let structure = br#"{"spec":{"nodeName":{"a":[1]}}}"#;
        assert!(read_value(structure, "io.k8s.api.core.v1.Pod", defs()).is_none());
        assert!(pod(structure).error.is_some());
        // Without a value to make, what is not looked into is skipped at any depth.
        let deep = format!(
            r#"{{"zzz":{}{},"spec":{{"nodeName":7}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert!(read_value(deep.as_bytes(), "io.k8s.api.core.v1.Pod", defs()).is_none());
        let read = pod(deep.as_bytes());
        assert_eq!(read.strict, ["unknown field \"zzz\""]);
        assert!(read.error.is_some());
    }

    #[test]
    fn a_strict_body_names_unknown_and_duplicate_fields_in_document_order() {
        let body = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"1","a":"2"},"foo":1},
            "spec":{"containers":[{"name":"c","image":"i","bogus":{"x":1}}],"zzz":true},"bar":[1]}"#;
        assert_eq!(
            pod(body).strict,
            [
                "duplicate field \"metadata.labels.a\"",
                "unknown field \"metadata.foo\"",
                "unknown field \"spec.containers[0].bogus\"",
                "unknown field \"spec.zzz\"",
                "unknown field \"bar\"",
            ]
        );
        // Raw values are not looked into; quantities and int-or-strings are values.
        let body = br#"{"metadata":{"managedFields":[{"fieldsV1":{"f:data":{},"f:data":{}}}]},
            "spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1"}},
            "ports":[{"containerPort":1}],"livenessProbe":{"httpGet":{"port":"http"}}}]}}"#;
        let clean = Read {
            nothing_to_prune: true,
            ..Read::default()
        };
        assert_eq!(pod(body), clean);
    }

    #[test]
    fn the_first_value_of_the_wrong_type_in_document_order_is_the_error() {
        let cm = read(
            br#"{"data":{"x":"1","y":5},"metadata":{"labels":{"a":true}}}"#,
            "io.k8s.api.core.v1.ConfigMap",
            defs(),
        );
        assert_eq!(
            cm.error.as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
            )
        );
        let body = br#"{"spec":{"containers":[{"name":"c","ports":[{"containerPort":"80"},{"containerPort":1.5}]}]}}"#;
        assert_eq!(
            pod(body).error.as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field \
                 ContainerPort.spec.containers.ports.containerPort of type int32"
            )
        );
        let body = br#"{"spec":{"containers":[{"name":"c","ports":[{"containerPort":1.5}]}]}}"#;
        assert_eq!(
            pod(body).error.as_deref(),
            Some(
                "json: cannot unmarshal number 1.5 into Go struct field \
                 ContainerPort.spec.containers.ports.containerPort of type int32"
            )
        );
        // Objects and lists of the wrong kind, and named types.
        let body = br#"{"metadata":"x"}"#;
        assert_eq!(
            pod(body).error.as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field Pod.metadata of type v1.ObjectMeta"
            )
        );
        let body = br#"{"spec":{"containers":{"name":"c"}}}"#;
        assert_eq!(
            pod(body).error.as_deref(),
            Some(
                "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container"
            )
        );
        let body = br#"{"spec":{"restartPolicy":1,"hostNetwork":"yes"}}"#;
        assert_eq!(
            pod(body).error.as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field PodSpec.spec.restartPolicy of type v1.RestartPolicy"
            )
        );
        // Nothing inside a value of the wrong kind is looked at.
        let body = br#"{"spec":{"containers":"x","zzz":1}}"#;
        assert_eq!(pod(body).strict, ["unknown field \"spec.zzz\""]);
    }

    #[test]
    fn a_type_reading_its_own_value_stops_the_decoder_and_its_error_wins() {
        // The label is noted first, the port stops the decoder.
        let body = br#"{"metadata":{"labels":{"a":1}},"spec":{"containers":[{"name":"c",
            "livenessProbe":{"httpGet":{"port":true}},"resources":{"limits":{"cpu":false}}}]}}"#;
        assert_eq!(
            pod(body).error.as_deref(),
            Some(
                "json: cannot unmarshal bool into Go struct field \
                 HTTPGetAction.spec.containers.livenessProbe.httpGet.port of type int32"
            )
        );
        let body = br#"{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1x"}}}]}}"#;
        assert_eq!(
            pod(body).error.as_deref(),
            Some(
                "quantities must match the regular expression \
                 '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            )
        );
        let body = br#"{"metadata":{"creationTimestamp":5}}"#;
        assert_eq!(
            pod(body).error.as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field \
                 ObjectMeta.metadata.creationTimestamp of type string"
            )
        );
        let secret = read(
            br#"{"data":{"a":"aGk"}}"#,
            "io.k8s.api.core.v1.Secret",
            defs(),
        );
        assert_eq!(
            secret.error.as_deref(),
            Some("illegal base64 data at input byte 0")
        );
    }

    #[test]
    fn patch_bodies_count_duplicates_only() {
        assert_eq!(
            duplicate_errors(br#"{"a":{"b":1,"b":[1,{"c":1,"c":2}]},"d":true}"#),
            ["duplicate field \"a.b\"", "duplicate field \"a.b[1].c\""]
        );
    }
}
