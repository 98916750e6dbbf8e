//! A small connection pool: at most `max` tiberius clients, idle ones kept in a `Mutex<Vec>`.
//! (bb8-tiberius does not build against tiberius 0.13.)
//!
//! A connection goes back to the pool only when its user calls [`PooledConn::release`] after
//! an operation that finished cleanly. A connection dropped without it (an error, a timeout, a
//! cancelled future, a handler transaction never committed) is closed, so the server rolls
//! back whatever it had open and frees its application locks; nothing half-read or
//! mid-transaction is ever handed to the next caller.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tiberius::Config;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::compat::TokioAsyncWriteCompatExt;

use super::{db_err, sql, Client};
use crate::error::{Error, Result};

/// How long [`Pool::get`] waits for a free slot before failing, unless the store was connected
/// with another bound (the relay passes `database.connectionTimeoutMs`).
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);
/// TCP connect plus login, at most (and at most the acquire timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

pub struct Pool {
    config: Config,
    display: String,
    max: usize,
    acquire_timeout: Duration,
    idle: Mutex<Vec<Client>>,
    slots: Arc<Semaphore>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("server", &self.display)
            .field("free_slots", &self.slots.available_permits())
            .finish()
    }
}

impl Pool {
    pub(super) fn new(
        config: Config,
        max: usize,
        display: String,
        acquire_timeout: Duration,
    ) -> Self {
        Pool {
            config,
            display,
            max,
            acquire_timeout,
            idle: Mutex::new(Vec::new()),
            slots: Arc::new(Semaphore::new(max)),
        }
    }

    /// `(in_use, idle)`: connections checked out now, and open ones waiting in the pool (the
    /// relay's `queuebox_db_pool_connections` gauge).
    pub fn gauges(&self) -> (usize, usize) {
        let in_use = self.max - self.slots.available_permits();
        (
            in_use,
            self.idle.lock().unwrap_or_else(|p| p.into_inner()).len(),
        )
    }

    /// The tiberius configuration (e.g. to open a connection to another database).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A connection: an idle one, or a new one while fewer than `max` are open.
    pub async fn get(self: &Arc<Self>) -> Result<PooledConn> {
        let wait = self.acquire_timeout;
        let permit = tokio::time::timeout(wait, self.slots.clone().acquire_owned())
            .await
            .map_err(|_| Error::Connect {
                url: self.display.clone(),
                reason: format!("no free pool connection within {wait:?}"),
            })?
            .expect("the pool semaphore is never closed");
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let client = match idle {
            Some(c) => c,
            None => self.open().await?,
        };
        Ok(PooledConn {
            client: Some(client),
            pool: self.clone(),
            _permit: permit,
        })
    }

    async fn open(&self) -> Result<Client> {
        let connect = |reason: String| Error::Connect {
            url: self.display.clone(),
            reason,
        };
        let attempt = async {
            let client = match open_client(self.config.clone()).await {
                Err(tiberius::error::Error::Routing { host, port }) => {
                    // Azure SQL redirects to the node that holds the database.
                    let mut routed = self.config.clone();
                    routed.host(&host);
                    routed.port(port);
                    open_client(routed).await
                }
                other => other,
            }
            .map_err(|e| connect(e.to_string()))?;
            Ok::<_, Error>(client)
        };
        let bound = CONNECT_TIMEOUT.min(self.acquire_timeout);
        let mut client = tokio::time::timeout(bound, attempt)
            .await
            .map_err(|_| connect(format!("no answer within {bound:?}")))??;
        client
            .simple_query(sql::SESSION_SETUP)
            .await
            .map_err(|e| db_err("session setup", e))?
            .into_results()
            .await
            .map_err(|e| db_err("session setup", e))?;
        Ok(client)
    }
}

async fn open_client(config: Config) -> tiberius::Result<Client> {
    let tcp = TcpStream::connect(config.get_addr()).await?;
    tcp.set_nodelay(true)?;
    tiberius::Client::connect(config, tcp.compat_write()).await
}

/// A checked-out connection; see the module docs for when it returns to the pool.
pub struct PooledConn {
    client: Option<Client>,
    pool: Arc<Pool>,
    _permit: OwnedSemaphorePermit,
}

impl PooledConn {
    pub fn client(&mut self) -> &mut Client {
        self.client
            .as_mut()
            .expect("the client is present until release")
    }

    /// The operation finished cleanly: hand the connection to the next caller.
    pub fn release(mut self) {
        if let Some(c) = self.client.take() {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(c);
        }
    }
}

impl Drop for PooledConn {
    fn drop(&mut self) {
        // Not released: close the connection (dropping the client closes the socket).
        drop(self.client.take());
    }
}
