package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

var ctx = context.Background()

func snapDef() keyspace.TableDef {
	return keyspace.TableDef{Schema: "public", Name: "snap", Columns: []keyspace.ColumnDef{
		{Name: "snapshot_id", Type: datum.Int8, NotNull: true},
		{Name: "note", Type: datum.Varchar},
		{Name: "end_snapshot", Type: datum.Int8},
	}, PrimaryKey: []int{0}}
}

func snapRow(id int64, note string) []datum.Value {
	return []datum.Value{datum.IntValue(id), datum.TextValue(note), datum.Null}
}

func mustNoErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dump renders a table as "ctid:values" lines, the shape tests compare.
func dump(t *testing.T, tb *Table) []string {
	t.Helper()
	var out []string
	tb.Scan(func(c CTID, r datum.Row) bool {
		vals, err := r.Decode(tb.Types(), nil)
		if err != nil {
			t.Fatal(err)
		}
		s := c.String()
		for i, v := range vals {
			if v.IsNull() {
				s += " NULL"
			} else {
				s += " " + datum.FormatText(tb.Types()[i], v)
			}
		}
		out = append(out, s)
		return true
	})
	return out
}

func setup(t *testing.T) *Database { t.Helper(); return setupWith(t, Options{}) }

// setupWith is setup on a server with opts.
func setupWith(t *testing.T, opts Options) *Database {
	t.Helper()
	db := NewServer(opts).Database("lake")
	tx := db.Begin()
	mustNoErr(t, tx.CreateTable(snapDef()))
	mustNoErr(t, tx.Commit(ctx))
	return db
}

func TestCTIDText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want CTID
		err  bool
	}{
		{"(0,3)", MakeCTID(0, 3), false},
		{" (12, 65535) ", MakeCTID(12, 65535), false},
		{"(4294967295,1)", MakeCTID(4294967295, 1), false},
		{"(0,65536)", 0, true},
		{"0,3", 0, true},
		{"(a,b)", 0, true},
	} {
		got, err := ParseCTID(tc.in)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("ParseCTID(%q) = %v, %v", tc.in, got, err)
		}
		if !tc.err && got.String() != fmt.Sprintf("(%d,%d)", tc.want.Block(), tc.want.Offset()) {
			t.Errorf("String %s", got)
		}
	}
}

func TestOverlayAndIsolation(t *testing.T) {
	db := setup(t)
	v0 := db.Current()
	tx := db.Begin()
	c1, err := tx.InsertRow("public", "snap", snapRow(1, "a"))
	mustNoErr(t, err)
	c2, err := tx.InsertRow("public", "snap", snapRow(2, "b"))
	mustNoErr(t, err)
	if c1 != MakeCTID(0, 1) || c2 != MakeCTID(0, 2) {
		t.Fatalf("ctids %s %s", c1, c2)
	}
	view1, err := tx.Table("public", "snap")
	mustNoErr(t, err)
	c3, err := tx.UpdateRow("public", "snap", c1, snapRow(1, "a2"))
	mustNoErr(t, err)
	if c3 != MakeCTID(0, 3) {
		t.Fatalf("update ctid %s", c3)
	}
	mustNoErr(t, tx.DeleteRow("public", "snap", c2))
	// The earlier view is a snapshot: later writes do not show in it.
	if got := dump(t, view1); fmt.Sprint(got) != "[(0,1) 1 a NULL (0,2) 2 b NULL]" {
		t.Fatalf("view1 changed: %v", got)
	}
	now, _ := tx.Table("public", "snap")
	if got := dump(t, now); fmt.Sprint(got) != "[(0,3) 1 a2 NULL]" {
		t.Fatalf("overlay: %v", got)
	}
	// Another transaction does not see the staged writes.
	other := db.Begin()
	ot, _ := other.Table("public", "snap")
	if ot.Len() != 0 {
		t.Fatalf("other sees %d rows", ot.Len())
	}
	mustNoErr(t, tx.Commit(ctx))
	// Pinned versions never change.
	if tb, _ := v0.Table("public", "snap"); tb.Len() != 0 {
		t.Fatal("v0 changed")
	}
	if ot2, _ := other.Table("public", "snap"); ot2.Len() != 0 {
		t.Fatal("pinned transaction sees a later commit")
	}
	cur, _ := db.Current().Table("public", "snap")
	if got := dump(t, cur); fmt.Sprint(got) != "[(0,3) 1 a2 NULL]" {
		t.Fatalf("committed: %v", got)
	}
	if err := tx.Commit(ctx); !errors.Is(err, ErrTxnDone) {
		t.Fatalf("second commit: %v", err)
	}
}

func TestPrimaryKey(t *testing.T) {
	db := setup(t)
	tx := db.Begin()
	_, err := tx.InsertRow("public", "snap", snapRow(5, "x"))
	mustNoErr(t, err)
	mustNoErr(t, tx.Commit(ctx))

	tx = db.Begin()
	_, err = tx.InsertRow("public", "snap", snapRow(5, "y"))
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("want duplicate, got %v", err)
	}
	if ce.Code != "23505" || ce.Constraint != "snap_pkey" || ce.Table != "snap" ||
		ce.Message != `duplicate key value violates unique constraint "snap_pkey"` ||
		ce.Detail != "Key (snapshot_id)=(5) already exists." {
		t.Fatalf("error %+v", ce)
	}
	// A failed write changes nothing.
	tb, _ := tx.Table("public", "snap")
	if tb.Len() != 1 || len(tx.Ops()) != 0 {
		t.Fatalf("failed insert left state: %d rows, %d ops", tb.Len(), len(tx.Ops()))
	}
	// Deleting frees the key; updating moves it.
	c, _, ok := tb.LookupKey([]datum.Value{datum.IntValue(5)})
	if !ok {
		t.Fatal("LookupKey")
	}
	nc, err := tx.UpdateRow("public", "snap", c, snapRow(6, "moved"))
	mustNoErr(t, err)
	_, err = tx.InsertRow("public", "snap", snapRow(5, "again"))
	mustNoErr(t, err)
	if _, err := tx.UpdateRow("public", "snap", nc, snapRow(5, "clash")); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("update to existing key: %v", err)
	}
	if _, err := tx.InsertRow("public", "snap", []datum.Value{datum.Null, datum.Null, datum.Null}); !errors.Is(err, ErrNotNull) {
		t.Fatalf("null pk: %v", err)
	}
	if _, err := tx.InsertRow("public", "snap", []datum.Value{datum.TextValue("1"), datum.Null, datum.Null}); !errors.Is(err, ErrBadValue) {
		t.Fatalf("bad kind: %v", err)
	}
	// Two transactions racing on the same key: the second commit fails.
	a, b := db.Begin(), db.Begin()
	_, err = a.InsertRow("public", "snap", snapRow(9, "a"))
	mustNoErr(t, err)
	_, err = b.InsertRow("public", "snap", snapRow(9, "b"))
	mustNoErr(t, err)
	mustNoErr(t, a.Commit(ctx))
	if err := b.Commit(ctx); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("racing commit: %v", err)
	}
}

func TestApplyMatchesTxn(t *testing.T) {
	db := setup(t)
	tx := db.Begin()
	for i := int64(0); i < 500; i++ {
		_, err := tx.InsertRow("public", "snap", snapRow(i, fmt.Sprintf("note %d %0*d", i, int(i%150), 0)))
		mustNoErr(t, err)
	}
	tb, _ := tx.Table("public", "snap")
	var cs []CTID
	tb.Scan(func(c CTID, _ datum.Row) bool { cs = append(cs, c); return true })
	for i, c := range cs {
		switch i % 3 {
		case 0:
			_, err := tx.UpdateRow("public", "snap", c, snapRow(int64(i)+1000, "u"))
			mustNoErr(t, err)
		case 1:
			mustNoErr(t, tx.DeleteRow("public", "snap", c))
		}
	}
	mustNoErr(t, tx.AddColumn("public", "snap", keyspace.ColumnDef{Name: "extra", Type: datum.Int8}, datum.IntValue(7)))
	_, err := tx.InsertRow("public", "snap", []datum.Value{datum.IntValue(-1), datum.Null, datum.Null, datum.Null})
	mustNoErr(t, err)
	want, _ := tx.Table("public", "snap")
	next, err := tx.Base().Apply(tx.Ops())
	mustNoErr(t, err)
	got, _ := next.Table("public", "snap")
	if a, b := fmt.Sprint(dump(t, want)), fmt.Sprint(dump(t, got)); a != b {
		t.Fatalf("Apply differs from the transaction's view:\n%s\n%s", a, b)
	}
	if want.Pages() != got.Pages() || want.Pages() < 2 {
		t.Fatalf("pages %d vs %d", want.Pages(), got.Pages())
	}
}

func TestApplyOnNewerVersion(t *testing.T) {
	db := setup(t)
	tx := db.Begin()
	c1, _ := tx.InsertRow("public", "snap", snapRow(1, "one"))
	c2, _ := tx.InsertRow("public", "snap", snapRow(2, "two"))
	mustNoErr(t, tx.Commit(ctx))
	_ = c2

	a, b := db.Begin(), db.Begin()
	_, err := a.InsertRow("public", "snap", snapRow(3, "a"))
	mustNoErr(t, err)
	_, err = a.UpdateRow("public", "snap", c1, snapRow(1, "a-upd"))
	mustNoErr(t, err)
	// b inserts and then updates its own row: its ctids move on apply.
	bc, err := b.InsertRow("public", "snap", snapRow(4, "b"))
	mustNoErr(t, err)
	_, err = b.UpdateRow("public", "snap", bc, snapRow(4, "b-upd"))
	mustNoErr(t, err)
	mustNoErr(t, a.Commit(ctx))
	mustNoErr(t, b.Commit(ctx))
	cur, _ := db.Current().Table("public", "snap")
	if got := fmt.Sprint(dump(t, cur)); got != "[(0,2) 2 two NULL (0,3) 3 a NULL (0,4) 1 a-upd NULL (0,6) 4 b-upd NULL]" {
		t.Fatalf("got %s", got)
	}
	// A concurrent update of the same row is a serialization failure.
	x, y := db.Begin(), db.Begin()
	_, err = x.UpdateRow("public", "snap", MakeCTID(0, 2), snapRow(2, "x"))
	mustNoErr(t, err)
	mustNoErr(t, y.DeleteRow("public", "snap", MakeCTID(0, 2)))
	mustNoErr(t, x.Commit(ctx))
	if err := y.Commit(ctx); !errors.Is(err, ErrSerialization) {
		t.Fatalf("want serialization failure, got %v", err)
	}
}

func TestDDL(t *testing.T) {
	db := setup(t)
	tx := db.Begin()
	if err := tx.CreateTable(snapDef()); !errors.Is(err, ErrTableExists) {
		t.Fatalf("dup table: %v", err)
	}
	mustNoErr(t, tx.CreateSchema("meta"))
	if err := tx.CreateSchema("meta"); !errors.Is(err, ErrSchemaExists) {
		t.Fatalf("dup schema: %v", err)
	}
	d := snapDef()
	d.Schema = "meta"
	mustNoErr(t, tx.CreateTable(d))
	_, err := tx.InsertRow("meta", "snap", snapRow(1, "m"))
	mustNoErr(t, err)
	mustNoErr(t, tx.RenameColumn("meta", "snap", "note", "remark"))
	if err := tx.RenameColumn("meta", "snap", "nope", "x"); !errors.Is(err, ErrNoColumn) {
		t.Fatalf("rename missing: %v", err)
	}
	mustNoErr(t, tx.DropTable("public", "snap"))
	if _, err := tx.Table("public", "snap"); !errors.Is(err, ErrNoTable) {
		t.Fatalf("dropped table: %v", err)
	}
	mustNoErr(t, tx.Commit(ctx))
	v := db.Current()
	pub, _ := v.Schema("public")
	meta, _ := v.Schema("meta")
	if pub.OID != PublicSchemaOID || meta.OID < FirstNormalOID || meta.CatalogID == pub.CatalogID {
		t.Fatalf("schema ids: %+v %+v", pub, meta)
	}
	tb, _ := v.Table("meta", "snap")
	if tb.Def().Columns[1].Name != "remark" || tb.Info().IndexOID == 0 || tb.OID() < FirstNormalOID {
		t.Fatalf("def %s info %+v", tb.Def(), tb.Info())
	}
}

// TestKeyOrderComposite: on a two-column key the index orders by the first
// column, then the second, as SQL does for integers (negatives included),
// so EdgeKey and AscendKeyFrom see every row with a given first column.
func TestKeyOrderComposite(t *testing.T) {
	db := NewServer(Options{}).Database("lake")
	tx := db.Begin()
	def := keyspace.TableDef{Schema: "public", Name: "pair", Columns: []keyspace.ColumnDef{
		{Name: "a", Type: datum.Int8, NotNull: true},
		{Name: "b", Type: datum.Int4, NotNull: true},
	}, PrimaryKey: []int{0, 1}}
	mustNoErr(t, tx.CreateTable(def))
	for _, p := range [][2]int64{{2, -1}, {-3, 5}, {2, 7}, {0, 0}, {-3, -9}, {1 << 40, 1}, {2, 0}} {
		_, err := tx.InsertRow("public", "pair", []datum.Value{datum.IntValue(p[0]), datum.IntValue(p[1])})
		mustNoErr(t, err)
	}
	mustNoErr(t, tx.Commit(ctx))
	tb, err := db.Current().Table("public", "pair")
	mustNoErr(t, err)
	row := func(r datum.Row) string {
		vals, err := r.Decode(tb.Types(), nil)
		mustNoErr(t, err)
		return fmt.Sprintf("(%d,%d)", vals[0].I, vals[1].I)
	}
	var got []string
	if !tb.AscendKeyFrom(datum.IntValue(0), func(_ CTID, r datum.Row) bool { got = append(got, row(r)); return true }) {
		t.Fatal("AscendKeyFrom refused")
	}
	if want := "[(0,0) (2,-1) (2,0) (2,7) (1099511627776,1)]"; fmt.Sprint(got) != want {
		t.Fatalf("AscendKeyFrom(0) = %v, want %s", got, want)
	}
	got = nil
	tb.AscendKeyFrom(datum.IntValue(-3), func(_ CTID, r datum.Row) bool { got = append(got, row(r)); return len(got) < 2 })
	if want := "[(-3,-9) (-3,5)]"; fmt.Sprint(got) != want {
		t.Fatalf("AscendKeyFrom(-3) stopped early = %v, want %s", got, want)
	}
	_, lo, ok1 := tb.EdgeKey(false)
	_, hi, ok2 := tb.EdgeKey(true)
	if !ok1 || !ok2 || row(lo) != "(-3,-9)" || row(hi) != "(1099511627776,1)" {
		t.Fatalf("EdgeKey = %v %v", ok1, ok2)
	}
}

// TestHugeRowsPlace: rows far over a page (a commit's changes_made for a
// thousand new tables is ~30 kB) are placed like PostgreSQL's TOASTed
// tuples, next to small ones, instead of looping through the free space map.
func TestHugeRowsPlace(t *testing.T) {
	db := setup(t)
	tx := db.Begin()
	seen := map[CTID]bool{}
	big := strings.Repeat("created_table:\"main\".\"t000001\",", 7000) // ~220 kB
	for i := int64(0); i < 400; i++ {
		note := "small"
		if i%3 == 0 {
			note = big
		}
		c, err := tx.InsertRow("public", "snap", snapRow(i, note))
		mustNoErr(t, err)
		if seen[c] {
			t.Fatalf("ctid %s handed out twice", c)
		}
		seen[c] = true
	}
	mustNoErr(t, tx.Commit(ctx))
	tb, err := db.Current().Table("public", "snap")
	mustNoErr(t, err)
	// A TOASTed row is ~50 bytes in the heap: 400 rows fit a few pages.
	if tb.Pages() > 4 {
		t.Fatalf("400 rows took %d pages", tb.Pages())
	}
}

// TestScanOrderAndStop: Scan visits every row once in ctid order, across
// the B-tree's leaves and the separators between them, and stops at the
// row where fn returns false, whichever leaf or separator holds it;
// ScanFrom starts at its ctid.
func TestScanOrderAndStop(t *testing.T) {
	db := setup(t)
	tx := db.Begin()
	const n = 700 // many leaves at degree 12
	for i := int64(0); i < n; i++ {
		_, err := tx.InsertRow("public", "snap", snapRow(i, fmt.Sprintf("row %d", i)))
		mustNoErr(t, err)
	}
	mustNoErr(t, tx.Commit(ctx))
	tb, err := db.Current().Table("public", "snap")
	mustNoErr(t, err)
	var all []CTID
	tb.Scan(func(c CTID, r datum.Row) bool {
		if len(all) > 0 && c <= all[len(all)-1] {
			t.Fatalf("ctid %s after %s", c, all[len(all)-1])
		}
		if _, ok := tb.Lookup(c); !ok {
			t.Fatalf("scanned ctid %s is not a row", c)
		}
		all = append(all, c)
		return true
	})
	if len(all) != n || tb.Len() != n {
		t.Fatalf("scanned %d rows of %d", len(all), tb.Len())
	}
	for stop := 1; stop <= n; stop++ {
		calls := 0
		tb.Scan(func(c CTID, _ datum.Row) bool {
			if c != all[calls] {
				t.Fatalf("stop %d: call %d got %s, want %s", stop, calls, c, all[calls])
			}
			calls++
			return calls < stop
		})
		if calls != stop {
			t.Fatalf("fn returned false at row %d, but Scan called it %d times", stop, calls)
		}
	}
	var from []CTID
	tb.ScanFrom(all[400], func(c CTID, _ datum.Row) bool { from = append(from, c); return true })
	if len(from) != n-400 || from[0] != all[400] {
		t.Fatalf("ScanFrom(%s): %d rows from %v", all[400], len(from), from[:1])
	}
}

// TestConcurrentCopiesOfOnePublishedVersion: transactions on one published
// version copy its tables for writing at the same time, on as many
// goroutines, while others read it. The trees have no locks of their own
// (treeOptions), so this holds only because a copy never writes to the
// published tree (copyTree): under the race detector a copy that did (the
// B-tree's own Copy) is reported here. Each transaction must see exactly
// the published rows plus its own, and the published version must not change.
func TestConcurrentCopiesOfOnePublishedVersion(t *testing.T) {
	db := setup(t)
	seed := db.Begin()
	for i := int64(1); i <= 200; i++ {
		_, err := seed.InsertRow("public", "snap", snapRow(i, "seed"))
		mustNoErr(t, err)
	}
	mustNoErr(t, seed.Commit(ctx))
	v := db.Current()
	pub, err := v.Table("public", "snap")
	mustNoErr(t, err)
	want := dump(t, pub)

	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for w := 0; w < writers; w++ {
		wg.Add(2)
		go func() { // a writer: copies the published table, then writes it
			defer wg.Done()
			tx := db.BeginOn(v)
			defer tx.Rollback()
			id := int64(1000 + w)
			if _, err := tx.InsertRow("public", "snap", snapRow(id, "mine")); err != nil {
				errs <- err
				return
			}
			if _, err := tx.UpdateRow("public", "snap", MakeCTID(0, 1), snapRow(1, fmt.Sprintf("w%d", w))); err != nil {
				errs <- err
				return
			}
			mine, err := tx.Table("public", "snap")
			if err != nil {
				errs <- err
				return
			}
			if mine.Len() != len(want)+1 {
				errs <- fmt.Errorf("writer %d sees %d rows, want %d", w, mine.Len(), len(want)+1)
			}
			if _, _, ok := mine.LookupKey([]datum.Value{datum.IntValue(id)}); !ok {
				errs <- fmt.Errorf("writer %d: its own row %d is missing", w, id)
			}
			for o := 0; o < writers; o++ {
				if _, _, ok := mine.LookupKey([]datum.Value{datum.IntValue(int64(1000 + o))}); ok && o != w {
					errs <- fmt.Errorf("writer %d sees writer %d's row", w, o)
				}
			}
		}()
		go func() { // a reader of the published version
			defer wg.Done()
			tb, err := v.Table("public", "snap")
			if err != nil {
				errs <- err
				return
			}
			n := 0
			tb.Scan(func(CTID, datum.Row) bool { n++; return true })
			if n != len(want) {
				errs <- fmt.Errorf("reader counted %d rows, want %d", n, len(want))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := dump(t, pub); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the published version changed under its writers")
	}
}

// TestCreateDropDatabase: databases exist only once created; a name is
// taken until dropped; a transaction of a dropped database cannot commit
// (its writes would land in catalogs the drop erased), and the name can be
// created afresh.
func TestCreateDropDatabase(t *testing.T) {
	ctx := context.Background()
	s := NewServer(Options{})
	if _, ok := s.Lookup("d"); ok {
		t.Fatal("a database exists before it is created")
	}
	db, err := s.CreateDatabase(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateDatabase(ctx, "d"); !errors.Is(err, ErrDatabaseExists) {
		t.Fatalf("second create: %v", err)
	}
	if got := s.Databases(); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("databases %v", got)
	}
	txn := db.Begin()
	if err := txn.CreateSchema("x"); err != nil {
		t.Fatal(err)
	}
	if err := s.DropDatabase(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(ctx); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("commit on a dropped database: %v", err)
	}
	if _, ok := s.Lookup("d"); ok || len(s.Databases()) != 0 {
		t.Fatalf("dropped database still listed: %v", s.Databases())
	}
	if err := s.DropDatabase(ctx, "d"); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("second drop: %v", err)
	}
	again, err := s.CreateDatabase(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Current().Schema("x"); ok {
		t.Fatal("the new database has the dropped one's schema")
	}
}
