//! Field selectors (`k8s.io/apimachinery/pkg/fields`): `field=value` and `field!=value`
//! terms, parsed, escaped, matched, and checked against the fields a kind supports.

use std::fmt;

use crate::apimachinery::quote::go_quote;

/// One `field=value` or `field!=value` term.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    field: String,
    equal: bool,
    value: String,
}

/// A parsed field selector (`fields.Selector`): terms, all of which must hold, in the byte
/// order of their text as Go sorts them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// `fields.EscapeValue`.
fn escape_field_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `fields.UnescapeValue`.
fn unescape_field_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                ));
            }
            out.push(c);
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Go prints the rune with %v: its code point in decimal.
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ));
            }
            c => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

/// `fields.splitTerms`: split on commas not escaped by a backslash (escapes kept).
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// `fields.splitTerm`: the first `!=`, `==` or `=` splits the term (no escapes on the left).
fn split_term(term: &str) -> Option<(&str, &str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for op in ["!=", "==", "="] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((&term[..i], op, rhs));
            }
        }
    }
    None
}

impl FieldSelector {
    /// Parses a selector as `fields.ParseSelector` does; the error is Go's error text, word
    /// for word (kube-apiserver answers it as the message of a 400 `BadRequest`). A term with
    /// neither field nor value (`=`, `==`, `!=`) selects everything and is dropped, as Go's
    /// `Transform` drops it.
    pub fn parse(s: &str) -> Result<FieldSelector, String> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((lhs, op, rhs)) = split_term(part) else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let value = unescape_field_value(rhs)?;
            if lhs.is_empty() && value.is_empty() {
                continue;
            }
            terms.push(FieldTerm {
                field: lhs.to_string(),
                equal: op != "!=",
                value,
            });
        }
        Ok(FieldSelector { terms })
    }

    /// The fields the terms name, in order (a field may come more than once).
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.field.as_str())
    }

    /// Whether every field is `metadata.name`, `metadata.namespace` or one of `supported`
    /// (the kind's `Strategy::selectable_fields`). The error is kube-apiserver's, for the
    /// first unknown field in term order: a kind with extra selectable fields registers a
    /// field label conversion func (pods, secrets, events, ...) whose error is `field label
    /// not supported: <field>`; a kind without (configmaps, ...) falls back to
    /// `runtime.DefaultMetaV1FieldSelectorConversion`: `"<field>" is not a known field
    /// selector: only "metadata.name", "metadata.namespace"`. Either is a 400 `BadRequest`.
    pub fn check_supported(&self, supported: &[&str]) -> Result<(), String> {
        for field in self.fields() {
            if field == "metadata.name" || field == "metadata.namespace" {
                continue;
            }
            if supported.contains(&field) {
                continue;
            }
            return Err(if supported.is_empty() {
                format!(
                    "{} is not a known field selector: only \"metadata.name\", \
                     \"metadata.namespace\"",
                    go_quote(field)
                )
            } else {
                format!("field label not supported: {field}")
            });
        }
        Ok(())
    }

    /// Whether an object matches: `value_of` gives its value of a field ("" when missing).
    /// The empty selector matches everything.
    pub fn matches(&self, value_of: impl Fn(&str) -> String) -> bool {
        self.terms
            .iter()
            .all(|t| (value_of(&t.field) == t.value) == t.equal)
    }

    /// Whether the selector has no terms (it then selects everything).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The `field=value` terms (`Selector.Requirements` with the `=` operator), which a
    /// key or an index can serve.
    pub fn exact(&self) -> impl Iterator<Item = (&str, &str)> {
        self.terms
            .iter()
            .filter(|t| t.equal)
            .map(|t| (t.field.as_str(), t.value.as_str()))
    }
}

impl fmt::Display for FieldSelector {
    /// `Selector.String()`: `field=value` / `field!=value`, values escaped, joined by `,`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = if t.equal { "=" } else { "!=" };
            write!(f, "{}{op}{}", t.field, escape_field_value(&t.value))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_selectors_parse_and_print_as_go() {
        for s in ["x=a,y=b,z=c", "", "x!=a,y=b", r"x=a||y\=b", r"x=a\=\=b"] {
            let sel = FieldSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(sel.to_string(), s);
        }
        for (s, want) in [
            ("x=a,a=x", "a=x,x=a"),
            ("b==c", "b=c"),
            ("a=a,", "a=a"),
            (",a=a", "a=a"),
            ("=", ""),
            ("==,!=", ""),
            ("=x", "=x"),
            (r"k=\,,k2=v2", r"k2=v2,k=\,"),
            ("함=수,목=록", "목=록,함=수"),
        ] {
            let sel = FieldSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(sel.to_string(), want, "{s}");
        }
        assert!(FieldSelector::parse("").unwrap().is_empty());
        assert!(FieldSelector::parse("=").unwrap().is_empty());
        let sel = FieldSelector::parse("spec.nodeName=n1,metadata.name!=a").unwrap();
        assert_eq!(
            sel.fields().collect::<Vec<_>>(),
            ["metadata.name", "spec.nodeName"]
        );
    }

    #[test]
    fn field_selector_errors_are_worded_as_go() {
        for (s, want) in [
            (
                "x=a||y=b",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "x==a==b",
                "invalid field selector: unescaped character in value: 61",
            ),
            ("x=a,b", "invalid selector: 'x=a,b'; can't understand 'b'"),
            (
                "x in (a)",
                "invalid selector: 'x in (a)'; can't understand 'x in (a)'",
            ),
            (
                "x in (a,b,c)",
                "invalid selector: 'x in (a,b,c)'; can't understand 'b'",
            ),
            ("x", "invalid selector: 'x'; can't understand 'x'"),
            (
                r"k=\a",
                r"invalid field selector: invalid escape sequence: \a",
            ),
            (
                r"k=\",
                r"invalid field selector: invalid escape sequence: \",
            ),
            (
                r"k=\\\",
                r"invalid field selector: invalid escape sequence: \",
            ),
            (
                r"a\=b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
        ] {
            assert_eq!(FieldSelector::parse(s), Err(want.to_string()), "{s}");
        }
    }

    #[test]
    fn field_selectors_unescape_and_match_as_go() {
        let set = |k: &str| match k {
            "foo" => "bar".to_string(),
            "baz" => "blah".to_string(),
            "complex" => r"=value\,\".to_string(),
            _ => String::new(),
        };
        for (s, want) in [
            ("", true),
            ("foo=bar", true),
            ("baz=blah", true),
            ("foo=bar,baz=blah", true),
            (r"foo=bar,baz=blah,complex=\=value\\\,\\", true),
            ("foo=blah", false),
            ("baz=bar", false),
            ("foo=bar,foobar=bar,baz=blah", false),
            ("foo==bar", true),
            ("foo!=bar", false),
            ("missing=", true),
            ("missing!=", false),
            ("missing!=x", true),
        ] {
            let sel = FieldSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(sel.matches(set), want, "{s}");
        }
        for (escaped, plain) in [
            ("", ""),
            ("a", "a"),
            (r"\=", "="),
            (r"\,", ","),
            (r"\\", r"\"),
            (r"\\\=\\\,\\", r"\=\,\"),
        ] {
            assert_eq!(escape_field_value(plain), escaped);
            assert_eq!(unescape_field_value(escaped).as_deref(), Ok(plain));
        }
    }

    #[test]
    fn unknown_fields_are_refused_as_kube_apiserver_does() {
        let sel = FieldSelector::parse("metadata.name=a,metadata.namespace=b").unwrap();
        assert_eq!(sel.check_supported(&[]), Ok(()));
        let sel = FieldSelector::parse("spec.nodeName=n,metadata.name=a").unwrap();
        assert_eq!(
            sel.check_supported(&[]),
            Err(
                "\"spec.nodeName\" is not a known field selector: only \"metadata.name\", \
                 \"metadata.namespace\""
                    .to_string()
            )
        );
        assert_eq!(sel.check_supported(&["spec.nodeName"]), Ok(()));
        assert_eq!(
            sel.check_supported(&["type"]),
            Err("field label not supported: spec.nodeName".to_string())
        );
        // The first unknown field in sorted term order is reported.
        let sel = FieldSelector::parse("z=1,b=2").unwrap();
        assert_eq!(
            sel.check_supported(&["type"]),
            Err("field label not supported: b".to_string())
        );
    }
}
