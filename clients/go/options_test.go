package queuebox

import (
	"encoding/json"
	"testing"
)

// An unset BatchSize must reach the core unset, so that the core adapts the batch to the
// concurrency (the formula lives once, in the core); a set one is sent as given.
func TestAZeroBatchSizeIsLeftToTheCore(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want any
	}{
		{Options{Source: "s", Concurrency: 32}, nil},
		{Options{Source: "s", BatchSize: 10, Concurrency: 32}, float64(10)},
	} {
		js, err := c.opts.optionsJSON()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			t.Fatal(err)
		}
		if got := m["batchSize"]; got != c.want {
			t.Errorf("%+v: batchSize %v, want %v (%s)", c.opts, got, c.want, js)
		}
		if m["handOut"] != true {
			t.Errorf("%+v: the worker must be a hand-out worker (%s)", c.opts, js)
		}
	}
}
