//! Patterns as Go's `regexp` (RE2) reads them, for a schema's `pattern` and CEL's regex
//! functions: the Perl classes `\d`, `\w`, `\s` (and their negations) and the word boundary
//! `\b` are ASCII, as in RE2 (the regex crate's are Unicode, which matches more and is far
//! slower to compile: `\w{60}` takes seconds); each pattern is compiled once and kept, as
//! upstream precompiles a rule's constant patterns, so a rule run over many list items
//! compiles nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use regex::Regex;

/// How many compiled patterns are kept (all are dropped when it is reached).
const KEPT: usize = 512;

/// The most memory one compiled pattern may take (RE2's default budget is 8 MiB).
const SIZE_LIMIT: usize = 8 << 20;

/// `pattern` compiled with RE2's ASCII classes, from the cache when it was compiled before.
pub fn compile(pattern: &str) -> Result<Arc<Regex>, regex::Error> {
    type Compiled = HashMap<String, Result<Arc<Regex>, regex::Error>>;
    static CACHE: Mutex<Option<Compiled>> = Mutex::new(None);
    if let Some(found) = CACHE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|c| c.get(pattern))
    {
        return found.clone();
    }
    let compiled = regex::RegexBuilder::new(&ascii_classes(pattern))
        .size_limit(SIZE_LIMIT)
        .build()
        .map(Arc::new);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if cache.len() >= KEPT {
        cache.clear();
    }
    cache.insert(pattern.to_string(), compiled.clone());
    compiled
}

/// `pattern` with RE2's ASCII meaning of `\d \D \w \W \s \S \b \B` spelled out for the regex
/// crate; every other escape is left as it is.
fn ascii_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(escaped) = chars.next() else {
            out.push('\\');
            break;
        };
        out.push_str(match escaped {
            'd' => "[0-9]",
            'D' => "[^0-9]",
            'w' => "[0-9A-Za-z_]",
            'W' => "[^0-9A-Za-z_]",
            's' => "[\\t\\n\\f\\r ]",
            'S' => "[^\\t\\n\\f\\r ]",
            'b' => "(?-u:\\b)",
            'B' => "(?-u:\\B)",
            _ => {
                out.push('\\');
                out.push(escaped);
                continue;
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_classes_are_ascii_as_in_re2() {
        let digits = compile(r"\d+").unwrap();
        assert_eq!(digits.find("١٢ 34").map(|m| m.as_str()), Some("34"));
        let word = compile(r"\w+").unwrap();
        assert_eq!(word.find("é_a1").map(|m| m.as_str()), Some("_a1"));
        assert!(compile(r"[\d\s]+").unwrap().is_match(" 1"));
        assert!(compile(r"[^\W]").unwrap().is_match("a"));
        assert!(!compile(r"\S").unwrap().is_match(" \t"));
        assert!(compile(r"\bcat\b").unwrap().is_match("a cat"));
        // Other escapes are kept; a backslash pair is one escape.
        assert!(compile(r"\\d").unwrap().is_match(r"\d"));
        assert!(compile(r"a\.b").unwrap().is_match("a.b"));
        assert!(compile("(").is_err());
    }

    #[test]
    fn a_long_repetition_of_a_class_compiles_quickly_and_once() {
        let first = compile(r"\w{60}").unwrap();
        let again = compile(r"\w{60}").unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert!(first.is_match(&"a".repeat(60)));
    }
}
