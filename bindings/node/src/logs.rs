//! The core's log records for the TypeScript client's logger. The sink queues each record to
//! a JavaScript function through a threadsafe function (non-blocking: records are emitted on
//! runtime threads and must not wait for the event loop); the function runs on the event
//! loop. The function is weak, so forwarding never keeps the process alive.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use queuebox_bridge::logs::{self, LogLevel, Record};

/// `[level 1 error .. 5 trace, target, message, fieldsJson]`: napi hands a tuple to the
/// JavaScript function as one array argument.
type Args = (u32, String, String, String);
type LogFn = ThreadsafeFunction<Args, Unknown<'static>, Args, Status, false, true>;

/// Forwards records at `minLevel` (1 error .. 5 trace) and more severe to
/// `callback([level, target, message, fieldsJson])`; `null` stops forwarding. The level filter
/// runs in Rust: a disabled level never reaches JavaScript.
#[napi(
    ts_args_type = "callback: ((record: [level: number, target: string, message: string, fieldsJson: string]) => void) | null, minLevel: number"
)]
pub fn set_log_callback(callback: Option<LogFn>, min_level: u32) -> Result<()> {
    let Some(callback) = callback else {
        return logs::set_sink(None, LogLevel::Error).map_err(Error::from_reason);
    };
    let level = LogLevel::from_number(min_level).ok_or_else(|| {
        Error::from_reason(format!(
            "minLevel {min_level} is not a level (1 error .. 5 trace)"
        ))
    })?;
    let sink: logs::Sink = Arc::new(move |r: &Record| {
        let args = (
            r.level as u32,
            r.target.clone(),
            r.message.clone(),
            r.fields_json(),
        );
        callback.call(args, ThreadsafeFunctionCallMode::NonBlocking);
    });
    logs::set_sink(Some(sink), level).map_err(Error::from_reason)
}
