package queuebox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// goKinds is every ErrorKind this package maps from the core's table (KindInternal is the
// C boundary's own status, not a core kind).
var goKinds = []ErrorKind{
	KindClaimLost, KindConnect, KindSchemaMissing, KindMigration, KindDatabase,
	KindConfig, KindInvalidInput, KindAlreadyFinished, KindCancelled,
}

// TestErrorKindsAreExactlyTheCoreTable compares this package's kinds (code and name) with
// proto-docs/error-kinds.json, written from queuebox-core's ErrorKind: a kind added,
// renumbered or renamed on either side fails here.
func TestErrorKindsAreExactlyTheCoreTable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "proto-docs", "error-kinds.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Kinds []struct {
			Code int    `json:"code"`
			Name string `json:"name"`
		} `json:"kinds"`
	}
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Kinds) != len(goKinds) {
		t.Fatalf("the core has %d kinds, this package %d", len(table.Kinds), len(goKinds))
	}
	for i, k := range table.Kinds {
		if int(goKinds[i]) != k.Code || goKinds[i].String() != k.Name {
			t.Errorf("kind %d: core has %d %q, Go has %d %q", i, k.Code, k.Name, int(goKinds[i]), goKinds[i].String())
		}
	}
	if KindInternal.String() != "internal" {
		t.Errorf("KindInternal is %q", KindInternal.String())
	}
}
