//! Paths: a field of an object as the [`PathElement`]s from its root, written as FieldsV1
//! keys (`f:`, `k:`, `v:`, `i:`) and as SMD prints them.

use serde_json::Value;

use super::value::{Ordered, go_json, go_json_string, value_string};

/// One step of a path. The derived order is SMD's: fields, then keys, values, indices.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathElement {
    /// A field of a struct or a key of a map (`f:`).
    Field(String),
    /// The item of a keyed list with these key fields, sorted by name (`k:`).
    Key(Vec<(String, Ordered)>),
    /// The item of a set with this value (`v:`).
    Value(Ordered),
    /// The item at this index of an atomic list (`i:`).
    Index(usize),
}

impl PathElement {
    /// A field element.
    pub fn field(name: &str) -> PathElement {
        PathElement::Field(name.to_string())
    }

    /// The element as a FieldsV1 key (`f:a`, `k:{"name":"c"}`, `v:"x"`, `i:0`).
    pub fn to_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let mut out = String::from("k:{");
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&go_json_string(name));
                    out.push(':');
                    out.push_str(&go_json(&value.0));
                }
                out.push('}');
                out
            }
            PathElement::Value(value) => format!("v:{}", go_json(&value.0)),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Reads a FieldsV1 key; `Ok(None)` for an element type this reader does not know.
    pub fn from_key(key: &str) -> Result<Option<PathElement>, String> {
        let b = key.as_bytes();
        if b.len() < 2 {
            return Err("key must be 2 characters long:".to_string());
        }
        if b[1] != b':' {
            return Err(format!("missing colon: {key}"));
        }
        let rest = &key[2..];
        Ok(Some(match b[0] {
            b'f' => PathElement::Field(rest.to_string()),
            b'v' => {
                let value: Value = serde_json::from_str(rest).map_err(|e| e.to_string())?;
                PathElement::Value(Ordered(value))
            }
            b'k' => {
                let value: Value = serde_json::from_str(rest).map_err(|e| e.to_string())?;
                let Value::Object(map) = value else {
                    return Err(format!("key element is not a JSON object: {rest}"));
                };
                // serde_json's map is sorted by name, as SMD sorts key fields.
                PathElement::Key(map.into_iter().map(|(k, v)| (k, Ordered(v))).collect())
            }
            b'i' => PathElement::Index(rest.parse().map_err(|e| format!("{e}"))?),
            _ => return Ok(None),
        }))
    }
}

impl std::fmt::Display for PathElement {
    /// SMD's `PathElement.String`: `.name`, `[name="c",port=80]`, `[="x"]`, `[0]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{k}={}", value_string(&v.0)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", value_string(&v.0)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A field of an object: the elements from the root.
pub type Path = Vec<PathElement>;

/// A path as SMD prints it (`.spec.containers[name="c"].image`).
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}
