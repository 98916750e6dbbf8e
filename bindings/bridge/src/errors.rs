//! What crosses a binding's boundary with an error. The kind and its name come from the
//! core's one table, [`queuebox_core::ErrorKind`]; this module only adds the machine-readable
//! detail.

use queuebox_core::Error;

/// The machine-readable detail of an error, when there is one: the SQLSTATE (or server
/// error number) of a database error, the option path of a configuration error
/// (`"batchSize"`, `"retry.baseDelayMs"`).
pub fn detail(e: &Error) -> Option<String> {
    match e {
        Error::Database { code, .. } => code.clone(),
        Error::Config { path, .. } => Some(path.clone()),
        _ => None,
    }
}
