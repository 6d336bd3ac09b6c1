//! The index lists of an Indexed Job's status (`status.completedIndexes`,
//! `status.failedIndexes`): comma-separated indexes and `x-y` intervals in increasing order,
//! each below `spec.completions` (`validateIndexesFormat`, `parseIndexInterval` and
//! `validateFailedIndexesNotOverlapCompleted`, pkg/apis/batch/validation/validation.go), with
//! upstream's error words.

use crate::apimachinery::quote::go_quote;

/// One interval of an index list, `x` or `x-y` (`parseIndexInterval`).
fn interval(text: &str, completions: i64) -> Result<(i64, i64), String> {
    let limits: Vec<&str> = text.split('-').collect();
    if limits.len() > 2 {
        return Err(format!(
            "the fragment {} violates the requirement that an index interval can have at most \
             two parts separated by '-'",
            go_quote(text)
        ));
    }
    let index = |s: &str| -> Result<i64, String> {
        let n: i64 = s.parse().map_err(|_| {
            format!(
                "cannot convert string to integer for index: {}",
                go_quote(s)
            )
        })?;
        if n >= completions {
            return Err(format!("too large index: {}", go_quote(s)));
        }
        Ok(n)
    };
    let x = index(limits[0])?;
    let Some(second) = limits.get(1) else {
        return Ok((x, x));
    };
    let y = index(second)?;
    if x >= y {
        return Err(format!("non-increasing order, previous: {x}, current: {y}"));
    }
    Ok((x, y))
}

/// Checks an index list (`validateIndexesFormat`): how many indexes it names, or why it is
/// malformed.
pub fn validate_format(list: &str, completions: i64) -> Result<i64, String> {
    if list.is_empty() {
        return Ok(0);
    }
    let mut last: Option<i64> = None;
    let mut total = 0;
    for part in list.split(',') {
        let (x, y) = interval(part, completions)?;
        if let Some(last) = last
            && last >= x
        {
            return Err(format!(
                "non-increasing order, previous: {last}, current: {x}"
            ));
        }
        total += y - x + 1;
        last = Some(y);
    }
    Ok(total)
}

/// The first index both lists name, as upstream words it
/// (`validateFailedIndexesNotOverlapCompleted`); intervals that do not parse are skipped
/// (the format check reports them).
pub fn overlap(completed: &str, failed: &str, completions: i64) -> Option<String> {
    if completed.is_empty() || failed.is_empty() {
        return None;
    }
    let completed: Vec<&str> = completed.split(',').collect();
    let failed: Vec<&str> = failed.split(',').collect();
    let (mut c, mut f) = (0, 0);
    let mut c_at = interval(completed[0], completions);
    let mut f_at = interval(failed[0], completions);
    while c < completed.len() && f < failed.len() {
        match (&c_at, &f_at) {
            (Err(_), _) => {
                c += 1;
                if c < completed.len() {
                    c_at = interval(completed[c], completions);
                }
            }
            (_, Err(_)) => {
                f += 1;
                if f < failed.len() {
                    f_at = interval(failed[f], completions);
                }
            }
            (Ok((cx, cy)), Ok((fx, fy))) => {
                if cx <= fy && fx <= cy {
                    return Some(format!(
                        "failedIndexes and completedIndexes overlap at index: {}",
                        cx.max(fx)
                    ));
                }
                if cx <= fx {
                    c += 1;
                    if c < completed.len() {
                        c_at = interval(completed[c], completions);
                    }
                } else {
                    f += 1;
                    if f < failed.len() {
                        f_at = interval(failed[f], completions);
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_lists_are_parsed_as_upstream_parses_them() {
        assert_eq!(validate_format("", 3), Ok(0));
        assert_eq!(validate_format("0,2-4,7", 10), Ok(5));
        let refused = [
            (
                "1-2-3",
                "the fragment \"1-2-3\" violates the requirement that an index interval can \
                 have at most two parts separated by '-'",
            ),
            ("a", "cannot convert string to integer for index: \"a\""),
            ("1,", "cannot convert string to integer for index: \"\""),
            ("0-10", "too large index: \"10\""),
            ("3-1", "non-increasing order, previous: 3, current: 1"),
            ("1-3,3", "non-increasing order, previous: 3, current: 3"),
        ];
        for (list, why) in refused {
            assert_eq!(validate_format(list, 10), Err(why.to_string()), "{list}");
        }
    }

    #[test]
    fn the_first_shared_index_is_named() {
        assert_eq!(overlap("0-2,5", "3-4", 10), None);
        assert_eq!(
            overlap("0-2,5-7", "3,6-8", 10),
            Some("failedIndexes and completedIndexes overlap at index: 6".into())
        );
        // An interval that does not parse is skipped.
        assert_eq!(
            overlap("x,4", "4", 10),
            Some("failedIndexes and completedIndexes overlap at index: 4".into())
        );
    }
}
