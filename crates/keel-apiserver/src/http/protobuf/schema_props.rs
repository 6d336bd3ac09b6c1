//! The types of a CustomResourceDefinition's schema whose JSON form apiextensions writes by
//! hand (`k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1/marshal.go`), between
//! their protobuf messages and their JSON values:
//!
//! - `JSON` (a `default`, an `example`, an `enum` item): the value's JSON text as `raw`
//!   bytes; none is `null`.
//! - `JSONSchemaPropsOrArray` (`items`): a schema as `schema`, an array of them as
//!   `jSONSchemas` (which wins when both are set).
//! - `JSONSchemaPropsOrBool` (`additionalProperties`, `additionalItems`): a schema as
//!   `schema` (and `allows` true), a boolean as `allows`.
//! - `JSONSchemaPropsOrStringArray` (a `dependencies` value): a list of property names as
//!   `property` (which wins), a schema as `schema`, neither `null`.

use prost_reflect::{DynamicMessage, Kind, MessageDescriptor, ReflectMessage, Value as Pb};
use serde_json::Value;

use super::encode::object;
use super::{get, json};

const PACKAGE: &str = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1";

/// Which of the hand-written types a message is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Type {
    Json,
    OrArray,
    OrBool,
    OrStringArray,
}

fn type_of(full_name: &str) -> Option<Type> {
    let name = full_name.strip_prefix(PACKAGE)?.strip_prefix('.')?;
    Some(match name {
        "JSON" => Type::Json,
        "JSONSchemaPropsOrArray" => Type::OrArray,
        "JSONSchemaPropsOrBool" => Type::OrBool,
        "JSONSchemaPropsOrStringArray" => Type::OrStringArray,
        _ => return None,
    })
}

/// The JSON value of one of these messages (None: another message).
pub(super) fn decode(message: &DynamicMessage) -> Option<Result<Value, String>> {
    let which = type_of(message.descriptor().full_name())?;
    let has = |name: &str| message.has_field_by_name(name);
    Some(match which {
        Type::Json => {
            let raw = get(message, "raw");
            match raw.as_bytes().map(|b| b.as_ref()).unwrap_or_default() {
                [] => Ok(Value::Null),
                raw => serde_json::from_slice(raw).map_err(|e| format!("JSON: {e}")),
            }
        }
        Type::OrArray if has("jSONSchemas") => json(&get(message, "jSONSchemas")),
        Type::OrStringArray if has("property") => json(&get(message, "property")),
        Type::OrArray | Type::OrBool | Type::OrStringArray if has("schema") => {
            json(&get(message, "schema"))
        }
        Type::OrBool => Ok(Value::Bool(get(message, "allows").as_bool() == Some(true))),
        Type::OrArray | Type::OrStringArray => Ok(Value::Null),
    })
}

/// The message `descriptor` of a JSON value, if it is one of these types (None: another
/// message; Some(None): the value does not fit).
pub(super) fn encode(
    descriptor: &MessageDescriptor,
    value: &Value,
) -> Option<Option<DynamicMessage>> {
    let which = type_of(descriptor.full_name())?;
    let mut out = DynamicMessage::new(descriptor.clone());
    let schema = |v: &Value| {
        let field = descriptor.get_field_by_name("schema")?;
        let Kind::Message(props) = field.kind() else {
            return None;
        };
        Some(object(&props, v.as_object()?))
    };
    // `?` below: a value that does not fit (Some(None)).
    let fits = |out: &mut DynamicMessage| -> Option<()> {
        match (which, value) {
            (Type::Json, value) => {
                let raw = serde_json::to_vec(value).expect("a JSON value encodes");
                out.set_field_by_name("raw", Pb::Bytes(raw.into()));
            }
            (Type::OrArray, Value::Array(items)) => {
                let items: Option<Vec<Pb>> = items
                    .iter()
                    .map(|item| schema(item).map(Pb::Message))
                    .collect();
                out.set_field_by_name("jSONSchemas", Pb::List(items?));
            }
            (Type::OrStringArray, Value::Array(items)) => {
                let items: Option<Vec<Pb>> = items
                    .iter()
                    .map(|item| Some(Pb::String(item.as_str()?.to_string())))
                    .collect();
                out.set_field_by_name("property", Pb::List(items?));
            }
            (Type::OrBool, Value::Bool(allows)) => {
                out.set_field_by_name("allows", Pb::Bool(*allows));
            }
            (_, Value::Object(_)) => {
                if which == Type::OrBool {
                    out.set_field_by_name("allows", Pb::Bool(true));
                }
                out.set_field_by_name("schema", Pb::Message(schema(value)?));
            }
            _ => return None,
        }
        Some(())
    };
    Some(fits(&mut out).map(|()| out))
}
