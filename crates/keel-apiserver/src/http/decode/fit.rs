//! Whether a value fits a Go type, and what each of kube-apiserver's readers says when it
//! does not:
//!
//! - [`json`]: `encoding/json` (as `sigs.k8s.io/json` runs it) decoding a body. A value of
//!   the wrong kind is an `UnmarshalTypeError` (`number`, `number 1.5` for an integer field,
//!   `string`, `bool`, `object`, `array`), noted and passed over; `null` fits everything.
//!   `Time`, `IntOrString` and `Quantity` read their values themselves: the first two
//!   decode a string or an `int32` with `json.Unmarshal` (its error gains the field's
//!   context), `Quantity` parses with `resource.ParseQuantity`; their errors stop the decoder.
//!   A `[]byte` is base64 (`illegal base64 data at input byte 4`, noted) or, as Go also
//!   takes it, a list of bytes.
//! - [`converted`]: `runtime.DefaultUnstructuredConverter.FromUnstructured` (a strategic
//!   merge patch's result): integers are `int64` and convert to any integer, a float only
//!   when it has no fraction; the first error ends it (`cannot convert int64 to string`,
//!   `unrecognized type: int32`, `cannot restore struct from: string`, ...).
//! - [`typed`]: structured-merge-diff validating an applied configuration (every number a
//!   `float64`): `expected string, got &value.valueUnstructured{Value:5}`, `expected
//!   numeric (int or float), got string`, `expected boolean, got &{5}`, `expected map, got
//!   &{x}`, `expected list, got &{x}`, `expected any scalar, got &{map[a:b]}`
//!   (`IntOrString` and `Quantity` take any scalar).

use serde_json::{Map, Value};

use super::{Place, Scalar, Shape};
use crate::apimachinery::go_value::{GoType, as_floats, go_fmt, go_sharp_v, json_float};
use crate::apimachinery::quantity::Quantity as ResourceQuantity;

/// A value of a body as Go's JSON decoder meets it: its kind and, for scalars, its text.
#[derive(Debug, Clone, Copy)]
pub enum Got<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(&'a str),
    /// A number, as written (empty where the reader did not keep it).
    Number(&'a str),
    /// A string, as written: quotes and escapes included.
    String(&'a str),
    /// An object.
    Object,
    /// A list, as written (empty where the reader did not keep it).
    Array(&'a str),
}

impl<'a> Got<'a> {
    /// The value written as `raw` (one JSON value).
    pub fn of(raw: &'a str) -> Got<'a> {
        match raw.trim_start().as_bytes().first() {
            Some(b'n') => Got::Null,
            Some(b't' | b'f') => Got::Bool(raw.trim()),
            Some(b'"') => Got::String(raw.trim()),
            Some(b'{') => Got::Object,
            Some(b'[') => Got::Array(raw),
            _ => Got::Number(raw.trim()),
        }
    }

    /// How an `UnmarshalTypeError` names the value (`number 1.5` when `literal`).
    fn word(self, literal: bool) -> String {
        match self {
            Got::Null => "null".to_string(),
            Got::Bool(_) => "bool".to_string(),
            Got::Number(n) if literal => format!("number {n}"),
            Got::Number(_) => "number".to_string(),
            Got::String(_) => "string".to_string(),
            Got::Object => "object".to_string(),
            Got::Array(_) => "array".to_string(),
        }
    }
}

/// Why Go's JSON decoder refuses a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// An `UnmarshalTypeError`: the value (`number`, `string`, ...) and the type wanted; the
    /// decoder notes the first and goes on, unless `stops` (it came from a type's own
    /// `UnmarshalJSON`).
    Type {
        /// The value as the error names it.
        value: String,
        /// The Go type wanted.
        go_type: String,
        /// Whether the decoder stops here.
        stops: bool,
    },
    /// An error of its own (base64, quantities), as it is.
    Other {
        /// The error.
        message: String,
        /// Whether the decoder stops here.
        stops: bool,
    },
}

/// What Go's JSON decoder says about `got` for a value of `shape` at `place` (which names
/// its Go type where `k8s.io/api` does); None when it fits.
pub fn json(
    shape: Shape<'_>,
    place: &Place<'_>,
    got: Got<'_>,
    defs: &Map<String, Value>,
) -> Option<Refusal> {
    let mismatch = |literal: bool| {
        Some(Refusal::Type {
            value: got.word(literal),
            go_type: place.go_type(shape, defs),
            stops: false,
        })
    };
    // A type's own UnmarshalJSON decoding into a Go `string` or `int32`.
    let inner = |literal: bool, go_type: &str| {
        Some(Refusal::Type {
            value: got.word(literal),
            go_type: go_type.to_string(),
            stops: true,
        })
    };
    let quantity = |text: &str| {
        ResourceQuantity::parse(text)
            .err()
            .map(|error| Refusal::Other {
                message: error.to_string(),
                stops: true,
            })
    };
    match (shape, got) {
        (_, Got::Null) | (Shape::Raw | Shape::Untyped, _) => None,
        (Shape::Struct(..) | Shape::Map(_), Got::Object) | (Shape::Slice(_), Got::Array(_)) => None,
        (Shape::Struct(..) | Shape::Map(_) | Shape::Slice(_), _) => mismatch(false),
        (Shape::Scalar(scalar), got) => match (scalar, got) {
            (Scalar::String | Scalar::Time | Scalar::IntOrString, Got::String(_))
            | (Scalar::Bool, Got::Bool(_))
            | (Scalar::Float, Got::Number(_)) => None,
            (Scalar::Int32, Got::Number(n)) => (!fits_int(n, 32)).then(|| mismatch(true)).flatten(),
            (Scalar::Int64, Got::Number(n)) => (!fits_int(n, 64)).then(|| mismatch(true)).flatten(),
            (Scalar::Bytes, Got::String(raw)) => {
                let text: String = serde_json::from_str(raw).unwrap_or_default();
                go_base64(text.as_bytes())
                    .err()
                    .map(|offset| Refusal::Other {
                        message: base64_error(offset),
                        stops: false,
                    })
            }
            (Scalar::Bytes, Got::Array(raw)) => byte_list(raw),
            (Scalar::Time, _) => inner(false, "string"),
            (Scalar::IntOrString, Got::Number(n)) => {
                (!fits_int(n, 32)).then(|| inner(true, "int32")).flatten()
            }
            (Scalar::IntOrString, _) => inner(false, "int32"),
            (Scalar::Quantity, Got::String(raw)) => quantity(raw[1..raw.len() - 1].trim()),
            (Scalar::Quantity, Got::Number(text) | Got::Bool(text)) => quantity(text),
            (Scalar::Quantity, _) => quantity("{"),
            _ => mismatch(false),
        },
    }
}

/// A list given for a `[]byte`: each item decoded into a `uint8`.
fn byte_list(raw: &str) -> Option<Refusal> {
    let items: Vec<Value> = serde_json::from_str(raw).unwrap_or_default();
    items.iter().find_map(|item| {
        let value = match item {
            Value::Null => return None,
            Value::Number(n) if n.as_u64().is_some_and(|b| b <= 255) => return None,
            Value::Number(n) => format!("number {n}"),
            Value::Bool(_) => "bool".into(),
            Value::String(_) => "string".into(),
            Value::Array(_) => "array".into(),
            Value::Object(_) => "object".into(),
        };
        Some(Refusal::Type {
            value,
            go_type: "uint8".into(),
            stops: false,
        })
    })
}

/// Whether the number written `n` is an integer of `bits` bits (`strconv.ParseInt`).
fn fits_int(n: &str, bits: u32) -> bool {
    match n.parse::<i64>() {
        Ok(i) => bits == 64 || i32::try_from(i).is_ok(),
        Err(_) => false,
    }
}

/// What apimachinery's unstructured converter says about `value` for a field of `shape` at
/// `place` (which names its Go type where `k8s.io/api` does); None when it converts.
/// Containers are judged as containers; their contents one by one by the caller.
pub fn converted(
    shape: Shape<'_>,
    place: &Place<'_>,
    value: &Value,
    defs: &Map<String, Value>,
) -> Option<String> {
    let got = GoType::of(value);
    let int_kind = |scalar: Scalar| {
        if scalar == Scalar::Int32 {
            "int32"
        } else {
            "int64"
        }
    };
    let integral = |v: &Value| v.as_f64().is_some_and(|f| f.fract() == 0.0);
    match (shape, got) {
        (_, GoType::Nil) | (Shape::Raw | Shape::Untyped, _) => None,
        (Shape::Struct(..), GoType::Map) | (Shape::Map(_), GoType::Map) => None,
        (Shape::Slice(_), GoType::Slice) => None,
        (Shape::Struct(..), _) => Some(format!("cannot restore struct from: {}", got.kind())),
        (Shape::Map(_), _) => Some(format!("cannot restore map from {}", got.kind())),
        (Shape::Slice(_), _) => Some(format!("cannot restore slice from {}", got.kind())),
        (Shape::Scalar(scalar), _) => match (scalar, got) {
            (Scalar::String | Scalar::Time | Scalar::IntOrString, GoType::String)
            | (Scalar::Bool, GoType::Bool)
            | (Scalar::Int32 | Scalar::Int64, GoType::Int)
            | (Scalar::Float, GoType::Int | GoType::Float) => None,
            (Scalar::Int32 | Scalar::Int64, GoType::Float) if integral(value) => None,
            (Scalar::Int32 | Scalar::Int64, GoType::Float) => {
                Some(format!("cannot convert float64 to {}", int_kind(scalar)))
            }
            (Scalar::String, GoType::Int) => Some(format!(
                "cannot convert int64 to {}",
                place.go_type(shape, defs)
            )),
            (Scalar::String, _) => Some("unrecognized type: string".into()),
            (Scalar::Bool, _) => Some("unrecognized type: bool".into()),
            (Scalar::Int32 | Scalar::Int64, _) => {
                Some(format!("unrecognized type: {}", int_kind(scalar)))
            }
            (Scalar::Float, _) => Some("unrecognized type: float64".into()),
            (Scalar::Bytes, GoType::String) => {
                let text = value.as_str().unwrap_or("");
                go_base64(text.as_bytes())
                    .err()
                    .map(|offset| format!("error decoding from json: {}", base64_error(offset)))
            }
            (Scalar::Bytes, GoType::Slice) => {
                value
                    .as_array()?
                    .iter()
                    .find_map(|item| match GoType::of(item) {
                        GoType::Nil | GoType::Int => None,
                        GoType::Float if integral(item) => None,
                        GoType::Float => Some("cannot convert float64 to uint8".to_string()),
                        _ => Some("unrecognized type: uint8".to_string()),
                    })
            }
            (Scalar::Bytes, _) => Some(format!("cannot restore slice from {}", got.kind())),
            (Scalar::Time, _) => Some(format!(
                "json: cannot unmarshal {} into Go value of type string",
                got.json_kind()
            )),
            (Scalar::IntOrString, GoType::Int | GoType::Float) => {
                let text = match value.as_i64() {
                    Some(i) => i.to_string(),
                    None => json_float(value.as_f64().unwrap_or(0.0)),
                };
                (!fits_int(&text, 32)).then(|| {
                    format!("json: cannot unmarshal number {text} into Go value of type int32")
                })
            }
            (Scalar::IntOrString, _) => Some(format!(
                "json: cannot unmarshal {} into Go value of type int32",
                got.json_kind()
            )),
            (Scalar::Quantity, _) => {
                let text = match value {
                    Value::String(s) => s.trim().to_string(),
                    Value::Number(n) => match n.as_i64() {
                        Some(i) => i.to_string(),
                        None => json_float(n.as_f64().unwrap_or(0.0)),
                    },
                    Value::Bool(b) => b.to_string(),
                    _ => "{".to_string(),
                };
                ResourceQuantity::parse(&text).err().map(|e| e.to_string())
            }
        },
    }
}

/// What structured-merge-diff's validation says about `value` (of an applied configuration)
/// for a field of `shape`; None when it fits. Containers are judged as containers.
pub fn typed(shape: Shape<'_>, value: &Value) -> Option<String> {
    let got = GoType::of(value);
    // A value.Value as %v prints it: a pointer to a struct holding the decoded value.
    let v = || format!("&{{{}}}", go_fmt(&as_floats(value)));
    match (shape, got) {
        (_, GoType::Nil) | (Shape::Raw | Shape::Untyped, _) => None,
        (Shape::Struct(..) | Shape::Map(_), GoType::Map) | (Shape::Slice(_), GoType::Slice) => None,
        (Shape::Struct(..) | Shape::Map(_), _) => Some(format!("expected map, got {}", v())),
        (Shape::Slice(_), _) => Some(format!("expected list, got {}", v())),
        (Shape::Scalar(scalar), _) => match (scalar, got) {
            (Scalar::String | Scalar::Bytes | Scalar::Time, GoType::String)
            | (Scalar::Int32 | Scalar::Int64 | Scalar::Float, GoType::Int | GoType::Float)
            | (Scalar::Bool, GoType::Bool) => None,
            (Scalar::IntOrString | Scalar::Quantity, GoType::Map | GoType::Slice) => {
                Some(format!("expected any scalar, got {}", v()))
            }
            (Scalar::IntOrString | Scalar::Quantity, _) => None,
            (Scalar::String | Scalar::Bytes | Scalar::Time, _) => Some(format!(
                "expected string, got &value.valueUnstructured{{Value:{}}}",
                go_sharp_v(&as_floats(value))
            )),
            (Scalar::Int32 | Scalar::Int64 | Scalar::Float, _) => Some(format!(
                "expected numeric (int or float), got {}",
                GoType::of(&as_floats(value)).name()
            )),
            (Scalar::Bool, _) => Some(format!("expected boolean, got {}", v())),
        },
    }
}

/// `base64.CorruptInputError`.
fn base64_error(offset: usize) -> String {
    format!("illegal base64 data at input byte {offset}")
}

/// Go's `base64.StdEncoding.Decode` of `src`, checked: Ok, or the offset its
/// `CorruptInputError` names. Line breaks are skipped; padding is required.
pub fn go_base64(src: &[u8]) -> Result<(), usize> {
    let valid = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    let newline = |c: u8| c == b'\n' || c == b'\r';
    let mut si = 0;
    while si < src.len() {
        // One quantum of four characters (decodeQuantum).
        let mut j = 0;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(());
                }
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if valid(c) {
                j += 1;
                continue;
            }
            if newline(c) {
                continue;
            }
            if c != b'=' {
                return Err(si - 1);
            }
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    while si < src.len() && newline(src[si]) {
                        si += 1;
                    }
                    if si == src.len() {
                        return Err(src.len());
                    }
                    if src[si] != b'=' {
                        return Err(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < src.len() && newline(src[si]) {
                si += 1;
            }
            if si < src.len() {
                return Err(si);
            }
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::quantity::QuantityError;
    use crate::http::openapi;
    use crate::registry;
    use serde_json::json;

    fn defs() -> &'static Map<String, Value> {
        openapi::documents(&registry::kinds()).definitions()
    }

    fn scalar(s: Scalar) -> Shape<'static> {
        Shape::Scalar(s)
    }

    fn json_says(shape: Shape<'_>, raw: &str) -> Option<Refusal> {
        json(shape, &Place::default(), Got::of(raw), defs())
    }

    fn type_error(value: &str, go_type: &str, stops: bool) -> Option<Refusal> {
        Some(Refusal::Type {
            value: value.into(),
            go_type: go_type.into(),
            stops,
        })
    }

    #[test]
    fn the_json_decoder_takes_each_kind_where_go_takes_it() {
        use Scalar::*;
        assert_eq!(
            json_says(scalar(String), "5"),
            type_error("number", "string", false)
        );
        assert_eq!(
            json_says(scalar(String), "true"),
            type_error("bool", "string", false)
        );
        assert_eq!(
            json_says(scalar(String), "{}"),
            type_error("object", "string", false)
        );
        assert_eq!(json_says(scalar(String), "null"), None);
        assert_eq!(
            json_says(scalar(Int32), "\"80\""),
            type_error("string", "int32", false)
        );
        assert_eq!(
            json_says(scalar(Int32), "1.5"),
            type_error("number 1.5", "int32", false)
        );
        assert_eq!(
            json_says(scalar(Int32), "1.0"),
            type_error("number 1.0", "int32", false)
        );
        assert_eq!(
            json_says(scalar(Int32), "3000000000"),
            type_error("number 3000000000", "int32", false)
        );
        assert_eq!(json_says(scalar(Int64), "3000000000"), None);
        assert_eq!(json_says(scalar(Int64), "-7"), None);
        assert_eq!(
            json_says(scalar(Bool), "\"true\""),
            type_error("string", "bool", false)
        );
        assert_eq!(
            json_says(scalar(Bool), "1"),
            type_error("number", "bool", false)
        );
        assert_eq!(json_says(scalar(IntOrString), "\"http\""), None);
        assert_eq!(json_says(scalar(IntOrString), "8080"), None);
        assert_eq!(
            json_says(scalar(IntOrString), "true"),
            type_error("bool", "int32", true)
        );
        assert_eq!(
            json_says(scalar(IntOrString), "1.5"),
            type_error("number 1.5", "int32", true)
        );
        assert_eq!(
            json_says(scalar(Time), "5"),
            type_error("number", "string", true)
        );
        assert_eq!(json_says(scalar(Quantity), "\"100m\""), None);
        assert_eq!(json_says(scalar(Quantity), "0.5"), None);
        assert_eq!(
            json_says(scalar(Quantity), "true"),
            Some(Refusal::Other {
                message: QuantityError::Format.to_string(),
                stops: true
            })
        );
        assert_eq!(
            json_says(scalar(Quantity), "\"1mi\""),
            Some(Refusal::Other {
                message: QuantityError::Suffix.to_string(),
                stops: true
            })
        );
        assert_eq!(json_says(scalar(Bytes), "\"aGk=\""), None);
        assert_eq!(json_says(scalar(Bytes), "[104, 105]"), None);
        assert_eq!(
            json_says(scalar(Bytes), "\"aGk\""),
            Some(Refusal::Other {
                message: "illegal base64 data at input byte 0".into(),
                stops: false
            })
        );
        assert_eq!(
            json_says(scalar(Bytes), "[300]"),
            type_error("number 300", "uint8", false)
        );
        let map = Shape::Map(
            &defs()["io.k8s.api.core.v1.ConfigMap"]["properties"]["data"]["additionalProperties"],
        );
        assert_eq!(
            json_says(map, "[]"),
            type_error("array", "map[string]string", false)
        );
        assert_eq!(json_says(Shape::Raw, "[]"), None);
    }

    #[test]
    fn the_converter_converts_what_go_converts() {
        use Scalar::*;
        let says = |s: Scalar, v: Value| converted(scalar(s), &Place::default(), &v, defs());
        let root = Place::default();
        let protocol = root.field("io.k8s.api.core.v1.ContainerPort", "protocol");
        assert_eq!(
            says(String, json!(5)).unwrap(),
            "cannot convert int64 to string"
        );
        assert_eq!(
            converted(scalar(String), &protocol, &json!(5), defs()).unwrap(),
            "cannot convert int64 to v1.Protocol"
        );
        assert_eq!(
            says(String, json!(1.5)).unwrap(),
            "unrecognized type: string"
        );
        assert_eq!(
            says(String, json!(true)).unwrap(),
            "unrecognized type: string"
        );
        assert_eq!(says(Int32, json!("1")).unwrap(), "unrecognized type: int32");
        assert_eq!(
            says(Int32, json!(1.5)).unwrap(),
            "cannot convert float64 to int32"
        );
        assert_eq!(says(Int32, json!(2.0)), None);
        assert_eq!(says(Bool, json!(1)).unwrap(), "unrecognized type: bool");
        assert_eq!(
            says(IntOrString, json!(1.5)).unwrap(),
            "json: cannot unmarshal number 1.5 into Go value of type int32"
        );
        assert_eq!(says(IntOrString, json!(8.0)), None);
        assert_eq!(
            says(Time, json!(5)).unwrap(),
            "json: cannot unmarshal number into Go value of type string"
        );
        assert_eq!(
            says(Quantity, json!(false)).unwrap(),
            QuantityError::Format.to_string()
        );
        assert_eq!(
            says(Bytes, json!("a")).unwrap(),
            "error decoding from json: illegal base64 data at input byte 0"
        );
        let properties = defs()["io.k8s.api.core.v1.ConfigMap"]["properties"]
            .as_object()
            .unwrap();
        let strukt = Shape::Struct("io.k8s.api.core.v1.ConfigMap", properties);
        assert_eq!(
            converted(strukt, &Place::default(), &json!("x"), defs()).unwrap(),
            "cannot restore struct from: string"
        );
        let map = Shape::Map(&properties["data"]["additionalProperties"]);
        assert_eq!(
            converted(map, &Place::default(), &json!([1]), defs()).unwrap(),
            "cannot restore map from slice"
        );
    }

    #[test]
    fn structured_merge_diff_words_values_as_go_prints_them() {
        use Scalar::*;
        assert_eq!(
            typed(scalar(String), &json!(5)).unwrap(),
            "expected string, got &value.valueUnstructured{Value:5}"
        );
        assert_eq!(
            typed(scalar(String), &json!(["10.0.0.1"])).unwrap(),
            "expected string, got &value.valueUnstructured{Value:[]interface {}{\"10.0.0.1\"}}"
        );
        assert_eq!(
            typed(scalar(Int32), &json!("80")).unwrap(),
            "expected numeric (int or float), got string"
        );
        assert_eq!(typed(scalar(Int32), &json!(1.5)), None);
        assert_eq!(
            typed(scalar(Bool), &json!("yes")).unwrap(),
            "expected boolean, got &{yes}"
        );
        assert_eq!(
            typed(scalar(Quantity), &json!({"a": 1})).unwrap(),
            "expected any scalar, got &{map[a:1]}"
        );
        assert_eq!(
            typed(Shape::Slice(&Value::Null), &json!("x")).unwrap(),
            "expected list, got &{x}"
        );
    }

    #[test]
    fn base64_is_checked_as_go_decodes_it() {
        assert_eq!(go_base64(b""), Ok(()));
        assert_eq!(go_base64(b"aGVsbG8="), Ok(()));
        assert_eq!(go_base64(b"aGVs\nbG8="), Ok(()));
        assert_eq!(go_base64(b"aGk"), Err(0));
        assert_eq!(go_base64(b"aGVsbG8"), Err(4));
        assert_eq!(go_base64(b"a"), Err(0));
        assert_eq!(go_base64(b"aGk!"), Err(3));
        assert_eq!(go_base64(b"a==="), Err(1));
        assert_eq!(go_base64(b"aG=="), Ok(()));
        assert_eq!(go_base64(b"aG="), Err(3));
        assert_eq!(go_base64(b"aG=x"), Err(2));
        assert_eq!(go_base64(b"aGk=x"), Err(4));
    }
}
