//! Decoded JSON values as Go sees and prints them, for error messages worded as
//! kube-apiserver's: a value decoded into `interface{}` is a `map[string]interface {}`, a
//! `[]interface {}`, a `string`, a `bool`, a number (`int64` where apimachinery's decoders
//! keep integers, `float64` otherwise) or `nil`; `fmt`'s `%v` ([`go_fmt`]) and `%#v`
//! ([`go_sharp_v`]) print them (a float as [`go_float`] does), `encoding/json` writes floats
//! as [`json_float`] does.

use serde_json::{Map, Value};

use super::quote::go_quote;

/// The Go type a decoded JSON value has (`reflect.TypeOf`), for type comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoType {
    /// `nil` (JSON null).
    Nil,
    /// `bool`.
    Bool,
    /// `int64` (an integer where apimachinery's decoders keep integers).
    Int,
    /// `float64`.
    Float,
    /// `string`.
    String,
    /// `[]interface {}` (an array).
    Slice,
    /// `map[string]interface {}` (an object).
    Map,
}

impl GoType {
    /// The type of `v` decoded with integers kept (`int64`).
    pub fn of(v: &Value) -> Self {
        match v {
            Value::Null => GoType::Nil,
            Value::Bool(_) => GoType::Bool,
            Value::Number(n) if n.is_i64() => GoType::Int,
            Value::Number(_) => GoType::Float,
            Value::String(_) => GoType::String,
            Value::Array(_) => GoType::Slice,
            Value::Object(_) => GoType::Map,
        }
    }

    /// The type's name as `%T` prints it (`%!s(<nil>)` for nil, as `%s` of a type prints it).
    pub fn name(self) -> &'static str {
        match self {
            GoType::Nil => "%!s(<nil>)",
            GoType::Bool => "bool",
            GoType::Int => "int64",
            GoType::Float => "float64",
            GoType::String => "string",
            GoType::Slice => "[]interface {}",
            GoType::Map => "map[string]interface {}",
        }
    }

    /// The JSON value's kind as `encoding/json`'s errors name it (`number`, `object`, ...).
    pub fn json_kind(self) -> &'static str {
        match self {
            GoType::Nil => "null",
            GoType::Bool => "bool",
            GoType::Int | GoType::Float => "number",
            GoType::String => "string",
            GoType::Slice => "array",
            GoType::Map => "object",
        }
    }

    /// The type's kind as `reflect.Kind` prints it (`int64`, `slice`, `map`, ...).
    pub fn kind(self) -> &'static str {
        match self {
            GoType::Nil => "invalid",
            GoType::Slice => "slice",
            GoType::Map => "map",
            other => other.name(),
        }
    }
}

/// A value as Go's `%v` prints the decoded JSON (`map[k:v]` with sorted keys, `[a b]`).
pub fn go_fmt(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) => go_float(f),
            (None, None) => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(l) => go_fmt_list(l),
        Value::Object(m) => go_fmt_map(m),
    }
}

/// A list as `%v` prints it.
pub fn go_fmt_list(l: &[Value]) -> String {
    let items: Vec<String> = l.iter().map(go_fmt).collect();
    format!("[{}]", items.join(" "))
}

/// A map as `%v` prints it.
pub fn go_fmt_map(m: &Map<String, Value>) -> String {
    let items: Vec<String> = sorted(m)
        .into_iter()
        .map(|(k, v)| format!("{k}:{}", go_fmt(v)))
        .collect();
    format!("map[{}]", items.join(" "))
}

/// A scalar as Go's `%s` prints it (`%!s(int64=1)` for a non-string).
pub fn go_fmt_s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "%!s(<nil>)".to_string(),
        Value::Bool(_) | Value::Number(_) => {
            format!("%!s({}={})", GoType::of(v).name(), go_fmt(v))
        }
        other => go_fmt(other),
    }
}

/// A value as Go's `%#v` prints the decoded JSON (`map[string]interface {}{"a":"b"}`).
pub fn go_sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".to_string(),
        Value::String(s) => go_quote(s),
        Value::Array(l) => {
            let items: Vec<String> = l.iter().map(go_sharp_v).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(m) => {
            let items: Vec<String> = sorted(m)
                .into_iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_sharp_v(v)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", items.join(", "))
        }
        scalar => go_fmt(scalar),
    }
}

fn sorted(m: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

/// `v` with every number a float, as `sigs.k8s.io/yaml` decodes a document into
/// `interface{}` (an applied configuration).
pub fn as_floats(v: &Value) -> Value {
    match v {
        Value::Number(n) => n.as_f64().map_or(Value::Null, Value::from),
        Value::Array(l) => Value::Array(l.iter().map(as_floats).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), as_floats(v))).collect())
        }
        other => other.clone(),
    }
}

/// A float64 as Go's `%v` and `%#v` print it (`strconv.FormatFloat(f, 'g', -1, 64)`): the
/// shortest digits that read back as `f`, with an exponent of at least two digits when it is
/// below -4 or from 6 up (`1e+06`, `1.5e-05`, `123456`), `+Inf`, `-Inf` and `NaN`.
pub fn go_float(f: f64) -> String {
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if f.is_nan() {
        return "NaN".to_string();
    }
    let (mantissa, exp) = scientific(f);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

/// A float as `encoding/json` writes it (shortest digits, an exponent from 1e+21 and below
/// 1e-06, written `1e+21` and `1e-7`).
pub fn json_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let (mantissa, exp) = scientific(f);
        if exp < 0 {
            format!("{mantissa}e-{}", -exp)
        } else {
            format!("{mantissa}e+{exp:02}")
        }
    } else {
        format!("{f}")
    }
}

/// The shortest digits of `f` as `d.ddd` and its decimal exponent.
fn scientific(f: f64) -> (String, i32) {
    let sci = format!("{f:e}");
    match sci.split_once('e') {
        Some((mantissa, exp)) => (mantissa.to_string(), exp.parse().unwrap_or(0)),
        None => (sci, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_as_fmt_and_encoding_json_print_them() {
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(1.5e-7), "1.5e-07");
        assert_eq!(go_float(-2.5e22), "-2.5e+22");
        assert_eq!(go_float(0.0), "0");
        assert_eq!(go_float(-0.0), "-0");
        assert_eq!(go_float(999999.0), "999999");
        assert_eq!(go_float(f64::INFINITY), "+Inf");
        assert_eq!(go_float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(go_float(f64::NAN), "NaN");
        assert_eq!(json_float(1.5), "1.5");
        assert_eq!(json_float(1.0), "1");
        assert_eq!(json_float(1e6), "1000000");
        assert_eq!(json_float(1e21), "1e+21");
        assert_eq!(json_float(1.5e-7), "1.5e-7");
        assert_eq!(json_float(1e-10), "1e-10");
    }

    #[test]
    fn decoded_values_print_as_percent_v_and_percent_sharp_v() {
        let v = json!({"name": "a", "list": ["x", 1.5, true, null], "n": 5});
        assert_eq!(go_fmt(&v), "map[list:[x 1.5 true <nil>] n:5 name:a]");
        assert_eq!(
            go_sharp_v(&as_floats(&v)),
            "map[string]interface {}{\"list\":[]interface {}{\"x\", 1.5, true, interface {}(nil)}, \
             \"n\":5, \"name\":\"a\"}"
        );
        assert_eq!(go_sharp_v(&as_floats(&json!(1000000))), "1e+06");
        assert_eq!(GoType::of(&json!([])).kind(), "slice");
        assert_eq!(GoType::of(&json!(1)).kind(), "int64");
    }
}
