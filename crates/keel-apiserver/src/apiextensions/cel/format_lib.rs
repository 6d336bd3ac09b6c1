//! Kubernetes' CEL format library (`k8s.io/apiserver/pkg/cel/library/format.go`): the
//! named string validations, `format.dns1123Label()`, `format.dns1123Subdomain()`,
//! `format.dns1035Label()`, `format.qualifiedName()`, their `...Prefix()` forms (a trailing
//! `-` allowed, for `generateName`), `format.labelValue()`, `format.uri()`,
//! `format.uuid()`, `format.byte()`, `format.date()`, `format.datetime()`, and
//! `format.named(name)` (an optional, none for an unknown name); `<format>.validate(s)` is
//! `optional.none()` when `s` is valid, else an optional of the list of what is wrong, in
//! apimachinery's words. A format is held as a map of one entry, its name.

use std::sync::Arc;

use cel::common::types::{CelOptional, MAP_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::library::{Opaque, values};
use crate::apiextensions::{crd::dns1035_label, formats};
use crate::apimachinery::quote::go_quote;
use crate::apimachinery::validation::{
    is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value,
};

/// The formats, by the name `format.named` takes.
const NAMES: [&str; 13] = [
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

/// Registers the format functions on `env`.
pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let constants: [cel::common::functions::Function; 13] = [
        |_| constant("dns1123Label"),
        |_| constant("dns1123Subdomain"),
        |_| constant("dns1035Label"),
        |_| constant("qualifiedName"),
        |_| constant("dns1123LabelPrefix"),
        |_| constant("dns1123SubdomainPrefix"),
        |_| constant("dns1035LabelPrefix"),
        |_| constant("labelValue"),
        |_| constant("uri"),
        |_| constant("uuid"),
        |_| constant("byte"),
        |_| constant("date"),
        |_| constant("datetime"),
    ];
    for (name, f) in NAMES.iter().zip(constants) {
        let full = format!("format.{name}");
        env.add_overload(&full, &full, vec![], f)?;
    }
    env.add_overload("format.named", "format-named", vec![STRING_TYPE], named)?;
    env.add_member_overload(
        "validate",
        "format-validate",
        MAP_TYPE,
        vec![STRING_TYPE],
        validate,
    )
}

fn value_of(name: &str) -> Value {
    Opaque::Format.wrap(name.to_string())
}

fn boxed(v: Value) -> Result<Box<dyn Val>, ExecutionError> {
    v.try_into()
}

fn constant<'b, 'v>(name: &str) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::Owned(boxed(value_of(name))?))
}

fn optional<'b, 'v>(v: Option<Value>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let opt = match v {
        Some(v) => CelOptional::of(boxed(v)?),
        None => CelOptional::none(),
    };
    Ok(CowVal::Owned(Box::new(opt)))
}

fn named<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match values(&args)?.first() {
        Some(Value::String(s)) => {
            optional(NAMES.contains(&s.as_str()).then(|| value_of(s.as_str())))
        }
        _ => Err(ExecutionError::no_such_overload("format.named", Vec::new())),
    }
}

/// apimachinery's `maskTrailingDash`: a name prefix's trailing `-` read as a letter.
fn mask_trailing_dash(s: &str) -> String {
    match s.strip_suffix('-') {
        Some(rest) if s.len() > 1 => {
            // Go drops the byte before the dash. Of a character that is not ASCII that
            // leaves a broken one, which no check accepts: a replacement character here.
            let mut masked = rest.to_string();
            if masked.pop().is_some_and(|c| !c.is_ascii()) {
                masked.push(char::REPLACEMENT_CHARACTER);
            }
            masked.push('a');
            masked
        }
        _ => s.to_string(),
    }
}

/// What is wrong with `s` as the format `name`.
fn problems(name: &str, s: &str) -> Vec<String> {
    let check = |format: &str, why: &str| {
        if formats::fits(format, s) == Some(false) {
            vec![why.to_string()]
        } else {
            Vec::new()
        }
    };
    match name {
        "dns1123Label" => is_dns1123_label(s),
        "dns1123Subdomain" => is_dns1123_subdomain(s),
        "dns1035Label" => dns1035_label(s),
        "qualifiedName" => is_qualified_name(s),
        "dns1123LabelPrefix" => is_dns1123_label(&mask_trailing_dash(s)),
        "dns1123SubdomainPrefix" => is_dns1123_subdomain(&mask_trailing_dash(s)),
        "dns1035LabelPrefix" => dns1035_label(&mask_trailing_dash(s)),
        "labelValue" => is_valid_label_value(s),
        "uri" => {
            let why = format!("parse {}: invalid URI for request", go_quote(s));
            check("uri", &why)
        }
        "uuid" => check("uuid", "does not match the UUID format"),
        "byte" => check("byte", "invalid base64"),
        "date" => check("date", "invalid date"),
        _ => check("datetime", "invalid datetime"),
    }
}

fn validate<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let name = Opaque::Format
        .text(args.first())
        .unwrap_or_default()
        .to_string();
    let (false, Some(Value::String(s))) = (name.is_empty(), args.get(1)) else {
        return Err(ExecutionError::no_such_overload("validate", Vec::new()));
    };
    let found = problems(&name, s);
    optional((!found.is_empty()).then(|| {
        let list: Vec<Value> = found.into_iter().map(Value::from).collect();
        Value::List(Arc::new(list))
    }))
}
