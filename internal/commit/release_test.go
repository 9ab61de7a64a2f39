package commit

import (
	"runtime"
	"testing"
	"weak"

	"github.com/moraine-db/moraine/internal/catalog"
)

// tableInfos returns weak pointers to the descriptions of every table db
// holds now.
func tableInfos(db *catalog.Database) []weak.Pointer[catalog.TableInfo] {
	var ws []weak.Pointer[catalog.TableInfo]
	for _, sc := range db.Current().Schemas() {
		for _, t := range sc.Tables() {
			ws = append(ws, weak.Make(t.Info()))
		}
	}
	return ws
}

// TestDroppedDatabaseIsReleased: once a database that committed through the
// pipeline is dropped, nothing the pipeline keeps holds its tables. A
// server whose clients create and drop lakes keeps its memory only if this
// holds.
func TestDroppedDatabaseIsReleased(t *testing.T) {
	h := newHarness(t, Options{})
	h.initLake()
	h.addFile(2, 1, 0, 10)
	h.mustCommit(func(tx *catalog.Txn) {
		h.del(tx, "ducklake_file_partition_value", "data_file_id", "1")
	})
	infos := tableInfos(h.db)
	if len(infos) == 0 {
		t.Fatal("the lake has no tables")
	}
	if err := h.srv.DropDatabase(h.ctx, "lake"); err != nil {
		t.Fatal(err)
	}
	h.db = nil
	runtime.GC()
	runtime.GC()
	for _, w := range infos {
		if ti := w.Value(); ti != nil {
			t.Errorf("table %s.%s of the dropped database is still reachable", ti.Def.Schema, ti.Def.Name)
		}
	}
	// The server and its pipeline live on, as in a running server.
	runtime.KeepAlive(h.srv)
	runtime.KeepAlive(h.pipe)
}
