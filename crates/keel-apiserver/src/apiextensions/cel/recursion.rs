//! How deeply an expression's tree could nest, estimated from its text before any parser
//! runs: the parser keel uses has no recursion limit, and a chain of a few hundred `+` or a
//! hundred nested parentheses would overflow a thread's stack in it (and in the checker and
//! evaluator after it). cel-go refuses past [`MAX_DEPTH`] levels (its parser's
//! `maxRecursionDepth`); keel refuses the same, counting conservatively, so everything it
//! parses stays well inside a runtime thread's stack (`keel_process::THREAD_STACK`).

/// cel-go's default `maxRecursionDepth`.
pub const MAX_DEPTH: usize = 250;

/// The most `&&` and `||` at one level of brackets: cel-go keeps such chains flat and
/// balances them, keel's parser may not, so they count apart from [`MAX_DEPTH`] with a bound
/// that is safe either way.
const MAX_LOGICAL: usize = 1000;

/// What one level of brackets holds so far.
#[derive(Default)]
struct Level {
    /// Operators that nest a tree (binary ones but `&&` and `||`, `?`, unary ones, `.`) in
    /// the current term (since the last `,`, `&&` or `||`).
    chain: usize,
    /// `&&` and `||`.
    logical: usize,
}

/// cel-go's error for an expression nested too deeply, when `source` could be.
pub fn too_deep(source: &str) -> Option<String> {
    let refused = || Some(format!("expression recursion limit exceeded: {MAX_DEPTH}"));
    let chars: Vec<char> = source.chars().collect();
    let mut levels = vec![Level::default()];
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '"' | '\'' => {
                i = after_string(&chars, i);
                continue;
            }
            '/' if next == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '(' | '[' | '{' => {
                // An index (`x[0]`, `f()[0]`) also nests what it indexes.
                let indexed = chars[..i]
                    .iter()
                    .rev()
                    .find(|c| !c.is_whitespace())
                    .is_some_and(|p| p.is_alphanumeric() || matches!(p, '_' | ']' | ')'));
                if c == '[' && indexed {
                    levels.last_mut().expect("one level at least").chain += 1;
                }
                levels.push(Level::default());
            }
            ')' | ']' | '}' if levels.len() > 1 => {
                levels.pop();
            }
            '&' | '|' if next == Some(c) => {
                let level = levels.last_mut().expect("one level at least");
                level.logical += 1;
                if level.logical > MAX_LOGICAL {
                    return refused();
                }
                // The terms of a logical chain are siblings, not nested in one another.
                level.chain = 0;
                i += 2;
                continue;
            }
            // So are a list's items and a call's arguments.
            ',' => levels.last_mut().expect("one level at least").chain = 0,
            '.' if !(i > 0 && chars[i - 1].is_ascii_digit()) => {
                levels.last_mut().expect("one level at least").chain += 1
            }
            '+' | '-' | '*' | '/' | '%' | '<' | '>' | '=' | '!' | '?' => {
                levels.last_mut().expect("one level at least").chain += 1;
                // A two-character operator (`==`, `!=`, `<=`, `>=`) is one.
                if next == Some('=') {
                    i += 1;
                }
            }
            _ => {}
        }
        let depth = levels.len() + levels.iter().map(|l| l.chain).sum::<usize>();
        if depth > MAX_DEPTH {
            return refused();
        }
        i += 1;
    }
    None
}

/// The index after the string literal opening at `start` (single or triple quotes, `\`
/// escapes; a raw string's backslashes are taken as escapes too, which can only end it later).
fn after_string(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let triple = chars.get(start + 1) == Some(&quote) && chars.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            c if c == quote
                && (!triple
                    || (chars.get(i + 1) == Some(&quote) && chars.get(i + 2) == Some(&quote))) =>
            {
                return i + if triple { 3 } else { 1 };
            }
            _ => i += 1,
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_chains_and_deep_brackets_are_refused_long_flat_lists_are_not() {
        let refused = Some("expression recursion limit exceeded: 250".to_string());
        assert_eq!(too_deep(&format!("{}1", "1+".repeat(300))), refused);
        assert_eq!(
            too_deep(&format!("{}1{}", "(".repeat(251), ")".repeat(251))),
            refused
        );
        assert_eq!(too_deep(&format!("self{}", "[0]".repeat(251))), refused);
        assert_eq!(too_deep(&format!("self{}", ".a".repeat(251))), refused);
        assert_eq!(too_deep(&format!("{}x", "!".repeat(251))), refused);
        assert_eq!(too_deep(&format!("{}true", "x || ".repeat(1001))), refused);
        // Wide, not deep: a long list, many terms of `||`, operators inside strings.
        assert_eq!(too_deep(&format!("[{}1]", "1, ".repeat(5000))), None);
        assert_eq!(
            too_deep(&format!("{}true", "self.a > 0 || ".repeat(300))),
            None
        );
        assert_eq!(too_deep(&format!("'{}' == self.s", "+".repeat(1000))), None);
        assert_eq!(
            too_deep(&format!("\"\"\"{}\"\"\" == x", "(\"".repeat(400))),
            None
        );
        assert_eq!(
            too_deep("self.replicas <= self.maxReplicas && 1.5 > 0.5"),
            None
        );
        // Each pair of brackets closes its level.
        assert_eq!(
            too_deep(&"(1 + 2) * ".repeat(100).replace("* ", "+ ")),
            None
        );
    }
}
