package commit

import (
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/moraine-db/moraine/internal/catalog"
)

// TestHoldOnAnEncryptedLake: in an ENCRYPTED lake every data file has its
// own key, recorded base64 in ducklake_data_file.encryption_key. A merge of
// files DuckDB wrote that way is held like any other: one carrying its
// sources' row ids lands, one renumbering them is refused, and one whose
// recorded key is wrong cannot be read and is refused too (58030).
func TestHoldOnAnEncryptedLake(t *testing.T) {
	h, dir := holdLake(t)
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	defer db.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`SET force_mbedtls_unsafe = 'true'`)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	write := func(name, query string) string {
		key := make([]byte, 32)
		rand.Read(key)
		keys[name] = base64.StdEncoding.EncodeToString(key)
		exec(fmt.Sprintf(`PRAGMA add_parquet_key('%s', '%s')`, name, keys[name]))
		fieldIDs := ""
		if strings.Contains(query, "_ducklake_internal_row_id") {
			fieldIDs = "FIELD_IDS {_ducklake_internal_row_id: 2147483540}, "
		}
		exec(fmt.Sprintf(`COPY (%s) TO '%s' (FORMAT parquet, %sENCRYPTION_CONFIG {footer_key: '%s'})`,
			query, filepath.Join(dir, name+".parquet"), fieldIDs, name))
		return keys[name]
	}
	register := func(snap, file, start, count int64, name string) {
		h.mustCommit(func(tx *catalog.Txn) {
			s := fmt.Sprint
			h.snap(tx, snap, "inserted_into_table:1")
			h.insert(tx, "ducklake_data_file", s(file), "1", s(snap), "NULL", "NULL", name+".parquet", "true", "parquet",
				s(count), "1000", "100", s(start), "NULL", keys[name], "NULL", "NULL", "1")
			h.insert(tx, "ducklake_file_partition_value", s(file), "1", "0", "2020")
			h.set(tx, "ducklake_table_stats", "table_id", "1", "next_row_id", s(start+count))
		})
	}
	write("f0", `SELECT i AS v FROM range(100) t(i)`)
	register(2, 0, 0, 100, "f0")
	write("f1", `SELECT i AS v, 100 + i AS _ducklake_internal_row_id FROM range(50) t(i)`)
	register(3, 1, 100, 50, "f1")
	merge := func(name string, key string) error {
		return h.commit(func(tx *catalog.Txn) {
			h.snap(tx, 4, "merge_adjacent:1")
			h.insert(tx, "ducklake_data_file", "2", "1", "2", "NULL", "NULL", name+".parquet", "true", "parquet",
				"150", "3000", "100", "NULL", "NULL", key, "NULL", "NULL", "1")
			h.insert(tx, "ducklake_file_partition_value", "2", "1", "0", "2020")
			for _, f := range []string{"0", "1"} {
				h.del(tx, "ducklake_data_file", "data_file_id", f)
				h.del(tx, "ducklake_file_partition_value", "data_file_id", f)
				h.insert(tx, "ducklake_files_scheduled_for_deletion", f, "f"+f+".parquet", "true", "2026-01-01 00:00:09+00")
			}
		})
	}
	bad := write("renumbered", `SELECT i AS v, 1 + i AS _ducklake_internal_row_id FROM range(150) t(i)`)
	if err := merge("renumbered", bad); !isKind(err, ErrHold) {
		t.Fatalf("renumbering merge of encrypted files: %v, want a hold refusal", err)
	}
	good := write("merged", `SELECT i AS v, i AS _ducklake_internal_row_id FROM range(150) t(i)`)
	var ce *Error
	if err := merge("merged", bad); !isKind(err, ErrHold) || !errors.As(err, &ce) || ce.Code != "58030" {
		t.Fatalf("merge whose output key is recorded wrong: %v, want a 58030 hold refusal", err)
	}
	if err := merge("merged", good); err != nil {
		t.Fatalf("faithful merge of encrypted files refused: %v", err)
	}
	h.checkStore()
}
