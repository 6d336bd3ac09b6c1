//! Properties of every built-in kind's defaults, on objects generated from the kind's own
//! schema (upstream's OpenAPI definition): defaulting is idempotent (defaults set on a
//! defaulted object change nothing), and server-side apply of the defaulted object, as the
//! manager that created it, is a no-op (the object stays as it is).
//!
//! The generator walks the definition: each property is present or not, objects and maps
//! get a few entries, lists a few items, strings come from the words the field's
//! description quotes (upstream documents its enums so: `Can be "Recreate" or
//! "RollingUpdate"`) and a few plain ones, int-or-strings and quantities take their forms.

use proptest::prelude::{any, prop_assert_eq, prop_assume, proptest};
use serde_json::{Map, Value, json};

use super::Strategy;
use crate::apimachinery::time::Time;
use crate::fieldmanager::managed::FieldManager;
use crate::schema::builtin::{definition_name, definitions};
use crate::schema::resolve;

/// The generator's randomness: splitmix64 from the case's seed, so a failing seed replays.
struct TestRng(u64);

impl TestRng {
    fn next_u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 32) as u32
    }
}

/// How deep the generator goes before it leaves objects empty.
const DEPTH: usize = 7;

/// A value for `schema` (a definition or a property's schema).
fn generate(schema: &Value, rng: &mut TestRng, depth: usize) -> Value {
    let (_, schema) = resolve(schema, definitions());
    let pick = |rng: &mut TestRng, n: usize| (rng.next_u32() as usize) % n.max(1);
    let format = schema.get("format").and_then(Value::as_str).unwrap_or("");
    if format == "int-or-string" {
        return if rng.next_u32().is_multiple_of(2) {
            json!(pick(rng, 4))
        } else {
            json!(["25%", "1", "50%"][pick(rng, 3)])
        };
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        return json!(pick(rng, 4));
    }
    let kind = schema.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "boolean" => json!(rng.next_u32().is_multiple_of(2)),
        "integer" => json!(pick(rng, 5)),
        "number" => json!(pick(rng, 5) as f64 / 2.0),
        "string" if format == "date-time" => json!(Time(1_780_000_000).rfc3339()),
        "string" if format == "byte" => json!("aGVsbG8="),
        "string" => {
            let mut words: Vec<String> = schema
                .get("enum")
                .and_then(Value::as_array)
                .map(|e| {
                    e.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let description = schema
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("");
            words.extend(
                description
                    .split('"')
                    .skip(1)
                    .step_by(2)
                    .filter(|w| !w.is_empty() && w.len() < 40 && !w.contains(' '))
                    .map(str::to_string),
            );
            words.extend(["a".to_string(), "web".to_string(), "1".to_string()]);
            json!(words[pick(rng, words.len())])
        }
        "array" if depth > 0 => {
            let items = schema.get("items").cloned().unwrap_or(json!({}));
            let n = pick(rng, 3);
            Value::Array((0..n).map(|_| generate(&items, rng, depth - 1)).collect())
        }
        "array" => json!([]),
        _ => {
            let mut out = Map::new();
            if depth == 0 {
                return Value::Object(out);
            }
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    if ["apiVersion", "kind", "metadata", "status"].contains(&name.as_str()) {
                        continue;
                    }
                    if rng.next_u32().is_multiple_of(3) {
                        out.insert(name.clone(), generate(property, rng, depth - 1));
                    }
                }
            } else if let Some(values) = schema.get("additionalProperties") {
                for i in 0..pick(rng, 3) {
                    out.insert(format!("k{i}"), generate(values, rng, depth - 1));
                }
            } else if format.is_empty() && kind.is_empty() && schema.get("oneOf").is_none() {
                return json!({});
            } else {
                return json!("1");
            }
            Value::Object(out)
        }
    }
}

/// Every stored built-in kind.
fn builtin_kinds() -> Vec<&'static dyn Strategy> {
    super::kinds()
        .into_iter()
        .filter(|k| k.stored())
        .filter(|k| {
            let info = k.info();
            definition_name(info.group, info.version, info.kind).is_some()
        })
        .collect()
}

/// An object of `kind` generated from `seed`.
fn object(kind: &dyn Strategy, seed: u64) -> Value {
    let info = kind.info();
    let name = definition_name(info.group, info.version, info.kind).expect("a definition");
    let mut rng = TestRng(seed);
    let mut obj = generate(
        &json!({"$ref": format!("{}{name}", crate::schema::REF_PREFIX)}),
        &mut rng,
        DEPTH,
    );
    info.set_type(&mut obj);
    obj["metadata"] = json!({"name": "x"});
    if info.namespaced {
        obj["metadata"]["namespace"] = json!("default");
    }
    obj
}

/// `obj` without what only the store and the field manager write.
fn content(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    obj
}

proptest! {
    #[test]
    fn every_kinds_defaulting_is_idempotent(seed in any::<u64>()) {
        for kind in builtin_kinds() {
            let mut once = object(kind, seed);
            kind.set_defaults(&mut once);
            let mut twice = once.clone();
            kind.set_defaults(&mut twice);
            prop_assert_eq!(&twice, &once, "{} from seed {}", kind.info().kind, seed);
        }
    }

    #[test]
    fn applying_a_defaulted_object_changes_nothing(seed in any::<u64>()) {
        for kind in builtin_kinds() {
            let config = object(kind, seed);
            let manager = FieldManager::new(kind, None, Time(1_780_000_000));
            let created = manager.apply(None, &config, "test", false);
            // The generator may make what the typed apply refuses (a duplicate list-map key).
            prop_assume!(created.is_ok());
            let created = created.unwrap();
            let defaulted = content(&created);
            let again = FieldManager::new(kind, None, Time(1_780_000_100))
                .apply(Some(&created), &defaulted, "test", false);
            prop_assert_eq!(
                again.as_ref().map(content).map_err(|e| format!("{e:?}")),
                Ok(defaulted.clone()),
                "{} from seed {}", kind.info().kind, seed
            );
        }
    }
}
