//! JSON pointers (RFC 6901) read without allocating: `serde_json::Value::pointer` builds a
//! `String` for every token it unescapes, and the request path looks up a few fields of every
//! object it handles (`/metadata/labels`, `/status/conditions`). [`At`] answers as `pointer`
//! does and allocates only for a token that holds an escape (`~0`, `~1`).

use serde_json::Value;

/// The value a JSON pointer names, as `Value::pointer` and `Value::pointer_mut` find it.
pub trait At {
    /// The value at `pointer` (`""` is the whole value; otherwise it starts with `/`).
    fn at(&self, pointer: &str) -> Option<&Value>;
    /// The value at `pointer`, to change.
    fn at_mut(&mut self, pointer: &str) -> Option<&mut Value>;
}

impl At for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        let mut target = self;
        for token in tokens(pointer)? {
            target = step(target, &token)?;
        }
        Some(target)
    }

    fn at_mut(&mut self, pointer: &str) -> Option<&mut Value> {
        let mut target = self;
        for token in tokens(pointer)? {
            target = match target {
                Value::Object(map) => map.get_mut(token.as_ref())?,
                Value::Array(list) => list.get_mut(index(&token)?)?,
                _ => return None,
            };
        }
        Some(target)
    }
}

/// The pointer's tokens, unescaped; None when it is neither empty nor starts with `/`.
fn tokens(pointer: &str) -> Option<impl Iterator<Item = std::borrow::Cow<'_, str>>> {
    let rest = match pointer {
        "" => None,
        _ => Some(pointer.strip_prefix('/')?),
    };
    Some(rest.into_iter().flat_map(|rest| {
        rest.split('/').map(|token| {
            if token.contains('~') {
                token.replace("~1", "/").replace("~0", "~").into()
            } else {
                token.into()
            }
        })
    }))
}

fn step<'v>(target: &'v Value, token: &str) -> Option<&'v Value> {
    match target {
        Value::Object(map) => map.get(token),
        Value::Array(list) => list.get(index(token)?),
        _ => None,
    }
}

/// An array index as RFC 6901 writes it: digits, no sign, no leading zero.
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
        return None;
    }
    token.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_find_what_serde_json_finds() {
        let mut doc = json!({"a": {"b/c": [1, {"d~e": true}], "": 2}, "x": null});
        for pointer in [
            "",
            "/",
            "/a",
            "/a/b~1c",
            "/a/b~1c/0",
            "/a/b~1c/1/d~0e",
            "/a/b~1c/01",
            "/a/b~1c/+1",
            "/a/b~1c/2",
            "/a/",
            "/x",
            "/x/y",
            "a",
            "/nope",
            "/a/b~1c/-",
        ] {
            assert_eq!(doc.at(pointer), doc.pointer(pointer), "{pointer}");
        }
        *doc.at_mut("/a/b~1c/1/d~0e").unwrap() = json!(false);
        assert_eq!(doc["a"]["b/c"][1]["d~e"], json!(false));
        assert!(doc.at_mut("/a/b~1c/9").is_none());
    }
}
