//! What crosses a binding's boundary with an error. The kind and its name come from the
//! core's one table, [`ErrorKind`]; this module only adds the machine-readable detail.

use queuebox_core::{Error, ErrorKind};

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

/// The kind of `e` and its stable name, what the Node and Python bindings raise with.
pub fn kind_and_name(e: &Error) -> (ErrorKind, &'static str) {
    let k = e.kind();
    (k, k.as_str())
}
