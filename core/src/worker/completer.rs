//! Batches plain completions (handlers that opened no transaction): while one completion
//! statement runs, the ones that arrive queue up and go together in the next statement.
//! Before sending, the completer also yields to the scheduler until a yield brings no new
//! request, so the handlers of one claimed batch, which finish together, share a statement.
//! There is no timer, so an idle worker completes at once and a busy one in bulk (River's
//! completer, without its delay).

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};
use crate::message::ClaimRef;
use crate::store::Store;

/// The most claims one completion statement carries.
const MAX_BATCH: usize = 500;

type Request = (ClaimRef, oneshot::Sender<Result<bool>>);

/// Takes every queued request, then yields and takes again while a yield brought more.
/// A yield costs microseconds; handlers finishing in the same scheduler round land in one
/// statement instead of two or three.
async fn gather(rx: &mut mpsc::UnboundedReceiver<Request>, batch: &mut Vec<Request>) {
    const MAX_YIELDS: usize = 8;
    let drain = |rx: &mut mpsc::UnboundedReceiver<Request>, batch: &mut Vec<Request>| {
        let before = batch.len();
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        batch.len() > before
    };
    drain(rx, batch);
    for _ in 0..MAX_YIELDS {
        if batch.len() >= MAX_BATCH {
            return;
        }
        tokio::task::yield_now().await;
        if !drain(rx, batch) {
            return;
        }
    }
}

#[derive(Clone)]
pub(super) struct Completer {
    tx: mpsc::UnboundedSender<Request>,
}

impl Completer {
    /// Starts the completer task; it ends when every sender is gone. Each statement runs
    /// under `row_writes`, the worker's lock shared with lease renewal (`Inner::row_writes`).
    pub(super) fn spawn(
        store: Arc<dyn Store>,
        row_writes: Arc<tokio::sync::Mutex<()>>,
    ) -> Completer {
        let (tx, mut rx) = mpsc::unbounded_channel::<Request>();
        tokio::spawn(async move {
            let mut batch: Vec<Request> = Vec::new();
            while let Some(first) = rx.recv().await {
                batch.push(first);
                gather(&mut rx, &mut batch).await;
                let claims: Vec<ClaimRef> = batch.iter().map(|(c, _)| *c).collect();
                let written = {
                    let _turn = row_writes.lock().await;
                    store.complete_pull_many(&claims).await
                };
                match written {
                    Ok(done) => {
                        for (claim, reply) in batch.drain(..) {
                            let _ = reply.send(Ok(done.contains(&claim.id)));
                        }
                    }
                    Err(e) => {
                        // Every waiter gets the same failure; an unreachable database stays
                        // `Unavailable` so callers can tell it from a refused statement.
                        let text = e.to_string();
                        let code = match &e {
                            Error::Database { code, .. } => code.clone(),
                            _ => None,
                        };
                        let unavailable = e.is_unavailable();
                        for (_, reply) in batch.drain(..) {
                            let err = if unavailable {
                                Error::Unavailable {
                                    operation: "pull complete",
                                    reason: text.clone(),
                                }
                            } else {
                                Error::Database {
                                    operation: "pull complete",
                                    message: text.clone(),
                                    code: code.clone(),
                                }
                            };
                            let _ = reply.send(Err(err));
                        }
                    }
                }
            }
        });
        Completer { tx }
    }

    /// Completes one claim; `Ok(false)` when the fence matched nothing.
    pub(super) async fn complete(&self, claim: ClaimRef) -> Result<bool> {
        let (reply, answer) = oneshot::channel();
        self.tx.send((claim, reply)).map_err(|_| Error::Cancelled)?;
        answer.await.map_err(|_| Error::Cancelled)?
    }
}
