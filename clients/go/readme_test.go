package queuebox_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Contract item 14: the README's Go examples build against this package. Each ```go block
// is a whole program; it is built as a package of this module (so it resolves the
// package and pgx as an application's go.mod would), with the cgo flags of the test run.
func TestReadmeExamplesBuild(t *testing.T) {
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(text), -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go example")
	}
	for i, b := range blocks {
		code := b[1]
		if !strings.HasPrefix(code, "package main\n") {
			t.Errorf("README Go block %d is not a whole program (package main): it cannot be built", i+1)
			continue
		}
		if !strings.Contains(code, "queuebox.Publish(") || !strings.Contains(code, ".RunPgx(") {
			t.Errorf("README Go block %d does not show both directions (Publish and RunPgx)", i+1)
		}
		// Inside the module, under a name `./...` patterns of a concurrent go vet skip.
		dir, err := os.MkdirTemp(".", "_readme_check")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("go", "build", "-o", os.DevNull, "./"+filepath.Base(dir)).CombinedOutput()
		if err != nil {
			t.Errorf("README Go block %d does not build: %v\n%s", i+1, err, out)
		}
	}
}
