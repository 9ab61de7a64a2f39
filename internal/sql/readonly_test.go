package sql

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/replay"
)

// withWriteRE finds the data-modifying statement after a WITH clause.
var withWriteRE = regexp.MustCompile(`\)\s*(UPDATE|INSERT|DELETE)\b`)

// TestReadOnlyAdmitsDuckLakeReads: over every statement DuckDB, DuckLake and
// psql sent in the captured conversations, the read-only check admits
// exactly the reads (so a read-only attach works: BEGIN, SELECT, COPY … TO,
// DISCARD, COMMIT) and refuses every INSERT, UPDATE, DELETE, DDL and COPY
// FROM.
func TestReadOnlyAdmitsDuckLakeReads(t *testing.T) {
	dir, err := replay.FixturesDir()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in %s: %v", dir, err)
	}
	writeWords := map[string]bool{"INSERT": true, "UPDATE": true, "DELETE": true, "CREATE": true, "ALTER": true, "DROP": true, "TRUNCATE": true}
	cache := newParseCache(1 << 20)
	var reads, refused int
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var m struct {
				Dir, Type string
				Msg       struct{ String, Query string }
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m.Dir != "F" || (m.Type != "Query" && m.Type != "Parse") {
				continue
			}
			stmts, err := cache.parse(m.Msg.String + m.Msg.Query)
			if err != nil {
				continue // the executor reports the syntax error
			}
			for _, st := range stmts {
				word := strings.ToUpper(firstKeyword(st.text))
				up := strings.ToUpper(st.text)
				want := writeWords[word] || (word == "COPY" && strings.Contains(up, "FROM STDIN")) ||
					(word == "WITH" && withWriteRE.MatchString(up))
				verb, got := writes(st.node)
				if got != want {
					t.Errorf("%s: writes = %q, %v; want %v for %.200q", filepath.Base(f), verb, got, want, st.text)
				}
				if got {
					refused++
				} else {
					reads++
				}
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	if reads < 1000 || refused < 100 {
		t.Fatalf("only %d reads and %d writes in the fixtures", reads, refused)
	}
	t.Logf("%d read statements admitted, %d writes refused", reads, refused)
}

// A standby's sessions are read-only as PostgreSQL's hot standby's are
// (25006, its wording; the settings and pg_is_in_recovery() say so); a
// writer whose store refuses writes answers every write with the refusal
// and still serves reads.
func TestReadOnlyServing(t *testing.T) {
	ctx := context.Background()
	ex := testServer()
	s := ex.Open("lake", "postgres", "", 1)
	if out := runSQL(ctx, s, `CREATE TABLE "public"."ducklake_snapshot"("snapshot_id" BIGINT PRIMARY KEY); INSERT INTO "public".ducklake_snapshot VALUES (1)`, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	ex.SetStandby(true)
	ro := ex.Open("lake", "postgres", "", 2)
	for q, want := range map[string]string{
		`INSERT INTO "public".ducklake_snapshot VALUES (2)`:                       "ERROR 25006: cannot execute INSERT in a read-only transaction",
		`WITH d AS (DELETE FROM "public".ducklake_snapshot RETURNING 1) SELECT 1`: "ERROR 25006: cannot execute DELETE in a read-only transaction",
		`DROP TABLE "public".ducklake_snapshot`:                                   "ERROR 25006: cannot execute DROP in a read-only transaction",
		`SELECT count(*) FROM "public".ducklake_snapshot`:                         "1",
		`SHOW transaction_read_only`:                                              "on",
		`SHOW in_hot_standby`:                                                     "on",
		`SELECT pg_is_in_recovery()`:                                              "t",
	} {
		if out := runSQL(ctx, ro, q, ""); !strings.Contains(out, want) {
			t.Errorf("%s: %q, want %q", q, out, want)
		}
	}
	ex.SetStandby(false)
	refusal := &pgwire.Error{Code: "58030", Message: "could not write to the store: no space left on device"}
	ex.WriteRefusal = func() error { return refusal }
	w := ex.Open("lake", "postgres", "", 3)
	if out := runSQL(ctx, w, `INSERT INTO "public".ducklake_snapshot VALUES (2)`, ""); !strings.Contains(out, "ERROR 58030: could not write to the store: no space left on device") {
		t.Errorf("write while the store refuses: %q", out)
	}
	if out := runSQL(ctx, w, `SELECT count(*) FROM "public".ducklake_snapshot`, ""); !strings.Contains(out, "1") || strings.Contains(out, "ERROR") {
		t.Errorf("read while the store refuses writes: %q", out)
	}
	var pe *pgwire.Error
	if !errors.As(ex.WriteRefusal(), &pe) {
		t.Fatal("refusal is not a pgwire error")
	}
}

// TestWrites: the read-only check, statement by statement; a query string
// writes if any of its statements does.
func TestWrites(t *testing.T) {
	cache := newParseCache(64)
	for _, c := range []struct {
		sql   string
		write string // "" = allowed
	}{
		{"SELECT 1", ""},
		{"select * from ducklake_snapshot; show transaction_read_only", ""},
		{"BEGIN TRANSACTION READ ONLY; SELECT 1; COMMIT", ""},
		{"SET search_path = public", ""},
		{`COPY (SELECT snapshot_id FROM public.ducklake_snapshot) TO STDOUT (FORMAT "binary")`, ""},
		{"EXPLAIN SELECT 1", ""},
		{"ROLLBACK", ""},
		{"INSERT INTO t VALUES (1)", "INSERT"},
		{"SELECT 1; UPDATE t SET a = 1", "UPDATE"},
		{"DELETE FROM t", "DELETE"},
		{"WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x", "DELETE"},
		{"SELECT 1 INTO t2", "SELECT INTO"},
		{"COPY t FROM STDIN", "COPY FROM"},
		{"CREATE TABLE t (a int)", "CREATE"},
		{"  drop table t", "DROP"},
		{"ALTER TABLE t ADD COLUMN b int", "ALTER"},
		{"TRUNCATE t", "TRUNCATE"},
		{"EXPLAIN ANALYZE INSERT INTO t VALUES (1)", "INSERT"},
	} {
		stmts, err := cache.parse(c.sql)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		got := ""
		for _, st := range stmts {
			if verb, ok := writes(st.node); ok {
				if verb == "" {
					verb = strings.ToUpper(firstKeyword(st.text))
				}
				got = verb
				break
			}
		}
		if got != c.write {
			t.Errorf("%q writes %q, want %q", c.sql, got, c.write)
		}
	}
}

// TestPgPromote: pg_promote() as PostgreSQL answers it: refused with 55000
// unless the server is a standby; on a standby it runs the promotion once
// (not again for the result-type probe), waits for it by default and
// reports its failure, returns false when the promotion outlasts
// wait_seconds, and with wait false starts it and returns at once.
func TestPgPromote(t *testing.T) {
	ctx := context.Background()
	// standby opens a session on a standby whose promotion runs promote.
	standby := func(promote func(ctx context.Context, ex *Executor) error) (*Executor, *Session) {
		ex := testServer()
		ex.SetStandby(true)
		ex.Promote = func(ctx context.Context) error { return promote(ctx, ex) }
		return ex, ex.Open("lake", "postgres", "", 1)
	}
	primary := testServer().Open("lake", "postgres", "", 1)
	if out := runSQL(ctx, primary, `SELECT pg_promote()`, ""); !strings.Contains(out, "ERROR 55000: recovery is not in progress") {
		t.Fatalf("pg_promote() on a primary: %q", out)
	}

	calls := 0
	_, s := standby(func(_ context.Context, ex *Executor) error { calls++; ex.SetStandby(false); return nil })
	if out := runSQL(ctx, s, `SELECT pg_promote()`, ""); !strings.Contains(out, "t") || strings.Contains(out, "ERROR") || calls != 1 {
		t.Fatalf("pg_promote(): %q after %d promotions", out, calls)
	}
	for q, want := range map[string]string{`SELECT pg_is_in_recovery()`: "f", `SHOW transaction_read_only`: "off", `SHOW in_hot_standby`: "off"} {
		if out := runSQL(ctx, s, q, ""); !strings.Contains(out, want) {
			t.Errorf("after promotion, %s: %q, want %q", q, out, want)
		}
	}

	_, s = standby(func(context.Context, *Executor) error { return errf("XX000", "the store refused") })
	if out := runSQL(ctx, s, `SELECT pg_promote()`, ""); !strings.Contains(out, "ERROR XX000: the store refused") {
		t.Fatalf("a failed promotion: %q", out)
	}
	if out := runSQL(ctx, s, `SELECT pg_is_in_recovery()`, ""); !strings.Contains(out, "t") {
		t.Fatalf("after a failed promotion: %q", out)
	}

	started := make(chan struct{}, 2)
	_, s = standby(func(ctx context.Context, _ *Executor) error {
		started <- struct{}{}
		<-ctx.Done() // a promotion that never ends unless given up on
		return ctx.Err()
	})
	if out := runSQL(ctx, s, `SELECT pg_promote(true, 1)`, ""); !strings.Contains(out, "f") || strings.Contains(out, "ERROR") {
		t.Fatalf("a promotion outlasting wait_seconds: %q", out)
	}
	<-started
	_, s = standby(func(context.Context, *Executor) error { started <- struct{}{}; return nil })
	if out := runSQL(ctx, s, `SELECT pg_promote(false)`, ""); !strings.Contains(out, "t") || strings.Contains(out, "ERROR") {
		t.Fatalf("pg_promote(false): %q", out)
	}
	<-started // it was started

	_, s = standby(func(context.Context, *Executor) error { t.Error("promoted on invalid arguments"); return nil })
	for q, want := range map[string]string{
		`SELECT pg_promote(true, 0)`: `ERROR 22023: "wait_seconds" must not be negative or zero`,
		`SELECT pg_promote(NULL)`:    "NULL",
		`SELECT pg_promote(1, 2, 3)`: "ERROR 42883",
		`SELECT pg_promote('x', 1)`:  "ERROR 22P02",
	} {
		if out := runSQL(ctx, s, q, ""); !strings.Contains(out, want) {
			t.Errorf("%s: %q, want %q", q, out, want)
		}
	}
}
