//! `qb_set_log_callback`: the core's log records (`queuebox-bridge`'s forwarding layer) handed
//! to one process-wide C callback, for the Go and C# wrappers to pass on to `log/slog` and
//! an `ILogger`. The level filter runs in Rust: a record below the minimum is never built.

use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;

use queuebox_bridge::logs::{self, LogLevel, Record};

use crate::boundary::{guard, SendPtr};
use crate::error::{Failure, QbError, QbStatus};

/// Severity of a log record (lower is more severe).
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum QbLogLevel {
    QB_LOG_ERROR = 1,
    QB_LOG_WARN = 2,
    QB_LOG_INFO = 3,
    QB_LOG_DEBUG = 4,
    QB_LOG_TRACE = 5,
}

impl From<LogLevel> for QbLogLevel {
    fn from(l: LogLevel) -> Self {
        match l {
            LogLevel::Error => QbLogLevel::QB_LOG_ERROR,
            LogLevel::Warn => QbLogLevel::QB_LOG_WARN,
            LogLevel::Info => QbLogLevel::QB_LOG_INFO,
            LogLevel::Debug => QbLogLevel::QB_LOG_DEBUG,
            LogLevel::Trace => QbLogLevel::QB_LOG_TRACE,
        }
    }
}

/// Receives one log record: its level, target (the emitting module, e.g.
/// `queuebox_core::worker`), message, and the other fields as a JSON object
/// (`{"message_id":"…","source":"orders","error":"…"}`). Every string is UTF-8, owned by the
/// library and valid only during the call: copy what you keep. Called from any thread that
/// logs (runtime threads, or the caller's thread in a blocking call), possibly from several
/// at once; it should return quickly.
pub type QbLogCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        level: QbLogLevel,
        target: *const c_char,
        message: *const c_char,
        fields_json: *const c_char,
    ),
>;

/// The C function and its `user_data`, shared by every thread that logs.
struct CSink {
    callback:
        unsafe extern "C" fn(*mut c_void, QbLogLevel, *const c_char, *const c_char, *const c_char),
    user_data: SendPtr,
}

// SAFETY: the caller promised (proto-docs/ffi.md) that the callback may run on any thread
// with this user_data; the library never dereferences it.
unsafe impl Sync for CSink {}

impl CSink {
    fn call(&self, r: &Record) {
        let c = |s: &str| CString::new(s.replace('\0', "\u{FFFD}")).unwrap_or_default();
        let (target, message, fields) = (c(&r.target), c(&r.message), c(&r.fields_json()));
        // SAFETY: a C function pointer the caller installed; the strings outlive the call.
        unsafe {
            (self.callback)(
                self.user_data.0,
                r.level.into(),
                target.as_ptr(),
                message.as_ptr(),
                fields.as_ptr(),
            )
        }
    }
}

/// Installs `callback` for the core's records at `min_level` (1 error .. 5 trace, see
/// `QbLogLevel`) and more severe, replacing any previous callback; a NULL `callback` removes
/// it (`min_level` is then ignored). Process-wide: one callback serves every runtime and
/// worker. When this returns, the previous callback is not running and is never called
/// again, so its `user_data` may be freed. Refused (`QB_ERR_INVALID_INPUT`) for a
/// `min_level` outside 1..=5 and when called from inside the log callback.
///
/// # Safety
/// `callback` is NULL or a function safe to call from any thread with `user_data` until it
/// is replaced or removed; `out_error` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn qb_set_log_callback(
    callback: QbLogCallback,
    user_data: *mut c_void,
    min_level: i32,
    out_error: *mut *mut QbError,
) -> QbStatus {
    guard(out_error, || {
        let sink: Option<logs::Sink> = callback.map(|callback| {
            let c = CSink {
                callback,
                user_data: SendPtr(user_data),
            };
            Arc::new(move |r: &Record| c.call(r)) as logs::Sink
        });
        let level = match (
            &sink,
            u32::try_from(min_level)
                .ok()
                .and_then(LogLevel::from_number),
        ) {
            (None, _) => LogLevel::Error,
            (Some(_), Some(l)) => l,
            (Some(_), None) => {
                return Err(Failure::invalid(format!(
                    "min_level {min_level} is not a QbLogLevel (1 error .. 5 trace)"
                )))
            }
        };
        logs::set_sink(sink, level).map_err(Failure::invalid)
    })
}
