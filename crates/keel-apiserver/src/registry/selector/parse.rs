//! The label selector parser (`labels.Parse`: its lexer, its parser and their errors, word for
//! word), which [`LabelSelector::parse`] runs.

use super::{Operator, Requirement, invalid};
use crate::apimachinery::validation::is_qualified_name;

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

/// A label selector's requirements, in the order written (`labels.Parse` before it sorts
/// them); the error is Go's, word for word.
pub(super) fn requirements(s: &str) -> Result<Vec<Requirement>, String> {
    let mut parser = Parser {
        items: lex_all(s.as_bytes()),
        position: 0,
    };
    parser.parse()
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
        let errs = is_qualified_name(&lit);
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

#[cfg(test)]
mod tests {
    use crate::registry::selector::LabelSelector;

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
}
