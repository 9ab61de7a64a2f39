// Package datum is moraine's value model: the PostgreSQL types DuckLake's
// catalog uses, typed values, their PostgreSQL text and binary forms, and the
// compact row encoding the resident catalog and the keyspace store rows in.
//
// Every layer above the store speaks datum: the SQL executor parses literals
// into Values, the catalog keeps rows as encoded Rows (never as boxed cells),
// the keyspace persists those bytes, and pgwire sends them out in text or
// binary form. A Value round-trips through every one of those forms without
// change, which is what makes moraine row-faithful.
package datum

import (
	"fmt"
	"strconv"
	"strings"
)

// PostgreSQL type OIDs moraine serves. The values are PostgreSQL's own.
const (
	OIDBool        uint32 = 16
	OIDBytea       uint32 = 17
	OIDChar        uint32 = 18 // "char", the one-byte type of pg_class.relkind
	OIDName        uint32 = 19
	OIDInt8        uint32 = 20
	OIDInt2        uint32 = 21
	OIDInt2Vector  uint32 = 22
	OIDInt4        uint32 = 23
	OIDRegproc     uint32 = 24
	OIDText        uint32 = 25
	OIDOID         uint32 = 26
	OIDTID         uint32 = 27
	OIDXID         uint32 = 28
	OIDOIDVector   uint32 = 30
	OIDJSON        uint32 = 114
	OIDFloat4      uint32 = 700
	OIDFloat8      uint32 = 701
	OIDInt2Array   uint32 = 1005
	OIDInt4Array   uint32 = 1007
	OIDTextArray   uint32 = 1009
	OIDInt8Array   uint32 = 1016
	OIDBPChar      uint32 = 1042
	OIDVarchar     uint32 = 1043
	OIDDate        uint32 = 1082
	OIDTime        uint32 = 1083
	OIDTimestamp   uint32 = 1114
	OIDTimestampTZ uint32 = 1184
	OIDInterval    uint32 = 1186
	OIDTimeTZ      uint32 = 1266
	OIDNumeric     uint32 = 1700
	OIDRegclass    uint32 = 2205
	OIDUUID        uint32 = 2950
	OIDJSONB       uint32 = 3802
)

// Kind is the in-memory representation family of a type: which field of a
// Value carries it and how it is compared.
type Kind uint8

const (
	KindNull        Kind = iota // only for Value: the SQL NULL
	KindBool                    // I: 0 or 1
	KindInt                     // I: int2, int4, int8, oid, xid
	KindFloat                   // I: math.Float64bits (float4 values are widened exactly)
	KindText                    // S: text, varchar, name, char, bpchar, json
	KindBytes                   // S: bytea, raw bytes
	KindNumeric                 // S: canonical decimal text ("12.50", "NaN")
	KindUUID                    // S: 16 raw bytes
	KindDate                    // I: days since 2000-01-01; math.MinInt32/MaxInt32 = -/+infinity
	KindTime                    // I: microseconds since midnight
	KindTimestamp               // I: microseconds since 2000-01-01 00:00:00; MinInt64/MaxInt64 = -/+infinity
	KindTimestampTZ             // I: microseconds since 2000-01-01 00:00:00 UTC; same infinities
	KindInterval                // I: microseconds, J: months<<32 | uint32(days)
	KindTID                     // I: block<<16 | offset
	KindArray                   // S: element values, row-encoded (see array.go); Type.Elem gives the element type
	KindTimeTZ                  // I: microseconds since midnight (local), J: zone in seconds west of UTC (PostgreSQL's sign)
)

// Type is a PostgreSQL column type: its OID and its type modifier (-1 for
// none). varchar(n) has Mod n+4; numeric(p,s) has Mod (p<<16 | s) + 4, as in
// PostgreSQL.
type Type struct {
	OID uint32
	Mod int32
}

// Common types.
var (
	Bool        = Type{OIDBool, -1}
	Bytea       = Type{OIDBytea, -1}
	Char        = Type{OIDChar, -1}
	Name        = Type{OIDName, -1}
	Int2        = Type{OIDInt2, -1}
	Int4        = Type{OIDInt4, -1}
	Int8        = Type{OIDInt8, -1}
	OID         = Type{OIDOID, -1}
	Text        = Type{OIDText, -1}
	Varchar     = Type{OIDVarchar, -1}
	Float4      = Type{OIDFloat4, -1}
	Float8      = Type{OIDFloat8, -1}
	Numeric     = Type{OIDNumeric, -1}
	Date        = Type{OIDDate, -1}
	Time        = Type{OIDTime, -1}
	Timestamp   = Type{OIDTimestamp, -1}
	TimestampTZ = Type{OIDTimestampTZ, -1}
	TimeTZ      = Type{OIDTimeTZ, -1}
	Interval    = Type{OIDInterval, -1}
	UUID        = Type{OIDUUID, -1}
	TID         = Type{OIDTID, -1}
	JSON        = Type{OIDJSON, -1}
	Int2Array   = Type{OIDInt2Array, -1}
	Int4Array   = Type{OIDInt4Array, -1}
	Int8Array   = Type{OIDInt8Array, -1}
	TextArray   = Type{OIDTextArray, -1}
)

type typeInfo struct {
	kind   Kind
	name   string // format_type spelling without modifier
	length int16  // pg_type.typlen
	elem   uint32 // element OID for arrays
}

var types = map[uint32]typeInfo{
	OIDBool:        {KindBool, "boolean", 1, 0},
	OIDBytea:       {KindBytes, "bytea", -1, 0},
	OIDChar:        {KindText, `"char"`, 1, 0},
	OIDName:        {KindText, "name", 64, 0},
	OIDInt8:        {KindInt, "bigint", 8, 0},
	OIDInt2:        {KindInt, "smallint", 2, 0},
	OIDInt4:        {KindInt, "integer", 4, 0},
	OIDRegproc:     {KindInt, "regproc", 4, 0},
	OIDText:        {KindText, "text", -1, 0},
	OIDOID:         {KindInt, "oid", 4, 0},
	OIDTID:         {KindTID, "tid", 6, 0},
	OIDXID:         {KindInt, "xid", 4, 0},
	OIDJSON:        {KindText, "json", -1, 0},
	OIDJSONB:       {KindText, "jsonb", -1, 0},
	OIDFloat4:      {KindFloat, "real", 4, 0},
	OIDFloat8:      {KindFloat, "double precision", 8, 0},
	OIDBPChar:      {KindText, "character", -1, 0},
	OIDVarchar:     {KindText, "character varying", -1, 0},
	OIDDate:        {KindDate, "date", 4, 0},
	OIDTime:        {KindTime, "time without time zone", 8, 0},
	OIDTimeTZ:      {KindTimeTZ, "time with time zone", 12, 0},
	OIDTimestamp:   {KindTimestamp, "timestamp without time zone", 8, 0},
	OIDTimestampTZ: {KindTimestampTZ, "timestamp with time zone", 8, 0},
	OIDInterval:    {KindInterval, "interval", 16, 0},
	OIDNumeric:     {KindNumeric, "numeric", -1, 0},
	OIDRegclass:    {KindInt, "regclass", 4, 0},
	OIDUUID:        {KindUUID, "uuid", 16, 0},
	OIDInt2Array:   {KindArray, "smallint[]", -1, OIDInt2},
	OIDInt4Array:   {KindArray, "integer[]", -1, OIDInt4},
	OIDInt8Array:   {KindArray, "bigint[]", -1, OIDInt8},
	OIDTextArray:   {KindArray, "text[]", -1, OIDText},
	OIDInt2Vector:  {KindArray, "int2vector", -1, OIDInt2},
	OIDOIDVector:   {KindArray, "oidvector", -1, OIDOID},
}

// Known reports whether moraine can store and serve values of type t.
func (t Type) Known() bool { _, ok := types[t.OID]; return ok }

// kindByOID is types' kinds indexed by OID for the OIDs below its length
// (every built-in one): Kind runs once per cell whenever a row decodes, and
// an array index costs a fraction of a map lookup there.
var kindByOID = func() (k [4096]Kind) {
	for oid, ti := range types {
		if oid < uint32(len(k)) {
			k[oid] = ti.kind
		}
	}
	return k
}()

// Kind returns the representation family of t (KindNull for unknown types).
func (t Type) Kind() Kind {
	if t.OID < uint32(len(kindByOID)) {
		return kindByOID[t.OID]
	}
	return types[t.OID].kind
}

// Len is pg_type.typlen: the fixed width, or -1 for variable-length types.
func (t Type) Len() int16 { return types[t.OID].length }

// Elem is the element type of an array type.
func (t Type) Elem() Type { return Type{types[t.OID].elem, -1} }

// ArrayOf returns the array type whose elements are t, if moraine has one.
func ArrayOf(t Type) (Type, bool) {
	for oid, ti := range types {
		if ti.kind == KindArray && ti.elem == t.OID && oid != OIDInt2Vector && oid != OIDOIDVector {
			return Type{oid, -1}, true
		}
	}
	return Type{}, false
}

// NumericPrecisionScale decodes a numeric type modifier; ok is false when the
// type has no modifier (unconstrained numeric).
func (t Type) NumericPrecisionScale() (precision, scale int, ok bool) {
	if t.OID != OIDNumeric || t.Mod < 4 {
		return 0, 0, false
	}
	m := t.Mod - 4
	return int(m>>16) & 0xffff, int(m & 0xffff), true
}

// NumericType returns numeric(p,s).
func NumericType(precision, scale int) Type {
	return Type{OIDNumeric, int32(precision<<16|scale) + 4}
}

// String is PostgreSQL's format_type(oid, typmod) spelling, as pg_catalog and
// information_schema report it.
func (t Type) String() string {
	ti, ok := types[t.OID]
	if !ok {
		return fmt.Sprintf("oid:%d", t.OID)
	}
	switch {
	case t.OID == OIDNumeric && t.Mod >= 4:
		p, s, _ := t.NumericPrecisionScale()
		return fmt.Sprintf("numeric(%d,%d)", p, s)
	case (t.OID == OIDVarchar || t.OID == OIDBPChar) && t.Mod >= 4:
		return fmt.Sprintf("%s(%d)", ti.name, t.Mod-4)
	}
	return ti.name
}

// TypeName is pg_type.typname: "int8", "varchar", "timestamptz", "_int8".
func (t Type) TypeName() string {
	switch t.OID {
	case OIDBool:
		return "bool"
	case OIDInt8:
		return "int8"
	case OIDInt2:
		return "int2"
	case OIDInt4:
		return "int4"
	case OIDFloat4:
		return "float4"
	case OIDFloat8:
		return "float8"
	case OIDVarchar:
		return "varchar"
	case OIDBPChar:
		return "bpchar"
	case OIDChar:
		return "char"
	case OIDTime:
		return "time"
	case OIDTimeTZ:
		return "timetz"
	case OIDTimestamp:
		return "timestamp"
	case OIDTimestampTZ:
		return "timestamptz"
	case OIDInt2Array:
		return "_int2"
	case OIDInt4Array:
		return "_int4"
	case OIDInt8Array:
		return "_int8"
	case OIDTextArray:
		return "_text"
	}
	if ti, ok := types[t.OID]; ok {
		return ti.name
	}
	return fmt.Sprintf("oid:%d", t.OID)
}

// ParseTypeName resolves a type as it is spelled in DDL or a cast, after the
// parser has split it into name parts and modifiers (pg_query gives
// ["pg_catalog","int8"] for BIGINT, ["pg_catalog","numeric"] with [18 3] for
// DECIMAL(18,3), ["uuid"] for UUID). arrayBounds > 0 asks for the array type.
func ParseTypeName(names []string, mods []int32, arrayBounds int) (Type, error) {
	if len(names) == 0 {
		return Type{}, fmt.Errorf("empty type name")
	}
	name := strings.ToLower(names[len(names)-1])
	if len(names) > 1 && !strings.EqualFold(names[0], "pg_catalog") && !(len(names) == 2 && strings.EqualFold(names[0], "public")) {
		return Type{}, fmt.Errorf("type %q does not exist", strings.Join(names, "."))
	}
	var t Type
	switch name {
	case "int8", "bigint":
		t = Int8
	case "int4", "integer", "int":
		t = Int4
	case "int2", "smallint":
		t = Int2
	case "float8", "double precision", "double":
		t = Float8
	case "float4", "real":
		t = Float4
	case "bool", "boolean":
		t = Bool
	case "text":
		t = Text
	case "varchar", "character varying":
		t = Varchar
	case "bpchar", "character", "char":
		t = Type{OIDBPChar, -1}
		if len(mods) == 0 {
			mods = []int32{1}
		}
	case "name":
		t = Name
	case "bytea":
		t = Bytea
	case "uuid":
		t = UUID
	case "date":
		t = Date
	case "time", "time without time zone":
		t = Time
	case "timetz", "time with time zone":
		t = TimeTZ
	case "timestamp", "timestamp without time zone":
		t = Timestamp
	case "timestamptz", "timestamp with time zone":
		t = TimestampTZ
	case "interval":
		t = Interval
	case "numeric", "decimal":
		t = Numeric
	case "oid":
		t = OID
	case "tid":
		t = TID
	case "json":
		t = JSON
	case "regclass":
		t = Type{OIDRegclass, -1}
	default:
		return Type{}, fmt.Errorf("type %q does not exist", name)
	}
	switch {
	case t.OID == OIDNumeric && len(mods) > 0:
		p, s := int(mods[0]), 0
		if len(mods) > 1 {
			s = int(mods[1])
		}
		if p < 1 || p > 1000 || s < 0 || s > p {
			return Type{}, fmt.Errorf("invalid NUMERIC type modifier (%d,%d)", p, s)
		}
		t = NumericType(p, s)
	case (t.OID == OIDVarchar || t.OID == OIDBPChar) && len(mods) > 0:
		if mods[0] < 1 {
			return Type{}, fmt.Errorf("length for type %s must be at least 1", name)
		}
		t.Mod = mods[0] + 4
	case len(mods) > 0 && t.OID != OIDTime && t.OID != OIDTimeTZ && t.OID != OIDTimestamp && t.OID != OIDTimestampTZ && t.OID != OIDInterval:
		return Type{}, fmt.Errorf("type modifier is not allowed for type %q", name)
	}
	if arrayBounds > 0 {
		at, ok := ArrayOf(Type{t.OID, -1})
		if !ok {
			return Type{}, fmt.Errorf("array of %s is not supported", t)
		}
		return at, nil
	}
	return t, nil
}

// MustParseTypeName is ParseTypeName for a single known SQL spelling such as
// "bigint" or "numeric(18,3)"; it panics on a bad name and exists for
// static tables and tests.
func MustParseTypeName(s string) Type {
	name, mods := s, []int32(nil)
	if i := strings.IndexByte(s, '('); i >= 0 && strings.HasSuffix(s, ")") {
		name = s[:i]
		for _, m := range strings.Split(s[i+1:len(s)-1], ",") {
			n, err := strconv.Atoi(strings.TrimSpace(m))
			if err != nil {
				panic(err)
			}
			mods = append(mods, int32(n))
		}
	}
	arr := 0
	if strings.HasSuffix(name, "[]") {
		name, arr = strings.TrimSuffix(name, "[]"), 1
	}
	t, err := ParseTypeName([]string{strings.TrimSpace(name)}, mods, arr)
	if err != nil {
		panic(err)
	}
	return t
}
