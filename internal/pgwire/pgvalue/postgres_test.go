package pgvalue

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/moraine-db/moraine/internal/testenv"
)

// TestAgainstPostgres compares the codec's text and binary output with a
// real PostgreSQL's for the same values (MORAINE_TEST_POSTGRES; .ci/run
// provides one). The server's session is set to the settings pgwire
// reports, so the text forms must be byte-identical.
func TestAgainstPostgres(t *testing.T) {
	dsn := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'; SET IntervalStyle = 'postgres'; SET extra_float_digits = 1; SET bytea_output = 'hex'").ReadAll(); err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC)
	cases := []struct {
		sql string
		oid uint32
		v   any
	}{
		{"(-32767-1)::int2", Int2OID, int16(-32768)},
		{"2147483647::int4", Int4OID, int32(math.MaxInt32)},
		{"(-9223372036854775807-1)::int8", Int8OID, int64(math.MinInt64)},
		{"1.5::float4", Float4OID, float32(1.5)},
		{"1e6::float4", Float4OID, float32(1e6)},
		{"123456::float4", Float4OID, float32(123456)},
		{"0.1::float8", Float8OID, 0.1},
		{"1e15::float8", Float8OID, 1e15},
		{"123456789012345::float8", Float8OID, 123456789012345.0},
		{"1e-5::float8", Float8OID, 1e-5},
		{"'-Infinity'::float8", Float8OID, math.Inf(-1)},
		{"'NaN'::float8", Float8OID, math.NaN()},
		{"'12345.678'::numeric", NumericOID, "12345.678"},
		{"'-0.000100'::numeric", NumericOID, "-0.000100"},
		{"'1000000000000000000000000000000'::numeric", NumericOID, "1000000000000000000000000000000"},
		{"0::numeric", NumericOID, "0"},
		{"'100.00'::numeric", NumericOID, "100.00"},
		{"true", BoolOID, true},
		{"'hé\tllo'::text", TextOID, "hé\tllo"},
		{"'vc'::varchar", VarcharOID, "vc"},
		{"'nm'::name", NameOID, "nm"},
		{"'c'::\"char\"", CharOID, "c"},
		{"'\\xdead00'::bytea", ByteaOID, []byte{0xde, 0xad, 0}},
		{"'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid", UUIDOID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{"'2026-01-02'::date", DateOID, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
		{"'03:04:05.5'::time", TimeOID, "03:04:05.5"},
		{"'2026-01-02 03:04:05.678901'::timestamp", TimestampOID, ts},
		{"'2026-01-02 03:04:05.678901+00'::timestamptz", TimestamptzOID, ts},
		{"'2026-01-02 03:04:05+00'::timestamptz", TimestamptzOID, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{"'1 year 2 mons 3 days 04:05:06.5'::interval", IntervalOID, pgtype.Interval{Months: 14, Days: 3, Microseconds: 14706500000, Valid: true}},
		{"'-3 days +01:00:00'::interval", IntervalOID, pgtype.Interval{Days: -3, Microseconds: 3600e6, Valid: true}},
		{"'-1 mons -00:00:01'::interval", IntervalOID, pgtype.Interval{Months: -1, Microseconds: -1e6, Valid: true}},
		{"'0'::interval", IntervalOID, pgtype.Interval{Valid: true}},
		{"2200::oid", OIDOID, uint32(2200)},
		{"'(3,4)'::tid", TIDOID, "(3,4)"},
		{"'{1,NULL,3}'::int4[]", Int4ArrayOID, []any{int32(1), nil, int32(3)}},
		{"'{-1,9223372036854775807}'::int8[]", Int8ArrayOID, []int64{-1, math.MaxInt64}},
		{"'{1,2}'::int2[]", Int2ArrayOID, []int16{1, 2}},
		{`'{a,"b c","",NULL,"q\""}'::text[]`, TextArrayOID, []any{"a", "b c", "", nil, `q"`}},
		{"'{}'::text[]", TextArrayOID, []string{}},
	}
	c := NewCodec()
	for _, tc := range cases {
		for _, format := range []int16{TextFormat, BinaryFormat} {
			res := conn.ExecParams(ctx, "SELECT "+tc.sql, nil, nil, nil, []int16{format}).Read()
			if res.Err != nil {
				t.Fatalf("%s: %v", tc.sql, res.Err)
			}
			if got := res.FieldDescriptions[0].DataTypeOID; got != tc.oid {
				t.Errorf("%s: PostgreSQL says oid %d, test says %d", tc.sql, got, tc.oid)
			}
			want := res.Rows[0][0]
			got, null, err := c.Append(nil, tc.oid, format, tc.v)
			if err != nil || null {
				t.Errorf("%s format %d: %v null=%v", tc.sql, format, err, null)
				continue
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s format %d:\n got  %q\n want %q (PostgreSQL)", tc.sql, format, got, want)
			}
		}
	}
}
