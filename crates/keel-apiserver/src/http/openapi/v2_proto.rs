//! The Swagger 2.0 document in protobuf, the form kubectl before 1.28 downloads
//! (`Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`) for `explain`,
//! `create -f` and `apply -f`: gnostic's `openapi.v2.Document` (`openapiv2/OpenAPIv2.proto`),
//! made from the JSON document as gnostic's `ParseDocument` makes it, for the parts keel's
//! document has (info, paths with their operations, parameters and responses, definitions,
//! the bearer token security definition).
//!
//! The encoding is written by hand, field by field with gnostic's field numbers: proto3, so
//! empty strings, `false` and empty lists are left out; vendor extensions (`x-...`) and
//! `default` values are `Any`s whose `yaml` is the value's JSON text (JSON is YAML), which is
//! how kube-openapi reads them back.

use serde_json::{Map, Value};

/// A protobuf message being written.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn key(&mut self, field: u32, wire: u8) {
        varint(&mut self.0, (u64::from(field) << 3) | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.key(field, 2);
        varint(&mut self.0, bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    fn message(&mut self, field: u32, m: Message) {
        self.bytes(field, &m.0);
    }

    fn boolean(&mut self, field: u32, b: bool) {
        if b {
            self.key(field, 0);
            self.0.push(1);
        }
    }

    fn int64(&mut self, field: u32, i: i64) {
        if i != 0 {
            self.key(field, 0);
            varint(&mut self.0, i as u64);
        }
    }

    fn double(&mut self, field: u32, f: f64) {
        if f != 0.0 {
            self.key(field, 1);
            self.0.extend_from_slice(&f.to_le_bytes());
        }
    }

    fn strings(&mut self, field: u32, value: Option<&Value>) {
        for s in value.and_then(Value::as_array).into_iter().flatten() {
            if let Some(s) = s.as_str() {
                self.bytes(field, s.as_bytes());
            }
        }
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn flag(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// `Any{yaml}`: the value as JSON text.
fn any(value: &Value) -> Message {
    let mut m = Message::default();
    m.string(2, &value.to_string());
    m
}

/// `NamedAny`s of the vendor extensions of `v`.
fn extensions(m: &mut Message, field: u32, v: &Value) {
    for (name, value) in v.as_object().into_iter().flatten() {
        if name.starts_with("x-") {
            let mut named = Message::default();
            named.string(1, name);
            named.message(2, any(value));
            m.message(field, named);
        }
    }
}

/// The protobuf `Document` of a Swagger 2.0 JSON document.
pub fn document(doc: &Value) -> Vec<u8> {
    let mut m = Message::default();
    m.string(1, text(doc, "swagger"));
    let mut info = Message::default();
    info.string(1, text(&doc["info"], "title"));
    info.string(2, text(&doc["info"], "version"));
    m.message(2, info);
    let mut paths = Message::default();
    for (name, item) in doc["paths"].as_object().into_iter().flatten() {
        let mut named = Message::default();
        named.string(1, name);
        named.message(2, path_item(item));
        paths.message(2, named);
    }
    m.message(8, paths);
    let mut definitions = Message::default();
    for (name, schema) in doc["definitions"].as_object().into_iter().flatten() {
        definitions.message(1, named_schema(name, schema));
    }
    m.message(9, definitions);
    for requirement in doc["security"].as_array().into_iter().flatten() {
        let mut r = Message::default();
        for (name, scopes) in requirement.as_object().into_iter().flatten() {
            let mut named = Message::default();
            named.string(1, name);
            let mut array = Message::default();
            array.strings(1, Some(scopes));
            named.message(2, array);
            r.message(1, named);
        }
        m.message(12, r);
    }
    let mut security = Message::default();
    for (name, scheme) in doc["securityDefinitions"].as_object().into_iter().flatten() {
        let mut key = Message::default();
        key.string(1, text(scheme, "type"));
        key.string(2, text(scheme, "name"));
        key.string(3, text(scheme, "in"));
        key.string(4, text(scheme, "description"));
        let mut item = Message::default();
        item.message(2, key);
        let mut named = Message::default();
        named.string(1, name);
        named.message(2, item);
        security.message(1, named);
    }
    m.message(13, security);
    m.0
}

fn path_item(item: &Value) -> Message {
    let mut m = Message::default();
    for (method, field) in [
        ("get", 2),
        ("put", 3),
        ("post", 4),
        ("delete", 5),
        ("patch", 8),
    ] {
        if let Some(op) = item.get(method) {
            m.message(field, operation(op));
        }
    }
    for param in item["parameters"].as_array().into_iter().flatten() {
        m.message(9, parameter(param));
    }
    m
}

fn operation(op: &Value) -> Message {
    let mut m = Message::default();
    m.strings(1, op.get("tags"));
    m.string(3, text(op, "description"));
    m.string(5, text(op, "operationId"));
    m.strings(6, op.get("produces"));
    m.strings(7, op.get("consumes"));
    for param in op["parameters"].as_array().into_iter().flatten() {
        m.message(8, parameter(param));
    }
    let mut responses = Message::default();
    for (code, response) in op["responses"].as_object().into_iter().flatten() {
        let mut r = Message::default();
        r.string(1, text(response, "description"));
        if let Some(schema) = response.get("schema") {
            let mut item = Message::default();
            item.message(1, schema_message(schema));
            r.message(2, item);
        }
        let mut value = Message::default();
        value.message(1, r);
        let mut named = Message::default();
        named.string(1, code);
        named.message(2, value);
        responses.message(1, named);
    }
    m.message(9, responses);
    m.strings(10, op.get("schemes"));
    extensions(&mut m, 13, op);
    m
}

/// `ParametersItem{parameter: Parameter{body_parameter | non_body_parameter}}`.
fn parameter(p: &Value) -> Message {
    let mut parameter = Message::default();
    if text(p, "in") == "body" {
        let mut body = Message::default();
        body.string(1, text(p, "description"));
        body.string(2, text(p, "name"));
        body.string(3, "body");
        body.boolean(4, flag(p, "required"));
        if let Some(schema) = p.get("schema") {
            body.message(5, schema_message(schema));
        }
        parameter.message(1, body);
    } else {
        // Query and path sub-schemas share their first fields; `type` and `uniqueItems`
        // sit one field later in the query form (after `allow_empty_value`).
        let query = text(p, "in") == "query";
        let mut sub = Message::default();
        sub.boolean(1, flag(p, "required"));
        sub.string(2, text(p, "in"));
        sub.string(3, text(p, "description"));
        sub.string(4, text(p, "name"));
        sub.string(if query { 6 } else { 5 }, text(p, "type"));
        sub.boolean(if query { 20 } else { 19 }, flag(p, "uniqueItems"));
        let mut non_body = Message::default();
        non_body.message(if query { 3 } else { 4 }, sub);
        parameter.message(2, non_body);
    }
    let mut item = Message::default();
    item.message(1, parameter);
    item
}

fn named_schema(name: &str, schema: &Value) -> Message {
    let mut m = Message::default();
    m.string(1, name);
    m.message(2, schema_message(schema));
    m
}

fn schema_message(s: &Value) -> Message {
    let mut m = Message::default();
    let empty = Map::new();
    let o = s.as_object().unwrap_or(&empty);
    m.string(1, text(s, "$ref"));
    m.string(2, text(s, "format"));
    m.string(3, text(s, "title"));
    m.string(4, text(s, "description"));
    if let Some(default) = o.get("default") {
        m.message(5, any(default));
    }
    let number = |k: &str| o.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let integer = |k: &str| o.get(k).and_then(Value::as_i64).unwrap_or(0);
    m.double(6, number("multipleOf"));
    m.double(7, number("maximum"));
    m.boolean(8, flag(s, "exclusiveMaximum"));
    m.double(9, number("minimum"));
    m.boolean(10, flag(s, "exclusiveMinimum"));
    m.int64(11, integer("maxLength"));
    m.int64(12, integer("minLength"));
    m.string(13, text(s, "pattern"));
    m.int64(14, integer("maxItems"));
    m.int64(15, integer("minItems"));
    m.boolean(16, flag(s, "uniqueItems"));
    m.int64(17, integer("maxProperties"));
    m.int64(18, integer("minProperties"));
    m.strings(19, o.get("required"));
    for value in o
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(20, any(value));
    }
    match o.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Message::default();
            item.key(2, 0);
            item.0.push(u8::from(*b));
            m.message(21, item);
        }
        Some(schema @ Value::Object(_)) => {
            let mut item = Message::default();
            item.message(1, schema_message(schema));
            m.message(21, item);
        }
        _ => {}
    }
    match o.get("type") {
        Some(Value::String(t)) => {
            let mut item = Message::default();
            item.string(1, t);
            m.message(22, item);
        }
        Some(types @ Value::Array(_)) => {
            let mut item = Message::default();
            item.strings(1, Some(types));
            m.message(22, item);
        }
        _ => {}
    }
    if let Some(items) = o.get("items") {
        let mut item = Message::default();
        match items {
            Value::Array(list) => list.iter().for_each(|i| item.message(1, schema_message(i))),
            single => item.message(1, schema_message(single)),
        }
        m.message(23, item);
    }
    for schema in o
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(24, schema_message(schema));
    }
    if let Some(Value::Object(properties)) = o.get("properties") {
        let mut p = Message::default();
        for (name, schema) in properties {
            p.message(1, named_schema(name, schema));
        }
        m.message(25, p);
    }
    m.boolean(27, flag(s, "readOnly"));
    if let Some(example) = o.get("example") {
        m.message(30, any(example));
    }
    extensions(&mut m, 31, s);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_written_with_gnostics_numbers() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1"},
            "paths": {},
            "definitions": {"a.B": {"type": "object", "x-k": [1]}},
        });
        let bytes = document(&doc);
        // swagger = 1: "2.0".
        assert_eq!(&bytes[..5], b"\x0a\x032.0");
        // info = 2: {title = 1, version = 2}.
        assert_eq!(&bytes[5..7], b"\x12\x10");
        assert_eq!(&bytes[7..19], b"\x0a\x0aKubernetes");
        // paths = 8 (empty), then definitions = 9.
        assert_eq!(&bytes[23..25], b"\x42\x00");
        assert_eq!(bytes[25], 0x4a);
        let schema = schema_message(&json!({"type": "object", "x-k": [1]})).0;
        // type = 22 (TypeItem{value: "object"}), vendor_extension = 31 (NamedAny{"x-k",
        // Any{yaml: "[1]"}}).
        assert_eq!(&schema[..2], [0xb2, 0x01]);
        assert_eq!(&schema[2..11], b"\x08\x0a\x06object");
        assert_eq!(&schema[11..13], [0xfa, 0x01]);
        assert!(schema.ends_with(b"\x12\x03[1]"));
    }
}
