package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/moraine-db/moraine/internal/replay"
	"github.com/moraine-db/moraine/internal/transfer"
)

// importMain is `moraine import --from URL --database NAME [flags]`: a
// DuckLake catalog held in PostgreSQL becomes a new database of a running
// moraine. exportMain is `moraine export --database NAME --to URL [flags]`,
// the reverse, into an empty PostgreSQL database.
func importMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("import --from URL --database NAME [flags]", stdout, stderr)
	from := fs.String("from", "", "the PostgreSQL database holding the catalog (postgres://… or a conninfo)")
	database := fs.String("database", "", "the moraine database to create for it")
	schema := fs.String("schema", "public", "the catalog's schema (DuckLake's METADATA_SCHEMA)")
	addr := fs.String("addr", replay.DefaultAddr, "moraine: `host:port` or a conninfo (its maintenance database is used to create the new one)")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	if *from == "" || *database == "" {
		fmt.Fprintln(stderr, "moraine import: --from and --database are required")
		fs.Usage()
		return 2
	}
	admin, err := replay.AdminConninfo(*addr)
	if err != nil {
		fmt.Fprintln(stderr, "moraine import:", err)
		return 2
	}
	p := newTransferProgress(stderr, "import")
	sum, err := transfer.Import(ctx, *from, admin, *schema, *database, p.report)
	if err != nil {
		p.abandon()
		fmt.Fprintln(stderr, "moraine import:", err)
		return 1
	}
	p.done(sum)
	return 0
}

func exportMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("export --database NAME --to URL [flags]", stdout, stderr)
	to := fs.String("to", "", "an empty PostgreSQL database to receive the catalog (postgres://… or a conninfo)")
	database := fs.String("database", "", "the moraine database holding the catalog")
	schema := fs.String("schema", "public", "the catalog's schema (DuckLake's METADATA_SCHEMA)")
	addr := fs.String("addr", replay.DefaultAddr, "moraine: `host:port` or a conninfo")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	if *to == "" || *database == "" {
		fmt.Fprintln(stderr, "moraine export: --to and --database are required")
		fs.Usage()
		return 2
	}
	moraine, err := replay.AdminConninfo(*addr)
	if err != nil {
		fmt.Fprintln(stderr, "moraine export:", err)
		return 2
	}
	p := newTransferProgress(stderr, "export")
	sum, err := transfer.Export(ctx, moraine, *database, *to, *schema, p.report)
	if err != nil {
		p.abandon()
		fmt.Fprintln(stderr, "moraine export:", err)
		return 1
	}
	p.done(sum)
	return 0
}

// transferProgress shows a transfer's tables, rows, bytes and rate: on a
// terminal a line rewritten in place, elsewhere only the summary.
type transferProgress struct {
	w       io.Writer
	what    string
	tty     bool
	last    time.Time
	printed bool
}

func newTransferProgress(w io.Writer, what string) *transferProgress {
	return &transferProgress{w: w, what: what, tty: isTerminal(w)}
}

func (p *transferProgress) report(pr transfer.Progress) {
	if !p.tty || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	rate := float64(pr.Bytes) / max(pr.Elapsed.Seconds(), 1e-3)
	fmt.Fprintf(p.w, "\r%s: table %d of %d (%s), %d rows, %s (%s/s)  ", p.what, pr.TablesDone, pr.Tables, pr.Table, pr.Rows, size(pr.Bytes), size(int64(rate)))
	p.printed = true
}

func (p *transferProgress) abandon() {
	if p.printed {
		fmt.Fprintln(p.w)
	}
}

func (p *transferProgress) done(s transfer.Summary) {
	if p.printed {
		fmt.Fprint(p.w, "\r")
	}
	rate := float64(s.Bytes) / max(s.Elapsed.Seconds(), 1e-3)
	fmt.Fprintf(p.w, "%s: catalog version %s, %d tables, %d rows, %s in %v (%s/s)\n", p.what, s.Version, s.Tables, s.Rows, size(s.Bytes), s.Elapsed.Round(time.Millisecond), size(int64(rate)))
}
