package queuebox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// A handler's tx.Exec stores exactly the values it was given, whatever the order of their
// kinds under one statement text: the core caches a prepared statement per text,
// and once bound a whole number as int8 and a fraction as float8, so 4.25 after 3 was
// stored as 4616471093031469056, silently. Mirrors core/tests/handler_statement_values.rs
// through the Go wrapper: one message, one handler, one transaction, and each stored
// v::text compared with what PostgreSQL itself (through psql) makes of the value's JSON
// literal (encoding/json's, which is what the wrapper hands the core).

func bigInt(t *testing.T, digits string) *big.Int {
	t.Helper()
	b, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		t.Fatalf("bad big integer %s", digits)
	}
	return b
}

// valueColumns are the column types of the test, each with the Go values sent into it in
// one order; the handler also sends them reversed.
func valueColumns(t *testing.T) []struct {
	column string
	values []any
} {
	return []struct {
		column string
		values []any
	}{
		{"numeric", []any{
			3, 4.25, 12.5, 7, 0.5, nil,
			json.Number("123456789012345678901234567890"),
			bigInt(t, "-123456789012345678901234567891"),
			json.Number("0.1234567890123456789012345"),
			json.Number("1e-400"),
			int64(math.MinInt64),
			uint64(math.MaxUint64),
			bigInt(t, "18446744073709551616"),
			json.Number("2.5E+3"),
			float32(0.25),
		}},
		{"float8", []any{3, 4.25, 0.1, 7, nil, 1e300, -0.5, json.Number("0.1234567890123456789012345")}},
		// A fraction into an int8 column rounds as PostgreSQL's assignment does (half away
		// from zero), as it would from psql.
		{"int8", []any{3, int64(math.MaxInt64), nil, -7, 0, 4.5, -2.5, uint8(200)}},
		{"text", []any{"12.345", 3, 4.25, true, nil, "héllo", []any{1, "a"}, map[string]any{"a": 1.5}}},
		{"jsonb", []any{
			map[string]any{"a": 1},
			[]any{1, 2.5, "x"},
			nil,
			map[string]any{"big": json.Number("123456789012345678901234567890")},
			map[string]any{"n": bigInt(t, "98765432109876543210"), "d": json.Number("0.10")},
		}},
		{"bool", []any{true, false, nil}},
	}
}

// expectedText is what PostgreSQL makes of the JSON literal lit stored into a column of
// type column, as text (nil for NULL), asked of the server through psql.
func expectedText(t *testing.T, url, column, lit string) *string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(lit))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", lit, err)
	}
	var cast string
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return &v
	case []any, map[string]any:
		cast = "jsonb"
	case bool:
		cast = "bool"
	case json.Number:
		switch column {
		case "float8":
			cast = "float8"
		case "int8":
			cast = "numeric::int8"
		default: // numeric, and a number into a text column
			cast = "numeric"
		}
	}
	got := psql(t, url, fmt.Sprintf("SELECT (%s::text)::%s::text", quoteLiteral(lit), cast))
	return &got
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func show(p *string) string {
	if p == nil {
		return "NULL"
	}
	return *p
}

func TestOneStatementStoresEveryKindOfValueExactlyInAnyOrder(t *testing.T) {
	url := newDB(t)
	columns := valueColumns(t)
	for _, c := range columns {
		psql(t, url, fmt.Sprintf("CREATE TABLE t_%s (n serial, v %s)", c.column, c.column))
	}
	insertRows(t, url, "go-values", 1)

	// sent[column] is every value in the order the handler sends it: forward, then reversed.
	sent := map[string][]any{}
	for _, c := range columns {
		all := append([]any{}, c.values...)
		for i := len(c.values) - 1; i >= 0; i-- {
			all = append(all, c.values[i])
		}
		sent[c.column] = all
	}

	var mu sync.Mutex
	var failures []string
	inTx := map[string][]*string{} // each column's rows as read back inside the transaction
	var calls atomic.Int32
	var done atomic.Bool
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		calls.Add(1)
		defer done.Store(true)
		for _, c := range columns {
			// One text for every value: one prepared statement on the handler's connection.
			insert := fmt.Sprintf("INSERT INTO t_%s (v) VALUES ($1)", c.column)
			for _, v := range sent[c.column] {
				if _, err := tx.Exec(ctx, insert, v); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s: Exec of %#v: %v", c.column, v, err))
					mu.Unlock()
					return queuebox.Dead(err.Error())
				}
			}
			var rows []struct {
				V *string `json:"v"`
			}
			if err := tx.QueryInto(ctx, &rows, fmt.Sprintf("SELECT v::text AS v FROM t_%s ORDER BY n", c.column)); err != nil {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%s: reading back: %v", c.column, err))
				mu.Unlock()
				return queuebox.Dead(err.Error())
			}
			mu.Lock()
			for _, r := range rows {
				inTx[c.column] = append(inTx[c.column], r.V)
			}
			mu.Unlock()
		}
		return nil
	}
	w := newWorker(t, url, quickOptions("go-values"))
	runUntil(t, w, handler, "the handler to finish", done.Load)
	if n := calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, f := range failures {
		t.Errorf("%s", f)
	}
	for _, c := range columns {
		stored, ok := inTx[c.column]
		if !ok {
			continue // not reached: its failure is reported above
		}
		if len(failures) == 0 {
			// What committed, read by psql, is what the transaction saw.
			var committed []*string
			if err := json.Unmarshal([]byte(psql(t, url, fmt.Sprintf("SELECT json_agg(v::text ORDER BY n) FROM t_%s", c.column))), &committed); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(showAll(committed)) != fmt.Sprint(showAll(stored)) {
				t.Errorf("%s: committed %v, but the transaction read %v", c.column, showAll(committed), showAll(stored))
			}
		}
		if len(stored) != len(sent[c.column]) {
			t.Errorf("%s: %d rows stored, %d sent", c.column, len(stored), len(sent[c.column]))
			continue
		}
		for i, v := range sent[c.column] {
			lit, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			want := expectedText(t, url, c.column, string(lit))
			if show(stored[i]) != show(want) || (stored[i] == nil) != (want == nil) {
				t.Errorf("%s: sent %T %s, stored %s, expected %s", c.column, v, lit, show(stored[i]), show(want))
			}
		}
	}
	if got := psql(t, url, "SELECT state FROM inbox WHERE source = 'go-values'"); got != "processed" && len(failures) == 0 {
		t.Errorf("the message is %s, want processed", got)
	}
}

func showAll(ps []*string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = show(p)
	}
	return out
}

// A numeric column comes back through tx.Query as json.Number holding the server's exact
// digits (the wrapper decodes rows with UseNumber): no float64 rounding on the way, so a
// handler can parse it with big.Float/big.Rat or a decimal package of its choice.
func TestNumericColumnReadsBackAsTheExactNumber(t *testing.T) {
	url := newDB(t)
	psql(t, url, "CREATE TABLE money (n serial, v numeric)")
	insertRows(t, url, "go-numeric", 1)
	sent := []any{
		4.25,
		json.Number("123456789012345678901234567890.000000000000000001"),
		json.Number("1e-30"),
		json.Number("12.50"),
		100,
		bigInt(t, "-99999999999999999999999999999"),
	}
	// The same numbers, digit for digit (PostgreSQL writes 1e-30 out in full; the core writes
	// 12.50 without its trailing zero, the same value).
	want := []string{
		"4.25",
		"123456789012345678901234567890.000000000000000001",
		"0.000000000000000000000000000001",
		"12.5",
		"100",
		"-99999999999999999999999999999",
	}
	var got []string
	var kinds []string
	var floats []float64
	var viaRows []string
	var failure atomic.Value
	var done atomic.Bool
	handler := func(ctx context.Context, m *queuebox.Message, tx *queuebox.Tx) error {
		defer done.Store(true)
		for _, v := range sent {
			if _, err := tx.Exec(ctx, "INSERT INTO money (v) VALUES ($1)", v); err != nil {
				failure.Store(fmt.Sprintf("Exec of %#v: %v", v, err))
				return queuebox.Dead(err.Error())
			}
		}
		rows, err := tx.Query(ctx, "SELECT v FROM money ORDER BY n")
		if err != nil {
			failure.Store("Query: " + err.Error())
			return queuebox.Dead(err.Error())
		}
		for _, r := range rows {
			kinds = append(kinds, fmt.Sprintf("%T", r["v"]))
			got = append(got, fmt.Sprint(r["v"]))
		}
		// Decoding into a float64 field is Go's ordinary (rounding) conversion.
		var typed []struct {
			V float64 `json:"v"`
		}
		if err := tx.QueryInto(ctx, &typed, "SELECT v FROM money ORDER BY n"); err != nil {
			failure.Store("QueryInto: " + err.Error())
			return queuebox.Dead(err.Error())
		}
		for _, r := range typed {
			floats = append(floats, r.V)
		}
		// QueryRows is QueryInto typed by its result: a json.Number field keeps every digit.
		exact, err := queuebox.QueryRows[struct {
			V json.Number `json:"v"`
		}](ctx, tx, "SELECT v FROM money ORDER BY n")
		if err != nil {
			failure.Store("QueryRows: " + err.Error())
			return queuebox.Dead(err.Error())
		}
		for _, r := range exact {
			viaRows = append(viaRows, r.V.String())
		}
		return nil
	}
	w := newWorker(t, url, quickOptions("go-numeric"))
	runUntil(t, w, handler, "the handler to finish", done.Load)
	if f := failure.Load(); f != nil {
		t.Fatal(f)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("numeric read back as\n%v\nwant\n%v", got, want)
	}
	if fmt.Sprint(viaRows) != fmt.Sprint(want) {
		t.Errorf("QueryRows read back\n%v\nwant\n%v", viaRows, want)
	}
	for i, k := range kinds {
		if k != "json.Number" {
			t.Errorf("row %d decoded as %s, want json.Number", i, k)
		}
	}
	if len(floats) != len(want) || floats[0] != 4.25 || floats[1] != 1.2345678901234568e29 || floats[4] != 100 {
		t.Errorf("into float64: %v", floats)
	}
	// The exact digits parse without loss.
	r, ok := new(big.Rat).SetString(got[1])
	if !ok || r.FloatString(18) != want[1] {
		t.Errorf("big.Rat of %s: %v", got[1], r)
	}
	if b, ok := new(big.Int).SetString(got[5], 10); !ok || b.String() != want[5] {
		t.Errorf("big.Int of %s: %v", got[5], b)
	}
}
