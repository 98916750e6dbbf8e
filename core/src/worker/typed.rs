//! Typed payloads: a row's JSON payload decoded into the handler's own `serde` type.
//!
//! [`Task::payload`] decodes on demand; [`typed`] wraps a handler that takes the decoded
//! value, so a payload that is not a `T` never reaches it. Such a row is dead-lettered at
//! once, with `last_error` naming the type, the field and what was wrong: retrying would
//! decode the same bytes to the same error, so the attempts would only delay the dead
//! letter an operator has to look at. A handler that prefers retries calls
//! [`Task::payload`] itself and returns the error.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde::de::DeserializeOwned;

use super::{HandlerError, Outcome, Task};

/// A payload that does not decode into the handler's type. Its text names the type and the
/// field, e.g. ``payload is not a valid shop::Order: field lines[0].qty: invalid type:
/// floating point `1.5`, expected i64``.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadError {
    message: String,
}

impl std::fmt::Display for PayloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PayloadError {}

impl Task {
    /// The row's payload decoded into `T`. The error names `T` and the path of the field
    /// that failed (`serde_path_to_error`), which a bare `serde_json` error does not.
    pub fn payload<T: DeserializeOwned>(&self) -> Result<T, PayloadError> {
        // Decoded from the JSON text, not from the stored `Value`: the core keeps numbers
        // exact (serde_json's `arbitrary_precision`), and a `Value` number then fails a
        // mismatched field with a bare "invalid number" where the text parser says
        // "invalid type: floating point `1.5`, expected i64".
        let text = self.message().payload.to_string();
        let mut json = serde_json::Deserializer::from_str(&text);
        serde_path_to_error::deserialize(&mut json).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." {
                String::new()
            } else {
                format!("field {path}: ")
            };
            // The position is in text the core wrote, not the sender: the path says where.
            let inner = e.inner();
            let at = format!(" at line {} column {}", inner.line(), inner.column());
            let error = inner.to_string();
            PayloadError {
                message: format!(
                    "payload is not a valid {}: {field}{}",
                    std::any::type_name::<T>(),
                    error.strip_suffix(&at).unwrap_or(&error)
                ),
            }
        })
    }
}

/// Wraps a handler of `(Task, T)` for [`Worker::run`](super::Worker::run): each row's
/// payload is decoded into `T` first, and a row whose payload is not a `T` is dead-lettered
/// at once with the [`PayloadError`] as its reason (see the module docs for why not retried).
///
/// ```no_run
/// # use queuebox_core::{typed, Outcome, Task, Worker};
/// #[derive(serde::Deserialize)]
/// struct Resize { image: String, width: u32 }
///
/// # async fn f(worker: Worker) -> queuebox_core::Result<()> {
/// worker
///     .run(
///         typed(|_task: Task, job: Resize| async move {
///             println!("{} to {} px", job.image, job.width);
///             Ok(Outcome::Complete)
///         }),
///         std::future::pending::<()>(),
///     )
///     .await
/// # }
/// ```
pub fn typed<T, H, F>(
    handler: H,
) -> impl Fn(Task) -> BoxFuture<'static, Result<Outcome, HandlerError>> + Send + Sync + 'static
where
    T: DeserializeOwned + Send + 'static,
    H: Fn(Task, T) -> F + Send + Sync + 'static,
    F: Future<Output = Result<Outcome, HandlerError>> + Send + 'static,
{
    let handler = Arc::new(handler);
    move |task: Task| {
        let handler = handler.clone();
        async move {
            match task.payload::<T>() {
                Ok(value) => handler(task, value).await,
                Err(e) => Ok(Outcome::Dead {
                    reason: e.to_string(),
                }),
            }
        }
        .boxed()
    }
}
