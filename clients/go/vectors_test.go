package queuebox_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// Kinds that need a database; the Rust store tests run them (core/tests/pull_worker.rs).
var databaseKinds = map[string]bool{"transitions": true}

func TestConformanceVectorsMatchThroughTheNativeLibrary(t *testing.T) {
	files, err := filepath.Glob("../../proto-docs/vectors/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vector files found (%v)", err)
	}
	total := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			Kind  string `json:"kind"`
			Cases []struct {
				Name     string          `json:"name"`
				Input    json.RawMessage `json:"input"`
				Expected json.RawMessage `json:"expected"`
			} `json:"cases"`
		}
		if err := json.Unmarshal(text, &file); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if databaseKinds[file.Kind] {
			t.Logf("%s: kind %s needs a database; run by the Rust store tests", filepath.Base(f), file.Kind)
			continue
		}
		if len(file.Cases) == 0 {
			t.Errorf("%s has no cases", f)
		}
		for _, c := range file.Cases {
			total++
			got, err := queuebox.EvaluateVector(file.Kind, c.Input)
			if err != nil {
				t.Errorf("%s/%s: %v", file.Kind, c.Name, err)
				continue
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("%s/%s: output is not JSON: %s", file.Kind, c.Name, got)
			}
			_ = json.Unmarshal(c.Expected, &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("%s/%s: expected %s, got %s", file.Kind, c.Name, c.Expected, got)
			}
		}
	}
	if total < 40 {
		t.Errorf("only %d vector cases ran", total)
	}
}

func TestUnknownVectorKindIsInvalidInput(t *testing.T) {
	_, err := queuebox.EvaluateVector("no_such_kind", []byte(`{}`))
	if !errors_Is(err, queuebox.ErrInvalidInput) {
		t.Fatalf("want ErrInvalidInput, got %v", err)
	}
}
