// Command quickstart is clients/go's README quick start, built in an empty module that got
// github.com/alternayte/queuebox/clients/go with `go get` (tests/install/go/run.sh):
//
//	quickstart migrate URL   applies the schema
//	quickstart work URL      handles one row of source "orders", then shuts down gracefully
package main

import (
	"context"
	"log"
	"os"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

type order struct {
	Total float64 `json:"total"`
}

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: quickstart migrate|work URL")
	}
	url := os.Args[2]
	if os.Args[1] == "migrate" {
		if err := queuebox.Migrate(context.Background(), url); err != nil {
			log.Fatalf("migrate: %v", err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := queuebox.NewWorker(ctx, url, queuebox.Options{Source: "orders", BatchSize: 20, Concurrency: 4})
	if err != nil {
		log.Fatalf("worker: %v", err)
	}
	defer w.Close()
	handled := false
	err = w.Run(ctx, func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		var o order
		if err := m.UnmarshalPayload(&o); err != nil {
			return queuebox.Dead("payload is not an order: " + err.Error())
		}
		_, err := tx.Exec(ctx, "INSERT INTO orders_seen (id, total) VALUES ($1::uuid, $2)", m.ID, o.Total)
		handled = true
		time.AfterFunc(200*time.Millisecond, cancel) // one row is the whole test: then a graceful stop
		return err
	})
	if err != nil {
		log.Fatalf("run: %v", err)
	}
	if !handled {
		log.Fatal("no row was handled within 60 s")
	}
	log.Printf("stopped: %+v", w.Stats())
}
