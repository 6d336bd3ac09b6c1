//! Values as structured-merge-diff orders and compares them ([`Ordered`], [`compare_values`],
//! [`values_equal`]) and as Go's `encoding/json` writes them ([`go_json`]), for the key
//! elements of paths and the values of sets.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::apimachinery::go_value::go_float;
use crate::apimachinery::quote::go_quote;

/// A JSON value ordered as structured-merge-diff orders values: numbers (ints and floats
/// compared numerically) before strings, bools, lists, maps and null.
#[derive(Debug, Clone)]
pub struct Ordered(pub Value);

impl PartialEq for Ordered {
    fn eq(&self, other: &Self) -> bool {
        compare_values(&self.0, &other.0) == Ordering::Equal
    }
}

impl Eq for Ordered {}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_values(&self.0, &other.0)
    }
}

/// SMD's `value.Compare`.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    use Value::*;
    let float = |v: &Value| match v {
        Number(n) if n.is_f64() => n.as_f64(),
        _ => None,
    };
    let int = |v: &Value| match v {
        Number(n) if !n.is_f64() => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from)),
        _ => None,
    };
    let (fa, fb, ia, ib) = (float(a), float(b), int(a), int(b));
    if let Some(x) = fa {
        return match (fb, ib) {
            (Some(y), _) => x.total_cmp(&y),
            (None, Some(y)) => x.total_cmp(&(y as f64)),
            _ => Ordering::Less,
        };
    }
    if let Some(y) = fb {
        return match ia {
            Some(x) => (x as f64).total_cmp(&y),
            None => Ordering::Greater,
        };
    }
    match (ia, ib) {
        (Some(x), Some(y)) => return x.cmp(&y),
        (Some(_), None) => return Ordering::Less,
        (None, Some(_)) => return Ordering::Greater,
        _ => {}
    }
    match (a, b) {
        (String(x), String(y)) => x.cmp(y),
        (String(_), _) => Ordering::Less,
        (_, String(_)) => Ordering::Greater,
        (Bool(x), Bool(y)) => x.cmp(y),
        (Bool(_), _) => Ordering::Less,
        (_, Bool(_)) => Ordering::Greater,
        (Array(x), Array(y)) => {
            for (l, r) in x.iter().zip(y) {
                let c = compare_values(l, r);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Array(_), _) => Ordering::Less,
        (_, Array(_)) => Ordering::Greater,
        (Object(x), Object(y)) => compare_maps(x, y),
        (Object(_), _) => Ordering::Less,
        (_, Object(_)) => Ordering::Greater,
        _ => Ordering::Equal,
    }
}

/// SMD's `MapCompare`: the keys in lexical order, the first difference decides.
fn compare_maps(l: &Map<String, Value>, r: &Map<String, Value>) -> Ordering {
    if l.is_empty() && r.is_empty() {
        return Ordering::Equal;
    }
    let keys: BTreeSet<&String> = l.keys().chain(r.keys()).collect();
    for (i, key) in keys.into_iter().enumerate() {
        let c = if i == l.len() {
            Ordering::Less
        } else if i == r.len() {
            Ordering::Greater
        } else {
            match (l.get(key), r.get(key)) {
                (None, _) => Ordering::Greater,
                (_, None) => Ordering::Less,
                (Some(a), Some(b)) => compare_values(a, b),
            }
        };
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}

/// SMD's `value.Equals`: ints and floats compare numerically, the rest structurally.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            x.as_f64() == y.as_f64()
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(l, r)| values_equal(l, r))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// SMD's `value.ToString`: strings quoted as Go's `%q`, numbers and bools plain.
pub(super) fn value_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::String(s) => go_quote(s),
        Value::Number(n) => match n.as_f64().filter(|_| n.is_f64()) {
            Some(f) => go_float(f),
            None => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(value_string).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", value_string(v)))
            .collect(),
    }
}

/// A JSON value as Go's `encoding/json` writes it (maps sorted by key, HTML characters
/// escaped in strings).
pub fn go_json(v: &Value) -> String {
    match v {
        Value::String(s) => go_json_string(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_json).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}:{}", go_json_string(k), go_json(v)))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        other => other.to_string(),
    }
}

/// A JSON string as Go's `encoding/json` writes it.
pub fn go_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_order_as_smd_orders_them() {
        let order = [
            json!(-1),
            json!(1.5),
            json!(2),
            json!("a"),
            json!("b"),
            json!(false),
            json!(true),
            json!([1]),
            json!({"a": 1}),
            Value::Null,
        ];
        for w in order.windows(2) {
            assert_eq!(compare_values(&w[0], &w[1]), Ordering::Less, "{w:?}");
        }
        assert_eq!(compare_values(&json!(1), &json!(1.0)), Ordering::Equal);
        assert!(values_equal(&json!({"a": [1]}), &json!({"a": [1.0]})));
        assert_eq!(
            go_json_string("a<b>&\"c\""),
            r#""a\u003cb\u003e\u0026\"c\"""#
        );
        assert_eq!(value_string(&json!(1e22)), "1e+22");
        assert_eq!(value_string(&json!(0.5)), "0.5");
    }
}
