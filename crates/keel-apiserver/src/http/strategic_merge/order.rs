//! The order strategic merge patch leaves a merged list in, as apimachinery orders it: a
//! `$setElementOrder` list checked against the patch, the patch's items sorted by it and the
//! server-only ones by the live list, interleaved where both are known, with Go's stable sort
//! (whose comparator is not a strict order, so the exact algorithm matters).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::errors::{PatchError, Result, bad_arg_type, no_merge_key};
use super::{DELETE_DIRECTIVE, DIRECTIVE_MARKER, canonical, find_by_key, merge_key_value_equal};
use crate::apimachinery::go_value::go_fmt_list;

/// `validatePatchWithSetOrderList`: the patch list (deletions aside) must be a subsequence
/// of the `$setElementOrder` list.
pub(super) fn validate_patch_with_set_order(
    patch: &[Value],
    order: &[Value],
    merge_key: &str,
) -> Result<()> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let non_delete: Vec<&Value> = if merge_key.is_empty() {
        patch.iter().collect()
    } else {
        let mut kept = Vec::new();
        for v in patch {
            let Value::Object(m) = v else {
                return Err(bad_arg_type("map[string]interface {}", v));
            };
            if m.get(DIRECTIVE_MARKER).and_then(Value::as_str) != Some(DELETE_DIRECTIVE) {
                kept.push(v);
            }
        }
        kept
    };
    let (mut p, mut o) = (0, 0);
    while p < non_delete.len() && o < order.len() {
        if non_delete[p]
            .as_object()
            .is_some_and(|m| m.contains_key(DIRECTIVE_MARKER))
        {
            p += 1;
            continue;
        }
        if merge_key_value_equal(non_delete[p], &order[o], merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < non_delete.len() && o >= order.len() {
        return Err(PatchError::SetElementOrderMismatch {
            patch: go_fmt_list(patch),
            order: go_fmt_list(order),
        });
    }
    Ok(())
}

/// Splits `list` into the items present in `by` and the others.
pub(super) fn partition_primitives(list: Vec<Value>, by: &[Value]) -> (Vec<Value>, Vec<Value>) {
    let present: HashSet<String> = by.iter().map(canonical).collect();
    list.into_iter()
        .partition(|v| present.contains(&canonical(v)))
}

/// Splits `list` into the objects whose merge key appears in `by` and the others.
pub(super) fn partition_maps(
    list: Vec<Value>,
    by: &[Value],
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut present = Vec::with_capacity(list.len());
    let mut absent = Vec::with_capacity(list.len());
    for v in list {
        let Value::Object(m) = &v else {
            return Err(bad_arg_type("map[string]interface {}", &v));
        };
        let Some(value) = m.get(merge_key) else {
            return Err(no_merge_key(m, merge_key));
        };
        if find_by_key(by, merge_key, value)?.is_some() {
            present.push(v);
        } else {
            absent.push(v);
        }
    }
    Ok((present, absent))
}

/// The value an item is ordered by: its merge key (maps) or itself (primitives), as text.
pub(super) fn order_key(item: &Value, merge_key: &str, is_map: bool) -> String {
    if is_map {
        canonical(
            item.as_object()
                .and_then(|m| m.get(merge_key))
                .unwrap_or(&Value::Null),
        )
    } else {
        canonical(item)
    }
}

/// First position of each order key in `order` (Go's `index`).
pub(super) fn positions(order: &[Value], merge_key: &str, is_map: bool) -> HashMap<String, usize> {
    let mut at = HashMap::new();
    for (i, v) in order.iter().enumerate() {
        at.entry(order_key(v, merge_key, is_map)).or_insert(i);
    }
    at
}

/// `normalizeElementOrder`: sorts the patch items by `patch_order` and the server-only items
/// by `server_order`, then interleaves them keeping the live order where both are known.
pub(super) fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    is_map: bool,
) -> Result<Vec<Value>> {
    let patch = normalize_slice_order(patch, patch_order, merge_key, is_map)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, is_map)?;
    let at = positions(server_order, merge_key, is_map);
    let rank = |v: &Value| at.get(&order_key(v, merge_key, is_map)).copied();
    // mergeSortedSlice: take a server-only item first only when both are in the live list
    // and it comes first there.
    let mut out = Vec::with_capacity(patch.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!((rank(l), rank(r)), (Some(a), Some(b)) if a < b),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    Ok(out)
}

/// `normalizeSliceOrder`: a stable sort of `items` by their position in `order`, with the
/// `$patch: delete` elements of a list of objects moved to the end.
pub(super) fn normalize_slice_order(
    items: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    is_map: bool,
) -> Result<Vec<Value>> {
    let (items, deleted) = if is_map {
        for v in items.iter().chain(order) {
            let Value::Object(m) = v else {
                return Err(bad_arg_type("map[string]interface {}", v));
            };
            if !m.contains_key(merge_key) {
                return Err(no_merge_key(m, merge_key));
            }
        }
        items.into_iter().partition(|v| {
            v.get(DIRECTIVE_MARKER).and_then(Value::as_str) != Some(DELETE_DIRECTIVE)
        })
    } else {
        (items, Vec::new())
    };
    let at = positions(order, merge_key, is_map);
    let mut keyed: Vec<(Option<usize>, Value)> = items
        .into_iter()
        .map(|v| (at.get(&order_key(&v, merge_key, is_map)).copied(), v))
        .collect();
    go_stable_sort(&mut keyed);
    let mut out: Vec<Value> = keyed.into_iter().map(|(_, v)| v).collect();
    out.extend(deleted);
    Ok(out)
}

/// Go's `sort.SliceStable` with apimachinery's comparator ("less" when both items are in the
/// order list and the first comes first, and also whenever either is missing), so that
/// items missing from the order list land where Go puts them.
pub(super) fn go_stable_sort(data: &mut [(Option<usize>, Value)]) {
    if data.iter().all(|(k, _)| k.is_some()) {
        data.sort_by_key(|(k, _)| *k);
        return;
    }
    let less = |d: &[(Option<usize>, Value)], i: usize, j: usize| match (d[i].0, d[j].0) {
        (Some(a), Some(b)) => a < b,
        _ => true,
    };
    let n = data.len();
    let insertion = |d: &mut [(Option<usize>, Value)], a: usize, b: usize| {
        for i in a + 1..b {
            let mut j = i;
            while j > a && less(d, j, j - 1) {
                d.swap(j, j - 1);
                j -= 1;
            }
        }
    };
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        insertion(data, a, b);
        a = b;
        b += block;
    }
    insertion(data, a, n);
    while block < n {
        a = 0;
        b = 2 * block;
        while b <= n {
            sym_merge(data, a, a + block, b, &less);
            a = b;
            b += 2 * block;
        }
        if a + block < n {
            sym_merge(data, a, a + block, n, &less);
        }
        block *= 2;
    }
}

pub(super) type Less = dyn Fn(&[(Option<usize>, Value)], usize, usize) -> bool;

/// Go's `symMerge_func`.
pub(super) fn sym_merge(
    d: &mut [(Option<usize>, Value)],
    a: usize,
    m: usize,
    b: usize,
    less: &Less,
) {
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if less(d, h, a) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = a;
        while k + 1 < i {
            d.swap(k, k + 1);
            k += 1;
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !less(d, m, h) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            d.swap(k, k - 1);
            k -= 1;
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !less(d, p - c, c) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        rotate(d, start, m, end);
    }
    if a < start && start < mid {
        sym_merge(d, a, start, mid, less);
    }
    if mid < end && end < b {
        sym_merge(d, mid, end, b, less);
    }
}

/// Go's `rotate_func`: swaps the blocks `d[a..m]` and `d[m..b]`.
pub(super) fn rotate(d: &mut [(Option<usize>, Value)], a: usize, m: usize, b: usize) {
    let (mut i, mut j) = (m - a, b - m);
    let swap_range = |d: &mut [(Option<usize>, Value)], x: usize, y: usize, n: usize| {
        for k in 0..n {
            d.swap(x + k, y + k);
        }
    };
    while i != j {
        if i > j {
            swap_range(d, m - i, m, j);
            i -= j;
        } else {
            swap_range(d, m - i, m + j - i, i);
            j -= i;
        }
    }
    swap_range(d, m - i, m, i);
}
