//! How deeply a JSON text, or a YAML text's flow collections, nest, counted in one pass before
//! any parser runs: a parser that recurses (serde_json with its limit lifted) or that slows
//! with depth (the YAML parser) is not handed a text nested past what it can take.

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
