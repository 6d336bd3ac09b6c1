//! cel-go's two-variable comprehensions (`ext.TwoVarComprehensions`, which Kubernetes' base
//! environment enables from 1.32 for CRD rules and admission expressions alike):
//! `l.all(i, v, p)`, `l.exists(i, v, p)`, `l.existsOne(i, v, p)` (or `exists_one`), `l.transformList(i, v,
//! [filter,] e)`, `m.transformMap(k, v, [filter,] e)` and `m.transformMapEntry(k, v,
//! [filter,] e)`, over a list (index and element) or a map (key and value).
//!
//! The macros expand as cel-go's do (`ext/comprehensions.go`): a comprehension with two
//! iteration variables over the `@result` accumulator, which the checker types (the
//! index an int, the key and value of the map's types) and prices as any comprehension.
//! The `cel` crate runs comprehensions of one variable only, so a program with a
//! two-variable one is run lowered ([`execute`]): it iterates over `@entries(range)`, the
//! `[index or key, value]` pairs, and binds the two variables from each pair, as
//! `cel.bind` does, around the loop step.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr,
};
use cel::common::types::{DYN_TYPE, LIST_TYPE, MAP_TYPE};
use cel::common::value::CowVal;
use cel::objects::{Key, Map};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{Context, DeclarationError, Env, ExecutionError, Program, ResolveResult, Value};

use super::library::{err, overload, owned, values};

const ACCUMULATOR: &str = "@result";

/// The function `transformMap` and `transformMapEntry` insert with (cel-go's name).
pub(super) const MAP_INSERT: &str = "cel.@mapInsert";

/// The function a lowered comprehension iterates over.
const ENTRIES: &str = "@entries";

/// The iteration variable of a lowered comprehension.
const ENTRY: &str = "@it";

/// What a macro builds: its accumulator's start, its loop condition, its step and result.
#[derive(Clone, Copy)]
enum Kind {
    All,
    Exists,
    ExistsOne,
    TransformList,
    TransformMap,
    TransformMapEntry,
}

/// Registers the macros and the functions their programs call.
pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let kinds: [(&str, Kind, &[usize]); 7] = [
        ("all", Kind::All, &[3]),
        ("exists", Kind::Exists, &[3]),
        ("existsOne", Kind::ExistsOne, &[3]),
        ("exists_one", Kind::ExistsOne, &[3]),
        ("transformList", Kind::TransformList, &[3, 4]),
        ("transformMap", Kind::TransformMap, &[3, 4]),
        ("transformMapEntry", Kind::TransformMapEntry, &[3, 4]),
    ];
    for (name, kind, counts) in kinds {
        for &n in counts {
            env.add_macro(Macro::receiver(name, n, move |h, t, a| {
                expand(kind, h, t, a)
            }))?;
        }
    }
    env.add_overload(ENTRIES, "list_entries", vec![LIST_TYPE], entries)?;
    env.add_overload(ENTRIES, "map_entries", vec![MAP_TYPE], entries)?;
    env.add_overload(
        MAP_INSERT,
        "map_insert_key_value",
        vec![MAP_TYPE, DYN_TYPE, DYN_TYPE],
        map_insert,
    )?;
    env.add_overload(
        MAP_INSERT,
        "map_insert_map",
        vec![MAP_TYPE, MAP_TYPE],
        map_insert,
    )
}

fn ident(h: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    h.next_expr(Expr::Ident(name.to_string()))
}

fn call(h: &mut MacroExprHelper<'_>, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::Call(CallExpr {
        func_name: name.to_string(),
        target: None,
        args,
    }))
}

fn literal(h: &mut MacroExprHelper<'_>, l: LiteralValue) -> IdedExpr {
    h.next_expr(Expr::Literal(l))
}

/// An iteration variable: a simple name (cel-go's `argument must be a simple name`).
fn var(h: &mut MacroExprHelper<'_>, e: &IdedExpr) -> Result<String, ParseError> {
    match &e.expr {
        Expr::Ident(name) => Ok(name.clone()),
        _ => Err(h.new_error(e.id, "argument must be a simple name")),
    }
}

fn expand(
    kind: Kind,
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    let Some(range) = target.take() else {
        return Ok(None);
    };
    let mut args = std::mem::take(args).into_iter();
    let (Some(first), Some(second)) = (args.next(), args.next()) else {
        return Ok(None);
    };
    let (v1, v2) = (var(h, &first)?, var(h, &second)?);
    if v1 == v2 {
        return Err(h.new_error(first.id, format!("duplicate variable name: {v1}")));
    }
    // cel-go's accumulator is `__result__`, the crate's `@result`: neither may be taken.
    let taken = |v: &str| v == ACCUMULATOR || v == "__result__";
    if taken(&v1) || taken(&v2) {
        let message = "iteration variable overwrites accumulator variable";
        return Err(h.new_error(first.id, message));
    }
    let rest: Vec<IdedExpr> = args.collect();
    let (filter, body) = match rest.len() {
        2 => {
            let mut rest = rest.into_iter();
            (rest.next(), rest.next())
        }
        _ => (None, rest.into_iter().next()),
    };
    let Some(body) = body else {
        return Ok(None);
    };
    let accu = |h: &mut MacroExprHelper<'_>| ident(h, ACCUMULATOR);
    let truth = |h: &mut MacroExprHelper<'_>| literal(h, LiteralValue::Boolean(true.into()));
    let (init, cond, step, result) = match kind {
        Kind::All | Kind::Exists => {
            let all = matches!(kind, Kind::All);
            let init = literal(h, LiteralValue::Boolean(all.into()));
            let a = accu(h);
            let tested = if all { a } else { call(h, "!_", vec![a]) };
            let cond = call(h, "@not_strictly_false", vec![tested]);
            let a = accu(h);
            let op = if all { "_&&_" } else { "_||_" };
            let step = call(h, op, vec![a, body]);
            (init, cond, step, accu(h))
        }
        Kind::ExistsOne => {
            let init = literal(h, LiteralValue::Int(0.into()));
            let (a, one) = (accu(h), literal(h, LiteralValue::Int(1.into())));
            let plus = call(h, "_+_", vec![a, one]);
            let a = accu(h);
            let step = call(h, "_?_:_", vec![body, plus, a]);
            let (a, one) = (accu(h), literal(h, LiteralValue::Int(1.into())));
            let result = call(h, "_==_", vec![a, one]);
            (init, truth(h), step, result)
        }
        Kind::TransformList => {
            let init = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
            let item = h.next_expr(Expr::List(ListExpr::new(vec![body])));
            let a = accu(h);
            let step = call(h, "_+_", vec![a, item]);
            (init, truth(h), step, accu(h))
        }
        Kind::TransformMap | Kind::TransformMapEntry => {
            let init = h.next_expr(Expr::Map(MapExpr {
                entries: Vec::new(),
            }));
            let a = accu(h);
            let args = if matches!(kind, Kind::TransformMap) {
                vec![a, ident(h, &v1), body]
            } else {
                vec![a, body]
            };
            let step = call(h, MAP_INSERT, args);
            (init, truth(h), step, accu(h))
        }
    };
    let step = match filter {
        Some(f) => {
            let a = accu(h);
            call(h, "_?_:_", vec![f, step, a])
        }
        None => step,
    };
    let c = ComprehensionExpr {
        iter_range: range,
        iter_var: v1,
        iter_var2: Some(v2),
        accu_var: ACCUMULATOR.to_string(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result,
    };
    Ok(Some(h.next_expr(Expr::Comprehension(Box::new(c)))))
}

overload!(entries, |args| {
    let pair = |k: Value, v: &Value| Value::List(Arc::new(vec![k, v.clone()]));
    let out: Vec<Value> = match args.first() {
        Some(Value::List(l)) => l
            .iter()
            .enumerate()
            .map(|(i, v)| pair(Value::Int(i as i64), v))
            .collect(),
        Some(Value::Map(m)) => m
            .map
            .iter()
            .map(|(k, v)| pair(Value::from(k.clone()), v))
            .collect(),
        _ => return Err(err(ENTRIES, "expected a list or a map")),
    };
    Ok(Value::List(Arc::new(out)))
});

fn key(v: &Value) -> Result<Key, ExecutionError> {
    Ok(match v {
        Value::Int(i) => Key::Int(*i),
        Value::UInt(u) => Key::Uint(*u),
        Value::Bool(b) => Key::Bool(*b),
        Value::String(s) => Key::String(s.clone()),
        _ => return Err(err("@mapInsert", "unsupported map key type")),
    })
}

overload!(map_insert, |args| {
    let Some(Value::Map(m)) = args.first() else {
        return Err(err("@mapInsert", "expected a map"));
    };
    let mut out: HashMap<Key, Value> = (*m.map).clone();
    let added: Vec<(Key, Value)> = match (args.get(1), args.get(2)) {
        (Some(k), Some(v)) => vec![(key(k)?, v.clone())],
        (Some(Value::Map(entries)), None) => entries
            .map
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        _ => return Err(err("@mapInsert", "expected a key and a value, or a map")),
    };
    for (k, v) in added {
        if out.contains_key(&k) {
            let shown = Value::from(k.clone());
            let message = format!("insert failed: key {} already exists", go_value(&shown));
            return Err(err("@mapInsert", &message));
        }
        out.insert(k, v);
    }
    Ok(Value::Map(Map { map: Arc::new(out) }))
});

/// A key as Go's `%v` prints it.
fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Bool(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

/// Whether `e` has a two-variable comprehension.
fn has_two_vars(e: &IdedExpr) -> bool {
    match &e.expr {
        Expr::Comprehension(c) => {
            c.iter_var2.is_some()
                || [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ]
                .into_iter()
                .any(has_two_vars)
        }
        Expr::Call(c) => {
            c.target.iter().any(|t| has_two_vars(t)) || c.args.iter().any(has_two_vars)
        }
        Expr::List(l) => l.elements.iter().any(has_two_vars),
        Expr::Select(s) => has_two_vars(&s.operand),
        Expr::Map(m) => m.entries.iter().any(|entry| match &entry.expr {
            EntryExpr::MapEntry(me) => has_two_vars(&me.key) || has_two_vars(&me.value),
            EntryExpr::StructField(f) => has_two_vars(&f.value),
        }),
        _ => false,
    }
}

fn node(expr: Expr) -> IdedExpr {
    IdedExpr { id: 0, expr }
}

/// `cel.bind(var, init, body)` as the bindings' macro builds it.
fn bind(var: &str, init: IdedExpr, body: IdedExpr) -> IdedExpr {
    node(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: node(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_string(),
        iter_var2: None,
        accu_var: var.to_string(),
        accu_init: init,
        loop_cond: node(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: node(Expr::Ident(var.to_string())),
        result: body,
    })))
}

fn entry_part(i: i64) -> IdedExpr {
    let at = node(Expr::Literal(LiteralValue::Int(i.into())));
    node(Expr::Call(CallExpr {
        func_name: "_[_]".to_string(),
        target: None,
        args: vec![node(Expr::Ident(ENTRY.to_string())), at],
    }))
}

/// `e` with every two-variable comprehension made one of one variable the crate runs.
fn lower(e: &IdedExpr) -> IdedExpr {
    let mut out = e.clone();
    lower_in_place(&mut out);
    out
}

fn lower_in_place(e: &mut IdedExpr) {
    match &mut e.expr {
        Expr::Comprehension(c) => {
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                lower_in_place(part);
            }
            if let Some(v2) = c.iter_var2.take() {
                let range = std::mem::replace(&mut c.iter_range, node(Expr::Unspecified));
                c.iter_range = node(Expr::Call(CallExpr {
                    func_name: ENTRIES.to_string(),
                    target: None,
                    args: vec![range],
                }));
                let step = std::mem::replace(&mut c.loop_step, node(Expr::Unspecified));
                let inner = bind(&v2, entry_part(1), step);
                let v1 = std::mem::replace(&mut c.iter_var, ENTRY.to_string());
                c.loop_step = bind(&v1, entry_part(0), inner);
            }
        }
        Expr::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                lower_in_place(t);
            }
            c.args.iter_mut().for_each(lower_in_place);
        }
        Expr::List(l) => l.elements.iter_mut().for_each(lower_in_place),
        Expr::Select(s) => lower_in_place(&mut s.operand),
        Expr::Map(m) => {
            for entry in &mut m.entries {
                if let EntryExpr::MapEntry(me) = &mut entry.expr {
                    lower_in_place(&mut me.key);
                    lower_in_place(&mut me.value);
                }
            }
        }
        _ => {}
    }
}

/// Runs `program` in `ctx`, lowered when it has a two-variable comprehension.
pub(super) fn execute(program: &Program, ctx: &Context) -> ResolveResult {
    if has_two_vars(program.expression()) {
        Value::resolve(&lower(program.expression()), ctx)
    } else {
        program.execute(ctx)
    }
}
