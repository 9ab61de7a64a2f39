package keyspace

import (
	"testing"

	"github.com/moraine-db/moraine/internal/datum"
)

func benchPair(b *testing.B, name string, children []datum.Row, vals ...datum.Value) (*Table, []byte, []byte) {
	tbl, _ := StaticTable(name)
	k, v, err := tbl.Encode(1, datum.EncodeRow(nil, tbl.Types()[:len(vals)], vals), children)
	if err != nil {
		b.Fatal(err)
	}
	return tbl, k, v
}

// BenchmarkDecodeKV measures the load path per stored record: a data file
// with one partition value, and one file column stats row.
func BenchmarkDecodeKV(b *testing.B) {
	fpv, _ := StaticTable("ducklake_file_partition_value")
	_, fk, fv := benchPair(b, "ducklake_data_file",
		[]datum.Row{datum.EncodeRow(nil, fpv.Types(), ints(123456, 3, 0, "2024-01-01"))},
		ints(123456, 3, 5000, nil, nil, "ducklake-019a0b1c-2d3e-7f40-8a5b-6c7d8e9f0a1b.parquet", true, "parquet", 1000, 123456, 4567, 99000, 7, nil, nil, nil, 1)...)
	_, sk, sv := benchPair(b, "ducklake_file_column_stats", nil, ints(123456, 3, 4, 1000, 1000, 0, "10", "99999", false, nil)...)
	b.Run("data_file", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := DecodeKV(fk, fv, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("file_column_stats", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := DecodeKV(sk, sv, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	tbl, _ := StaticTable("ducklake_file_column_stats")
	row := datum.EncodeRow(nil, tbl.Types(), ints(123456, 3, 4, 1000, 1000, 0, "10", "99999", false, nil))
	b.Run("encode_file_column_stats", func(b *testing.B) {
		b.ReportAllocs()
		var k, v []byte
		var err error
		for i := 0; i < b.N; i++ {
			if k, err = tbl.AppendKey(k[:0], 1, row); err != nil {
				b.Fatal(err)
			}
			if v, err = tbl.EncodeValue(v[:0], row, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
