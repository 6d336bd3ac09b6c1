//! What every walk of a typed value shares: where the walk is in the schema ([`Ty`], which
//! also names a list's items as SMD names them), the shape of a value on either side, and the
//! errors a walk finds ([`TypedErrors`]).

use serde_json::{Map, Value};

use crate::fieldmanager::fieldpath::{Ordered, Path, PathElement, path_string};
use crate::schema::{ListType, ObjectType, Schema};

/// Problems SMD finds walking a value, each at its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedErrors(pub Vec<(String, String)>);

impl std::fmt::Display for TypedErrors {
    /// SMD's `ValidationErrors.Error`: one error alone, or `errors:` and one per line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let line = |(path, message): &(String, String)| format!("{path}: {message}");
        match self.0.as_slice() {
            [one] => write!(f, "{}", line(one)),
            many => {
                write!(f, "errors:")?;
                for e in many {
                    write!(f, "\n  {}", line(e))?;
                }
                Ok(())
            }
        }
    }
}

pub(super) type Result<T> = std::result::Result<T, TypedErrors>;

/// Where a walk is in the schema: a field path, or the items of the list there.
#[derive(Clone)]
pub(super) struct Ty<'a> {
    schema: &'a Schema,
    path: String,
    item: bool,
}

impl<'a> Ty<'a> {
    /// The root of an object of `schema`.
    pub(super) fn root(schema: &'a Schema) -> Ty<'a> {
        Ty {
            schema,
            path: String::new(),
            item: false,
        }
    }

    /// The field `name` of the struct or map here.
    pub(super) fn field(&self, name: &str) -> Ty<'a> {
        let mut path = String::with_capacity(self.path.len() + 1 + name.len());
        if !self.path.is_empty() {
            path.push_str(&self.path);
            path.push('.');
        }
        path.push_str(name);
        Ty {
            schema: self.schema,
            path,
            item: false,
        }
    }

    /// The items of the list here.
    pub(super) fn item(&self) -> Ty<'a> {
        Ty {
            schema: self.schema,
            path: self.path.clone(),
            item: true,
        }
    }

    /// What kind of object is here (struct, map, atomic).
    pub(super) fn object(&self) -> ObjectType {
        self.schema.object_type(&self.path, self.item)
    }

    /// What kind of list is here (atomic, set, keyed).
    pub(super) fn list(&self) -> ListType {
        if self.item {
            // A list of lists is atomic.
            ListType::Atomic
        } else {
            self.schema.list_type(&self.path)
        }
    }

    /// SMD's `listItemToPathElement`: the element naming `item` of this list.
    pub(super) fn element(
        &self,
        list: &ListType,
        item: &Value,
    ) -> std::result::Result<PathElement, String> {
        match list {
            ListType::Map(keys) => {
                let Some(fields) = item.as_object() else {
                    return Err(if item.is_null() {
                        "associative list with keys may not have a null element".into()
                    } else {
                        "associative list with keys may not have non-map elements".into()
                    });
                };
                let mut key: Vec<(String, Ordered)> = keys
                    .iter()
                    .filter_map(|k| {
                        let v = fields
                            .get(k)
                            .or_else(|| self.schema.key_default_of(&self.path, k))?;
                        Some((k.clone(), Ordered(v.clone())))
                    })
                    .collect();
                if key.is_empty() {
                    let quoted: Vec<String> = keys
                        .iter()
                        .map(|k| crate::apimachinery::quote::go_quote(k))
                        .collect();
                    return Err(format!(
                        "associative list with keys has an element that omits all key fields \
                         [{}] (and doesn't have default values for any key fields)",
                        quoted.join(" ")
                    ));
                }
                key.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(PathElement::Key(key))
            }
            _ => match item {
                Value::Object(_) => {
                    Err("associative list without keys has an element that's a map type".into())
                }
                Value::Array(_) => {
                    Err("not supported: associative list with lists as elements".into())
                }
                Value::Null => Err(
                    "associative list without keys has an element that's an explicit null".into(),
                ),
                v => Ok(PathElement::Value(Ordered(v.clone()))),
            },
        }
    }

    /// The elements of `items`, or the errors of those that have none.
    pub(super) fn elements(
        &self,
        list: &ListType,
        items: &[Value],
        path: &Path,
    ) -> Result<Vec<PathElement>> {
        let mut out = Vec::with_capacity(items.len());
        let mut errors = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match self.element(list, item) {
                Ok(pe) => out.push(pe),
                Err(e) => errors.push((path_string(path), format!("element {i}: {e}"))),
            }
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(TypedErrors(errors))
        }
    }
}

/// What a value is, as a walk tells them apart.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Object,
    List,
    Scalar,
}

/// The shape of `v` (None for null).
pub(super) fn shape(v: &Value) -> Option<Shape> {
    match v {
        Value::Null => None,
        Value::Object(_) => Some(Shape::Object),
        Value::Array(_) => Some(Shape::List),
        _ => Some(Shape::Scalar),
    }
}

/// The shape both sides share (null takes the other side's); None when they differ.
pub(super) fn common_shape(l: Option<&Value>, r: Option<&Value>) -> Option<Shape> {
    match (l.and_then(shape), r.and_then(shape)) {
        (Some(a), Some(b)) if a == b => Some(a),
        (Some(_), Some(_)) => None,
        (Some(a), None) | (None, Some(a)) => Some(a),
        (None, None) => Some(Shape::Scalar),
    }
}

/// Whether `v` is not an object with fields (absent, null, another value, or `{}`).
pub(super) fn empty_object(v: Option<&Value>) -> bool {
    v.and_then(Value::as_object).is_none_or(Map::is_empty)
}

/// Whether `v` is not a list with items (absent, null, another value, or `[]`).
pub(super) fn empty_list(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array).is_none_or(Vec::is_empty)
}
