package datum_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/testenv"
)

// TestAgainstPostgres checks the value model against a real PostgreSQL
// (MORAINE_TEST_POSTGRES; .ci/run provides one): each value, parsed from
// PostgreSQL's text output, must print back byte for byte in text and
// encode byte for byte in binary as PostgreSQL sends it. The server's
// session has the settings pgwire reports, so the text forms must match.
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
	exprs := []string{
		"(-32767-1)::int2", "2147483647::int4", "(-9223372036854775807-1)::int8",
		"1.5::float4", "1e6::float4", "123456::float4", "1.1::float4",
		"0.1::float8", "1e15::float8", "1e20::float8", "123456789012345::float8", "1e-5::float8", "0.0001::float8",
		"'-Infinity'::float8", "'NaN'::float8",
		"'12345.678'::numeric", "'-0.000100'::numeric", "'-0.0100'::numeric", "'1000000000000000000000000000000'::numeric",
		"0::numeric", "'100.00'::numeric",
		"true", "false", "'hé\tllo'::text", "''::text", "'vc'::varchar", "'nm'::name", "'c'::\"char\"",
		"'\\xdead00'::bytea", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid",
		"'2026-01-02'::date", "'03:04:05.5'::time",
		"'2026-01-02 03:04:05.678901'::timestamp", "'2026-01-02 03:04:05'::timestamp",
		"'4714-11-24 00:00:00 BC'::timestamp", "'294276-12-31 23:59:59.999999'::timestamp",
		"'2026-01-02 03:04:05.678901+00'::timestamptz", "'2026-01-02 03:04:05+01'::timestamptz",
		"'1 year 2 mons 3 days 04:05:06.5'::interval", "'1 mon 1 day'::interval", "'-3 days +01:00:00'::interval",
		"'-1 mons -00:00:01'::interval", "'-13 mons -00:00:01.5'::interval", "'100:00:00'::interval",
		"'90 minutes'::interval", "'0'::interval",
		"2200::oid", "'(3,4)'::tid",
		"'{1,NULL,3}'::int4[]", "'{-1,9223372036854775807}'::int8[]", "'{1,2}'::int2[]",
		`'{a,"b c","",NULL,"q\""}'::text[]`, "'{}'::text[]",
	}
	for _, e := range exprs {
		text := conn.ExecParams(ctx, "SELECT "+e, nil, nil, nil, []int16{0}).Read()
		bin := conn.ExecParams(ctx, "SELECT "+e, nil, nil, nil, []int16{1}).Read()
		if text.Err != nil || bin.Err != nil {
			t.Fatalf("%s: %v %v", e, text.Err, bin.Err)
		}
		typ := datum.Type{OID: text.FieldDescriptions[0].DataTypeOID, Mod: -1}
		pgText, pgBin := text.Rows[0][0], bin.Rows[0][0]
		v, err := datum.ParseText(typ, string(pgText))
		if err != nil {
			t.Errorf("%s: parsing PostgreSQL's %q: %v", e, pgText, err)
			continue
		}
		if got := datum.AppendText(nil, typ, v); !bytes.Equal(got, pgText) {
			t.Errorf("%s text:\n got  %q\n want %q (PostgreSQL)", e, got, pgText)
		}
		got, err := datum.AppendBinary(nil, typ, v)
		if err != nil || !bytes.Equal(got, pgBin) {
			t.Errorf("%s binary: %v\n got  %x\n want %x (PostgreSQL)", e, err, got, pgBin)
		}
		if back, err := datum.DecodeBinary(typ, pgBin); err != nil || !bytes.Equal(datum.AppendText(nil, typ, back), pgText) {
			t.Errorf("%s: PostgreSQL's binary %x decodes to %v (%v)", e, pgBin, back, err)
		}
	}
}
