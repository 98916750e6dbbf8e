//! The relay's log output on stderr: `logging.format` picks human text (the default) or
//! one JSON object per line for log collectors. The level filter stays `RUST_LOG`
//! (default `info,sqlx=warn`) in both formats.
//!
//! A JSON line carries `timestamp`, `level`, `target`, `message` and the event's own fields
//! at the top level (`messageId`, `source`, `topic`, `error`, ...), so a collector can
//! filter one message's records without parsing the text.

use queuebox_config::LogFormat;

/// The environment variable the configuration maps to `logging.format`; read directly for
/// commands that run without a configuration file and before the file is loaded.
const FORMAT_ENV: &str = "QUEUEBOX_LOGGING_FORMAT";

/// `QUEUEBOX_LOGGING_FORMAT` when it says `json`, else text. An invalid value is reported
/// by the configuration load, naming the key.
pub fn format_from_env() -> LogFormat {
    match std::env::var(FORMAT_ENV) {
        Ok(v) if v.trim().eq_ignore_ascii_case("json") => LogFormat::Json,
        _ => LogFormat::Text,
    }
}

/// Installs the process's subscriber; call once, before anything logs.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,sqlx=warn".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        // Fields at the top level (not under "fields"), so `message` and `messageId` sit
        // beside `level` and `target`.
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
}

/// The last word of a failed command: the `queuebox: ...` line in text, an error record in
/// JSON (so every stderr line of a JSON relay parses).
pub fn fatal(format: LogFormat, message: &str) {
    match format {
        LogFormat::Text => eprintln!("queuebox: {message}"),
        LogFormat::Json => tracing::error!(target: "queuebox", "{message}"),
    }
}
