package server

import (
	"os"
	"strings"
	"testing"
)

// TestOperationsDocComplete: docs/operations.md names every setting and
// every metric the server exports, so the doc cannot fall behind the code.
func TestOperationsDocComplete(t *testing.T) {
	raw, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	_, table, _ := strings.Cut(doc, "| setting |")
	table, _, _ = strings.Cut(table, "\n\n")
	for _, name := range append(Settings(), "config") {
		if !strings.Contains(table, "`"+name+"`") {
			t.Errorf("docs/operations.md: settings table lacks %s", name)
		}
	}
	m := NewMetrics()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"moraine_resident_rows", "moraine_resident_bytes"} // computed only with a stack
	for _, f := range fams {
		names = append(names, f.GetName())
	}
	if len(names) < 15 {
		t.Fatalf("only %d metric families", len(names))
	}
	for _, n := range names {
		// The Go runtime's and the process's standard series are
		// documented as families (`go_*`, `process_*`); moraine's own one
		// by one.
		name := n
		for _, std := range []string{"go_", "process_"} {
			if strings.HasPrefix(n, std) {
				name = std + "*"
			}
		}
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/operations.md: metrics table lacks %s", name)
		}
	}
}
