//! The JSONPath a CRD's printer columns and selectable fields name (`.spec.replicas`,
//! `.status.conditions[?(@.type=="Ready")].status`), read as client-go's `util/jsonpath`
//! reads the one expression inside `{...}`: fields by `.name` or `['name']`, list items by
//! index (`[0]`, `[-1]`), every item (`[*]`), and items that pass a filter
//! (`[?(@.path == "value")]`, also `!=`, `<`, `<=`, `>`, `>=` on numbers, or `[?(@.path)]`
//! for items that have it). A step that finds nothing ends with nothing, not an error.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter(Filter),
}

/// `[?(@.path op value)]`, or `[?(@.path)]` (op None).
#[derive(Debug, Clone, PartialEq)]
struct Filter {
    path: Vec<Step>,
    op: Option<(String, Value)>,
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

impl JsonPath {
    /// Parses `path` (with or without the `{...}` around it); the error says where it stops
    /// making sense.
    pub fn parse(path: &str) -> Result<JsonPath, String> {
        let inner = path
            .trim()
            .strip_prefix('{')
            .and_then(|p| p.strip_suffix('}'))
            .unwrap_or(path.trim());
        let mut parser = Parser { text: inner, at: 0 };
        let steps = parser.steps(false)?;
        if parser.at != inner.len() {
            return Err(format!(
                "unrecognized character in action: {}",
                &inner[parser.at..]
            ));
        }
        Ok(JsonPath { steps })
    }

    /// The values the path finds in `value`, in order.
    pub fn find<'a>(&self, value: &'a Value) -> Vec<&'a Value> {
        let mut current = vec![value];
        for step in &self.steps {
            current = current.into_iter().flat_map(|v| apply(step, v)).collect();
        }
        current
    }
}

fn apply<'a>(step: &Step, value: &'a Value) -> Vec<&'a Value> {
    match (step, value) {
        (Step::Field(name), Value::Object(map)) => map.get(name).into_iter().collect(),
        (Step::Index(i), Value::Array(items)) => {
            let i = if *i < 0 { items.len() as i64 + i } else { *i };
            usize::try_from(i)
                .ok()
                .and_then(|i| items.get(i))
                .into_iter()
                .collect()
        }
        (Step::All, Value::Array(items)) => items.iter().collect(),
        (Step::All, Value::Object(map)) => map.values().collect(),
        (Step::Filter(filter), Value::Array(items)) => {
            items.iter().filter(|item| passes(filter, item)).collect()
        }
        _ => Vec::new(),
    }
}

fn passes(filter: &Filter, item: &Value) -> bool {
    let path = JsonPath {
        steps: filter.path.clone(),
    };
    let found = path.find(item);
    let Some((op, want)) = &filter.op else {
        return !found.is_empty();
    };
    found.iter().any(|got| {
        let numbers = got.as_f64().zip(want.as_f64());
        match op.as_str() {
            "==" => *got == want || numbers.is_some_and(|(a, b)| a == b),
            "!=" => *got != want && !numbers.is_some_and(|(a, b)| a == b),
            "<" => numbers.is_some_and(|(a, b)| a < b),
            "<=" => numbers.is_some_and(|(a, b)| a <= b),
            ">" => numbers.is_some_and(|(a, b)| a > b),
            ">=" => numbers.is_some_and(|(a, b)| a >= b),
            _ => false,
        }
    })
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            self.at += s.len();
            true
        } else {
            false
        }
    }

    fn skip_spaces(&mut self) {
        let trimmed = self.rest().trim_start();
        self.at = self.text.len() - trimmed.len();
    }

    /// Steps until the end, or (in a filter) until what is not a step.
    fn steps(&mut self, in_filter: bool) -> Result<Vec<Step>, String> {
        let mut steps = Vec::new();
        loop {
            if self.rest().is_empty() {
                return Ok(steps);
            }
            if self.eat("..") {
                return Err("recursive descent (..) is not supported".into());
            }
            if self.eat(".") {
                let name = self.name();
                if name.is_empty() {
                    if self.rest().starts_with('[') || self.rest().is_empty() {
                        continue;
                    }
                    return Err(format!("invalid field name at {}", self.rest()));
                }
                if name == "*" {
                    steps.push(Step::All);
                } else {
                    steps.push(Step::Field(name));
                }
            } else if self.eat("[") {
                steps.push(self.bracket()?);
            } else if in_filter {
                return Ok(steps);
            } else {
                return Err(format!("unrecognized character in action: {}", self.rest()));
            }
        }
    }

    fn name(&mut self) -> String {
        let end = self
            .rest()
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '*' | '/')))
            .unwrap_or(self.rest().len());
        let name = self.rest()[..end].to_string();
        self.at += end;
        name
    }

    fn bracket(&mut self) -> Result<Step, String> {
        self.skip_spaces();
        let step = if self.eat("*") {
            Step::All
        } else if self.eat("?(") {
            self.skip_spaces();
            if !self.eat("@") {
                return Err("a filter starts with @".into());
            }
            let path = self.steps(true)?;
            self.skip_spaces();
            let op = ["==", "!=", "<=", ">=", "<", ">"]
                .into_iter()
                .find(|op| self.rest().starts_with(op));
            let op = match op {
                Some(op) => {
                    self.at += op.len();
                    self.skip_spaces();
                    Some((op.to_string(), self.literal()?))
                }
                None => None,
            };
            self.skip_spaces();
            if !self.eat(")") {
                return Err(format!("unclosed filter at {}", self.rest()));
            }
            Step::Filter(Filter { path, op })
        } else if let Some(name) = self.quoted()? {
            Step::Field(name)
        } else {
            let end = self.rest().find(']').unwrap_or(self.rest().len());
            let text = self.rest()[..end].trim().to_string();
            self.at += end;
            let index = text
                .parse::<i64>()
                .map_err(|_| format!("invalid array index {text}"))?;
            Step::Index(index)
        };
        self.skip_spaces();
        if !self.eat("]") {
            return Err(format!("unterminated array at {}", self.rest()));
        }
        Ok(step)
    }

    /// A string in single or double quotes, if one starts here.
    fn quoted(&mut self) -> Result<Option<String>, String> {
        let Some(quote) = ['\'', '"']
            .into_iter()
            .find(|q| self.rest().starts_with(*q))
        else {
            return Ok(None);
        };
        self.at += 1;
        let end = self
            .rest()
            .find(quote)
            .ok_or_else(|| "unterminated string".to_string())?;
        let text = self.rest()[..end].to_string();
        self.at += end + 1;
        Ok(Some(text))
    }

    fn literal(&mut self) -> Result<Value, String> {
        if let Some(text) = self.quoted()? {
            return Ok(Value::String(text));
        }
        let end = self
            .rest()
            .find(|c: char| c == ')' || c.is_whitespace())
            .unwrap_or(self.rest().len());
        let text = &self.rest()[..end];
        let value = match text {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => serde_json::from_str::<serde_json::Number>(text)
                .map(Value::Number)
                .map_err(|_| format!("invalid literal {text}"))?,
        };
        self.at += end;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn find(path: &str, value: &Value) -> Vec<Value> {
        JsonPath::parse(path)
            .unwrap()
            .find(value)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn fields_indexes_wildcards_and_filters() {
        let obj = json!({
            "metadata": {"labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"replicas": 3, "ports": [{"port": 80}, {"port": 443}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False"},
            ]},
        });
        assert_eq!(find(".spec.replicas", &obj), [json!(3)]);
        assert_eq!(find("{.spec.replicas}", &obj), [json!(3)]);
        assert_eq!(find(".spec.ports[1].port", &obj), [json!(443)]);
        assert_eq!(find(".spec.ports[-1].port", &obj), [json!(443)]);
        assert_eq!(find(".spec.ports[*].port", &obj), [json!(80), json!(443)]);
        assert_eq!(
            find(r#".status.conditions[?(@.type=="Ready")].status"#, &obj),
            [json!("True")]
        );
        assert_eq!(
            find(".status.conditions[?(@.type != 'Ready')].type", &obj),
            [json!("Synced")]
        );
        assert_eq!(
            find(".spec.ports[?(@.port > 100)].port", &obj),
            [json!(443)]
        );
        assert_eq!(
            find(".metadata.labels['app.kubernetes.io/name']", &obj),
            [json!("web")]
        );
        assert!(find(".spec.missing.deeper", &obj).is_empty());
        assert!(find(".spec.ports[5]", &obj).is_empty());
        assert!(JsonPath::parse(".spec[").is_err());
        assert!(JsonPath::parse("..spec").is_err());
    }
}
