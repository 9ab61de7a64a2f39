package keyspace

import (
	"math"

	"pgregory.net/rapid"

	"github.com/moraine-db/moraine/internal/datum"
)

// Generators shared by the property tests.

// nastyStrings are values DuckLake stores verbatim and moraine must never
// touch: transforms, sort expressions with quotes, SQL text, unicode.
var nastyStrings = []string{
	"", "identity", "bucket(16)", "truncate(10)", "year", "epoch_day",
	`"col" DESC`, `lower("Name")`, `it's`, `a"b'c`, `''`, `\x00ff`, `\`,
	"SELECT * FROM t WHERE s = 'x;y'", "日本語", "𝄞 music", "a\x00b", "\x00", "\xff\xfe",
	"NULL", "map_by_name", "created_schema:\"main\"", "s3://bucket/lake/", "NULLS_FIRST",
}

var extremeInts = []int64{0, 1, -1, math.MinInt64, math.MaxInt64, math.MinInt64 + 1, math.MaxInt64 - 1, 1 << 32, -(1 << 32), 255, 256}

func genInt(t *rapid.T, label string) int64 {
	if rapid.Bool().Draw(t, label+"_x") {
		return rapid.SampledFrom(extremeInts).Draw(t, label)
	}
	return rapid.Int64().Draw(t, label)
}

func genString(t *rapid.T, label string) string {
	switch rapid.IntRange(0, 2).Draw(t, label+"_k") {
	case 0:
		return rapid.SampledFrom(nastyStrings).Draw(t, label)
	case 1:
		return rapid.String().Draw(t, label)
	}
	return string(rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, label))
}

// genValue draws a value of type typ (NULL with some probability unless
// notNull).
func genValue(t *rapid.T, typ datum.Type, notNull bool, label string) datum.Value {
	if !notNull && rapid.IntRange(0, 5).Draw(t, label+"_null") == 0 {
		return datum.Null
	}
	switch typ.Kind() {
	case datum.KindBool:
		return datum.BoolValue(rapid.Bool().Draw(t, label))
	case datum.KindInt:
		switch typ.OID {
		case datum.OIDInt2:
			return datum.IntValue(int64(rapid.Int16().Draw(t, label)))
		case datum.OIDInt4:
			return datum.IntValue(int64(rapid.Int32().Draw(t, label)))
		}
		return datum.IntValue(genInt(t, label))
	case datum.KindFloat:
		if typ.OID == datum.OIDFloat4 {
			f := math.Float32frombits(rapid.Uint32().Draw(t, label))
			return datum.FloatValue(float64(f))
		}
		return datum.Value{K: datum.KindFloat, I: int64(rapid.Uint64().Draw(t, label))}
	case datum.KindText:
		return datum.TextValue(genString(t, label))
	case datum.KindBytes:
		return datum.BytesValue(rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, label))
	case datum.KindNumeric:
		return datum.NumericValue(rapid.SampledFrom([]string{"0", "12.50", "-0.001", "NaN", "99999999999999999999.999", "1"}).Draw(t, label))
	case datum.KindUUID:
		var u [16]byte
		copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, label))
		return datum.UUIDValue(u)
	case datum.KindDate:
		return datum.DateValue(rapid.Int32().Draw(t, label))
	case datum.KindTime:
		return datum.TimeValue(rapid.Int64Range(0, 86400e6).Draw(t, label))
	case datum.KindTimestamp:
		return datum.TimestampValue(genInt(t, label))
	case datum.KindTimestampTZ:
		return datum.TimestampTZValue(genInt(t, label))
	case datum.KindInterval:
		return datum.IntervalValue(rapid.Int32().Draw(t, label+"m"), rapid.Int32().Draw(t, label+"d"), genInt(t, label))
	}
	panic("genValue: unsupported type " + typ.String())
}

func genRow(t *rapid.T, cols []ColumnDef, label string) []datum.Value {
	vals := make([]datum.Value, len(cols))
	for i, c := range cols {
		vals[i] = genValue(t, c.Type, c.NotNull, label+"_"+c.Name)
	}
	return vals
}

// inlinableTypes are the column types DuckLake's Postgres manager gives
// inlined data tables (section 1.5 of the protocol note) and a few more
// that datum supports.
var inlinableTypes = []datum.Type{
	datum.Int8, datum.Int4, datum.Int2, datum.Bool, datum.Bytea, datum.Varchar,
	datum.Float4, datum.Float8, datum.NumericType(10, 2), datum.NumericType(38, 0),
	datum.UUID, datum.Interval, datum.Time, datum.Date, datum.Timestamp, datum.TimestampTZ, datum.Text,
}
