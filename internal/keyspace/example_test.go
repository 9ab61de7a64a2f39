package keyspace_test

import (
	"bytes"
	"fmt"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
)

// A data file with its partition value: one key, one value, and the file
// sits in the current range of its table until it is ended.
func Example() {
	defs, _ := keyspace.FixedDefs("public", keyspace.Version11)
	codecs := map[string]*keyspace.Table{}
	for _, d := range defs {
		t, err := keyspace.NewTable(d)
		if err != nil {
			panic(err)
		}
		codecs[d.Name] = t
	}
	file, pv := codecs["ducklake_data_file"], codecs["ducklake_file_partition_value"]
	I, S := datum.IntValue, datum.TextValue
	row := datum.EncodeRow(nil, file.Types(), []datum.Value{
		I(7), I(3), I(5), datum.Null, datum.Null, S("f.parquet"), datum.BoolValue(true), S("parquet"),
		I(100), I(4096), I(512), I(0), I(2), datum.Null, datum.Null, datum.Null, I(1)})
	part := datum.EncodeRow(nil, pv.Types(), []datum.Value{I(7), I(3), I(0), S("2026")})

	key, value, err := file.Encode(1, row, []datum.Row{part})
	if err != nil {
		panic(err)
	}
	current, _ := keyspace.TablePrefix(1, keyspace.KindDataFile, keyspace.SubCurrent, 3)
	fmt.Println("in table 3's current range:", bytes.HasPrefix(key, current))

	e, err := keyspace.DecodeKV(key, value, func(_ uint32, name string) (*keyspace.Table, bool) {
		t, ok := codecs[name]
		return t, ok
	})
	if err != nil {
		panic(err)
	}
	v, _ := e.Children[0].Column(pv.Types(), 3)
	fmt.Println(e.Table, "+", len(e.Children), e.ChildTable, "=", v.Text())

	// Ending the file (UPDATE … SET end_snapshot = 9) moves it to history:
	// delete the old key, put the new one.
	ended := datum.EncodeRow(nil, file.Types(), []datum.Value{
		I(7), I(3), I(5), I(9), datum.Null, S("f.parquet"), datum.BoolValue(true), S("parquet"),
		I(100), I(4096), I(512), I(0), I(2), datum.Null, datum.Null, datum.Null, I(1)})
	hkey, _ := file.Key(1, ended)
	history, _ := keyspace.TablePrefix(1, keyspace.KindDataFile, keyspace.SubHistory, 3)
	fmt.Println("ended file in history:", bytes.HasPrefix(hkey, history))
	// Output:
	// in table 3's current range: true
	// ducklake_data_file + 1 ducklake_file_partition_value = 2026
	// ended file in history: true
}
