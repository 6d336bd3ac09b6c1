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

/// Whether the log is JSON lines (set once by [`init`]).
static JSON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Tells the operator `text` (what is serving, what to run next): a plain line on standard
/// error, or a log line when the log is JSON, so every line of a JSON log parses.
pub fn announce(text: &str) {
    match JSON.get() {
        Some(true) => tracing::info!(target: "keel", "{text}"),
        _ => eprintln!("{text}"),
    }
}

/// Tells the operator why the command failed: a plain line, or an error log line.
pub fn fail(text: &str) {
    match JSON.get() {
        Some(true) => tracing::error!(target: "keel", "{text}"),
        _ => eprintln!("{text}"),
    }
}

/// Installs the log for the whole process.
pub fn init(format: Format) {
    let _ = JSON.set(matches!(format, Format::Json { .. }));
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
        let mut line = Map::new();
        line.insert("ts".into(), Value::String(now_rfc3339()));
        line.insert(
            "level".into(),
            Value::String(meta.level().as_str().to_ascii_lowercase()),
        );
        line.insert(
            "component".into(),
            Value::String(component(meta.target()).into()),
        );
        if let Some(member) = &self.member {
            line.insert("member".into(), Value::String(member.clone()));
        }
        line.insert("logger".into(), Value::String(meta.target().into()));
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        let message = fields.0.remove("message").unwrap_or(Value::Null);
        line.insert("msg".into(), message);
        line.extend(fields.0);
        let text = serde_json::to_string(&line).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
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
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let whole = keel_apiserver::registry::time::Time(now.as_secs() as i64).rfc3339();
    format!(
        "{}.{:06}Z",
        whole.trim_end_matches('Z'),
        now.subsec_micros()
    )
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
