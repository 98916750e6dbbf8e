//! The small checks several sections share (a positive number, a readable file), each naming
//! its key path.

use crate::strict::ConfigErrors;

/// A count or a duration that 0 would make meaningless.
pub(crate) fn positive(errs: &mut ConfigErrors, path: &str, v: u64) {
    if v == 0 {
        errs.push(path, "must be greater than 0");
    }
}

/// A certificate or key file must be readable at start-up, not at the first handshake.
pub(crate) fn readable(errs: &mut ConfigErrors, path: &str, file: &str) {
    if file.trim().is_empty() {
        errs.push(path, "required (a PEM file)");
    } else if let Err(e) = std::fs::read(file) {
        errs.push(path, format!("cannot read {file}: {e}"));
    }
}
