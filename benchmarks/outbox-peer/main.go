// A hand-written outbox relay of the usual kind, the peer of QueueBox's relay in
// benchmarks/outbox.md (issue 21), and the bare-SQL ceiling beside it. Both read QueueBox's
// own outbox table (the schema its migrations create) on the same PostgreSQL.
//
//	outbox-peer -mode peer    : each of -loops goroutines, in a loop: BEGIN; SELECT a batch of
//	                            pending rows FOR UPDATE SKIP LOCKED; for each row publish it to
//	                            JetStream and wait for the ack, then UPDATE it sent; COMMIT.
//	                            An empty batch sleeps -poll. What a user writes in an afternoon.
//	outbox-peer -mode ceiling : the same claim without publishing, and the batch marked sent
//	                            in one UPDATE … WHERE id = ANY: what PostgreSQL allows for
//	                            claim + mark on this table and its indexes.
//	outbox-peer -mode stream  : (re)creates the JetStream stream -stream on -subject-prefix.>
//	                            (file storage, the server's defaults), empty, and exits.
//	outbox-peer -mode count   : prints the number of messages in -stream.
//	outbox-peer -mode jsonly  : the broker's side alone: -n messages like the peer's (same
//	                            subject, body size, Nats-Msg-Id) published asynchronously,
//	                            at most 256 unacknowledged; prints "<acked> <seconds>".
//
// The peer sets Nats-Msg-Id to the row id, as QueueBox's NATS destination does, so the
// broker does the same deduplication work for both. It runs until killed; the benchmark
// (benchmarks/outbox_peer.sh) times the drain from the rows' sent marks.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const claim = `SELECT id::text, topic, key, payload, headers FROM outbox
 WHERE state = 'pending' AND scheduled_at <= now()
 ORDER BY scheduled_at, sequence
 LIMIT $1 FOR UPDATE SKIP LOCKED`

func main() {
	mode := flag.String("mode", "peer", "peer | ceiling | stream | count | jsonly")
	dbURL := flag.String("db", os.Getenv("DATABASE_URL"), "PostgreSQL URL")
	natsURL := flag.String("nats", "nats://127.0.0.1:4222", "NATS URL")
	prefix := flag.String("subject-prefix", "qbbench", "subject = prefix.topic")
	stream := flag.String("stream", "QBBENCH", "JetStream stream (mode stream)")
	batch := flag.Int("batch", 100, "rows per claim")
	loops := flag.Int("loops", 1, "concurrent claim loops (one connection each)")
	n := flag.Int("n", 100000, "messages (mode jsonly)")
	poll := flag.Duration("poll", 100*time.Millisecond, "sleep after an empty claim")
	flag.Parse()
	ctx := context.Background()

	if *mode == "count" {
		nc, err := nats.Connect(*natsURL)
		if err != nil {
			log.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		s, err := js.Stream(ctx, *stream)
		if err != nil {
			log.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(info.State.Msgs)
		return
	}
	if *mode == "jsonly" {
		nc, err := nats.Connect(*natsURL)
		if err != nil {
			log.Fatal(err)
		}
		js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
		t0 := time.Now()
		for i := 1; i <= *n; i++ {
			msg := nats.NewMsg(*prefix + ".orders")
			msg.Data = []byte(fmt.Sprintf(`{"n": %d, "amount": %d, "customer": "c%d"}`, i, i*3, i%997))
			msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("%08d-0000-4000-8000-%012d", i, t0.UnixNano()%1e12))
			if _, err := js.PublishMsgAsync(msg); err != nil {
				log.Fatal(err)
			}
		}
		<-js.PublishAsyncComplete()
		fmt.Println(*n, time.Since(t0).Seconds())
		nc.Close()
		return
	}
	if *mode == "stream" {
		nc, err := nats.Connect(*natsURL)
		if err != nil {
			log.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		_ = js.DeleteStream(ctx, *stream)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: *stream, Subjects: []string{*prefix + ".>"}}); err != nil {
			log.Fatal(err)
		}
		nc.Close()
		return
	}

	cfg, err := pgxpool.ParseConfig(*dbURL)
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = int32(*loops)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	var js jetstream.JetStream
	if *mode == "peer" {
		nc, err := nats.Connect(*natsURL)
		if err != nil {
			log.Fatal(err)
		}
		if js, err = jetstream.New(nc); err != nil {
			log.Fatal(err)
		}
	} else if *mode != "ceiling" {
		log.Fatalf("unknown mode %q", *mode)
	}
	var wg sync.WaitGroup
	for i := 0; i < *loops; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := relayBatch(ctx, pool, js, *prefix, *batch)
				if err != nil {
					log.Printf("batch failed: %v", err)
					time.Sleep(*poll)
				} else if n == 0 {
					time.Sleep(*poll)
				}
			}
		}()
	}
	wg.Wait()
}

type row struct {
	id, topic string
	key       *string
	payload   json.RawMessage
	headers   map[string]any
}

// relayBatch claims up to batch rows in one transaction and delivers them; js nil = ceiling.
func relayBatch(ctx context.Context, pool *pgxpool.Pool, js jetstream.JetStream, prefix string, batch int) (int, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	rs, err := tx.Query(ctx, claim, batch)
	if err != nil {
		return 0, err
	}
	var rows []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.id, &r.topic, &r.key, &r.payload, &r.headers); err != nil {
			return 0, err
		}
		rows = append(rows, r)
	}
	if err := rs.Err(); err != nil {
		return 0, err
	}
	if len(rows) == 0 {
		return 0, nil
	}
	if js == nil {
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.id
		}
		if _, err := tx.Exec(ctx, `UPDATE outbox SET state = 'sent', updated_at = clock_timestamp() WHERE id = ANY($1::uuid[])`, ids); err != nil {
			return 0, err
		}
		return len(rows), tx.Commit(ctx)
	}
	for _, r := range rows {
		msg := nats.NewMsg(fmt.Sprintf("%s.%s", prefix, r.topic))
		msg.Data = r.payload
		msg.Header.Set(nats.MsgIdHdr, r.id)
		for k, v := range r.headers {
			if s, ok := v.(string); ok {
				msg.Header.Set(k, s)
			}
		}
		if r.key != nil {
			msg.Header.Set("x-message-key", *r.key)
		}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			return 0, fmt.Errorf("publish %s: %w", r.id, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE outbox SET state = 'sent', updated_at = clock_timestamp() WHERE id = $1`, r.id); err != nil {
			return 0, err
		}
	}
	return len(rows), tx.Commit(ctx)
}
