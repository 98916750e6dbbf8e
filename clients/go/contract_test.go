package queuebox_test

// The client contract (proto-docs/client-contract.md, 19 items) that worker_test.go does not
// already cover, on the wrapper-owned transaction. Each test names its item. Items 2, 3,
// 7, 9, 10, 12 and 15 (NewWorker) are in worker_test.go; the application-owned transaction
// versions of 2, 3, 4, 7 and 12 are in apptx_test.go; 14 (the README example builds) is
// readme_test.go; 13 (mapped table/column names) is names_test.go. Not here: 19 (SQL
// Server's Msg 51000: libqueuebox is built without the sqlserver backend and
// no SQL Server runs in this suite; the core's store contract covers it).

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// Item 1: the handler gets every field of the row, and never the claim token.
func TestContractHandlerGetsEveryField(t *testing.T) {
	url := newDB(t)
	id := psql(t, url, `INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers, correlation_id, consumption)
		VALUES ('fields', 'order-1', 'cust-7', 'order.created', '{"total": 12.5, "items": [1, 2]}', '{"x-tenant": "acme"}', 'corr-1', 'pull') RETURNING id`)
	w := newWorker(t, url, quickOptions("fields"))
	var got *queuebox.Message
	var token string
	var mu sync.Mutex
	runUntil(t, w, func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		held := psql(t, url, "SELECT claim_token FROM inbox")
		mu.Lock()
		got, token = m, held
		mu.Unlock()
		return nil
	}, "the row processed", func() bool { return psql(t, url, "SELECT state FROM inbox") == "processed" })
	mu.Lock()
	defer mu.Unlock()
	var payload struct {
		Total float64
		Items []int
	}
	if err := got.UnmarshalPayload(&payload); err != nil || payload.Total != 12.5 || len(payload.Items) != 2 {
		t.Errorf("payload %s (%v)", got.Payload, err)
	}
	if got.ID != id || got.Source != "fields" || got.IdempotencyKey != "order-1" || got.Attempt != 0 {
		t.Errorf("message %+v, want id %s", got, id)
	}
	if got.AggregateID == nil || *got.AggregateID != "cust-7" || got.EventType == nil || *got.EventType != "order.created" ||
		got.CorrelationID == nil || *got.CorrelationID != "corr-1" {
		t.Errorf("optional fields: %+v", got)
	}
	if len(got.Headers) != 1 || got.Headers["x-tenant"] != "acme" {
		t.Errorf("headers %v", got.Headers)
	}
	created := psql(t, url, "SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US') FROM inbox")
	if got.CreatedAt.UTC().Format("2006-01-02T15:04:05.000000") != created {
		t.Errorf("createdAt %s, row has %s", got.CreatedAt, created)
	}
	// The claim token held while the handler ran never reaches it.
	raw, _ := json.Marshal(got)
	if token == "" || strings.Contains(string(raw), token) {
		t.Errorf("token %q, message %s: the message must not carry the claim token", token, raw)
	}
}

// Item 4 (wrapper-owned transaction): the claim is stolen before the completion runs; the
// completion matches 0 rows, so the handler's write rolls back and nothing is marked.
func TestContractStolenClaimAtCompletionRollsTheWriteBack(t *testing.T) {
	url := newDB(t)
	psql(t, url, "CREATE TABLE seen (id uuid PRIMARY KEY)")
	insertRows(t, url, "stolen", 1)
	w := newWorker(t, url, quickOptions("stolen"))
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO seen (id) VALUES ($1::uuid)", m.ID); err != nil {
			return err
		}
		psql(t, url, "UPDATE inbox SET claim_token = gen_random_uuid()")
		return nil
	}
	runUntil(t, w, handler, "the lost claim", func() bool { return w.Stats().ClaimsLost == 1 && w.Stats().InFlight == 0 })
	if s := w.Stats(); s.Completed != 0 {
		t.Fatalf("stats %+v: a stolen claim must not count as completed", s)
	}
	if got := psql(t, url, "SELECT state || ' ' || attempt || ' ' || coalesce(last_error, '-') FROM inbox"); got != "processing 0 -" {
		t.Fatalf("row %q: the stolen row must be left to its new owner", got)
	}
	if got := psql(t, url, "SELECT count(*) FROM seen"); got != "0" {
		t.Fatalf("the handler's write committed (%s rows) although the completion was fenced out", got)
	}
}

// Item 5: two workers on one source never get the same message.
func TestContractTwoWorkersNeverGetTheSameMessage(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "shared", 200)
	var mu sync.Mutex
	calls := map[string]int{}
	perWorker := [2]int{}
	handlerFor := func(i int) queuebox.Handler {
		return func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
			mu.Lock()
			calls[m.ID]++
			perWorker[i]++
			mu.Unlock()
			time.Sleep(time.Millisecond)
			return nil
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	for i := 0; i < 2; i++ {
		w := newWorker(t, url, quickOptions("shared"))
		runs.Add(1)
		go func() {
			defer runs.Done()
			if err := w.Run(ctx, handlerFor(i)); err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
	}
	waitFor(t, 30*time.Second, "200 rows processed", func() bool {
		return psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "200"
	})
	cancel()
	runs.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 200 {
		t.Fatalf("%d distinct messages handled, want 200", len(calls))
	}
	for id, n := range calls {
		if n != 1 {
			t.Errorf("message %s handled %d times", id, n)
		}
	}
	t.Logf("deliveries per worker: %v", perWorker)
}

// Item 6: a handler running longer than the lease keeps ownership: the renewals hold the
// row, a second worker polling the source never gets it, and it completes once.
func TestContractHandlerLongerThanTheLeaseKeepsOwnership(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "renew", 1)
	opts := quickOptions("renew")
	opts.Lease = 600 * time.Millisecond
	var deliveries atomic.Int32
	slow := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		deliveries.Add(1)
		select {
		case <-time.After(2 * time.Second): // more than three leases
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	first, rival := newWorker(t, url, opts), newWorker(t, url, opts)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	go func() { done <- first.Run(ctx, slow) }()
	waitFor(t, 10*time.Second, "the first delivery", func() bool { return deliveries.Load() == 1 })
	go func() { done <- rival.Run(ctx, slow) }()
	waitFor(t, 10*time.Second, "the row processed", func() bool { return psql(t, url, "SELECT state FROM inbox") == "processed" })
	cancel()
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	if n := deliveries.Load(); n != 1 {
		t.Fatalf("%d deliveries: the renewed row was claimed again", n)
	}
	if s := first.Stats(); s.ClaimsLost != 0 || s.Completed != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// Item 8: a message abandoned by a stopped worker (a handler outliving the shutdown grace)
// is claimable by another worker once its lease expired, with no attempt spent.
func TestContractAbandonedMessageIsClaimableAfterTheLease(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "abandon", 1)
	opts := quickOptions("abandon")
	opts.Lease, opts.ShutdownGrace = 900*time.Millisecond, 50*time.Millisecond
	w1 := newWorker(t, url, opts)
	started := make(chan time.Time, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- w1.Run(ctx, func(hctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
			started <- time.Now()
			<-hctx.Done()
			return nil
		})
	}()
	claimedAt := <-started
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := psql(t, url, "SELECT state || ' ' || attempt FROM inbox"); got != "processing 0" {
		t.Fatalf("abandoned row %q", got)
	}
	w2 := newWorker(t, url, opts)
	var second atomic.Int64
	runUntil(t, w2, func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		if m.Attempt != 0 {
			return errors.New("attempt " + strconv.Itoa(m.Attempt) + ": an abandon spent an attempt")
		}
		second.Store(int64(time.Since(claimedAt)))
		return nil
	}, "the abandoned row processed by another worker", func() bool { return psql(t, url, "SELECT state FROM inbox") == "processed" })
	if d := time.Duration(second.Load()); d < 800*time.Millisecond {
		t.Fatalf("reclaimed %s after the first claim, before the lease (900ms) expired", d)
	}
}

// Item 11: stale tokens change nothing: after the claim was taken over, the worker's
// complete, retry and dead statements all match 0 rows and leave the new owner's row as it is.
func TestContractStaleTokensChangeNothing(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "stale", 3)
	w := newWorker(t, url, quickOptions("stale"))
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		psql(t, url, "UPDATE inbox SET claim_token = '00000000-0000-0000-0000-00000000000"+m.IdempotencyKey[1:]+"' WHERE id = '"+m.ID+"'")
		switch m.IdempotencyKey {
		case "k1":
			return nil // complete
		case "k2":
			return queuebox.RetryWithReason(time.Minute, "retry with a stale token")
		default:
			return queuebox.Dead("dead with a stale token")
		}
	}
	runUntil(t, w, handler, "three lost claims", func() bool { s := w.Stats(); return s.ClaimsLost == 3 && s.InFlight == 0 })
	got := psql(t, url, "SELECT string_agg(idempotency_key || ':' || state || ':' || attempt || ':' || coalesce(last_error, '-') || ':' || claim_token, ',' ORDER BY idempotency_key) FROM inbox")
	want := "k1:processing:0:-:00000000-0000-0000-0000-000000000001," +
		"k2:processing:0:-:00000000-0000-0000-0000-000000000002," +
		"k3:processing:0:-:00000000-0000-0000-0000-000000000003"
	if got != want {
		t.Fatalf("rows\n got %s\nwant %s", got, want)
	}
	if s := w.Stats(); s.Completed != 0 || s.Retried != 0 || s.Dead != 0 {
		t.Fatalf("stats %+v: fenced-out outcomes must not count", s)
	}
}

// Item 16: no polling storm on an empty table: an idle worker claims about once per poll
// interval. Counted from pg_stat_database's committed transactions of the test database,
// read after the worker closed its connections (a backend flushes its counters on exit).
func TestContractNoPollingStormOnAnEmptyTable(t *testing.T) {
	url := newDB(t)
	name := url[len(serverURL(t))+1:]
	commits := func() int {
		time.Sleep(300 * time.Millisecond) // let exiting backends flush their counters
		n, err := strconv.Atoi(psql(t, serverURL(t)+"/postgres", "SELECT pg_stat_force_next_flush(); SELECT xact_commit FROM pg_stat_database WHERE datname = '"+name+"'"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := commits()
	opts := quickOptions("idle")
	opts.PollInterval = 200 * time.Millisecond
	w, err := queuebox.NewWorker(t.Context(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := w.Run(ctx, func(context.Context, *queuebox.Message, *queuebox.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	n := commits() - before
	// 2 s / 200 ms = 10 claims, plus the connection checks; a storm makes thousands.
	t.Logf("%d transactions in 2 s with a 200 ms poll interval", n)
	if n < 5 || n > 40 {
		t.Fatalf("%d transactions in 2 s: want about 10 (one claim per poll interval)", n)
	}
}

// Item 17: never more than a batch in flight: with BatchSize 3 (and Concurrency 8), at
// most 3 handlers run at once and at most 3 rows are held in 'processing'.
func TestContractNeverMoreThanABatchInFlight(t *testing.T) {
	url := newDB(t)
	insertRows(t, url, "batch", 15)
	opts := quickOptions("batch")
	opts.BatchSize, opts.Concurrency = 3, 8
	w := newWorker(t, url, opts)
	var running, maxRunning, maxHeld atomic.Int32
	bump := func(a *atomic.Int32, v int32) {
		for {
			old := a.Load()
			if v <= old || a.CompareAndSwap(old, v) {
				return
			}
		}
	}
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			default:
			}
			n, _ := strconv.Atoi(psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processing'"))
			bump(&maxHeld, int32(n))
		}
	}()
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		bump(&maxRunning, running.Add(1))
		time.Sleep(60 * time.Millisecond)
		running.Add(-1)
		return nil
	}
	runUntil(t, w, handler, "15 rows processed", func() bool {
		return psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "15"
	})
	close(stopSampling)
	<-sampled
	if m := maxRunning.Load(); m != 3 {
		t.Errorf("at most %d handlers ran at once, want exactly 3 (the batch)", m)
	}
	if m := maxHeld.Load(); m > 3 {
		t.Errorf("%d rows held in processing at once, more than the batch of 3", m)
	}
}

// Item 18: across two workers, at most one message per aggregate is in flight, messages of
// one aggregate run in arrival order, and different aggregates overlap.
func TestContractOneMessagePerAggregateInFlightAcrossTwoWorkers(t *testing.T) {
	url := newDB(t)
	psql(t, url, `INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption)
		SELECT 'agg', 'k' || g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, jsonb_build_object('n', g), 'pull'
		FROM generate_series(1, 12) g`)
	var mu sync.Mutex
	inFlight := map[string]int{}
	order := map[string][]int{}
	overlapped := false
	violation := ""
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		var p struct{ N int }
		_ = m.UnmarshalPayload(&p)
		agg := *m.AggregateID
		mu.Lock()
		inFlight[agg]++
		if inFlight[agg] > 1 {
			violation = "two messages of aggregate " + agg + " in flight"
		}
		if inFlight["a"] > 0 && inFlight["b"] > 0 {
			overlapped = true
		}
		order[agg] = append(order[agg], p.N)
		mu.Unlock()
		time.Sleep(40 * time.Millisecond)
		mu.Lock()
		inFlight[agg]--
		mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	for i := 0; i < 2; i++ {
		w := newWorker(t, url, quickOptions("agg"))
		runs.Add(1)
		go func() {
			defer runs.Done()
			if err := w.Run(ctx, handler); err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
	}
	waitFor(t, 30*time.Second, "12 rows processed", func() bool {
		return psql(t, url, "SELECT count(*) FROM inbox WHERE state = 'processed'") == "12"
	})
	cancel()
	runs.Wait()
	mu.Lock()
	defer mu.Unlock()
	if violation != "" {
		t.Fatal(violation)
	}
	if !overlapped {
		t.Error("aggregates a and b never ran at the same time")
	}
	for agg, ns := range order {
		for i := 1; i < len(ns); i++ {
			if ns[i] < ns[i-1] {
				t.Errorf("aggregate %s ran out of order: %v", agg, ns)
				break
			}
		}
	}
}

// Item 15 (with TestUnmigratedDatabaseIsSchemaMissing for NewWorker): a password in the
// URL never shows in an error, also from Migrate.
func TestContractPasswordsNeverAppearInErrors(t *testing.T) {
	err := queuebox.Migrate(t.Context(), "postgres://postgres:hunter2@127.0.0.1:1/x")
	if !errors.Is(err, queuebox.ErrConnect) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("want ErrConnect without the password, got %v", err)
	}
}
