package catalog

import (
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/testenv"
)

// pgConn connects to the PostgreSQL CI starts (MORAINE_TEST_POSTGRES). Under
// CI the variable must be set; elsewhere the test is skipped without it.
func pgConn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

// fileDef is shaped like ducklake_data_file plus the other types DuckLake's
// tables use (uuid, timestamptz), 17 columns so the NULL bitmap takes 3 bytes.
func fileDef(schema string) keyspace.TableDef {
	cols := []keyspace.ColumnDef{
		{Name: "data_file_id", Type: datum.Int8, NotNull: true},
		{Name: "table_id", Type: datum.Int8},
		{Name: "begin_snapshot", Type: datum.Int8},
		{Name: "end_snapshot", Type: datum.Int8},
		{Name: "file_order", Type: datum.Int8},
		{Name: "path", Type: datum.Varchar},
		{Name: "path_is_relative", Type: datum.Bool},
		{Name: "file_format", Type: datum.Varchar},
		{Name: "record_count", Type: datum.Int8},
		{Name: "file_size_bytes", Type: datum.Int8},
		{Name: "footer_size", Type: datum.Int8},
		{Name: "row_id_start", Type: datum.Int8},
		{Name: "partition_id", Type: datum.Int8},
		{Name: "encryption_key", Type: datum.Varchar},
		{Name: "file_uuid", Type: datum.UUID},
		{Name: "created", Type: datum.TimestampTZ},
		{Name: "flag", Type: datum.Bool},
	}
	return keyspace.TableDef{Schema: schema, Name: "files", Columns: cols, PrimaryKey: []int{0}}
}

func pgDDL(def keyspace.TableDef) string {
	var cs []string
	for i, c := range def.Columns {
		s := fmt.Sprintf("%s %s", c.Name, c.Type)
		if len(def.PrimaryKey) > 0 && def.PrimaryKey[0] == i {
			s += " PRIMARY KEY"
		}
		cs = append(cs, s)
	}
	return fmt.Sprintf("CREATE TABLE %s.%s (%s) WITH (autovacuum_enabled = false)", def.Schema, def.Name, strings.Join(cs, ", "))
}

// pgArgs converts values to pgx arguments.
func pgArgs(def keyspace.TableDef, vals []datum.Value) []any {
	out := make([]any, len(vals))
	for i, v := range vals {
		if v.IsNull() {
			continue
		}
		switch def.Columns[i].Type.OID {
		case datum.OIDInt8:
			out[i] = v.Int()
		case datum.OIDBool:
			out[i] = v.Bool()
		case datum.OIDUUID:
			out[i] = v.UUID()
		case datum.OIDTimestampTZ:
			out[i] = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(v.Int()) * time.Microsecond)
		default:
			out[i] = v.Text()
		}
	}
	return out
}

// strLens keeps every tuple under TOAST_TUPLE_THRESHOLD (~2 kB) unless
// toast is set: then some values are far longer, and random (pglz, which
// moraine does not emulate, cannot compress them), so PostgreSQL moves them
// out of line as moraine does.
var strLens = []int{0, 1, 7, 50, 125, 126, 127, 128, 200, 700, 1200}

var toastLens = []int{1500, 2100, 2500, 4000, 9000, 30000}

func randRow(r *rand.Rand, def keyspace.TableDef, id int64, toast bool) []datum.Value {
	vals := make([]datum.Value, len(def.Columns))
	long := false
	for i, c := range def.Columns {
		if i > 0 && r.Intn(4) == 0 {
			continue // NULL
		}
		switch c.Type.OID {
		case datum.OIDInt8:
			vals[i] = datum.IntValue(r.Int63n(1 << 40))
		case datum.OIDBool:
			vals[i] = datum.BoolValue(r.Intn(2) == 0)
		case datum.OIDUUID:
			var u [16]byte
			r.Read(u[:])
			vals[i] = datum.UUIDValue(u)
		case datum.OIDTimestampTZ:
			vals[i] = datum.TimestampTZValue(r.Int63n(1 << 50))
		default:
			if toast {
				// Every text value random, so that pglz compresses none.
				n := strLens[r.Intn(len(strLens))]
				if r.Intn(3) == 0 {
					n = toastLens[r.Intn(len(toastLens))]
				}
				b := make([]byte, n)
				for j := range b {
					b[j] = byte(33 + r.Intn(94))
				}
				vals[i] = datum.TextValue(string(b))
				continue
			}
			n := strLens[r.Intn(len(strLens))]
			if n > 200 {
				if long {
					n = 30
				}
				long = true
			}
			vals[i] = datum.TextValue(strings.Repeat(string(rune('a'+r.Intn(26))), n))
		}
	}
	vals[0] = datum.IntValue(id)
	return vals
}

// TestCTIDsMatchPostgres runs the same history of inserts, updates, deletes
// and an ADD COLUMN against PostgreSQL and against a Txn, and requires every
// ctid PostgreSQL returns to be the one moraine assigned, then the whole
// table and its page count to match. The history runs in one PostgreSQL
// transaction (dead tuples of a running transaction are not prunable, and
// moraine does not emulate pruning), and again committing every few
// statements with inserts and ctid deletes only (TID scans do not prune; a
// unique-index check that meets an equal key — an updated row's old version —
// would).
func TestCTIDsMatchPostgres(t *testing.T) {
	conn := pgConn(t)
	for _, tc := range []struct {
		name       string
		steps      int
		commitEach int // 0: one PostgreSQL transaction
		noUpdates  bool
		toast      bool
	}{
		{"one-transaction", 3000, 0, false, false},
		{"many-commits", 1500, 7, true, false},
		{"toasted-values", 800, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A DROP DATABASE anywhere on the server (other test packages
			// run beside this one) makes every backend drop its cached
			// relations (PostgreSQL 15's PROCSIGNAL_BARRIER_SMGRRELEASE)
			// and with them the target block, which moraine, modelling one
			// undisturbed backend, keeps. The history is deterministic, so a
			// real divergence repeats on every attempt; one such drop does
			// not.
			var diverged []string
			for attempt := 1; attempt <= 3; attempt++ {
				d := ctidAttempt(t, conn, tc.name, tc.steps, tc.commitEach, tc.noUpdates, tc.toast)
				if d == "" {
					return
				}
				t.Logf("attempt %d: %s", attempt, d)
				diverged = append(diverged, d)
			}
			t.Fatalf("moraine's ctids diverged from PostgreSQL's on every attempt: %v", diverged)
		})
	}
}

// ctidAttempt runs one history on a fresh table in both systems and
// returns how moraine's placement diverged from PostgreSQL's, or "".
func ctidAttempt(t *testing.T, conn *pgx.Conn, name string, steps, commitEach int, noUpdates, toast bool) string {
	schema := fmt.Sprintf("moraine_ctid_%d_%s", os.Getpid(), strings.ReplaceAll(name, "-", "_"))
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	def := fileDef(schema)
	if _, err := conn.Exec(ctx, pgDDL(def)); err != nil {
		t.Fatal(err)
	}
	db := NewServer(Options{}).Database("x")
	tx := db.Begin()
	mustNoErr(t, tx.CreateSchema(schema))
	mustNoErr(t, tx.CreateTable(def))
	return runCTIDHistory(t, conn, tx, def, steps, commitEach, noUpdates, toast)
}

// runCTIDHistory replays a random history of inserts, ctid updates and
// ctid deletes in both systems; it returns the first divergence of
// moraine's ctids (or pages) from PostgreSQL's, or "".
func runCTIDHistory(t *testing.T, conn *pgx.Conn, tx *Txn, def keyspace.TableDef, steps, commitEach int, noUpdates, toast bool) string {
	r := rand.New(rand.NewSource(42))
	q := def.Schema + "." + def.Name
	pgTx, err := conn.Begin(ctx)
	mustNoErr(t, err)
	defer func() { pgTx.Rollback(ctx) }()
	var live []CTID
	nextID := int64(1)
	cols := func() string {
		var ps []string
		for i := range def.Columns {
			ps = append(ps, fmt.Sprintf("$%d", i+1))
		}
		return strings.Join(ps, ", ")
	}
	setList := func() string {
		var ps []string
		for i, c := range def.Columns {
			ps = append(ps, fmt.Sprintf("%s = $%d", c.Name, i+1))
		}
		return strings.Join(ps, ", ")
	}
	var pgCTID string
	for step := 0; step < steps; step++ {
		if step == steps/2 {
			// ALTER TABLE ADD COLUMN: later tuples have one more attribute.
			col := keyspace.ColumnDef{Name: "row_group_count", Type: datum.Int8}
			_, err := pgTx.Exec(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s bigint", q, col.Name))
			mustNoErr(t, err)
			mustNoErr(t, tx.AddColumn(def.Schema, def.Name, col, datum.Null))
			def.Columns = append(def.Columns, col)
		}
		op := r.Intn(10)
		switch {
		case op < 5 || len(live) == 0 || (noUpdates && op < 8):
			vals := randRow(r, def, nextID, toast)
			nextID++
			mustNoErr(t, pgTx.QueryRow(ctx, fmt.Sprintf("INSERT INTO %s VALUES (%s) RETURNING ctid::text", q, cols()), pgArgs(def, vals)...).Scan(&pgCTID))
			c, err := tx.InsertRow(def.Schema, def.Name, vals)
			mustNoErr(t, err)
			if c.String() != pgCTID {
				return fmt.Sprintf("step %d insert: moraine %s, PostgreSQL %s", step, c, pgCTID)
			}
			live = append(live, c)
		case op < 8:
			i := r.Intn(len(live))
			tb, _ := tx.Table(def.Schema, def.Name)
			old, _ := tb.Lookup(live[i])
			oldVals, err := old.Decode(tb.Types(), nil)
			mustNoErr(t, err)
			vals := randRow(r, def, oldVals[0].Int(), toast)
			args := append(pgArgs(def, vals), live[i].String())
			mustNoErr(t, pgTx.QueryRow(ctx, fmt.Sprintf("UPDATE %s SET %s WHERE ctid = $%d::tid RETURNING ctid::text", q, setList(), len(def.Columns)+1), args...).Scan(&pgCTID))
			c, err := tx.UpdateRow(def.Schema, def.Name, live[i], vals)
			mustNoErr(t, err)
			if c.String() != pgCTID {
				return fmt.Sprintf("step %d update of %s: moraine %s, PostgreSQL %s", step, live[i], c, pgCTID)
			}
			live[i] = c
		default:
			i := r.Intn(len(live))
			tag, err := pgTx.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE ctid = $1::tid", q), live[i].String())
			mustNoErr(t, err)
			if tag.RowsAffected() != 1 {
				t.Fatalf("step %d: PostgreSQL deleted %d rows at %s", step, tag.RowsAffected(), live[i])
			}
			mustNoErr(t, tx.DeleteRow(def.Schema, def.Name, live[i]))
			live = append(live[:i], live[i+1:]...)
		}
		if commitEach > 0 && step%commitEach == commitEach-1 {
			mustNoErr(t, pgTx.Commit(ctx))
			pgTx, err = conn.Begin(ctx)
			mustNoErr(t, err)
		}
	}
	// The whole table, in ctid order, with the data PostgreSQL holds.
	rows, err := pgTx.Query(ctx, fmt.Sprintf("SELECT ctid::text AS c, data_file_id FROM %s ORDER BY ctid", q))
	mustNoErr(t, err)
	var want []string
	for rows.Next() {
		var c string
		var id int64
		mustNoErr(t, rows.Scan(&c, &id))
		want = append(want, fmt.Sprintf("%s:%d", c, id))
	}
	mustNoErr(t, rows.Err())
	tb, _ := tx.Table(def.Schema, def.Name)
	var got []string
	tb.Scan(func(c CTID, r datum.Row) bool {
		v, err := r.Column(tb.Types(), 0)
		mustNoErr(t, err)
		got = append(got, fmt.Sprintf("%s:%d", c, v.Int()))
		return true
	})
	for i := 0; i < max(len(got), len(want)); i++ {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			return fmt.Sprintf("table differs at row %d (moraine %d rows, PostgreSQL %d):\nmoraine    %v\nPostgreSQL %v",
				i, len(got), len(want), got[i:min(i+5, len(got))], want[i:min(i+5, len(want))])
		}
	}
	var pages int
	mustNoErr(t, pgTx.QueryRow(ctx, "SELECT pg_relation_size($1::regclass) / 8192", q).Scan(&pages))
	if uint32(pages) != tb.Pages() {
		return fmt.Sprintf("pages: moraine %d, PostgreSQL %d", tb.Pages(), pages)
	}
	t.Logf("%d rows on %d pages", len(got), pages)
	return ""
}

// TestCTIDFreeSpaceMapAndDDL drives PostgreSQL's free space map on purpose:
// pages filled with big tuples get recorded in the map when a tuple does
// not fit, a later tuple that fits an earlier page is sent there (and that
// page becomes the target block), and ALTER TABLE resets the target block so
// the next insert tries the last page again.
func TestCTIDFreeSpaceMapAndDDL(t *testing.T) {
	conn := pgConn(t)
	schema := fmt.Sprintf("moraine_fsm_%d", os.Getpid())
	for _, q := range []string{"DROP SCHEMA IF EXISTS " + schema + " CASCADE", "CREATE SCHEMA " + schema,
		"CREATE TABLE " + schema + ".t (id bigint, s varchar) WITH (autovacuum_enabled = false)"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	def := keyspace.TableDef{Schema: schema, Name: "t", Columns: []keyspace.ColumnDef{
		{Name: "id", Type: datum.Int8}, {Name: "s", Type: datum.Varchar}}}
	db := NewServer(Options{}).Database("x")
	tx := db.Begin()
	mustNoErr(t, tx.CreateSchema(schema))
	mustNoErr(t, tx.CreateTable(def))
	pgTx, err := conn.Begin(ctx)
	mustNoErr(t, err)
	defer pgTx.Rollback(ctx)
	id := int64(0)
	insert := func(n int) CTID {
		t.Helper()
		id++
		s := strings.Repeat("x", n)
		var pg string
		mustNoErr(t, pgTx.QueryRow(ctx, "INSERT INTO "+schema+".t VALUES ($1, $2) RETURNING ctid::text", id, s).Scan(&pg))
		vals := []datum.Value{datum.IntValue(id), datum.TextValue(s)}
		if len(def.Columns) == 3 {
			vals = append(vals, datum.Null)
		}
		c, err := tx.InsertRow(schema, "t", vals)
		mustNoErr(t, err)
		if c.String() != pg {
			t.Fatalf("insert %d (%d bytes): moraine %s, PostgreSQL %s", id, n, c, pg)
		}
		return c
	}
	const big = 1850
	for i := 0; i < 4; i++ {
		insert(big) // page 0
	}
	for i := 0; i < 4; i++ {
		insert(big) // page 1; page 0 recorded in the map
	}
	insert(600) // does not fit page 1: recorded; extends to page 2
	for i := 0; i < 3; i++ {
		insert(big)
	}
	for i := 0; i < 4; i++ {
		insert(big) // page 2 recorded with ~1.8 kB free; page 3
	}
	c := insert(1000) // fits neither page 3 nor 0/1, but page 2 through the map
	tb, _ := tx.Table(schema, "t")
	if c.Block() == tb.Pages()-1 {
		t.Fatalf("the map did not send the tuple to an earlier page: %s of %d pages", c, tb.Pages())
	}
	_, err = pgTx.Exec(ctx, "ALTER TABLE "+schema+".t ADD COLUMN extra bigint")
	mustNoErr(t, err)
	col := keyspace.ColumnDef{Name: "extra", Type: datum.Int8}
	mustNoErr(t, tx.AddColumn(schema, "t", col, datum.Null))
	def.Columns = append(def.Columns, col)
	c = insert(100)
	if c.Block() != tb.Pages()-1 {
		t.Fatalf("after ALTER TABLE the insert went to %s, not the last page %d", c, tb.Pages()-1)
	}
}
