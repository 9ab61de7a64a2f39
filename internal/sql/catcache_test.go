package sql

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/testenv/wiretest"
)

// TestCatalogReadCache: a read of PostgreSQL's catalogs is answered from
// the cache while no DDL lands, always as the general interpreter answers
// it (compared with the cache off), and afresh once DDL changes the
// catalog; a read that calls a function or takes a parameter is never
// cached.
func TestCatalogReadCache(t *testing.T) {
	ex, s := lakeSession(t, `CREATE TABLE ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint)`)
	ctx := context.Background()
	const q = `SELECT c.relname, a.attname, a.attnum FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND a.attnum > 0 ORDER BY 1, 3`
	general := func() string {
		ex.catalogReads.disabled = true
		defer func() { ex.catalogReads.disabled = false }()
		return runSQL(ctx, s, q, "")
	}
	entries := func() int {
		ex.catalogReads.mu.Lock()
		defer ex.catalogReads.mu.Unlock()
		return len(ex.catalogReads.answers.m)
	}
	first := runSQL(ctx, s, q, "")
	if entries() != 1 || first != general() || !strings.Contains(first, "ducklake_metadata | scope_id") {
		t.Fatalf("first read (%d entries):\n%s", entries(), first)
	}
	if again := runSQL(ctx, s, q, ""); again != first || entries() != 1 {
		t.Fatalf("repeated read (%d entries):\n%s", entries(), again)
	}
	// DDL from another session changes the answer.
	other := ex.Open("lake", "postgres", "", 9)
	defer other.Close()
	if out := runSQL(ctx, other, `CREATE TABLE ducklake_snapshot(snapshot_id bigint primary key, snapshot_time timestamptz, schema_version bigint, next_catalog_id bigint, next_file_id bigint)`, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	after := runSQL(ctx, s, q, "")
	if after == first || after != general() || !strings.Contains(after, "ducklake_snapshot | snapshot_id") {
		t.Fatalf("after DDL:\n%s", after)
	}
	// A transaction that staged rows sees the published catalogs (cached);
	// one that staged DDL sees its own.
	if out := runSQL(ctx, s, `BEGIN; INSERT INTO ducklake_metadata VALUES ('k', 'v', NULL, NULL)`, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	rows := func(out string) string { return out[:strings.LastIndex(out, "status")] }
	if got := runSQL(ctx, s, q, ""); rows(got) != rows(after) {
		t.Fatalf("with staged rows:\n%s", got)
	}
	if out := runSQL(ctx, s, `CREATE TABLE ducklake_tag(object_id bigint, begin_snapshot bigint, end_snapshot bigint, key varchar, value varchar)`, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	staged := runSQL(ctx, s, q, "")
	if !strings.Contains(staged, "ducklake_tag | object_id") || rows(staged) != rows(general()) {
		t.Fatalf("with staged DDL:\n%s", staged)
	}
	runSQL(ctx, s, `ROLLBACK`, "")
	if got := runSQL(ctx, s, q, ""); got != after {
		t.Fatalf("after the rollback:\n%s", got)
	}
	// Functions and parameters are never cached.
	before := entries()
	runSQL(ctx, s, `SELECT relname, pg_table_size(oid) FROM pg_class WHERE relname = 'ducklake_snapshot'`, "")
	runSQL(ctx, s, `SELECT current_user, relname FROM pg_class WHERE relname = 'ducklake_snapshot'`, "")
	if entries() != before {
		t.Fatalf("a read calling a function was cached (%d → %d entries)", before, entries())
	}
}

// TestCatalogRelationCache: reads the answer cache does not keep (they call
// a function) take the DDL-derived relations from the relation cache, and
// see what a fresh build shows: after DDL, with staged DDL, with a temp
// table of their own, and after a sort of the shared rows.
func TestCatalogRelationCache(t *testing.T) {
	ex, s := lakeSession(t, `CREATE TABLE ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint)`)
	ctx := context.Background()
	queries := []string{
		`SELECT current_user, c.relname, a.attname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid WHERE a.attnum > 0 AND c.relname LIKE 'ducklake%' ORDER BY 2, 3`,
		`SELECT relname FROM pg_class ORDER BY relname DESC LIMIT 3`,
		`SELECT current_user, relname FROM pg_class`,
		`SELECT current_user, count(*) FROM pg_attribute`,
		// Equalities a shared relation answers through its indexes.
		`SELECT current_user, c.relname, a.attname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid WHERE c.relname = 'ducklake_metadata' AND a.attnum > 0 ORDER BY 3`,
		`SELECT current_user, relname FROM pg_class WHERE relkind = 'r' AND relname = 'ducklake_snapshot'`,
		`SELECT current_user, attname FROM pg_attribute WHERE attnum = 2 AND attname = 'value' ORDER BY 2`,
		`SELECT current_user, relname FROM pg_class WHERE relname = 'no_such_relation'`,
		// … PostgreSQL's own rows among them, indexed once for every build.
		`SELECT current_user, c.relname, a.attname, t.typname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid JOIN pg_type t ON t.oid = a.atttypid WHERE c.relname = 'ducklake_metadata' AND a.attnum > 0 ORDER BY 3`,
		`SELECT current_user, relname, relkind FROM pg_class WHERE relname = 'pg_attribute'`,
		`SELECT current_user, a.attname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid WHERE c.relname = 'pg_namespace' AND a.attnum > 0 ORDER BY a.attnum`,
	}
	relations := func() int {
		ex.catalogReads.mu.Lock()
		defer ex.catalogReads.mu.Unlock()
		return len(ex.catalogReads.relations.m)
	}
	check := func(what string) {
		t.Helper()
		sameAsFresh(t, ex, s, what, queries)
	}
	check("first reads")
	check("second reads")
	if relations() == 0 {
		t.Fatal("no relation was cached")
	}
	other := ex.Open("lake", "postgres", "", 9)
	defer other.Close()
	if out := runSQL(ctx, other, `CREATE TABLE ducklake_snapshot(snapshot_id bigint primary key, snapshot_time timestamptz, schema_version bigint, next_catalog_id bigint, next_file_id bigint)`, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	check("after DDL")
	if out := runSQL(ctx, s, `BEGIN; CREATE TABLE ducklake_tag(object_id bigint, begin_snapshot bigint, end_snapshot bigint, key varchar, value varchar)`, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	check("with staged DDL")
	runSQL(ctx, s, `ROLLBACK`, "")
	// The rolled-back DDL's catalogs must not stand for the next DDL that
	// is published.
	if out := runSQL(ctx, other, `CREATE TABLE ducklake_view(view_id bigint, view_uuid uuid, begin_snapshot bigint, end_snapshot bigint, schema_id bigint, view_name varchar, dialect varchar, sql varchar, column_aliases varchar)`, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	check("after the rollback and other DDL")
	if out := runSQL(ctx, s, `CREATE TEMP TABLE ducklake_scratch(a bigint)`, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	check("with a temp table")
}

// TestCatalogCachesConcurrent: sessions read the catalogs through both
// caches — answers and shared relations with their indexes — while another
// session keeps changing the DDL; every read succeeds, and once the DDL
// stops each session's answers equal a fresh build. .ci/run runs it under
// the race detector.
func TestCatalogCachesConcurrent(t *testing.T) {
	ex, s := lakeSession(t, `CREATE TABLE ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint)`)
	ctx := context.Background()
	queries := []string{
		`SELECT c.relname, a.attname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid WHERE c.relname = 'ducklake_metadata' AND a.attnum > 0 ORDER BY 2`,
		`SELECT current_user, c.relname, a.attname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid WHERE c.relname LIKE 'ducklake%' AND a.attnum > 0 ORDER BY 2, 3`,
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan string, 8)
	for r := 0; r < 4; r++ {
		wg.Go(func() {
			rs := ex.Open("lake", "postgres", "", uint32(10+r))
			defer rs.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, q := range queries {
					if out := runSQL(ctx, rs, q, ""); strings.Contains(out, "ERROR") {
						errs <- out
						return
					}
				}
			}
		})
	}
	for i := 0; i < 20; i++ {
		if out := runSQL(ctx, s, fmt.Sprintf(`CREATE TABLE ducklake_inlined_data_%d_1(_ducklake_row_id bigint, _ducklake_begin_snapshot bigint, _ducklake_end_snapshot bigint, v bigint)`, i+1), ""); strings.Contains(out, "ERROR") {
			t.Fatal(out)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	sameAsFresh(t, ex, s, "after the DDL", queries)
}

// sameAsFresh fails the test unless each query answers in session s as it
// does with the catalog caches off (evaluated afresh, no relation indexes).
func sameAsFresh(t *testing.T, ex *Executor, s *Session, what string, queries []string) {
	t.Helper()
	ctx := context.Background()
	for _, q := range queries {
		got := runSQL(ctx, s, q, "")
		ex.catalogReads.disabled = true
		want := runSQL(ctx, s, q, "")
		ex.catalogReads.disabled = false
		if got != want {
			t.Fatalf("%s: %s\nthrough the caches:\n%s\nafresh:\n%s", what, q, got, want)
		}
	}
}

// TestCatalogCacheSharedByContent: databases whose DDL-derived catalogs
// hold the same rows share one catalog ID, so a read answered in one is
// answered from the cache in the other, with the same relations; DDL that
// changes one of them gives it another ID, and each keeps answering as a
// fresh evaluation does. Databases whose catalogs differ in any row (a
// column's name, the tables' order and so their oids) never share.
func TestCatalogCacheSharedByContent(t *testing.T) {
	ctx := context.Background()
	ex := testServer()
	admin := ex.Open("lake", "postgres", "", 1)
	defer admin.Close()
	ddl := []string{
		`CREATE TABLE ducklake_metadata(key varchar NOT NULL, value varchar NOT NULL, scope varchar, scope_id bigint)`,
		`CREATE TABLE ducklake_snapshot(snapshot_id bigint primary key, snapshot_time timestamptz, schema_version bigint, next_catalog_id bigint, next_file_id bigint)`,
	}
	open := func(db string, stmts ...string) *Session {
		t.Helper()
		if out := runSQL(ctx, admin, "CREATE DATABASE "+db, ""); strings.Contains(out, "ERROR") {
			t.Fatal(out)
		}
		s := ex.Open(db, "postgres", "", 2)
		t.Cleanup(func() { s.Close() })
		for _, q := range stmts {
			if out := runSQL(ctx, s, q, ""); strings.Contains(out, "ERROR") {
				t.Fatal(out)
			}
		}
		return s
	}
	a := open("a", ddl...)
	b := open("b", ddl...)
	renamed := open("c", ddl[0], strings.Replace(ddl[1], "next_file_id", "next_file", 1))
	reordered := open("d", ddl[1], ddl[0])

	idOf := func(s *Session) catalogID {
		t.Helper()
		x := &exec{ctx: ctx, s: s}
		id, ok := x.catalogID()
		if !ok {
			t.Fatal("no catalog ID for a published view")
		}
		return id
	}
	if idOf(a) != idOf(b) {
		t.Fatal("databases with the same DDL have different catalog IDs")
	}
	for name, s := range map[string]*Session{"a renamed column": renamed, "another table order": reordered} {
		if idOf(s) == idOf(a) {
			t.Fatalf("%s: the same catalog ID as the original DDL", name)
		}
	}

	const q = `SELECT c.oid, c.relname, a.attname, a.attnum FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND a.attnum > 0 ORDER BY 2, 4`
	entries := func() int {
		ex.catalogReads.mu.Lock()
		defer ex.catalogReads.mu.Unlock()
		return len(ex.catalogReads.answers.m)
	}
	sameAsFresh(t, ex, a, "in a", []string{q})
	n := entries()
	sameAsFresh(t, ex, b, "in b, answered from a's entry", []string{q})
	if entries() != n {
		t.Fatalf("b's read added an answer (%d → %d entries): it did not find a's", n, entries())
	}
	x := &exec{ctx: ctx, s: b}
	ra, _ := x.virtual("pg_catalog", "pg_attribute")
	x = &exec{ctx: ctx, s: a}
	rb, _ := x.virtual("pg_catalog", "pg_attribute")
	if ra != rb {
		t.Fatal("a and b hold separate copies of the same pg_attribute")
	}
	sameAsFresh(t, ex, renamed, "in c", []string{q})
	if entries() != n+1 {
		t.Fatalf("c's read found another database's answer (%d entries, want %d)", entries(), n+1)
	}

	// DDL in b gives it its own catalogs; a's answers stay a's.
	if out := runSQL(ctx, b, `CREATE TABLE ducklake_tag(object_id bigint, begin_snapshot bigint, end_snapshot bigint, key varchar, value varchar)`, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	if idOf(b) == idOf(a) {
		t.Fatal("b kept a's catalog ID after its DDL")
	}
	sameAsFresh(t, ex, b, "in b after its DDL", []string{q})
	sameAsFresh(t, ex, a, "in a after b's DDL", []string{q})
	if got := runSQL(ctx, a, q, ""); strings.Contains(got, "ducklake_tag") {
		t.Fatalf("a sees b's table:\n%s", got)
	}
}

// TestCatalogAnswerOnTheWire: a cached catalog answer reaches a client as
// the general interpreter's answer does, byte for byte, whether it is sent
// as the DataRow messages encoded once for all sessions (a simple query, an
// extended query with text results) or encoded row by row (binary results).
func TestCatalogAnswerOnTheWire(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex := testServer()
	setup := ex.Open("lake", "postgres", "", 1)
	defs, err := keyspace.FixedDefs("public", keyspace.VersionNext)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defs {
		if out := runSQL(ctx, setup, createTableSQL(d), ""); strings.Contains(out, "ERROR") {
			t.Fatal(out)
		}
	}
	setup.Close()
	addr := wiretest.Serve(t, ex, nil)
	c, err := pgconn.Connect(ctx, "postgres://moraine@"+addr+"/lake?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	whole, perTable := introspectionQueries(t)
	queries := append(whole, perTable)
	// read answers q through the simple protocol, or the extended one with
	// every result column in format.
	read := func(q string, extended bool, format int16) string {
		t.Helper()
		var rs []*pgconn.Result
		if extended {
			rs = []*pgconn.Result{c.ExecParams(ctx, q, nil, nil, nil, []int16{format}).Read()}
		} else if rs, err = c.Exec(ctx, q).ReadAll(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var b strings.Builder
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("%s: %v", q, r.Err)
			}
			fmt.Fprintf(&b, "%v %s\n", r.FieldDescriptions, r.CommandTag)
			for _, row := range r.Rows {
				fmt.Fprintf(&b, "%q\n", row)
			}
		}
		return b.String()
	}
	withRows := 0
	for _, q := range queries {
		for _, m := range []struct {
			extended bool
			format   int16
		}{{false, 0}, {true, 0}, {true, 1}} {
			ex.catalogReads.disabled = true
			general := read(q, m.extended, m.format)
			ex.catalogReads.disabled = false
			ex.catalogReads.answers = newFIFO[catalogKey, *catalogAnswer](catalogCacheEntries)
			first := read(q, m.extended, m.format)  // evaluated, then kept
			cached := read(q, m.extended, m.format) // from the cache
			if first != general || cached != general {
				t.Fatalf("%.60q (extended %v, format %d): cached answer differs from the general interpreter's:\ngeneral:\n%.2000s\ncached:\n%.2000s", q, m.extended, m.format, general, cached)
			}
			ex.catalogReads.mu.Lock()
			a, ok := ex.catalogReads.answers.get(firstKey(ex.catalogReads))
			ex.catalogReads.mu.Unlock()
			if !ok {
				t.Fatalf("%.60q: no cached answer", q)
			}
			if len(a.r.rows) == 0 {
				continue // nothing to encode
			}
			withRows++
			if encoded := a.text != nil; encoded != (m.format == 0) {
				t.Fatalf("%.60q (extended %v, format %d): answer sent from its encoded rows: %v", q, m.extended, m.format, encoded)
			}
		}
	}
	if withRows < 3*3 {
		t.Fatalf("only %d of the reads had rows", withRows)
	}
}

// firstKey is the key of the oldest answer c holds; its user locks c.
func firstKey(c *catalogCache) catalogKey { return c.answers.order[0] }
