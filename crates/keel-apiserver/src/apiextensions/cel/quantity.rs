//! Kubernetes' CEL quantity library: `quantity('1.5Gi')`, `isQuantity`, and on a quantity
//! `isInteger`, `asInteger`, `asApproximateFloat`, `sign`, `add`, `sub`, `isLessThan`,
//! `isGreaterThan`, `compareTo`. A quantity is held as a map of one entry, its value in
//! billionths (so `==` compares magnitudes: `quantity('1') == quantity('1000m')`); finer
//! fractions round up, as the apiserver rounds a quantity it stores. Quantities are parsed
//! by the server's one reading of them ([`crate::apimachinery::quantity`]).

use std::cmp::Ordering;

use cel::common::types::{DYN_TYPE, MAP_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::library::{Opaque, err, overload, owned, values};
use crate::apimachinery::quantity::{Quantity, QuantityError};

const NANO: i128 = 1_000_000_000;

/// Upstream's `ErrFormatWrong`, which `quantity()` fails with.
fn format_wrong() -> String {
    QuantityError::Format.to_string()
}

/// Registers the quantity functions on `env`.
pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![STRING_TYPE],
        quantity,
    )?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![STRING_TYPE],
        is_quantity,
    )?;
    let members: [(&str, cel::common::functions::Function, bool); 9] = [
        ("isInteger", is_integer, false),
        ("asInteger", as_integer, false),
        ("asApproximateFloat", as_float, false),
        ("sign", sign, false),
        ("add", add, true),
        ("sub", sub, true),
        ("isLessThan", is_less_than, true),
        ("isGreaterThan", is_greater_than, true),
        ("compareTo", compare_to, true),
    ];
    for (name, f, with_arg) in members {
        let args = if with_arg { vec![DYN_TYPE] } else { vec![] };
        env.add_member_overload(name, &format!("quantity_{name}"), MAP_TYPE, args, f)?;
    }
    Ok(())
}

/// A quantity's value in billionths ([`Quantity::nanos`]), or `None` when `s` is not a
/// quantity (or one too large for CEL's arithmetic).
pub(super) fn parse(s: &str) -> Option<i128> {
    Quantity::parse(s).ok()?.nanos()
}

fn make(nanos: i128) -> Value {
    Opaque::Quantity.wrap(nanos.to_string())
}

/// The billionths of a quantity value, or of an int (for `add` and `sub`).
fn nanos(v: Option<&Value>, function: &str) -> Result<i128, ExecutionError> {
    match v {
        Some(Value::Int(i)) => Ok(i128::from(*i) * NANO),
        _ => Opaque::Quantity
            .text(v)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| err(function, "not a quantity")),
    }
}

fn pair(args: &[Value], function: &str) -> Result<(i128, i128), ExecutionError> {
    Ok((
        nanos(args.first(), function)?,
        nanos(args.get(1), function)?,
    ))
}

overload!(quantity, |args| match args.first() {
    Some(Value::String(s)) => parse(s)
        .map(make)
        .ok_or_else(|| err("quantity", &format_wrong())),
    _ => Err(err("quantity", &format_wrong())),
});

overload!(is_quantity, |args| Ok(Value::Bool(
    matches!(args.first(), Some(Value::String(s)) if parse(s).is_some())
)));

overload!(is_integer, |args| Ok(Value::Bool(
    nanos(args.first(), "isInteger")? % NANO == 0
)));

overload!(as_integer, |args| {
    let n = nanos(args.first(), "asInteger")?;
    if n % NANO != 0 {
        return Err(err("asInteger", "cannot convert value to integer"));
    }
    i64::try_from(n / NANO)
        .map(Value::Int)
        .map_err(|_| err("asInteger", "cannot convert value to integer"))
});

overload!(as_float, |args| Ok(Value::Float(
    nanos(args.first(), "asApproximateFloat")? as f64 / NANO as f64
)));

overload!(sign, |args| Ok(Value::Int(
    nanos(args.first(), "sign")?.signum() as i64
)));

overload!(add, |args| {
    let (a, b) = pair(args, "add")?;
    a.checked_add(b)
        .map(make)
        .ok_or_else(|| err("add", "quantity overflow"))
});

overload!(sub, |args| {
    let (a, b) = pair(args, "sub")?;
    a.checked_sub(b)
        .map(make)
        .ok_or_else(|| err("sub", "quantity overflow"))
});

/// The order of the receiver and the argument of a comparison: two semver values (the
/// semver library shares `isLessThan`, `isGreaterThan` and `compareTo`), or two quantities.
fn order(args: &[Value], function: &str) -> Result<Ordering, ExecutionError> {
    if let Some(o) = super::semver::ordering(args.first(), args.get(1)) {
        return Ok(o);
    }
    let (a, b) = pair(args, function)?;
    Ok(a.cmp(&b))
}

overload!(is_less_than, |args| Ok(Value::Bool(
    order(args, "isLessThan")? == Ordering::Less
)));

overload!(is_greater_than, |args| Ok(Value::Bool(
    order(args, "isGreaterThan")? == Ordering::Greater
)));

overload!(compare_to, |args| Ok(Value::Int(
    match order(args, "compareTo")? {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
)));
