//! The process's log: human-readable lines on standard error, coloured only when it is a
//! terminal (a log written to a file or a pipe carries no escape codes), or JSON lines on
//! request (`keel store --log-format json`, as etcd 3.6 names it; `keel apiserver
//! --logging-format json`, as kube-apiserver does; either on `keel up`): one object per line
//! with the time, the level, the component (`store`, `apiserver`, ...), the store member's
//! name where there is one, the message and the event's fields.

use std::fmt;
use std::io::IsTerminal;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// What is logged unless `RUST_LOG` says otherwise. openraft warns each time the caller of a
/// write has gone before its answer (a client that gave up under load): not worth a line each.
const DEFAULT_LOG: &str = "info,openraft=warn,openraft::raft::responder=error";

/// How log lines are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// Human-readable lines.
    Text,
    /// One JSON object per line; `member` is the store member's name, when the process runs
    /// one.
    Json {
        /// The store member's name.
        member: Option<String>,
    },
}

/// The JSON log's settings, once [`init`] chose JSON (`None` inside: text).
static JSON: std::sync::OnceLock<Option<JsonLines>> = std::sync::OnceLock::new();

/// Tells the operator `text` (what is serving, what to run next): a plain line on standard
/// error, or a JSON line when the log is JSON, so every line of a JSON log parses. Written
/// whatever `RUST_LOG` filters.
pub fn announce(text: &str) {
    say("info", text);
}

/// Tells the operator why the command failed, as [`announce`] does, at level `error`.
pub fn fail(text: &str) {
    say("error", text);
}

/// Writes `text` at `level` past the filter: as a JSON line or a plain one.
fn say(level: &str, text: &str) {
    match JSON.get() {
        Some(Some(json)) => {
            let fields = Map::from_iter([("msg".to_string(), Value::String(text.into()))]);
            eprintln!("{}", json.line(level, "keel", fields));
        }
        _ => eprintln!("{text}"),
    }
}

/// Installs the log for the whole process.
pub fn init(format: Format) {
    let _ = JSON.set(match &format {
        Format::Json { member } => Some(JsonLines {
            member: member.clone(),
        }),
        Format::Text => None,
    });
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        Format::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        Format::Json { member } => builder
            .with_ansi(false)
            .event_format(JsonLines { member })
            .init(),
    }
}

/// Writes each event as one JSON object.
struct JsonLines {
    member: Option<String>,
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        let mut fields = fields.0;
        if let Some(message) = fields.remove("message") {
            fields.insert("msg".into(), message);
        }
        let level = meta.level().as_str().to_ascii_lowercase();
        writeln!(writer, "{}", self.line(&level, meta.target(), fields))
    }
}

impl JsonLines {
    /// One JSON line: the time, `level`, the component of `target`, the member, the logger
    /// and `fields` (whose names never replace those).
    fn line(&self, level: &str, target: &str, fields: Map<String, Value>) -> String {
        let mut line = Map::new();
        line.insert("ts".into(), Value::String(now_rfc3339()));
        line.insert("level".into(), Value::String(level.into()));
        line.insert("component".into(), Value::String(component(target).into()));
        if let Some(member) = &self.member {
            line.insert("member".into(), Value::String(member.clone()));
        }
        line.insert("logger".into(), Value::String(target.into()));
        if !fields.contains_key("msg") {
            line.insert("msg".into(), Value::Null);
        }
        for (name, value) in fields {
            line.entry(name).or_insert(value);
        }
        Value::Object(line).to_string()
    }
}

/// The component a log target belongs to: the store's crates and Raft are `store`, the
/// apiserver's `apiserver`, the rest by their crate.
fn component(target: &str) -> &str {
    let krate = target.split("::").next().unwrap_or(target);
    match krate {
        "keel_store" | "keel_mvcc" | "keel_wal" | "openraft" => "store",
        "keel_apiserver" => "apiserver",
        "keel_bench" => "bench",
        "keel" => "keel",
        other => other,
    }
}

/// The current time as RFC 3339 in UTC with microseconds.
fn now_rfc3339() -> String {
    keel_apiserver::apimachinery::time::MicroTime::now().rfc3339()
}

/// An event's fields as JSON values.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), Value::String(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().into(), Value::String(value.into()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), Value::Bool(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
}

#[cfg(test)]
mod tests {
    use super::component;

    #[test]
    fn targets_name_their_component() {
        assert_eq!(component("keel_store::raft::network"), "store");
        assert_eq!(component("openraft::core"), "store");
        assert_eq!(component("keel_apiserver::http"), "apiserver");
        assert_eq!(component("h2::proto"), "h2");
    }
}
