package commit

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/pgcode"
)

// Each test here reproduces a commit that would corrupt a lake and checks
// that it is refused with the error naming the rule, leaving the catalog
// and the store as they were (harness.refused). docs/commit.md maps every
// guard to its test; scripts/guards shows each test fails without its
// guard.

// snap mints snapshot id with the given change set in tx.
func (h *harness) snap(tx *catalog.Txn, id int64, changes string) {
	h.t.Helper()
	h.insert(tx, "ducklake_snapshot", fmt.Sprint(id), "2026-01-01 00:00:09+00", "1", "2", "9")
	h.insert(tx, "ducklake_snapshot_changes", fmt.Sprint(id), changes, "NULL", "NULL", "NULL")
}

// dataFile inserts a data file row of table 1.
func (h *harness) dataFile(tx *catalog.Txn, id, begin, rowStart, count int64) {
	h.t.Helper()
	s := fmt.Sprint
	h.insert(tx, "ducklake_data_file", s(id), "1", s(begin), "NULL", "NULL", fmt.Sprintf("f%d.parquet", id), "true", "parquet",
		s(count), "1000", "100", s(rowStart), "NULL", "NULL", "NULL", "NULL", "1")
	h.insert(tx, "ducklake_file_partition_value", s(id), "1", "0", "2020")
}

// deleteFile inserts a live delete file row of table 1 for data file file.
func (h *harness) deleteFile(tx *catalog.Txn, id, file, begin, count int64) {
	h.t.Helper()
	s := fmt.Sprint
	h.insert(tx, "ducklake_delete_file", s(id), "1", s(begin), "NULL", s(file), fmt.Sprintf("d%d.parquet", id), "true", "parquet", s(count), "100", "50", "NULL", "NULL", "NULL")
}

// inlineDeletion stages, as snapshot 3, the inlined deletion of row 0 of
// data file 0 of table 1 (its inlined-delete table created with it).
func (h *harness) inlineDeletion(tx *catalog.Txn) {
	h.snap(tx, 3, "inlined_delete:1")
	if err := tx.CreateTable(keyspace.InlinedDeleteDef(schema, 1)); err != nil {
		h.t.Fatal(err)
	}
	h.insert(tx, keyspace.InlinedDeleteTableName(1), "0", "3", "3")
}

// lakeWithFile is a lake with table 1 and its data file 0 (rows 0..9),
// registered at snapshot 2.
func lakeWithFile(t *testing.T) *harness {
	h := newHarness(t, Options{})
	h.initLake()
	h.addFile(2, 0, 0, 10)
	return h
}

func (h *harness) refusedSaying(kind error, want string, fn func(tx *catalog.Txn)) {
	h.t.Helper()
	err := h.refused(kind, fn)
	if !strings.Contains(err.Error(), want) {
		h.t.Fatalf("error %q does not say %q", err, want)
	}
}

// TestCompactionComesAlone: a merge mixed with an insert escaped the hold
// and the next_row_id check; now the mixture itself is refused, even with
// the hold off.
func TestCompactionComesAlone(t *testing.T) {
	h := lakeWithFile(t)
	h.addFile(3, 1, 10, 10)
	h.refusedSaying(ErrShape, "never mixes compaction", func(tx *catalog.Txn) {
		h.snap(tx, 4, "inserted_into_table:1,merge_adjacent:1")
		h.dataFile(tx, 2, 2, 5, 20) // renumbered: the sources held 0..19
		h.del(tx, "ducklake_data_file", "data_file_id", "0")
		h.del(tx, "ducklake_data_file", "data_file_id", "1")
		h.set(tx, "ducklake_table_stats", "table_id", "1", "next_row_id", "25")
	})
}

// TestOnlyAMergeHardDeletesALiveFile: removing a live file's row outside a
// merge loses its rows (and nothing schedules its bytes).
func TestOnlyAMergeHardDeletesALiveFile(t *testing.T) {
	h := lakeWithFile(t)
	h.refusedSaying(ErrShape, "no merge_adjacent", func(tx *catalog.Txn) {
		h.snap(tx, 3, "deleted_from_table:1")
		h.del(tx, "ducklake_data_file", "data_file_id", "0")
		h.del(tx, "ducklake_file_partition_value", "data_file_id", "0")
	})
}

// TestMergeRefusesFilesWithDeletes: a merge source carrying live delete
// files, or inlined deletions, would bring the deleted rows back.
func TestMergeRefusesFilesWithDeletes(t *testing.T) {
	merge := func(h *harness) func(tx *catalog.Txn) {
		return func(tx *catalog.Txn) {
			h.snap(tx, 4, "merge_adjacent:1")
			h.dataFile(tx, 1, 2, 0, 10)
			h.del(tx, "ducklake_data_file", "data_file_id", "0")
			h.del(tx, "ducklake_file_partition_value", "data_file_id", "0")
			h.del(tx, "ducklake_delete_file", "data_file_id", "0")
			h.insert(tx, "ducklake_files_scheduled_for_deletion", "0", "f0.parquet", "true", "2026-01-01 00:00:05+00")
		}
	}
	t.Run("delete file", func(t *testing.T) {
		h := lakeWithFile(t)
		h.mustCommit(func(tx *catalog.Txn) {
			h.snap(tx, 3, "deleted_from_table:1")
			h.deleteFile(tx, 1, 0, 3, 2)
		})
		h.refusedSaying(ErrShape, "carries the live delete file 1", merge(h))
	})
	t.Run("inlined deletions", func(t *testing.T) {
		h := lakeWithFile(t)
		h.mustCommit(func(tx *catalog.Txn) {
			h.inlineDeletion(tx)
		})
		h.refusedSaying(ErrShape, "carries 1 inlined deletions", merge(h))
	})
}

// TestRebaseOnlyTheRewriteOutput: SET begin_snapshot is legal only on the
// file the same rewrite inserted, and only to the rewrite's snapshot; an
// older live file rebased to snapshot 0 changed what time travel sees.
func TestRebaseOnlyTheRewriteOutput(t *testing.T) {
	h := lakeWithFile(t)
	h.addFile(3, 1, 10, 10)
	h.refusedSaying(ErrShape, "did not insert", func(tx *catalog.Txn) {
		h.snap(tx, 4, "rewrite_delete:1")
		h.set(tx, "ducklake_data_file", "data_file_id", "1", "begin_snapshot", "0")
	})
	h.refusedSaying(ErrShape, "outside a rewrite_delete", func(tx *catalog.Txn) {
		h.snap(tx, 4, "inserted_into_table:1")
		h.dataFile(tx, 2, 4, 20, 5)
		h.set(tx, "ducklake_data_file", "data_file_id", "2", "begin_snapshot", "1")
	})
	h.refusedSaying(ErrShape, "to its own snapshot (4)", func(tx *catalog.Txn) {
		h.snap(tx, 4, "rewrite_delete:1")
		h.dataFile(tx, 2, 3, 0, 8)
		h.set(tx, "ducklake_data_file", "data_file_id", "0", "end_snapshot", "4")
		h.set(tx, "ducklake_data_file", "data_file_id", "2", "begin_snapshot", "0")
	})
}

// TestNextRowIDNeverGoesDown: an ordinary commit lowering next_row_id
// would hand out row ids in use again.
func TestNextRowIDNeverGoesDown(t *testing.T) {
	h := lakeWithFile(t)
	h.refusedSaying(ErrIntegrity, "down to 5", func(tx *catalog.Txn) {
		h.snap(tx, 3, "inserted_into_table:1")
		h.dataFile(tx, 1, 3, 5, 5)
		h.set(tx, "ducklake_table_stats", "table_id", "1", "next_row_id", "5")
	})
}

// TestReplacementDeletesAtLeastAsMany: a replacement delete file that
// deletes fewer rows than the one it replaces (ended or hard-deleted)
// brings rows back.
func TestReplacementDeletesAtLeastAsMany(t *testing.T) {
	for _, how := range []string{"ended", "hard-deleted"} {
		t.Run(how, func(t *testing.T) {
			h := lakeWithFile(t)
			h.mustCommit(func(tx *catalog.Txn) {
				h.snap(tx, 3, "deleted_from_table:1")
				h.deleteFile(tx, 1, 0, 3, 3)
			})
			h.refusedSaying(ErrIntegrity, "deletes 1 rows where the one it replaces deleted 3", func(tx *catalog.Txn) {
				h.snap(tx, 4, "deleted_from_table:1")
				if how == "ended" {
					h.set(tx, "ducklake_delete_file", "delete_file_id", "1", "end_snapshot", "4")
				} else {
					h.del(tx, "ducklake_delete_file", "delete_file_id", "1")
				}
				h.deleteFile(tx, 2, 0, 4, 1)
			})
		})
	}
}

// TestExpiryKeepsWhatRetainedSnapshotsSee: expiry may remove a history
// row only once no retained snapshot sees it, and a data file only with
// its inlined deletions.
func TestExpiryKeepsWhatRetainedSnapshotsSee(t *testing.T) {
	setup := func(t *testing.T) *harness {
		h := lakeWithFile(t)
		h.mustCommit(func(tx *catalog.Txn) {
			h.inlineDeletion(tx)
			h.deleteFile(tx, 1, 0, 3, 1)
		})
		h.mustCommit(func(tx *catalog.Txn) {
			h.snap(tx, 4, "deleted_from_table:1")
			h.set(tx, "ducklake_data_file", "data_file_id", "0", "end_snapshot", "4")
			h.set(tx, "ducklake_delete_file", "delete_file_id", "1", "end_snapshot", "4")
		})
		return h
	}
	t.Run("data file history", func(t *testing.T) {
		h := setup(t)
		h.refusedSaying(ErrIntegrity, "retained snapshot 2 still sees it", func(tx *catalog.Txn) {
			h.del(tx, "ducklake_data_file", "data_file_id", "0")
			h.del(tx, "ducklake_file_partition_value", "data_file_id", "0")
			h.del(tx, "ducklake_delete_file", "data_file_id", "0")
			h.del(tx, keyspace.InlinedDeleteTableName(1), "file_id", "0")
		})
	})
	t.Run("delete file history", func(t *testing.T) {
		h := setup(t)
		h.refusedSaying(ErrIntegrity, "retained snapshot 3 still sees it", func(tx *catalog.Txn) {
			h.del(tx, "ducklake_delete_file", "delete_file_id", "1")
		})
	})
	t.Run("inlined deletions left behind", func(t *testing.T) {
		h := setup(t)
		h.mustCommit(func(tx *catalog.Txn) {
			for _, s := range []string{"0", "1", "2", "3"} {
				h.del(tx, "ducklake_snapshot", "snapshot_id", s)
			}
		})
		h.refusedSaying(ErrIntegrity, "1 inlined deletions of its rows remain", func(tx *catalog.Txn) {
			h.del(tx, "ducklake_data_file", "data_file_id", "0")
			h.del(tx, "ducklake_file_partition_value", "data_file_id", "0")
			h.del(tx, "ducklake_delete_file", "data_file_id", "0")
		})
		// With them, and nothing retained that sees the file, it lands.
		h.mustCommit(func(tx *catalog.Txn) {
			h.del(tx, "ducklake_data_file", "data_file_id", "0")
			h.del(tx, "ducklake_file_partition_value", "data_file_id", "0")
			h.del(tx, "ducklake_delete_file", "data_file_id", "0")
			h.del(tx, keyspace.InlinedDeleteTableName(1), "file_id", "0")
		})
	})
}

// TestTombstoneRules: a live delete file stops being live only with its
// data file or with a replacement, and never outlives its data file.
func TestTombstoneRules(t *testing.T) {
	setup := func(t *testing.T) *harness {
		h := lakeWithFile(t)
		h.mustCommit(func(tx *catalog.Txn) {
			h.snap(tx, 3, "deleted_from_table:1")
			h.deleteFile(tx, 1, 0, 3, 2)
		})
		return h
	}
	t.Run("dropped", func(t *testing.T) {
		h := setup(t)
		h.refusedSaying(ErrShape, "the deleted rows would come back", func(tx *catalog.Txn) {
			h.snap(tx, 4, "deleted_from_table:1")
			h.set(tx, "ducklake_delete_file", "delete_file_id", "1", "end_snapshot", "4")
		})
	})
	t.Run("outlives its data file", func(t *testing.T) {
		h := setup(t)
		h.refusedSaying(ErrShape, "must never outlive its data file", func(tx *catalog.Txn) {
			h.snap(tx, 4, "deleted_from_table:1")
			h.set(tx, "ducklake_data_file", "data_file_id", "0", "end_snapshot", "4")
		})
	})
}

// TestMergeHardDeletesChildrenFirst: a merge may delete a source's
// embedded partition value before the source itself (DuckLake's batch has
// no guaranteed order); the store ends up the same either way.
func TestMergeHardDeletesChildrenFirst(t *testing.T) {
	h := lakeWithFile(t)
	h.addFile(3, 1, 10, 10)
	h.mustCommit(func(tx *catalog.Txn) {
		h.snap(tx, 4, "merge_adjacent:1")
		h.dataFile(tx, 2, 2, 0, 20)
		for _, f := range []string{"0", "1"} {
			h.del(tx, "ducklake_file_partition_value", "data_file_id", f)
			h.del(tx, "ducklake_file_column_stats", "data_file_id", f)
			h.del(tx, "ducklake_data_file", "data_file_id", f)
			h.insert(tx, "ducklake_files_scheduled_for_deletion", f, "f"+f+".parquet", "true", "2026-01-01 00:00:05+00")
		}
	})
	if cur, hist := h.keys(keyspace.KindDataFile); cur != 1 || hist != 0 {
		t.Fatalf("after a children-first merge: %d current, %d history data-file keys; want 1 and 0", cur, hist)
	}
}

// TestFileOfALiveTable: a commit registers data and delete files only of a
// table the catalog holds live once it lands (one it creates in the same
// commit included); a file of a table it never had, or has dropped, would
// hide from every read.
func TestFileOfALiveTable(t *testing.T) {
	h := lakeWithFile(t)
	err := h.refused(ErrIntegrity, func(tx *catalog.Txn) {
		h.snap(tx, 3, "inserted_into_table:9")
		h.insert(tx, "ducklake_data_file", "1", "9", "3", "NULL", "NULL", "g.parquet", "true", "parquet",
			"10", "1000", "100", "100", "NULL", "NULL", "NULL", "NULL", "1")
	})
	var e *Error
	if !errors.As(err, &e) || e.Code != pgcode.ForeignKeyViolation || !strings.Contains(e.Message, "names table 9") {
		t.Fatalf("a file of a table the catalog never had: %v, want 23503 naming table 9", err)
	}
	h.refusedSaying(ErrIntegrity, "names table 1", func(tx *catalog.Txn) {
		h.snap(tx, 3, "dropped_table:1,inserted_into_table:1")
		h.set(tx, "ducklake_table", "table_id", "1", "end_snapshot", "3")
		h.insert(tx, "ducklake_delete_file", "1", "1", "3", "NULL", "0", "d.parquet", "true", "parquet", "1", "100", "10", "NULL", "NULL", "1")
	})
}
