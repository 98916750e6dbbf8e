//! The owner session of a pull worker: a connection of its own, taken out of the
//! pool, holding a session-level advisory lock on a random key for as long as the worker
//! runs. The worker's claims record the key (`inbox.claim_owner`); when the process dies its
//! connection closes, PostgreSQL releases the lock, and any live worker's
//! [`expire_dead_owners`] expires the dead owner's leases so they are claimed again within
//! about a second instead of after the lease. Statements: `OWNER_LOCK`, `OWNER_PING` and
//! `EXPIRE_DEAD_OWNERS` in [`super::sql`].

use async_trait::async_trait;
use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, Postgres};

use super::{db_err, sql};
use crate::error::Result;
use crate::store::OwnerSession;

/// A held owner key and the connection that holds it; dropping it closes the connection,
/// which releases the key.
pub(super) struct PgOwnerSession {
    key: i64,
    conn: PgConnection,
}

/// Opens a session on a connection detached from `pool` (the pool opens another in its place)
/// and takes `prefer` on it if it is free (a holder taking its key back), else a fresh random
/// key. A key someone else holds (another worker, or an application's own advisory lock) is
/// not ours to take: draw again.
pub(super) async fn open(pool: &super::WatchedPool, prefer: Option<i64>) -> Result<PgOwnerSession> {
    let conn: PoolConnection<Postgres> = pool
        .acquire()
        .await
        .map_err(|e| db_err("owner session", e))?;
    let mut conn = conn.detach();
    let mut prefer = prefer.filter(|k| *k != 0);
    loop {
        // 64 random bits; 0 is kept out so it can mean "no key" to the worker.
        let key = prefer
            .take()
            .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0 as i64);
        if key == 0 {
            continue;
        }
        let taken: bool = sqlx::query_scalar(sql::OWNER_LOCK)
            .bind(key)
            .fetch_one(&mut conn)
            .await
            .map_err(|e| db_err("owner session", e))?;
        if taken {
            return Ok(PgOwnerSession { key, conn });
        }
    }
}

#[async_trait]
impl OwnerSession for PgOwnerSession {
    fn key(&self) -> i64 {
        self.key
    }

    async fn check(&mut self) -> Result<()> {
        sqlx::query(sql::OWNER_PING)
            .execute(&mut self.conn)
            .await
            .map_err(|e| db_err("owner session", e))?;
        Ok(())
    }
}

/// Expires the live leases of `source`'s pull rows whose owner session is gone; returns how
/// many rows it expired.
pub(super) async fn expire_dead_owners(store: &super::PgStore, source: &str) -> Result<u64> {
    let r = sqlx::query(store.sql(sql::EXPIRE_DEAD_OWNERS))
        .bind(source)
        .execute(store.db())
        .await
        .map_err(|e| db_err("expire dead owners", e))?;
    Ok(r.rows_affected())
}
