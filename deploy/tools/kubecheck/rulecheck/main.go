// rulecheck validates Prometheus rule files offline with Prometheus's own rule parser, the
// one `promtool check rules` calls: rulefmt.ParseFile decodes each file strictly (an unknown
// field is an error) and validates every group and rule (names, durations, label names, the
// PromQL of each expr, the Go templates of labels and annotations). Like promtool it also
// refuses a file whose groups share a name, and a group with two rules of one name and one
// label set. promtool itself compiles all of Prometheus (1,747 s cold here); this compiles
// only the rule and PromQL packages, inside the module that already builds helm and
// kubecheck.
//
// Usage: rulecheck FILE...   Exit status 1 on any problem.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: rulecheck FILE...")
		os.Exit(2)
	}
	// promtool's settings for `check rules`: UTF-8 metric and label names, the default
	// PromQL functions, unknown fields refused.
	p := parser.NewParser(parser.Options{})
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	problems := 0
	for _, file := range os.Args[1:] {
		groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, p, logger)
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, "rulecheck:", err)
			problems++
		}
		if groups == nil {
			continue
		}
		rules := 0
		seenGroup := map[string]bool{}
		for _, g := range groups.Groups {
			if seenGroup[g.Name] {
				fmt.Fprintf(os.Stderr, "rulecheck: %s: group %q is defined more than once\n", file, g.Name)
				problems++
			}
			seenGroup[g.Name] = true
			seenRule := map[string]bool{}
			for _, r := range g.Rules {
				rules++
				key := r.Record + r.Alert + "{" + labelKey(r.Labels) + "}"
				if seenRule[key] {
					fmt.Fprintf(os.Stderr, "rulecheck: %s: group %q has rule %s twice\n", file, g.Name, key)
					problems++
				}
				seenRule[key] = true
			}
		}
		fmt.Printf("rulecheck: %s: %d groups, %d rules\n", file, len(groups.Groups), rules)
	}
	if problems > 0 {
		fmt.Fprintf(os.Stderr, "rulecheck: %d problems\n", problems)
		os.Exit(1)
	}
}

// labelKey is a rule's labels in a stable order, so two rules that differ only in the
// order their labels were written compare equal.
func labelKey(labels map[string]string) string {
	names := make([]string, 0, len(labels))
	for n := range labels {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + labels[n]
	}
	return strings.Join(parts, ",")
}
