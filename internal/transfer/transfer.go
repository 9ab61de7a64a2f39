// Package transfer moves a DuckLake catalog between a PostgreSQL database
// and moraine, in either direction, over the wire on both sides: `moraine
// import` and `moraine export`.
//
// A catalog is the ducklake_* tables of one schema with their full history
// (every snapshot, every ended row). Transfer reads the source in one
// REPEATABLE READ transaction, so it copies one consistent state, and writes
// the destination in one transaction: on moraine that is one commit, which
// moraine checks as a whole (a commit that creates a catalog must pass
// moraine verify); on PostgreSQL it is one transaction too. Tables are
// created with DuckLake's own shapes (column names, types, NOT NULL, primary
// key, as DuckLake's DDL creates them) and their rows copied with binary COPY,
// so values arrive bit for bit.
package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/pgcode"
)

// ErrNotDuckLake is returned for a source schema that holds no DuckLake
// catalog, or one at a version moraine cannot serve.
var ErrNotDuckLake = errors.New("transfer: not a DuckLake catalog moraine can serve")

// Progress is reported after each table and every few megabytes.
type Progress struct {
	Table              string
	TablesDone, Tables int
	Rows, Bytes        int64 // copied so far, all tables
	Elapsed            time.Duration
}

// Summary is what a transfer copied.
type Summary struct {
	Version string // the catalog version (ducklake_metadata 'version')
	Tables  int
	Rows    int64
	Bytes   int64
	Elapsed time.Duration
}

// column is one column as the source's catalog describes it.
type column struct {
	name    string
	typ     string // format_type
	notNull bool
}

// table is one catalog table of the source.
type table struct {
	name string
	cols []column
	pk   []string
}

// catalogVersion reads the catalog's version and checks moraine serves it.
func catalogVersion(ctx context.Context, c *pgconn.PgConn, schema string) (string, error) {
	q := fmt.Sprintf(`SELECT value FROM %s.ducklake_metadata WHERE key = 'version' AND scope IS NULL`, ident(schema))
	rs, err := c.Exec(ctx, q).ReadAll()
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == pgcode.UndefinedTable || pe.Code == pgcode.InvalidSchemaName) {
			return "", fmt.Errorf("%w: schema %s has no ducklake_metadata table", ErrNotDuckLake, schema)
		}
		return "", fmt.Errorf("transfer: read the catalog version: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Rows) != 1 {
		return "", fmt.Errorf("%w: ducklake_metadata of schema %s records no version", ErrNotDuckLake, schema)
	}
	v := string(rs[0].Rows[0][0])
	if !keyspace.KnownVersion(v) {
		return "", fmt.Errorf("%w: catalog version %s (moraine serves %s; let DuckLake migrate it first)", ErrNotDuckLake, v, strings.Join(keyspace.Versions, ", "))
	}
	return v, nil
}

// tables lists the catalog's tables with their columns and primary keys.
// Every table must be one DuckLake creates: a stray ducklake_ table is
// refused before anything is written.
func tables(ctx context.Context, c *pgconn.PgConn, schema string) ([]table, error) {
	rs, err := c.Exec(ctx, fmt.Sprintf(`SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
		WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname LIKE 'ducklake%%' AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY c.relname, a.attnum`, literal(schema))).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("transfer: list the catalog's tables: %w", err)
	}
	var out []table
	for _, r := range rs[0].Rows {
		name := string(r[0])
		if len(out) == 0 || out[len(out)-1].name != name {
			if _, ok := keyspace.Known(name); !ok {
				return nil, fmt.Errorf("%w: table %s.%s is not one DuckLake creates", ErrNotDuckLake, schema, name)
			}
			out = append(out, table{name: name})
		}
		t := &out[len(out)-1]
		t.cols = append(t.cols, column{name: string(r[1]), typ: string(r[2]), notNull: string(r[3]) == "t"})
	}
	pks, err := c.Exec(ctx, fmt.Sprintf(`SELECT c.relname, a.attname
		FROM pg_catalog.pg_constraint k
		JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(k.conkey)
		WHERE n.nspname = %s AND k.contype = 'p' AND c.relname LIKE 'ducklake%%'
		ORDER BY c.relname, a.attnum`, literal(schema))).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("transfer: list the catalog's primary keys: %w", err)
	}
	for _, r := range pks[0].Rows {
		for i := range out {
			if out[i].name == string(r[0]) {
				out[i].pk = append(out[i].pk, string(r[1]))
			}
		}
	}
	return out, nil
}

// ddl is the table's CREATE TABLE as DuckLake writes it: a one-column
// primary key inline, a wider one as a table constraint.
func (t table) ddl(schema string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s.%s(", ident(schema), ident(t.name))
	for i, c := range t.cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", ident(c.name), strings.ToUpper(c.typ))
		switch {
		case len(t.pk) == 1 && t.pk[0] == c.name:
			b.WriteString(" PRIMARY KEY")
		case c.notNull:
			b.WriteString(" NOT NULL")
		}
	}
	if len(t.pk) > 1 {
		quoted := make([]string, len(t.pk))
		for i, k := range t.pk {
			quoted[i] = ident(k)
		}
		fmt.Fprintf(&b, ", PRIMARY KEY (%s)", strings.Join(quoted, ", "))
	}
	b.WriteString(")")
	return b.String()
}

// copyCatalog copies every catalog table of srcSchema on src into
// dstSchema on dst, which must be inside a transaction and hold none of
// them.
func copyCatalog(ctx context.Context, src, dst *pgconn.PgConn, srcSchema, dstSchema string, progress func(Progress)) (Summary, error) {
	start := time.Now()
	var sum Summary
	version, err := catalogVersion(ctx, src, srcSchema)
	if err != nil {
		return sum, err
	}
	sum.Version = version
	ts, err := tables(ctx, src, srcSchema)
	if err != nil {
		return sum, err
	}
	if dstSchema != "public" {
		if _, err := dst.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+ident(dstSchema)).ReadAll(); err != nil {
			return sum, fmt.Errorf("transfer: create schema %s: %w", dstSchema, err)
		}
	}
	for _, t := range ts {
		if _, err := dst.Exec(ctx, t.ddl(dstSchema)).ReadAll(); err != nil {
			return sum, fmt.Errorf("transfer: create table %s: %w", t.name, err)
		}
	}
	report := func(table string, done int, bytes int64) {
		if progress != nil {
			progress(Progress{Table: table, TablesDone: done, Tables: len(ts), Rows: sum.Rows, Bytes: bytes, Elapsed: time.Since(start)})
		}
	}
	for i, t := range ts {
		n, bytes, err := copyTable(ctx, src, dst, srcSchema, dstSchema, t, func(b int64) { report(t.name, i, sum.Bytes+b) })
		sum.Rows += n
		sum.Bytes += bytes
		if err != nil {
			return sum, fmt.Errorf("transfer: table %s: %w", t.name, err)
		}
		report(t.name, i+1, sum.Bytes)
	}
	sum.Tables = len(ts)
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// copyTable streams one table with binary COPY from src to dst.
func copyTable(ctx context.Context, src, dst *pgconn.PgConn, srcSchema, dstSchema string, t table, tick func(int64)) (rows, bytes int64, err error) {
	cols := make([]string, len(t.cols))
	for i, c := range t.cols {
		cols[i] = ident(c.name)
	}
	list := strings.Join(cols, ", ")
	pr, pw := io.Pipe()
	// The source hands over one row per write; batched, the destination
	// gets CopyData messages of a megabyte instead of a row each.
	buf := bufio.NewWriterSize(pw, 1<<20)
	counted := &countingWriter{w: buf, tick: tick}
	done := make(chan error, 1)
	go func() {
		_, err := src.CopyTo(ctx, counted, fmt.Sprintf("COPY (SELECT %s FROM %s.%s) TO STDOUT (FORMAT binary)", list, ident(srcSchema), ident(t.name)))
		if err == nil {
			err = buf.Flush()
		}
		pw.CloseWithError(err)
		done <- err
	}()
	tag, err := dst.CopyFrom(ctx, pr, fmt.Sprintf("COPY %s.%s (%s) FROM STDIN (FORMAT binary)", ident(dstSchema), ident(t.name), list))
	pr.CloseWithError(err)
	if serr := <-done; err == nil && serr != nil {
		err = serr
	}
	if err != nil {
		return 0, counted.n, err
	}
	return tag.RowsAffected(), counted.n, nil
}

// countingWriter counts the bytes through it and ticks every 4 MiB.
type countingWriter struct {
	w    io.Writer
	n    int64
	last int64
	tick func(int64)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if c.tick != nil && c.n-c.last >= 4<<20 {
		c.last = c.n
		c.tick(c.n)
	}
	return n, err
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
