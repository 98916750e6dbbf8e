package queuebox_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// Shipment is a GORM model of the application's own table.
type Shipment struct {
	Key string `gorm:"primaryKey"`
}

// GORM: inside db.Transaction, tx.Statement.ConnPool is the transaction's database/sql
// handle (a *sql.Tx, or GORM's prepared-statement wrapper with PrepareStmt), so Publish,
// Enqueue and CompleteTx run in the same transaction as tx.Create. One row's handler commits:
// the shipment, the outbox row, the enqueued job and the completion are all there. The
// other's fails after the same calls: none of them is, and the row is retried.
func TestGORMTransactionCarriesPublishEnqueueAndCompletion(t *testing.T) {
	for _, prepare := range []bool{false, true} {
		name := "plain"
		if prepare {
			name = "PrepareStmt"
		}
		t.Run(name, func(t *testing.T) {
			url := newDB(t)
			insertRows(t, url, "gorm", 2) // keys k1 and k2
			db, err := gorm.Open(postgres.Open(url), &gorm.Config{Logger: logger.Discard, PrepareStmt: prepare})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&Shipment{}); err != nil {
				t.Fatal(err)
			}
			w := newWorker(t, url, quickOptions("gorm"))
			failed := errors.New("k2's handler fails after its writes")
			runUntilTasks(t, w, func(ctx context.Context, task *queuebox.Task) error {
				return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
					key := task.Message.IdempotencyKey
					if err := tx.Create(&Shipment{Key: key}).Error; err != nil {
						return err
					}
					if _, err := queuebox.Publish(ctx, tx.Statement.ConnPool, "shipments.created", map[string]string{"key": key}); err != nil {
						return err
					}
					if _, err := queuebox.Enqueue(ctx, tx.Statement.ConnPool, "emails", map[string]string{"key": key}, queuebox.WithIdempotencyKey("mail-"+key)); err != nil {
						return err
					}
					if err := queuebox.CompleteTx(ctx, tx.Statement.ConnPool, task); err != nil {
						return err
					}
					if key == "k2" {
						return failed // GORM rolls back everything above
					}
					return nil
				})
			}, "k1 processed and k2 retried", func() bool {
				return psql(t, url, "SELECT string_agg(idempotency_key || '=' || state || '/' || attempt, ',' ORDER BY idempotency_key) FROM inbox WHERE source = 'gorm'") == "k1=processed/0,k2=pending/1"
			})
			want := map[string]string{
				"SELECT string_agg(key, ',') FROM shipments":                                            "k1",
				"SELECT string_agg(payload->>'key', ',') FROM outbox WHERE topic = 'shipments.created'": "k1",
				"SELECT string_agg(idempotency_key, ',') FROM inbox WHERE source = 'emails'":            "mail-k1",
				"SELECT last_error FROM inbox WHERE idempotency_key = 'k2'":                             failed.Error(),
			}
			for q, v := range want {
				if got := psql(t, url, q); got != v {
					t.Errorf("%s: want %q, got %q", q, v, got)
				}
			}
		})
	}
}

// What sqlc generates as the Queries' database handle, for each of its two drivers
// (sql_package: pgx/v5 and database/sql): a value of either is what an application that uses
// sqlc passes around, and Publish, Enqueue and CompleteTx take it as it is.
type (
	sqlcPgxDBTX interface {
		Exec(context.Context, string, ...interface{}) (pgconn.CommandTag, error)
		Query(context.Context, string, ...interface{}) (pgx.Rows, error)
		QueryRow(context.Context, string, ...interface{}) pgx.Row
	}
	sqlcStdDBTX interface {
		ExecContext(context.Context, string, ...interface{}) (sql.Result, error)
		PrepareContext(context.Context, string) (*sql.Stmt, error)
		QueryContext(context.Context, string, ...interface{}) (*sql.Rows, error)
		QueryRowContext(context.Context, string, ...interface{}) *sql.Row
	}
)

// The method sets the package reads, checked at compile time for what applications hold:
// pgx's transaction and pool, database/sql's transaction, GORM's ConnPool and both sqlc DBTX
// shapes.
var (
	_ queuebox.PgxExecutor = pgx.Tx(nil)
	_ queuebox.PgxQuerier  = pgx.Tx(nil)
	_ queuebox.SQLExecutor = (*sql.Tx)(nil)
	_ queuebox.SQLQuerier  = (*sql.Tx)(nil)
	_ queuebox.SQLExecutor = gorm.ConnPool(nil)
	_ queuebox.SQLQuerier  = gorm.ConnPool(nil)
	_ queuebox.PgxExecutor = sqlcPgxDBTX(nil)
	_ queuebox.PgxQuerier  = sqlcPgxDBTX(nil)
	_ queuebox.SQLExecutor = sqlcStdDBTX(nil)
	_ queuebox.SQLQuerier  = sqlcStdDBTX(nil)
)

// sqlc: the transaction handed to queries.WithTx(tx), held as sqlc's DBTX, carries the
// business write (sqlc's own statement, here written as sqlc generates it), the publish and
// the enqueue; after the commit all three are there, for both of sqlc's drivers.
func TestSqlcDBTXCarriesPublishAndEnqueue(t *testing.T) {
	url := newDB(t)
	psql(t, url, "CREATE TABLE shipments (key text PRIMARY KEY)")
	ctx := t.Context()
	const createShipment = "-- name: CreateShipment :exec\nINSERT INTO shipments (key) VALUES ($1)\n"

	ptx, err := pgxPool(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A failed step must still end the transaction, or the pool's Close waits for it forever.
	defer func() { _ = ptx.Rollback(context.Background()) }()
	var pdb sqlcPgxDBTX = ptx
	if _, err := pdb.Exec(ctx, createShipment, "pgx"); err != nil {
		t.Fatal(err)
	}
	if _, err := queuebox.Publish(ctx, pdb, "shipments.created", map[string]string{"key": "pgx"}); err != nil {
		t.Fatal(err)
	}
	if _, err := queuebox.Enqueue(ctx, pdb, "emails", map[string]string{"key": "pgx"}); err != nil {
		t.Fatal(err)
	}
	if err := ptx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	stx, err := sqlDB(t, url).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stx.Rollback() }()
	var sdb sqlcStdDBTX = stx
	if _, err := sdb.ExecContext(ctx, createShipment, "std"); err != nil {
		t.Fatal(err)
	}
	if _, err := queuebox.Publish(ctx, sdb, "shipments.created", map[string]string{"key": "std"}); err != nil {
		t.Fatal(err)
	}
	if _, err := queuebox.Enqueue(ctx, sdb, "emails", map[string]string{"key": "std"}); err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	for q, v := range map[string]string{
		"SELECT string_agg(key, ',' ORDER BY key) FROM shipments":                                           "pgx,std",
		"SELECT string_agg(payload->>'key', ',' ORDER BY payload->>'key') FROM outbox":                      "pgx,std",
		"SELECT string_agg(payload->>'key', ',' ORDER BY payload->>'key') FROM inbox WHERE source='emails'": "pgx,std",
	} {
		if got := psql(t, url, q); got != v {
			t.Errorf("%s: want %q, got %q", q, v, got)
		}
	}
}
