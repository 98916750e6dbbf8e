//! The application's-own-transaction calls every binding offers, as JSON text in and out
//! (`queuebox_core::app_tx` decides the statements): a task's completion statement, a claim
//! lost by the application's completion, the publish statement and the enqueue statement.

use queuebox_core::app_tx::{self, Placeholder};
use queuebox_core::store::Backend;
use queuebox_core::{Error, Result, Task};
use serde_json::Value;

/// `task`'s fenced completion rendered in `placeholder` style, as
/// `{"sql", "params", "expect": "one_row_affected"}`. From here on the application owns
/// the completion (no renewal, no completion by the worker).
pub fn completion_statement(task: &Task, placeholder: &str) -> Result<String> {
    let style: Placeholder = placeholder.parse()?;
    Ok(task.completion_statement(style)?.to_json().to_string())
}

/// The application's completion affected no row: settles the task and returns the
/// `ClaimLost` error for the wrapper to raise (always an error).
pub fn claim_lost(task: &Task) -> Error {
    task.claim_lost()
}

/// The insert of `messages_json` (a JSON array of messages, see
/// `app_tx::OutboxMessage::from_json`) for `backend` (`postgres` when `None`, or
/// `sqlserver`), as `{"sql", "params", "expect": "rows_affected", "ids"}`.
pub fn publish_statement(
    backend: Option<&str>,
    messages_json: &str,
    placeholder: &str,
) -> Result<String> {
    let (style, backend, v) = statement_args(backend, messages_json, placeholder)?;
    let messages = app_tx::messages_from_json(&v)?;
    Ok(app_tx::publish_statement(&messages, style, backend)?
        .to_json()
        .to_string())
}

/// The enqueue of pull rows for `messages_json` (a JSON array of messages, see
/// `app_tx::EnqueueMessage::from_json`) for `backend` (`postgres` when `None`, or
/// `sqlserver`), as `{"sql", "params", "expect": "enqueue_rows"}`: the wrapper runs it
/// in the application's transaction and reads one row per message, in order, with columns
/// `n`, `id`, `duplicate`.
pub fn enqueue_statement(
    backend: Option<&str>,
    messages_json: &str,
    placeholder: &str,
) -> Result<String> {
    let (style, backend, v) = statement_args(backend, messages_json, placeholder)?;
    let messages = app_tx::enqueue_messages_from_json(&v)?;
    Ok(app_tx::enqueue_statement(&messages, style, backend)?
        .to_json()
        .to_string())
}

/// What the publish and the enqueue statement read first, in this order: the placeholder
/// style, the backend (`postgres` when `None`) and the messages' JSON.
fn statement_args(
    backend: Option<&str>,
    messages_json: &str,
    placeholder: &str,
) -> Result<(Placeholder, Backend, Value)> {
    let style: Placeholder = placeholder.parse()?;
    let backend = app_tx::parse_backend(backend.unwrap_or("postgres"))?;
    let v: Value = serde_json::from_str(messages_json)
        .map_err(|e| Error::InvalidInput(format!("messages is not valid JSON: {e}")))?;
    Ok((style, backend, v))
}
