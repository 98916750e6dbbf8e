//! The application's own transaction: what an application runs with its own driver (sqlx,
//! pgx, node-postgres, Knex, psycopg, SQLAlchemy, ADO.NET …) inside its own transaction, so
//! its ORM and repository code share one commit with QueueBox's rows.
//!
//! - **Consume**: [`crate::Task::completion_statement`] renders the fenced completion of a
//!   claimed pull row. Asking for it hands the completion to the application: the worker
//!   stops renewing the lease (the application's `UPDATE` holds the row lock until its
//!   commit) and does not complete the row itself when the handler succeeds. Zero rows
//!   affected means the claim was lost: the wrapper calls [`crate::Task::claim_lost`] and
//!   raises the error it returns, so the business write rolls back. A handler error still
//!   becomes the core's own fenced retry or dead-letter.
//! - **Produce**: [`publish_statement`] renders one insert of any number of outbox rows,
//!   each validated first, with ids the core made.
//! - **Enqueue**: [`enqueue_statement`] renders one statement that stores any number of pull
//!   inbox rows ([`EnqueueMessage`]: source, payload, idempotency key, aggregate id, headers,
//!   priority, max attempts, delay or scheduled time), each validated first. A repeat of
//!   `(source, idempotency_key)` inserts nothing: its result row carries the stored row's id
//!   and `duplicate = true`, also when a concurrent transaction stored it first. The rows are
//!   claimable once the application's transaction commits; a rollback leaves none.
//!
//! A [`Statement`] is SQL text in the driver's [`Placeholder`] style with every parameter a
//! string or NULL (the SQL casts), and how to read its result ([`Expect`]). The SQL lives
//! beside every other statement in `store::postgres::sql` / `store::sqlserver::sql`
//! (`APP_COMPLETE`, `PUBLISH`, `ENQUEUE`); proto-docs/sql-contract.md documents it.
//!
//! Rust applications on sqlx use [`complete_in`], [`publish`], [`publish_many`], [`enqueue`]
//! and [`enqueue_many`].

mod enqueue;
mod message_fields;
mod placeholder;
mod publish;

use serde::Serialize;
use uuid::Uuid;

pub use enqueue::{
    enqueue_messages_from_json, enqueue_statement, enqueue_statement_native,
    enqueue_statement_with_ids, read_enqueue_rows, EnqueueMessage, MAX_PRIORITY,
};
pub use placeholder::Placeholder;

pub(crate) use placeholder::{render, Marker};
pub use publish::{
    messages_from_json, publish_statement, publish_statement_named, publish_statement_with_ids,
    OutboxMessage, DEFAULT_MAX_ATTEMPTS,
};

use crate::error::{Error, Result};
use crate::store::names::Names;
use crate::store::Backend;

/// How a wrapper reads the result of a [`Statement`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// Exactly one row affected; zero means the claim was lost ([`crate::Task::claim_lost`]).
    OneRowAffected,
    /// The number of rows affected (one per published message).
    RowsAffected,
    /// A result set of one row per message, in message order: `n` (the message's index, from
    /// 0), `id` (the stored row's id; text on PostgreSQL, `uniqueidentifier` on SQL Server)
    /// and `duplicate` (boolean: the row was stored already and nothing was inserted). Fewer
    /// or more rows than messages is an error ([`read_enqueue_rows`]).
    EnqueueRows,
}

/// A statement for the application's driver: `{"sql", "params", "expect"}`, plus `"ids"`
/// (the new rows' ids, in order) for a publish. An enqueue has no `ids`: the ids are in its
/// result rows ([`Expect::EnqueueRows`]), since a duplicate's is the stored row's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Statement {
    pub sql: String,
    /// Every parameter is text or NULL; bind them as plain strings in this order.
    pub params: Vec<Option<String>>,
    pub expect: Expect,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<Uuid>,
}

impl Statement {
    /// The statement as the JSON object the bindings hand to wrappers.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a statement is plain data")
    }
}

/// The fenced completion of the claim `(id, token)` on `backend`: `APP_COMPLETE` rendered in
/// `style`. Applications get it from [`crate::Task::completion_statement`], which also hands
/// the completion over; this function only renders (the conformance vectors use it).
pub fn completion_statement(
    backend: Backend,
    id: Uuid,
    token: Uuid,
    style: Placeholder,
) -> Statement {
    completion_statement_named(backend, &Names::default(), id, token, style)
}

/// [`completion_statement`] for tables and columns named `names` (the worker's store's
/// names, [`crate::Store::names`]).
pub fn completion_statement_named(
    backend: Backend,
    names: &Names,
    id: Uuid,
    token: Uuid,
    style: Placeholder,
) -> Statement {
    use crate::store::sql;
    let (text, marker) = match backend {
        Backend::Postgres => (sql::postgres::APP_COMPLETE, Marker::Dollar),
        Backend::SqlServer => (sql::sqlserver::APP_COMPLETE, Marker::AtP),
    };
    let (sql, params) = render(
        &names.render(backend, text),
        marker,
        style,
        &[Some(id.to_string()), Some(token.to_string())],
    );
    Statement {
        sql,
        params,
        expect: Expect::OneRowAffected,
        ids: Vec::new(),
    }
}

/// A backend by the name the bindings take: `postgres` (also `postgresql`) or `sqlserver`.
pub fn parse_backend(name: &str) -> Result<Backend> {
    match name {
        "postgres" | "postgresql" => Ok(Backend::Postgres),
        "sqlserver" => Ok(Backend::SqlServer),
        other => Err(Error::InvalidInput(format!(
            "backend: unknown database `{other}` (postgres or sqlserver)"
        ))),
    }
}

#[cfg(feature = "postgres")]
mod sqlx_tx {
    use sqlx::{Postgres, Transaction};
    use uuid::Uuid;

    use super::{
        enqueue_statement, publish_statement, read_enqueue_rows, EnqueueMessage, OutboxMessage,
        Placeholder, Statement,
    };
    use crate::error::{Error, Result};
    use crate::message::InsertOutcome;
    use crate::store::postgres::db_err;
    use crate::store::Backend;
    use crate::Task;

    async fn run(
        tx: &mut Transaction<'_, Postgres>,
        st: &Statement,
        operation: &'static str,
    ) -> Result<u64> {
        let mut q = sqlx::query(&st.sql);
        for p in &st.params {
            q = q.bind(p.as_deref());
        }
        let done = q
            .execute(&mut **tx)
            .await
            .map_err(|e| db_err(operation, e))?;
        Ok(done.rows_affected())
    }

    /// Completes `task` inside the application's transaction `tx`: the row turns processed
    /// when `tx` commits. [`Error::ClaimLost`] when the lease was lost; return it from the
    /// handler (or roll back) so the business write in `tx` rolls back with it. From here
    /// on the worker no longer renews the lease nor completes the row itself.
    pub async fn complete_in(tx: &mut Transaction<'_, Postgres>, task: &Task) -> Result<()> {
        let st = task.completion_statement(Placeholder::Dollar)?;
        match run(tx, &st, "pull complete (application transaction)").await? {
            1 => Ok(()),
            _ => Err(task.claim_lost()),
        }
    }

    /// Publishes one outbox row in `tx`; returns its id. Nothing is sent unless `tx` commits.
    pub async fn publish(
        tx: &mut Transaction<'_, Postgres>,
        message: &OutboxMessage,
    ) -> Result<Uuid> {
        let ids = publish_many(tx, std::slice::from_ref(message)).await?;
        Ok(ids[0])
    }

    /// Publishes many outbox rows in `tx` with one statement; returns their ids in order.
    pub async fn publish_many(
        tx: &mut Transaction<'_, Postgres>,
        messages: &[OutboxMessage],
    ) -> Result<Vec<Uuid>> {
        let st = publish_statement(messages, Placeholder::Dollar, Backend::Postgres)?;
        let n = run(tx, &st, "outbox publish").await?;
        if n != st.ids.len() as u64 {
            return Err(Error::Database {
                operation: "outbox publish",
                message: format!("inserted {n} rows of {}", st.ids.len()),
                code: None,
            });
        }
        Ok(st.ids)
    }

    /// Enqueues one pull row in `tx`: [`InsertOutcome::Inserted`] with the new row's id, or
    /// [`InsertOutcome::Duplicate`] with the id of the row stored under the same
    /// `(source, idempotency_key)`. The row is claimable only once `tx` commits.
    pub async fn enqueue(
        tx: &mut Transaction<'_, Postgres>,
        message: &EnqueueMessage,
    ) -> Result<InsertOutcome> {
        let mut out = enqueue_many(tx, std::slice::from_ref(message)).await?;
        Ok(out.remove(0))
    }

    /// Enqueues many pull rows in `tx` with one statement; one outcome per message, in order
    /// (a key repeated within `messages` is stored once: its later messages are duplicates).
    pub async fn enqueue_many(
        tx: &mut Transaction<'_, Postgres>,
        messages: &[EnqueueMessage],
    ) -> Result<Vec<InsertOutcome>> {
        let st = enqueue_statement(messages, Placeholder::Dollar, Backend::Postgres)?;
        let mut q = sqlx::query_as::<_, (i32, String, bool)>(&st.sql);
        for p in &st.params {
            q = q.bind(p.as_deref());
        }
        let rows = q
            .fetch_all(&mut **tx)
            .await
            .map_err(|e| db_err("inbox enqueue", e))?;
        let rows = rows
            .into_iter()
            .map(|(n, id, duplicate)| {
                let id = Uuid::parse_str(&id).map_err(|e| Error::Database {
                    operation: "inbox enqueue",
                    message: format!("the stored id `{id}` is not a UUID: {e}"),
                    code: None,
                })?;
                Ok((i64::from(n), id, duplicate))
            })
            .collect::<Result<Vec<_>>>()?;
        read_enqueue_rows(&rows, messages.len())
    }
}

#[cfg(feature = "postgres")]
pub use sqlx_tx::{complete_in, enqueue, enqueue_many, publish, publish_many};
