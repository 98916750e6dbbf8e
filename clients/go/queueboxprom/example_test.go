package queueboxprom_test

import (
	"context"
	"log"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	queuebox "github.com/alternayte/queuebox/clients/go"
	"github.com/alternayte/queuebox/clients/go/queueboxprom"
)

// Register a worker's metrics beside the application's own and serve them all.
func ExampleNewCollector() {
	ctx := context.Background()
	w, err := queuebox.NewWorker(ctx, os.Getenv("DATABASE_URL"), queuebox.Options{Source: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	prometheus.MustRegister(queueboxprom.NewCollector(w))
	http.Handle("/metrics", promhttp.Handler())
	go func() { log.Print(http.ListenAndServe(":9090", nil)) }()
	log.Fatal(w.Run(ctx, func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error { return nil }))
}
