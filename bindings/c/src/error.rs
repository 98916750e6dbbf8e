//! Status codes and the error object handed across the boundary.
//!
//! Every export returns a [`QbStatus`]; on failure it also writes a [`QbError`] through an
//! out-parameter (or passes one to a callback). There is no thread-local "last error": a
//! goroutine or a C# continuation may run the next call on another OS thread.

use std::any::Any;
use std::ffi::{c_char, CStr, CString};
use std::ptr;

use queuebox_core::{Error, ErrorKind};

/// The result of every call. `QB_ERR_*` values 2..=9 and `QB_CANCELLED` are the codes of
/// `queuebox_core::ErrorKind`, the one error-kind table (a test checks every value and
/// name against it); cancellation has its own code so that no caller matches on a message.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum QbStatus {
    /// Success.
    QB_OK = 0,
    /// A bug or a panic inside the library (the panic was caught at the boundary).
    QB_ERR_INTERNAL = 1,
    /// A fenced write matched no row: the lease expired or another worker owns the row.
    QB_ERR_CLAIM_LOST = 2,
    /// The database could not be reached.
    QB_ERR_CONNECT = 3,
    /// The QueueBox tables are missing: run the migrations.
    QB_ERR_SCHEMA_MISSING = 4,
    /// The migration history disagrees with this build.
    QB_ERR_MIGRATION = 5,
    /// A statement failed; `QbError.code` holds the SQLSTATE when the server gave one.
    QB_ERR_DATABASE = 6,
    /// An option is invalid; `QbError.code` names the field (e.g. `batchSize`).
    QB_ERR_CONFIG = 7,
    /// An argument is invalid (NULL handle, bad JSON, a blocking call on a runtime thread).
    QB_ERR_INVALID_INPUT = 8,
    /// The task was already completed, failed, retried, dead-lettered, released or abandoned.
    QB_ERR_ALREADY_FINISHED = 9,
    /// The operation was cancelled (worker shutdown, lost lease, or shutdown grace over).
    QB_CANCELLED = 10,
}

impl From<ErrorKind> for QbStatus {
    fn from(k: ErrorKind) -> Self {
        match k {
            ErrorKind::ClaimLost => QbStatus::QB_ERR_CLAIM_LOST,
            ErrorKind::Connect => QbStatus::QB_ERR_CONNECT,
            ErrorKind::SchemaMissing => QbStatus::QB_ERR_SCHEMA_MISSING,
            ErrorKind::Migration => QbStatus::QB_ERR_MIGRATION,
            ErrorKind::Database => QbStatus::QB_ERR_DATABASE,
            ErrorKind::Config => QbStatus::QB_ERR_CONFIG,
            ErrorKind::InvalidInput => QbStatus::QB_ERR_INVALID_INPUT,
            ErrorKind::AlreadyFinished => QbStatus::QB_ERR_ALREADY_FINISHED,
            ErrorKind::Cancelled => QbStatus::QB_CANCELLED,
        }
    }
}

impl QbStatus {
    /// The core's kind behind this status; `None` for `QB_OK` and `QB_ERR_INTERNAL`.
    pub fn kind(self) -> Option<ErrorKind> {
        ErrorKind::from_code(self as i32)
    }

    /// The stable name of a status (`"claim_lost"`, ...): the core's `ErrorKind` name, or
    /// `"ok"` / `"internal"` for the two statuses of the boundary itself.
    pub fn name(self) -> &'static str {
        self.name_cstr().to_str().expect("names are ASCII")
    }

    fn name_cstr(self) -> &'static CStr {
        match self {
            QbStatus::QB_OK => c"ok",
            QbStatus::QB_ERR_INTERNAL => c"internal",
            other => other
                .kind()
                .expect("every other status is a core kind")
                .name_cstr(),
        }
    }
}

/// An error: allocated by the library, owned by the caller, released with
/// `qb_error_free`. All strings are UTF-8 and NUL-terminated.
#[repr(C)]
pub struct QbError {
    /// The status the call returned (never `QB_OK`).
    pub kind: QbStatus,
    /// The stable name of `kind` (`"claim_lost"`, `"config"`, ...); static, never freed.
    pub kind_name: *const c_char,
    /// A machine-readable detail or NULL: the SQLSTATE of a database error, the option
    /// path of a configuration error (`"batchSize"`, `"retry.baseDelayMs"`).
    pub code: *mut c_char,
    /// A human-readable message (passwords redacted by the core).
    pub message: *mut c_char,
}

/// An error before it crosses the boundary.
#[derive(Debug)]
pub(crate) struct Failure {
    pub status: QbStatus,
    pub code: Option<String>,
    pub message: String,
}

impl Failure {
    pub fn invalid(message: impl Into<String>) -> Self {
        Failure {
            status: QbStatus::QB_ERR_INVALID_INPUT,
            code: None,
            message: message.into(),
        }
    }

    pub fn config(path: &str, reason: impl Into<String>) -> Self {
        Failure::from(Error::Config {
            path: path.to_string(),
            reason: reason.into(),
        })
    }

    pub fn panic(payload: Box<dyn Any + Send>) -> Self {
        let text = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Failure {
            status: QbStatus::QB_ERR_INTERNAL,
            code: None,
            message: format!("internal error (panic caught at the C boundary): {text}"),
        }
    }

    /// Moves the failure onto the heap for the caller; `qb_error_free` releases it.
    pub fn into_raw(self) -> *mut QbError {
        Box::into_raw(Box::new(QbError {
            kind: self.status,
            kind_name: self.status.name_cstr().as_ptr(),
            code: self.code.map_or(ptr::null_mut(), |c| cstring(c).into_raw()),
            message: cstring(self.message).into_raw(),
        }))
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure {
            status: e.kind().into(),
            code: queuebox_bridge::errors::detail(&e),
            message: e.to_string(),
        }
    }
}

/// A `CString` from text that may contain NUL bytes (they are replaced, never truncated).
pub(crate) fn cstring(s: String) -> CString {
    CString::new(s).unwrap_or_else(|e| {
        let s: String = String::from_utf8_lossy(&e.into_vec()).replace('\0', "\u{FFFD}");
        CString::new(s).expect("NULs replaced")
    })
}

/// Writes `e` through `out` when the caller asked for it; otherwise drops it.
pub(crate) fn write_error(out: *mut *mut QbError, e: Failure) {
    if !out.is_null() {
        // SAFETY: the caller passes a writable `QbError**` or NULL (checked above).
        unsafe { *out = e.into_raw() };
    }
}

/// Releases an error returned by any call. NULL is ignored.
///
/// # Safety
/// `error` is NULL or a pointer the library returned and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn qb_error_free(error: *mut QbError) {
    let _ = std::panic::catch_unwind(|| {
        if error.is_null() {
            return;
        }
        let e = Box::from_raw(error);
        if !e.code.is_null() {
            drop(CString::from_raw(e.code));
        }
        if !e.message.is_null() {
            drop(CString::from_raw(e.message));
        }
    });
}

/// The stable name of a status code (`"ok"`, `"claim_lost"`, ...); a static string, never
/// freed. Unknown values give `"unknown"`.
#[no_mangle]
pub extern "C" fn qb_status_name(status: i32) -> *const c_char {
    let name: &'static CStr = match status {
        0 => QbStatus::QB_OK.name_cstr(),
        1 => QbStatus::QB_ERR_INTERNAL.name_cstr(),
        _ => ErrorKind::from_code(status).map_or(c"unknown", ErrorKind::name_cstr),
    };
    name.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The C statuses are the core's kind table: same code, same name, for every kind.
    #[test]
    fn every_core_error_kind_is_a_status_with_its_code_and_name() {
        for k in ErrorKind::ALL {
            let s = QbStatus::from(k);
            assert_eq!(s as i32, k.code(), "{k:?}");
            assert_eq!(s.name(), k.as_str(), "{k:?}");
            assert_eq!(s.kind(), Some(k));
            // SAFETY: qb_status_name returns a static NUL-terminated string.
            let c = unsafe { CStr::from_ptr(qb_status_name(k.code())) };
            assert_eq!(c.to_str().unwrap(), k.as_str());
        }
        assert_eq!(QbStatus::QB_OK.kind(), None);
        assert_eq!(QbStatus::QB_ERR_INTERNAL.name(), "internal");
        // SAFETY: as above.
        assert_eq!(
            unsafe { CStr::from_ptr(qb_status_name(99)) }
                .to_str()
                .unwrap(),
            "unknown"
        );
    }
}
