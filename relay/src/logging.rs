//! The relay's log output on stderr: `logging.format` picks human text (the default) or
//! one JSON object per line for log collectors. The level filter stays `RUST_LOG`
//! (default `info,sqlx=warn`) in both formats.
//!
//! Text carries ANSI colours only when stderr is a terminal and `NO_COLOR` is unset or empty
//! (<https://no-color.org>): output redirected to a file or a collector stays plain text.
//!
//! A JSON line carries `timestamp`, `level`, `target`, `message` and the event's own fields
//! at the top level (`messageId`, `source`, `topic`, `error`, ...), so a collector can
//! filter one message's records without parsing the text.

use std::io::IsTerminal;

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

/// Whether text logs may carry colour codes: stderr is a terminal and `NO_COLOR` is unset or
/// empty. A file of logs with escape codes in it is hard to read and to grep.
fn ansi_allowed(stderr_is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    stderr_is_terminal && !matches!(no_color, Some(v) if !v.is_empty())
}

/// Installs the process's subscriber; call once, before anything logs.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,sqlx=warn".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(ansi_allowed(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR"),
            ))
            .init(),
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

#[cfg(test)]
mod tests {
    use super::ansi_allowed;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(ansi_allowed(true, None));
        assert!(ansi_allowed(true, Some("".into())));
        assert!(!ansi_allowed(true, Some("1".into())));
        assert!(!ansi_allowed(false, None));
    }
}
