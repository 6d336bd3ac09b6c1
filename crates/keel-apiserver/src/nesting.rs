//! How deeply a JSON text, or a YAML text's flow collections, nest, counted in one pass before
//! any parser runs: a parser that recurses (serde_json with its limit lifted) or that slows
//! with depth (the YAML parser) is not handed a text nested past what it can take.
//!
//! # How deep a request's object may nest
//!
//! kube-apiserver reads a body with Go's `encoding/json` (through `sigs.k8s.io/json`), whose
//! scanner takes 10,000 levels and refuses the next with `invalid character '{' exceeded max
//! depth`, within its 3 MiB body limit. keel keeps `serde_json`'s limit of 128 levels for
//! request bodies (JSON and patch documents alike; YAML has its parser's own 128) and refuses
//! a deeper one with 400 BadRequest, `couldn't get version/kind; json parse error: recursion
//! limit exceeded at line 1 column <n>` (a patch: `json parse error: recursion limit exceeded
//! ...`), before anything else reads it. This is a documented difference, chosen because a
//! deeper limit cannot be made safe by lifting the parser's limit alone: every step after the
//! parser walks the value by recursion on the worker's stack (tokio's 2 MiB), and
//! `serde_json::Value` itself recurses to drop, clone, compare and encode. Measured on a 2 MiB
//! stack with a value nested `{"a":{"a":...}}`, the deepest each survives:
//!
//! | step on `serde_json::Value` | debug build | release build |
//! |---|---|---|
//! | parse (limit lifted) | ~1,070 | ~3,500 |
//! | clone, `==` | ~1,130 | ~7,600 |
//! | drop | ~2,400 | ~12,700 |
//! | encode | ~3,200 | ~25,000 |
//!
//! so 10,000 levels would overflow the stack (which aborts the whole server) in the value
//! type before any of keel's own walkers (the strict reader, pruning, defaulting, strategic
//! merge, server-side apply's field sets, CEL, the watch cache) run, each of which recurses
//! too. Accepting upstream's depth needs a value type that drops, clones and compares without
//! recursion, or every request run on a far larger stack; until then, 128 levels (which no
//! built-in kind's schema comes near, and stored objects are read up to
//! [`crate::registry::stored::MAX_STORED_DEPTH`]) keeps every path well inside its stack.

/// The deepest nesting of arrays and objects in a JSON text, or of flow collections in a
/// YAML one (brackets inside double-quoted strings do not count); malformed text gives some
/// number, and the parser then says what is wrong.
pub fn depth(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0);
    let (mut in_string, mut escaped) = (false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    #[test]
    fn brackets_in_strings_do_not_count() {
        assert_eq!(super::depth(br#"{"a":["[{\"]",{"b":{}}]}"#), 4);
        assert_eq!(super::depth(b"x: [[1], {a: [2]}]\n"), 3);
        assert_eq!(super::depth(b"plain"), 0);
    }
}
