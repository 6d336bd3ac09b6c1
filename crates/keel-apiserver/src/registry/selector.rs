//! Label and field selectors, parsed, validated, matched and worded as apimachinery does
//! (`k8s.io/apimachinery/pkg/labels/selector.go` `Parse` and `pkg/fields/selector.go`
//! `ParseSelector`, Kubernetes 1.34, the same release the object-name messages in
//! [`super::names`] follow).
//!
//! How kube-apiserver answers a bad selector on a list, watch or deletecollection: the
//! `labelSelector` and `fieldSelector` query parameters are decoded into
//! `metainternalversion.ListOptions` (`Convert_string_To_labels_Selector` and
//! `Convert_string_To_fields_Selector`, neither wraps the parser's error), and a decoding
//! failure becomes `errors.NewBadRequest(err.Error())`: a `Status` with `code` 400, `reason`
//! `BadRequest` and `message` exactly the text [`LabelSelector::parse`] or
//! [`FieldSelector::parse`] returns, e.g. `unable to parse requirement: found '', expected:
//! ',' or ')'` for `a in (b`, or `invalid selector: 'x'; can't understand 'x'`. A field
//! selector that parses but names a field the kind does not know is then rejected by the
//! kind's field label conversion, again as a 400 `BadRequest` whose message is the text of
//! [`FieldSelector::check_supported`]. No extra wrapping happens anywhere, so the HTTP layer
//! puts these strings in the `Status` as they are.
//!
//! Kubernetes 1.35 changed three details: "must be no more than 63 bytes" (for
//! "characters"), "a valid label key" (for "a qualified name") in the message for a key with
//! more than one `/`, and `x in (a,,)` parses (1.34 rejects it with `found ')', expected:
//! ',', or identifier`).

use std::fmt;

use serde_json::{Map, Value};

// ---------------------------------------------------------------------------------------
// Validation messages (k8s.io/apimachinery/pkg/util/validation/validation.go).

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
    and must start and end with an alphanumeric character";
const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of \
    alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
    character";
const LABEL_VALUE_MAX: usize = 63;
const SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
    alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_MAX: usize = 253;

/// `validation.MaxLenError`.
fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `validation.RegexError` (its odd `',  or '` spacing included).
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{re}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{re}')"));
    s
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// The DNS-1123 subdomain regex.
fn is_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        match (b.first(), b.last()) {
            (Some(f), Some(l)) => {
                let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
                ok(f) && ok(l) && b.iter().all(|c| ok(c) || *c == b'-')
            }
            _ => false,
        }
    })
}

/// `validation.IsDNS1123Subdomain`.
fn subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > SUBDOMAIN_MAX {
        errs.push(max_len_error(SUBDOMAIN_MAX));
    }
    if !is_subdomain(s) {
        errs.push(regex_error(SUBDOMAIN_ERR, SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// `validation.IsQualifiedName`: what is wrong with a label key (nothing: empty).
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let examples = ["MyName", "my.name", "123-abc"];
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &examples)
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &examples)
        ));
    }
    errs
}

/// `validation.IsValidLabelValue`: what is wrong with a label value (nothing: empty).
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errs.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !(value.is_empty() || is_qualified_name_part(value)) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Go's `%q` of a string (`strconv.Quote`), for the values in `field.Invalid` messages.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            ' ' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() || c.is_whitespace() => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `field.Invalid(path, value, detail).Error()` for a string value.
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {}: {detail}", go_quote(value))
}

/// `field.Invalid(path, values, detail).Error()` for a list of values (rendered as JSON).
fn invalid_list(path: &str, values: &[String], detail: &str) -> String {
    let json = serde_json::to_string(values).unwrap_or_default();
    format!("{path}: Invalid value: {json}: {detail}")
}

/// `field.ErrorList.ToAggregate().Error()`: duplicates dropped, one message as it is, more
/// in brackets separated by `, `.
fn aggregate(errs: Vec<String>) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    match seen.len() {
        0 => None,
        1 => seen.pop(),
        _ => Some(format!("[{}]", seen.join(", "))),
    }
}

// ---------------------------------------------------------------------------------------
// Label selectors.

/// A label selector requirement's operator (`selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `key in (a,b)`.
    In,
    /// `key notin (a,b)`: also matches when the label is missing.
    NotIn,
    /// `key=value`.
    Equals,
    /// `key==value`.
    DoubleEquals,
    /// `key!=value`: also matches when the label is missing.
    NotEquals,
    /// `key`: the label is set.
    Exists,
    /// `!key`: the label is not set.
    DoesNotExist,
    /// `key>n`: the label is an integer greater than `n`.
    GreaterThan,
    /// `key<n`: the label is an integer less than `n`.
    LessThan,
}

/// One requirement of a label selector (`labels.Requirement`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    /// Sorted and without duplicates, as Go's `sets.String.List()` gives them.
    values: Vec<String>,
}

impl Requirement {
    /// `labels.NewRequirement` with no field path, as the parser calls it.
    fn new(key: String, operator: Operator, values: Vec<String>) -> Result<Self, String> {
        let mut errs = Vec::new();
        let key_errs = qualified_name_errors(&key);
        if !key_errs.is_empty() {
            errs.push(invalid("key", &key, &key_errs.join("; ")));
        }
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errs.push(invalid_list(
                        "values",
                        &values,
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errs.push(invalid_list(
                        "values",
                        &values,
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(invalid_list(
                        "values",
                        &values,
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(invalid_list(
                        "values",
                        &values,
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(invalid(
                            &format!("values[{i}]"),
                            v,
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let value_errs = label_value_errors(v);
            if !value_errs.is_empty() {
                errs.push(invalid(
                    &format!("values[{i}][{key}]"),
                    v,
                    &value_errs.join("; "),
                ));
            }
        }
        match aggregate(errs) {
            Some(e) => Err(e),
            None => Ok(Requirement {
                key,
                operator,
                values,
            }),
        }
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted (empty for `Exists` and `DoesNotExist`).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether `labels` satisfy this requirement (`Requirement.Matches`).
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        // A label that is not a string (never so in a valid object) counts as set to "".
        let get = |k: &str| labels.get(k).map(|v| v.as_str().unwrap_or(""));
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                get(&self.key).is_some_and(has)
            }
            Operator::NotIn | Operator::NotEquals => !get(&self.key).is_some_and(has),
            Operator::Exists => labels.contains_key(&self.key),
            Operator::DoesNotExist => !labels.contains_key(&self.key),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(Ok(have)) = get(&self.key).map(str::parse::<i64>) else {
                    return false;
                };
                let [want] = self.values.as_slice() else {
                    return false;
                };
                let Ok(want) = want.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    /// `Requirement.String()`: `!k`, `k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k>1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.operator {
            Operator::DoesNotExist => return write!(f, "!{}", self.key),
            Operator::Exists => return write!(f, "{}", self.key),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::In | Operator::NotIn => {
                let op = if self.operator == Operator::In {
                    "in"
                } else {
                    "notin"
                };
                return write!(f, "{} {op} ({})", self.key, self.values.join(","));
            }
        };
        write!(f, "{}{op}{}", self.key, self.values.join(","))
    }
}

/// A parsed label selector (`labels.Selector`): requirements, all of which must hold, sorted
/// by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses a selector as `labels.Parse` does; the error is Go's error text, word for word
    /// (kube-apiserver answers it as the message of a 400 `BadRequest`).
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut parser = Parser {
            items: lex_all(s.as_bytes()),
            position: 0,
        };
        let mut requirements = parser.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// Whether `labels` (a `metadata.labels` map of string values) satisfy every requirement.
    /// The empty selector matches everything.
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the selector has no requirements (it then selects everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

impl fmt::Display for LabelSelector {
    /// `Selector.String()`: the requirements joined by `,`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// The lexer's tokens (`labels.Token`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn literal_token(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// `labels.Lexer`, byte by byte; like Go's, it reads a NUL byte as the end of the string.
struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&c) => {
                self.pos += 1;
                c
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos -= 1;
    }

    fn scan_id_or_keyword(&mut self) -> (Token, String) {
        let mut buf = Vec::new();
        loop {
            let c = self.read();
            if c == 0 {
                break;
            }
            if is_special(c) || is_whitespace(c) {
                self.unread();
                break;
            }
            buf.push(c);
        }
        let tok = literal_token(&buf).unwrap_or(Token::Identifier);
        (tok, String::from_utf8_lossy(&buf).into_owned())
    }

    fn scan_special(&mut self) -> (Token, String) {
        let mut buf = Vec::new();
        let mut last: Option<(Token, String)> = None;
        loop {
            let c = self.read();
            if c == 0 {
                break;
            }
            if !is_special(c) {
                self.unread();
                break;
            }
            buf.push(c);
            if let Some(tok) = literal_token(&buf) {
                last = Some((tok, String::from_utf8_lossy(&buf).into_owned()));
            } else if last.is_some() {
                self.unread();
                break;
            }
        }
        last.unwrap_or_else(|| {
            (
                Token::Error,
                format!(
                    "error expected: keyword found '{}'",
                    String::from_utf8_lossy(&buf)
                ),
            )
        })
    }

    fn lex(&mut self) -> (Token, String) {
        let mut c = self.read();
        while is_whitespace(c) {
            c = self.read();
        }
        if c == 0 {
            return (Token::EndOfString, String::new());
        }
        self.unread();
        if is_special(c) {
            self.scan_special()
        } else {
            self.scan_id_or_keyword()
        }
    }
}

/// Every token up to and including the end of the string (`Parser.scan`).
fn lex_all(s: &[u8]) -> Vec<(Token, String)> {
    let mut lexer = Lexer { s, pos: 0 };
    let mut items = Vec::new();
    loop {
        let item = lexer.lex();
        let end = item.0 == Token::EndOfString;
        items.push(item);
        if end {
            return items;
        }
    }
}

/// `labels.ParserContext`: in `Values`, `in` and `notin` are identifiers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

/// `labels.Parser`.
struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

/// Go's `sets.String` → sorted list.
fn sorted_set(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

impl Parser {
    fn lookahead(&self, ctx: Context) -> (Token, String) {
        let (tok, lit) = self.items[self.position.min(self.items.len() - 1)].clone();
        (Self::in_context(tok, ctx), lit)
    }

    fn consume(&mut self, ctx: Context) -> (Token, String) {
        let item = self.lookahead(ctx);
        self.position += 1;
        item
    }

    fn in_context(tok: Token, ctx: Context) -> Token {
        match tok {
            Token::In | Token::NotIn if ctx == Context::Values => Token::Identifier,
            t => t,
        }
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, operator) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (Operator::Exists | Operator::DoesNotExist)) = operator {
            return Requirement::new(key, op, Vec::new());
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(key, operator, sorted_set(values))
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut operator = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errs = qualified_name_errors(&lit);
        if !errs.is_empty() {
            // The parser's field path is nil, which Go prints as `<nil>`.
            return Err(invalid("<nil>", &lit, &errs.join("; ")));
        }
        let (t, _) = self.lookahead(Context::Values);
        if (t == Token::EndOfString || t == Token::Comma) && operator.is_none() {
            operator = Some(Operator::Exists);
        }
        Ok((lit, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let s = self.parse_identifiers_list()?;
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(s)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut s: Vec<String> = Vec::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    s.push(lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(s),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if s.is_empty() {
                        s.push(String::new());
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Token::ClosedPar {
                        s.push(String::new());
                        return Ok(s);
                    }
                    if tok2 == Token::Comma {
                        // Kubernetes 1.34 consumes the second comma here, so `(a,,)` fails.
                        self.consume(Context::Values);
                        s.push(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier {
            return Ok(vec![lit]);
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}

// ---------------------------------------------------------------------------------------
// Field selectors.

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
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of \
        alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
        character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is \
        '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' \
        or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or \
        'my.name',  or '123-abc', regex used for validation is \
        '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    #[test]
    fn label_selectors_parse_and_print_as_go() {
        // TestSelectorParse's good strings: String() gives them back without spaces.
        for s in [
            "x=a,y=b,z=c",
            "",
            "x!=a,y=b",
            "x=",
            "x= ",
            "x=,z= ",
            "x= ,z= ",
            "!x",
            "x>1",
            "x>1,z<5",
        ] {
            let sel = LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(sel.to_string(), s.replace(' ', ""), "{s}");
        }
        // TestSetSelectorParser's valid cases, printed sorted by key.
        for (s, want) in [
            ("\rx", "x"),
            (
                "this-is-a-dns.domain.com/key-with-dash",
                "this-is-a-dns.domain.com/key-with-dash",
            ),
            (
                "this-is-another-dns.domain.com/key-with-dash in (so,what)",
                "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            ),
            (
                "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
                "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)",
            ),
            ("foo  in\t (abc)", "foo in (abc)"),
            ("x notin\n (abc)", "x notin (abc)"),
            ("x  notin\t\t\t(abc,def)", "x notin (abc,def)"),
            ("x in (abc,def)", "x in (abc,def)"),
            ("x in (abc,)", "x in (,abc)"),
            ("x in ()", "x in ()"),
            (
                "x notin (abc,,def),bar,z in (),w",
                "bar,w,x notin (,abc,def),z in ()",
            ),
            ("x,y in (a)", "x,y in (a)"),
            ("x=a", "x=a"),
            ("x>1", "x>1"),
            ("x<7", "x<7"),
            ("x=a,y!=b", "x=a,y!=b"),
            ("x=a,y!=b,z in (h,i,j)", "x=a,y!=b,z in (h,i,j)"),
            ("x notin ( )", "x notin ()"),
            ("x notin (, a)", "x notin (,a)"),
            ("a ", "a"),
            ("a in (x,y,notin, z,in)", "a in (in,notin,x,y,z)"),
            ("x=a,a=x", "a=x,x=a"),
            ("a = b , c", "a=b,c"),
            ("in=notin", "in=notin"),
            ("x==a", "x==a"),
            ("x in (b,a,b)", "x in (a,b)"),
            ("x \0garbage", "x"),
        ] {
            let sel = LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
            assert_eq!(sel.to_string(), want, "{s:?}");
        }
        assert!(LabelSelector::parse("").unwrap().is_empty());
        assert!(LabelSelector::parse("  ").unwrap().is_empty());
        assert!(!LabelSelector::parse("a").unwrap().is_empty());
    }

    #[test]
    fn label_selector_errors_are_worded_as_go() {
        let long = "a".repeat(64);
        let cases: Vec<(String, String)> = vec![
            (
                "x=a||y=b".into(),
                format!(
                    "unable to parse requirement: values[0][x]: Invalid value: \"a||y\": \
                     {LABEL_VALUE_MSG}"
                ),
            ),
            (
                "x==a==b".into(),
                "found '==', expected: ',' or 'end of string'".into(),
            ),
            (
                "!x=a".into(),
                "found '=', expected: ',' or 'end of string'".into(),
            ),
            (
                "x<a".into(),
                "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' \
                 operators, the value must be an integer"
                    .into(),
            ),
            (
                "x,,y".into(),
                "found ',', expected: identifier after ','".into(),
            ),
            (
                ",x,y".into(),
                "found ',', expected: !, identifier, or 'end of string'".into(),
            ),
            (
                "x nott in (y)".into(),
                "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt"
                    .into(),
            ),
            (
                "a in (xyz),".into(),
                "found '', expected: identifier after ','".into(),
            ),
            (
                "a in (xyz)b notin ()".into(),
                "found 'b', expected: ',' or 'end of string'".into(),
            ),
            (
                "a in (xyz abc)".into(),
                "unable to parse requirement: found 'abc', expected: ',' or ')'".into(),
            ),
            (
                "a notin(".into(),
                "unable to parse requirement: found '', expected: ',', ')' or identifier".into(),
            ),
            (
                "a (".into(),
                "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"
                    .into(),
            ),
            (
                "(".into(),
                "found '(', expected: !, identifier, or 'end of string'".into(),
            ),
            (
                "a in (b".into(),
                "unable to parse requirement: found '', expected: ',' or ')'".into(),
            ),
            (
                "a in b".into(),
                "unable to parse requirement: found 'b' expected: '('".into(),
            ),
            (
                "x=(".into(),
                "unable to parse requirement: found '(', expected: identifier".into(),
            ),
            (
                "!".into(),
                "unable to parse requirement: found '', expected: identifier".into(),
            ),
            (
                "x in (a,,)".into(),
                "unable to parse requirement: found ')', expected: ',', or identifier".into(),
            ),
            (
                "a/b/c".into(),
                "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name \
                 must consist of alphanumeric characters, '-', '_' or '.', and must start and \
                 end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
                 '123-abc', regex used for validation is \
                 '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain \
                 prefix and '/' (e.g. 'example.com/MyName')"
                    .into(),
            ),
            (
                "/a".into(),
                "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must \
                 be non-empty"
                    .into(),
            ),
            (
                "a/".into(),
                format!(
                    "unable to parse requirement: <nil>: Invalid value: \"a/\": name part must \
                     be non-empty; {NAME_PART_MSG}"
                ),
            ),
            (
                "Example.com/a".into(),
                "unable to parse requirement: <nil>: Invalid value: \"Example.com/a\": prefix \
                 part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                 characters, '-' or '.', and must start and end with an alphanumeric character \
                 (e.g. 'example.com', regex used for validation is \
                 '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                    .into(),
            ),
            (
                long.clone(),
                format!(
                    "unable to parse requirement: <nil>: Invalid value: \"{long}\": name part \
                     must be no more than 63 characters"
                ),
            ),
            (
                "-x".into(),
                format!(
                    "unable to parse requirement: <nil>: Invalid value: \"-x\": {NAME_PART_MSG}"
                ),
            ),
            (
                format!("x={long}"),
                format!(
                    "unable to parse requirement: values[0][x]: Invalid value: \"{long}\": must \
                     be no more than 63 characters"
                ),
            ),
            (
                "x=a\"b".into(),
                format!(
                    "unable to parse requirement: values[0][x]: Invalid value: \"a\\\"b\": \
                     {LABEL_VALUE_MSG}"
                ),
            ),
            (
                "x>-1".into(),
                format!(
                    "unable to parse requirement: values[0][x]: Invalid value: \"-1\": \
                     {LABEL_VALUE_MSG}"
                ),
            ),
            (
                "x>-".into(),
                format!(
                    "unable to parse requirement: [values[0]: Invalid value: \"-\": for 'Gt', \
                     'Lt' operators, the value must be an integer, values[0][x]: Invalid value: \
                     \"-\": {LABEL_VALUE_MSG}]"
                ),
            ),
            (
                "x in (a,-)".into(),
                format!(
                    "unable to parse requirement: values[0][x]: Invalid value: \"-\": \
                     {LABEL_VALUE_MSG}"
                ),
            ),
            (
                // A NUL byte inside a word ends the word, as Go's lexer reads it.
                "x\0y".into(),
                "unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt"
                    .into(),
            ),
        ];
        for (s, want) in cases {
            assert_eq!(LabelSelector::parse(&s), Err(want), "{s:?}");
        }
    }

    #[test]
    fn label_selectors_match_as_go() {
        let cases = [
            // TestSelectorMatches.
            ("", json!({"x": "y"}), true),
            ("x=y", json!({"x": "y"}), true),
            ("x=y,z=w", json!({"x": "y", "z": "w"}), true),
            ("x!=y,z!=w", json!({"x": "z", "z": "a"}), true),
            ("notin=in", json!({"notin": "in"}), true),
            ("x", json!({"x": "z"}), true),
            ("!x", json!({"y": "z"}), true),
            ("x>1", json!({"x": "2"}), true),
            ("x<1", json!({"x": "0"}), true),
            ("x=z", json!({}), false),
            ("x=y", json!({"x": "z"}), false),
            ("x=y,z=w", json!({"x": "w", "z": "w"}), false),
            ("x!=y,z!=w", json!({"x": "z", "z": "w"}), false),
            ("x", json!({"y": "z"}), false),
            ("!x", json!({"x": "z"}), false),
            ("x>1", json!({"x": "0"}), false),
            ("x<1", json!({"x": "2"}), false),
            ("foo=bar", json!({"foo": "bar", "baz": "blah"}), true),
            ("baz=blah", json!({"foo": "bar", "baz": "blah"}), true),
            (
                "foo=bar,baz=blah",
                json!({"foo": "bar", "baz": "blah"}),
                true,
            ),
            ("foo=blah", json!({"foo": "bar", "baz": "blah"}), false),
            ("baz=bar", json!({"foo": "bar", "baz": "blah"}), false),
            (
                "foo=bar,foobar=bar,baz=blah",
                json!({"foo": "bar", "baz": "blah"}),
                false,
            ),
            // TestRequirementSelectorMatching.
            (
                "x in (foo),y notin (alpha)",
                json!({"x": "foo", "y": "baz"}),
                true,
            ),
            (
                "x in (foo),y in (alpha)",
                json!({"x": "foo", "y": "baz"}),
                false,
            ),
            ("x notin (),y", json!({"y": ""}), true),
            ("!x,y", json!({"y": ""}), true),
            ("x notin (),!y", json!({"y": ""}), false),
            ("x in ()", json!({"y": "baz"}), false),
            ("z>1", json!({"z": "2"}), true),
            ("z>1", json!({"z": "v2"}), false),
            // Missing labels: != and notin match, in and = do not, > and < do not.
            ("x!=a", json!({}), true),
            ("x notin (a,b)", json!({}), true),
            ("x in (a,b)", json!({}), false),
            ("x>0", json!({}), false),
            ("x in (a,b)", json!({"x": "b"}), true),
            ("x notin (a,b)", json!({"x": "b"}), false),
            ("x=", json!({"x": ""}), true),
            ("x=", json!({}), false),
            ("a = b , c", json!({"a": "b", "c": "d"}), true),
            ("a = b , c", json!({"a": "b"}), false),
            ("x>1", json!({"x": "02"}), true),
            ("x>1", json!({"x": "+5"}), true),
            ("x<10", json!({"x": "-3"}), true),
        ];
        for (s, l, want) in cases {
            let sel = LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(sel.matches(&labels(l.clone())), want, "{s} on {l}");
        }
    }

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

    #[test]
    fn go_quoting() {
        assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(go_quote("\u{1}\u{7f}\u{a0}é"), r#""\x01\x7f\u00a0é""#);
    }
}
