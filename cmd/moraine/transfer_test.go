package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/testenv"
	"github.com/moraine-db/moraine/internal/testenv/testserver"
)

// TestImportExportCommands: usage errors exit 2; a source without a
// DuckLake catalog is refused (exit 1) naming the problem, and creates
// nothing. (internal/transfer tests the round trip itself.)
func TestImportExportCommands(t *testing.T) {
	ctx := context.Background()
	run := func(main func(context.Context, []string, io.Writer, io.Writer) int, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := main(ctx, args, &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, _ := run(importMain, "--database", "x"); code != 2 {
		t.Fatalf("import without --from: exit %d", code)
	}
	if code, _ := run(exportMain, "--to", "postgres://127.0.0.1/x"); code != 2 {
		t.Fatalf("export without --database: exit %d", code)
	}
	pg := testenv.Postgres(t)
	r := testserver.Start(t, "file://"+t.TempDir())
	code, out := run(importMain, "--from", pg, "--database", "sales", "--addr", r.Addr)
	if code != 1 || !strings.Contains(out, "not a DuckLake catalog moraine can serve") {
		t.Fatalf("import of a database without a catalog: exit %d:\n%s", code, out)
	}
	if code, out := run(exportMain, "--database", "sales", "--to", pg, "--addr", r.Addr); code != 1 || !strings.Contains(out, `database "sales" does not exist`) {
		t.Fatalf("export of a database the import did not create: exit %d:\n%s", code, out)
	}
}
