//! Kubernetes' CEL quantity library: `quantity('1.5Gi')`, `isQuantity`, and on a quantity
//! `isInteger`, `asInteger`, `asApproximateFloat`, `sign`, `add`, `sub`, `isLessThan`,
//! `isGreaterThan`, `compareTo`. A quantity is held as a map of one entry, its value in
//! billionths (so `==` compares magnitudes: `quantity('1') == quantity('1000m')`); finer
//! fractions round up, as the apiserver rounds a quantity it stores.

use std::cmp::Ordering;

use cel::common::types::{DYN_TYPE, MAP_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::library::{Opaque, err, overload, owned, values};

const NANO: i128 = 1_000_000_000;

/// The decimal suffixes and their powers of ten.
const DECIMAL_SI: [(&str, i32); 10] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

/// The binary suffixes and their powers of two.
const BINARY_SI: [(&str, i32); 6] = [
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];

/// Upstream's `ErrFormatWrong`.
const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

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

/// A quantity's value in billionths, or `None` when `s` is not a quantity.
pub(super) fn parse(s: &str) -> Option<i128> {
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let split = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return None;
    }
    let find = |table: &[(&str, i32)]| table.iter().find(|(n, _)| *n == suffix).map(|t| t.1);
    let (base, exponent): (i128, i32) = if let Some(e) = find(&DECIMAL_SI) {
        (10, e)
    } else if let Some(e) = find(&BINARY_SI) {
        (2, e)
    } else if suffix.starts_with(['e', 'E']) {
        (10, suffix[1..].parse().ok()?)
    } else {
        return None;
    };
    let digits: String = format!("{whole}{fraction}");
    let mut value: i128 = digits.parse().ok()?;
    // value * base^exponent * 10^9 / 10^len(fraction), rounded up.
    let mut scale: i32 = 9 - fraction.len() as i32;
    if base == 2 {
        value = value.checked_mul(2i128.checked_pow(exponent as u32)?)?;
    } else {
        scale += exponent;
    }
    if scale >= 0 {
        value = value.checked_mul(10i128.checked_pow(scale as u32)?)?;
    } else {
        let divisor = 10i128
            .checked_pow(scale.unsigned_abs())
            .unwrap_or(i128::MAX);
        value = value / divisor + i128::from(value % divisor != 0);
    }
    Some(if negative { -value } else { value })
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
        .ok_or_else(|| err("quantity", FORMAT_WRONG)),
    _ => Err(err("quantity", FORMAT_WRONG)),
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
