//! Objects read into their kind's Go types, as kube-apiserver's decoders read them. The
//! kind's OpenAPI schema ([`super::openapi`]) says which Go type each field has
//! ([`Shape`]); three readers use it, each deciding and wording as its upstream
//! counterpart does:
//!
//! - [`strict`]: `sigs.k8s.io/json` reading a body into the Go type (creates, updates, and
//!   the object a JSON or merge patch makes): the unknown and duplicate fields
//!   `fieldValidation` reports, and the error that fails the request, the first value of the
//!   wrong type (`json: cannot unmarshal number into Go struct field ConfigMap.data of type
//!   string`; the decoder notes it and goes on) unless a type with its own `UnmarshalJSON`
//!   (`Time`, `IntOrString`, `Quantity`) fails, which stops the decoder and wins;
//! - [`prune`]: a decoded object with what its schema does not declare removed, as decoding
//!   into Go types drops it; the same walk judges each value as apimachinery's unstructured
//!   converter does (strategic merge patches: `cannot convert int64 to string`) and as
//!   structured-merge-diff's validation of a typed value does (server-side apply:
//!   `.data.a: expected string, got &value.valueUnstructured{Value:5}`);
//! - [`fit`]: what each of them says about one value of one Go type.
//!
//! One reader needs no schema: [`yaml_strict`], `yaml.v2` reading a YAML body or an applied
//! configuration strictly into `interface{}`, which finds the keys a YAML (or JSON) document
//! repeats, by line.
//!
//! Go names a type by its package and name (`v1.ObjectMeta`, `[]v1.Container`,
//! `map[string]string`); the schema has the structs' names, [`names`] the named string and
//! map types of `k8s.io/api` it does not carry.

pub mod fit;
pub mod names;
pub mod prune;
pub mod strict;
pub mod yaml_strict;

use serde_json::{Map, Value};

use crate::schema::quantities::QUANTITY;
use crate::schema::resolve;

const TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";

/// A Go scalar type, as far as decoding goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// `string`, or a named string type (`v1.Protocol`).
    String,
    /// `[]byte`, written as a base64 string (`format: byte`).
    Bytes,
    /// `bool`.
    Bool,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `float64`.
    Float,
    /// `metav1.Time` or `metav1.MicroTime`: a string, read by their own `UnmarshalJSON`.
    Time,
    /// `intstr.IntOrString`: a string or an `int32`, read by its own `UnmarshalJSON`.
    IntOrString,
    /// `resource.Quantity`: a string or a number in quantity syntax, read by its own
    /// `UnmarshalJSON`.
    Quantity,
}

/// A schema as the Go type it stands for.
#[derive(Debug, Clone, Copy)]
pub enum Shape<'a> {
    /// A struct: its definition's name and its properties.
    Struct(&'a str, &'a Map<String, Value>),
    /// A map with string keys: its values' schema.
    Map(&'a Value),
    /// A slice: its items' schema.
    Slice(&'a Value),
    /// A scalar.
    Scalar(Scalar),
    /// `map[string]interface{}`, as a patch body is read: duplicates count, nothing else.
    Untyped,
    /// Kept raw (`FieldsV1`, `RawExtension`, preserved unknown fields): anything goes.
    Raw,
}

impl<'a> Shape<'a> {
    /// The shape of the definition `root` (None when `defs` lacks it).
    pub fn root(root: &'a str, defs: &'a Map<String, Value>) -> Option<Shape<'a>> {
        let schema = defs.get(root)?;
        Some(match schema.get("properties").and_then(Value::as_object) {
            Some(properties) => Shape::Struct(root, properties),
            None => Shape::of(schema, defs),
        })
    }

    /// The shape of `schema`, its `$ref`s followed into `defs`.
    pub fn of(schema: &'a Value, defs: &'a Map<String, Value>) -> Shape<'a> {
        let (name, schema) = resolve(schema, defs);
        match name {
            Some(TIME | MICRO_TIME) => return Shape::Scalar(Scalar::Time),
            Some(INT_OR_STRING) => return Shape::Scalar(Scalar::IntOrString),
            Some(QUANTITY) => return Shape::Scalar(Scalar::Quantity),
            _ => {}
        }
        let flag = |name: &str| schema.get(name) == Some(&Value::Bool(true));
        if flag("x-kubernetes-preserve-unknown-fields") {
            return Shape::Raw;
        }
        if flag("x-kubernetes-int-or-string") {
            return Shape::Scalar(Scalar::IntOrString);
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            return Shape::Struct(name.unwrap_or(""), properties);
        }
        if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
            return Shape::Map(values);
        }
        if let Some(items) = schema.get("items") {
            return Shape::Slice(items);
        }
        let text = |field: &str| schema.get(field).and_then(Value::as_str).unwrap_or("");
        Shape::Scalar(match (text("type"), text("format")) {
            ("string", "byte") => Scalar::Bytes,
            ("string", _) => Scalar::String,
            ("boolean", _) => Scalar::Bool,
            ("integer", "int32") => Scalar::Int32,
            ("integer", _) => Scalar::Int64,
            ("number", _) => Scalar::Float,
            _ => return Shape::Raw,
        })
    }

    /// The Go type's name as `reflect.Type.String()` writes it (`v1.ObjectMeta`,
    /// `map[string]string`, `[]uint8`); `named` is the name `k8s.io/api` gives it, if any.
    pub fn go_type(self, named: Option<&str>, defs: &Map<String, Value>) -> String {
        if let Some(named) = named {
            return named.to_string();
        }
        match self {
            Shape::Struct(definition, _) => go_struct(definition),
            Shape::Map(values) => {
                format!("map[string]{}", Shape::of(values, defs).go_type(None, defs))
            }
            Shape::Slice(items) => format!("[]{}", Shape::of(items, defs).go_type(None, defs)),
            Shape::Scalar(scalar) => match scalar {
                Scalar::String => "string",
                Scalar::Bytes => "[]uint8",
                Scalar::Bool => "bool",
                Scalar::Int32 => "int32",
                Scalar::Int64 => "int64",
                Scalar::Float => "float64",
                Scalar::Time => "v1.Time",
                Scalar::IntOrString => "intstr.IntOrString",
                Scalar::Quantity => "resource.Quantity",
            }
            .to_string(),
            Shape::Untyped | Shape::Raw => "interface {}".to_string(),
        }
    }
}

/// `v1.Container` for `io.k8s.api.core.v1.Container`: the package's name and the type's.
fn go_struct(definition: &str) -> String {
    let mut segments = definition.rsplit('.');
    let name = segments.next().unwrap_or("");
    match segments.next() {
        Some(package) => format!("{package}.{name}"),
        None => name.to_string(),
    }
}

/// Where a value is, as the decoders name it: the steps from the object's root, each
/// borrowing its parent, spelt out only when a message names the place (most values fit and
/// are never named, so reading a body allocates nothing per field for it).
#[derive(Debug, Clone, Copy, Default)]
pub struct Place<'a> {
    parent: Option<&'a Place<'a>>,
    step: Step<'a>,
}

/// One step down from a [`Place`].
#[derive(Debug, Clone, Copy, Default)]
enum Step<'a> {
    /// The object itself.
    #[default]
    Root,
    /// The field `key` of a struct whose Go name is `owner` (`Container`).
    Field { owner: &'a str, key: &'a str },
    /// The value at `key` of a map.
    Value(&'a str),
    /// An item of a list.
    Item(usize),
}

impl<'a> Place<'a> {
    /// The field `key` of the struct defined as `definition`, where this place holds one.
    pub fn field(&'a self, definition: &'a str, key: &'a str) -> Place<'a> {
        let owner = definition.rsplit('.').next().unwrap_or("");
        self.down(Step::Field { owner, key })
    }

    /// The value at `key` of the map here.
    pub fn value(&'a self, key: &'a str) -> Place<'a> {
        self.down(Step::Value(key))
    }

    /// The item `index` of the list here.
    pub fn item(&'a self, index: usize) -> Place<'a> {
        self.down(Step::Item(index))
    }

    fn down(&'a self, step: Step<'a>) -> Place<'a> {
        Place {
            parent: Some(self),
            step,
        }
    }

    /// The path of unknown fields and pruning: field names joined with `.`, list items as
    /// `[0]` (`spec.containers[0].image`).
    pub fn path(&self) -> String {
        let mut path = String::new();
        self.write(&mut path, true);
        path
    }

    /// The struct fields down to the value, joined with `.`, without map keys or list items
    /// (`UnmarshalTypeError.Field`: `spec.containers.image`).
    fn field_path(&self) -> String {
        let mut path = String::new();
        self.write(&mut path, false);
        path
    }

    /// Writes the steps down to here: every step (`all`), or the struct fields alone.
    fn write(&self, out: &mut String, all: bool) {
        if let Some(parent) = self.parent {
            parent.write(out, all);
        }
        let key = match self.step {
            Step::Root => return,
            Step::Field { key, .. } => key,
            Step::Value(key) if all => key,
            Step::Item(index) if all => {
                out.push_str(&format!("[{index}]"));
                return;
            }
            Step::Value(_) | Step::Item(_) => return,
        };
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(key);
    }

    /// The Go struct whose field holds the value (`UnmarshalTypeError.Struct`).
    fn owner(&self) -> &'a str {
        match (self.step, self.parent) {
            (Step::Field { owner, .. }, _) => owner,
            (_, Some(parent)) => parent.owner(),
            (_, None) => "",
        }
    }

    /// The value's Go type, where `k8s.io/api` names it ([`names`]).
    pub fn named(&self) -> Option<&'static str> {
        match self.step {
            Step::Root => None,
            Step::Field { owner, key } => names::named_type(owner, key),
            Step::Value(_) => self.parent?.named()?.strip_prefix("map[string]"),
            Step::Item(_) => self.parent?.named()?.strip_prefix("[]"),
        }
    }

    /// The Go type's name here, for a value of `shape`.
    pub fn go_type(&self, shape: Shape<'_>, defs: &Map<String, Value>) -> String {
        shape.go_type(self.named(), defs)
    }

    /// Go's `UnmarshalTypeError` for `value` (`number`, `string`, ...) found here where a
    /// `go_type` was wanted.
    pub fn type_error(&self, value: &str, go_type: &str) -> String {
        let (owner, field) = (self.owner(), self.field_path());
        if owner.is_empty() && field.is_empty() {
            format!("json: cannot unmarshal {value} into Go value of type {go_type}")
        } else {
            format!(
                "json: cannot unmarshal {value} into Go struct field {owner}.{field} of type {go_type}"
            )
        }
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

    /// Calls `f` with the shape and place `path` leads to from the definition `root`.
    fn at<R>(root: &str, path: &[&str], f: impl FnOnce(Shape<'_>, &Place<'_>) -> R) -> R {
        fn down<R>(
            shape: Shape<'_>,
            place: &Place<'_>,
            path: &[&str],
            f: impl FnOnce(Shape<'_>, &Place<'_>) -> R,
        ) -> R {
            let defs = defs();
            let Some((step, rest)) = path.split_first() else {
                return f(shape, place);
            };
            match (shape, *step) {
                (Shape::Slice(items), "[]") => {
                    down(Shape::of(items, defs), &place.item(0), rest, f)
                }
                (Shape::Map(values), key) => {
                    down(Shape::of(values, defs), &place.value(key), rest, f)
                }
                (Shape::Struct(name, properties), key) => down(
                    Shape::of(&properties[key], defs),
                    &place.field(name, key),
                    rest,
                    f,
                ),
                other => panic!("no {step} in {other:?}"),
            }
        }
        down(
            Shape::root(root, defs()).unwrap(),
            &Place::default(),
            path,
            f,
        )
    }

    #[test]
    fn fields_have_the_go_types_the_decoder_names() {
        let pod = "io.k8s.api.core.v1.Pod";
        let cases: [(&[&str], &str); 9] = [
            (&["metadata"], "v1.ObjectMeta"),
            (&["metadata", "uid"], "types.UID"),
            (&["metadata", "labels"], "map[string]string"),
            (&["spec", "containers"], "[]v1.Container"),
            (
                &["spec", "containers", "[]", "ports", "[]", "protocol"],
                "v1.Protocol",
            ),
            (
                &["spec", "containers", "[]", "ports", "[]", "containerPort"],
                "int32",
            ),
            (
                &["spec", "containers", "[]", "resources", "limits"],
                "v1.ResourceList",
            ),
            (
                &[
                    "spec",
                    "containers",
                    "[]",
                    "securityContext",
                    "capabilities",
                    "add",
                    "[]",
                ],
                "v1.Capability",
            ),
            (&["spec", "activeDeadlineSeconds"], "int64"),
        ];
        for (path, go_type) in cases {
            let named = at(pod, path, |shape, place| place.go_type(shape, defs()));
            assert_eq!(named, go_type, "{path:?}");
        }
        let data = at("io.k8s.api.core.v1.Secret", &["data"], |shape, _| {
            shape.go_type(None, defs())
        });
        assert_eq!(data, "map[string][]uint8");
        at(pod, &["metadata", "creationTimestamp"], |shape, _| {
            assert!(matches!(shape, Shape::Scalar(Scalar::Time)));
        });
        let cpu = ["spec", "containers", "[]", "resources", "limits", "cpu"];
        at(pod, &cpu, |shape, _| {
            assert!(matches!(shape, Shape::Scalar(Scalar::Quantity)));
        });
        at(
            pod,
            &["metadata", "managedFields", "[]", "fieldsV1"],
            |shape, _| {
                assert!(matches!(shape, Shape::Raw));
            },
        );
    }

    #[test]
    fn type_errors_name_the_struct_and_the_fields_down_to_the_value() {
        at(
            "io.k8s.api.core.v1.ConfigMap",
            &["data", "y"],
            |_, place| {
                assert_eq!(
                    place.type_error("number", "string"),
                    "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
                );
            },
        );
        let port = ["spec", "ports", "[]", "port"];
        at("io.k8s.api.core.v1.Service", &port, |_, place| {
            assert_eq!(place.path(), "spec.ports[0].port");
            assert_eq!(
                place.type_error("string", "int32"),
                "json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32"
            );
        });
        at(
            "io.k8s.api.core.v1.Node",
            &["status", "volumesInUse", "[]"],
            |shape, place| {
                assert_eq!(place.go_type(shape, defs()), "v1.UniqueVolumeName");
            },
        );
    }
}
