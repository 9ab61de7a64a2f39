package pgwire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/moraine-db/moraine/internal/pgwire/pgcopy"
)

// toyExec is the test executor: a tiny statement vocabulary over one
// in-memory table t(id int8, name text), enough to drive every protocol
// path from real clients.
//
//	SELECT 1                     one int4 row
//	SELECT pg_sleep(n)           sleeps n seconds, honouring cancellation
//	SELECT generate_series(1,n)  n int4 rows
//	SELECT * FROM t [WHERE false] the table (zero rows with WHERE false)
//	SELECT types                 one row with a value of every supported type
//	SELECT $1::int8, $2 ...      (extended) echoes its parameters
//	INSERT INTO t VALUES (n, 's')
//	COPY t TO STDOUT [binary]    / COPY t FROM STDIN [binary]
//	COPY series(n) TO STDOUT [binary]  n rows (id, 'x')
//	COPY fast(n) TO STDOUT       n binary rows through the AppendRow fast path
//	COPY framed(n,k) TO STDOUT   the same rows, framed beforehand, k at a time (AppendMessages)
//	BEGIN / COMMIT / ROLLBACK, NOTICE <text>, PANIC, anything else: 42601
//	SELECT version()             text
type toyExec struct {
	mu   sync.Mutex
	rows []toyRow
	// slept receives the cause that ended each interrupted pg_sleep, when
	// a test set it.
	slept chan error
	// sessions counts live sessions, for leak checks.
	sessions sync.WaitGroup
	live     int
}

type toyRow struct {
	id   int64
	name *string
}

func (e *toyExec) NewSession(ctx context.Context, info StartupInfo) (Session, error) {
	if info.Database == "nodb" {
		return nil, &Error{Code: "3D000", Message: `database "nodb" does not exist`}
	}
	e.mu.Lock()
	e.live++
	e.mu.Unlock()
	return &toySession{e: e, tx: TxIdle}, nil
}

func (e *toyExec) snapshot() []toyRow {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]toyRow(nil), e.rows...)
}

func (e *toyExec) liveSessions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.live
}

type toySession struct {
	e      *toyExec
	tx     TxStatus
	closed bool
}

func (s *toySession) TxStatus() TxStatus { return s.tx }

func (s *toySession) Close() error {
	if s.closed {
		return errors.New("toy: session closed twice")
	}
	s.closed = true
	s.e.mu.Lock()
	s.e.live--
	s.e.mu.Unlock()
	return nil
}

// splitToy splits on ';' (the toy has no quoted semicolons) and drops
// blank pieces.
func splitToy(sql string) []string {
	var out []string
	for _, p := range strings.Split(sql, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (s *toySession) Query(ctx context.Context, sql string, w *ResultWriter) error {
	for _, st := range splitToy(sql) {
		if err := s.run(ctx, st, w, nil, 0); err != nil {
			if s.tx == TxActive {
				s.tx = TxFailed
			}
			return err
		}
	}
	return nil
}

var (
	int4Col = func(name string) Column { return Column{Name: name, TypeOID: datum.OIDInt4, TypeModifier: -1} }
	tCols   = []Column{
		{Name: "id", TypeOID: datum.OIDInt8, TypeModifier: -1, TableAttr: 1},
		{Name: "name", TypeOID: datum.OIDText, TypeModifier: -1, TableAttr: 2},
	}
	reSleep      = regexp.MustCompile(`(?i)^select pg_sleep\(([0-9.]+)\)$`)
	reSeries     = regexp.MustCompile(`(?i)^select generate_series\(1, ?([0-9]+)\)$`)
	reInsert     = regexp.MustCompile(`(?i)^insert into t values \((-?[0-9]+), (null|'([^']*)')\)$`)
	reCopy       = regexp.MustCompile(`^copy t( \(\s*id,\s*name\s*\))? (from stdin|to stdout)(.*)$`)
	reCopySeries = regexp.MustCompile(`^copy series\(([0-9]+)\) to stdout(.*)$`)
	reCopyFast   = regexp.MustCompile(`^copy fast\(([0-9]+)\) to stdout`)
	reCopyFramed = regexp.MustCompile(`^copy framed\(([0-9]+),([0-9]+)\) to stdout`)
	reParam      = regexp.MustCompile(`\$([0-9]+)(::([a-z0-9_]+))?`)
)

// toyTypes is the "SELECT types" row: one value per supported type, from
// its PostgreSQL text form.
func toyTypes() ([]Column, []datum.Value) {
	cols := []Column{}
	vals := []datum.Value{}
	add := func(name string, oid uint32, text string) {
		cols = append(cols, Column{Name: name, TypeOID: oid, TypeModifier: -1})
		v, err := datum.ParseText(datum.Type{OID: oid, Mod: -1}, text)
		if err != nil {
			panic(err)
		}
		vals = append(vals, v)
	}
	add("i2", datum.OIDInt2, "-2")
	add("i4", datum.OIDInt4, "40000")
	add("i8", datum.OIDInt8, "1099511627776")
	add("f4", datum.OIDFloat4, "1.5")
	add("f8", datum.OIDFloat8, "2.25")
	add("num", datum.OIDNumeric, "12345.678")
	add("b", datum.OIDBool, "true")
	add("txt", datum.OIDText, "hello")
	add("vc", datum.OIDVarchar, "varchar")
	add("nm", datum.OIDName, "aname")
	add("ch", datum.OIDChar, "c")
	add("by", datum.OIDBytea, `\xdead`)
	add("u", datum.OIDUUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
	add("d", datum.OIDDate, "2026-01-02")
	add("tm", datum.OIDTime, "03:04:05.5")
	add("ts", datum.OIDTimestamp, "2026-01-02 03:04:05.678")
	add("tstz", datum.OIDTimestampTZ, "2026-01-02 03:04:05.678+00")
	add("iv", datum.OIDInterval, "01:30:00")
	add("o", datum.OIDOID, "2200")
	add("tid", datum.OIDTID, "(3,4)")
	add("ia", datum.OIDInt4Array, "{1,2,3}")
	add("ta", datum.OIDTextArray, `{a,"b c"}`)
	cols = append(cols, Column{Name: "nul", TypeOID: datum.OIDText, TypeModifier: -1})
	vals = append(vals, datum.Null)
	return cols, vals
}

// writeRow sends vals as one DataRow, each cell encoded by datum in the
// column's type and the format the client asked for, as the SQL layer does.
func writeRow(w *ResultWriter, vals []datum.Value) error {
	cols, formats := w.Columns(), w.Formats()
	cells := make([][]byte, len(vals))
	if len(cols) != len(vals) {
		return w.RawRow(cells) // the writer reports the misuse
	}
	for i, v := range vals {
		c, err := encodeCell(cols[i].TypeOID, formats[i], v)
		if err != nil {
			return err
		}
		cells[i] = c
	}
	return w.RawRow(cells)
}

// encodeCell is v's cell in format (nil for NULL).
func encodeCell(oid uint32, format int16, v datum.Value) ([]byte, error) {
	if v.IsNull() {
		return nil, nil
	}
	t := datum.Type{OID: oid, Mod: -1}
	if format == 1 {
		return datum.AppendBinary([]byte{}, t, v)
	}
	return datum.AppendText([]byte{}, t, v), nil
}

// decodeCell is the value a client sent in format.
func decodeCell(oid uint32, format int16, b []byte) (datum.Value, error) {
	if b == nil {
		return datum.Null, nil
	}
	t := datum.Type{OID: oid, Mod: -1}
	if format == 1 {
		return datum.DecodeBinary(t, b)
	}
	return datum.ParseText(t, string(b))
}

// nameValue is a toy row's name column.
func nameValue(name *string) datum.Value {
	if name == nil {
		return datum.Null
	}
	return datum.TextValue(*name)
}

// run executes one statement. params is non-nil for extended-protocol
// portals; maxRows limits rows (portal state kept by toyPortal).
func (s *toySession) run(ctx context.Context, st string, w *ResultWriter, params []datum.Value, skip int) error {
	st = strings.TrimSpace(strings.ReplaceAll(st, "\n", " "))
	for strings.Contains(st, "  ") {
		st = strings.ReplaceAll(st, "  ", " ")
	}
	lower := strings.ToLower(st)
	if s.tx == TxFailed && lower != "rollback" && lower != "commit" {
		return &Error{Code: pgcode.InFailedSQLTransaction, Message: "current transaction is aborted, commands ignored until end of transaction block"}
	}
	switch {
	case lower == "select 1":
		if err := w.Describe([]Column{int4Col("?column?")}); err != nil {
			return err
		}
		if err := writeRow(w, []datum.Value{datum.IntValue(1)}); err != nil {
			return err
		}
		return w.Complete("SELECT 1")
	case lower == "select fastrows":
		if err := w.Describe(tCols); err != nil {
			return err
		}
		for i := range 2 {
			if err := w.AppendRow(func(dst []byte) []byte {
				dst = pgcopy.AppendStringField(dst, strconv.Itoa(i)) // text format: "SELECT fastrows" is simple-protocol
				if i == 1 {
					return pgcopy.AppendNullField(dst)
				}
				return pgcopy.AppendStringField(dst, "x")
			}); err != nil {
				return err
			}
		}
		return w.Complete("SELECT 2")
	case lower == "misuse": // a buggy executor: a row before Describe
		return writeRow(w, []datum.Value{datum.IntValue(1)})
	case lower == "unfinished": // a buggy executor: no Complete
		return w.Describe([]Column{int4Col("x")})
	case lower == "select 1/0": // PostgreSQL folds it at plan time: no RowDescription
		return &Error{Code: "22012", Message: "division by zero"}
	case lower == "select version()":
		if err := w.Describe([]Column{{Name: "version", TypeOID: datum.OIDText, TypeModifier: -1}}); err != nil {
			return err
		}
		if err := writeRow(w, []datum.Value{datum.TextValue("PostgreSQL 16.4 (moraine toy)")}); err != nil {
			return err
		}
		return w.Complete("SELECT 1")
	case lower == "select types":
		cols, vals := toyTypes()
		if err := w.Describe(cols); err != nil {
			return err
		}
		if err := writeRow(w, vals); err != nil {
			return err
		}
		return w.Complete("SELECT 1")
	case lower == "begin":
		s.tx = TxActive
		return w.Complete("BEGIN")
	case lower == "commit":
		tag := "COMMIT"
		if s.tx == TxFailed {
			tag = "ROLLBACK"
		}
		s.tx = TxIdle
		return w.Complete(tag)
	case lower == "rollback":
		s.tx = TxIdle
		return w.Complete("ROLLBACK")
	case strings.HasPrefix(lower, "set application_name = "):
		if err := w.ParameterStatus("application_name", strings.Trim(st[len("set application_name = "):], "'")); err != nil {
			return err
		}
		return w.Complete("SET")
	case lower == "panic":
		panic("toy panic")
	case strings.HasPrefix(lower, "notice "):
		if err := w.Notice(&Error{Message: st[len("notice "):]}); err != nil {
			return err
		}
		return w.Complete("NOTICE")
	case reSleep.MatchString(st):
		secs, _ := strconv.ParseFloat(reSleep.FindStringSubmatch(st)[1], 64)
		select {
		case <-time.After(time.Duration(secs * float64(time.Second))):
		case <-ctx.Done():
			if s.e.slept != nil {
				s.e.slept <- context.Cause(ctx)
			}
			return ctx.Err()
		}
		if err := w.Describe([]Column{{Name: "pg_sleep", TypeOID: datum.OIDText, TypeModifier: -1}}); err != nil {
			return err
		}
		if err := writeRow(w, []datum.Value{datum.TextValue("")}); err != nil {
			return err
		}
		return w.Complete("SELECT 1")
	case reSeries.MatchString(st):
		n, _ := strconv.Atoi(reSeries.FindStringSubmatch(st)[1])
		return s.rowsResult(w, []Column{int4Col("generate_series")}, n, skip, func(i int) []datum.Value { return []datum.Value{datum.IntValue(int64(i + 1))} })
	case lower == "select * from t" || lower == "select * from t where false":
		s.e.mu.Lock()
		rows := append([]toyRow(nil), s.e.rows...)
		s.e.mu.Unlock()
		if strings.HasSuffix(lower, "false") {
			rows = nil
		}
		return s.rowsResult(w, tCols, len(rows), skip, func(i int) []datum.Value {
			return []datum.Value{datum.IntValue(rows[i].id), nameValue(rows[i].name)}
		})
	case reInsert.MatchString(st):
		m := reInsert.FindStringSubmatch(st)
		id, _ := strconv.ParseInt(m[1], 10, 64)
		r := toyRow{id: id}
		if strings.ToLower(m[2]) != "null" {
			name := m[3]
			r.name = &name
		}
		s.e.mu.Lock()
		s.e.rows = append(s.e.rows, r)
		s.e.mu.Unlock()
		return w.Complete("INSERT 0 1")
	case reCopyFast.MatchString(lower):
		n, _ := strconv.Atoi(reCopyFast.FindStringSubmatch(lower)[1])
		co, err := w.CopyOut(1, tCols)
		if err != nil {
			return err
		}
		// The executor's fast path: one bound method value, no allocation
		// per row or cell.
		f := &fastRows{name: "duckdb-lake-row"}
		appendRow := f.append
		for f.i = 0; f.i < int64(n); f.i++ {
			if err := co.AppendRow(appendRow); err != nil {
				return err
			}
		}
		return co.Close()
	case reCopyFramed.MatchString(lower):
		m := reCopyFramed.FindStringSubmatch(lower)
		n, _ := strconv.Atoi(m[1])
		k, _ := strconv.Atoi(m[2])
		co, err := w.CopyOut(1, tCols)
		if err != nil {
			return err
		}
		f := &fastRows{name: "duckdb-lake-row"}
		for f.i = 0; f.i < int64(n); {
			var msgs []byte
			rows := 0
			for ; rows < k && f.i < int64(n); rows, f.i = rows+1, f.i+1 {
				msgs = AppendCopyData(msgs, f.append)
			}
			if err := co.AppendMessages(msgs, rows); err != nil {
				return err
			}
		}
		return co.Close()
	case reCopySeries.MatchString(lower):
		m := reCopySeries.FindStringSubmatch(lower)
		n, _ := strconv.Atoi(m[1])
		rows := make([]toyRow, n)
		name := "x"
		for i := range rows {
			rows[i] = toyRow{id: int64(i), name: &name}
		}
		return s.copyOutRows(w, rows, strings.Contains(m[2], "binary"))
	case reCopy.MatchString(strings.ReplaceAll(lower, `"`, "")):
		m := reCopy.FindStringSubmatch(strings.ReplaceAll(lower, `"`, ""))
		if m[2] == "to stdout" {
			return s.copyOut(w, strings.Contains(m[3], "binary"))
		}
		return s.copyIn(w, strings.Contains(m[3], "binary"))
	case params != nil && strings.HasPrefix(lower, "select $"):
		cols := w.portalColumns()
		if err := w.Describe(cols); err != nil {
			return err
		}
		if err := writeRow(w, params); err != nil {
			return err
		}
		return w.Complete("SELECT 1")
	}
	return &Error{Code: "42601", Message: fmt.Sprintf("syntax error at or near %q", strings.Fields(st + " x")[0]), Position: 1}
}

// portalColumns is a test-only hook: the echo statement's columns are the
// ones its portal described.
func (w *ResultWriter) portalColumns() []Column {
	if w.portal == nil {
		return nil
	}
	return w.portal.cols
}

func (s *toySession) rowsResult(w *ResultWriter, cols []Column, n, skip int, row func(i int) []datum.Value) error {
	if err := w.Describe(cols); err != nil {
		return err
	}
	limit := w.maxRows
	for i := skip; i < n; i++ {
		if limit > 0 && i-skip == limit {
			return w.Suspend()
		}
		if err := writeRow(w, row(i)); err != nil {
			return err
		}
	}
	return w.Complete("SELECT " + strconv.Itoa(n-skip))
}

func (s *toySession) copyOut(w *ResultWriter, binary bool) error {
	s.e.mu.Lock()
	rows := append([]toyRow(nil), s.e.rows...)
	s.e.mu.Unlock()
	return s.copyOutRows(w, rows, binary)
}

func (s *toySession) copyOutRows(w *ResultWriter, rows []toyRow, binary bool) error {
	format := int16(0)
	if binary {
		format = 1
	}
	co, err := w.CopyOut(format, tCols)
	if err != nil {
		return err
	}
	for i, r := range rows {
		if binary && i%2 == 0 {
			// The fast path, as the catalog executor would use it.
			r := r
			id, _ := encodeCell(datum.OIDInt8, 1, datum.IntValue(r.id))
			err = co.AppendRow(func(dst []byte) []byte {
				dst = pgcopy.AppendTupleStart(dst, 2)
				dst = pgcopy.AppendBytesField(dst, id)
				if r.name == nil {
					return pgcopy.AppendNullField(dst)
				}
				return pgcopy.AppendStringField(dst, *r.name)
			})
		} else {
			// Cells encoded by datum, framed as a COPY row.
			var cells [2][]byte
			for i, v := range []datum.Value{datum.IntValue(r.id), nameValue(r.name)} {
				if cells[i], err = encodeCell(tCols[i].TypeOID, format, v); err != nil {
					return err
				}
			}
			err = co.AppendRow(func(dst []byte) []byte { return appendCopyRow(dst, binary, cells[:]) })
		}
		if err != nil {
			return err
		}
	}
	return co.Close()
}

// appendCopyRow frames encoded cells (nil is NULL) as one COPY row.
func appendCopyRow(dst []byte, binary bool, cells [][]byte) []byte {
	if binary {
		dst = pgcopy.AppendTupleStart(dst, len(cells))
		for _, c := range cells {
			if c == nil {
				dst = pgcopy.AppendNullField(dst)
			} else {
				dst = pgcopy.AppendBytesField(dst, c)
			}
		}
		return dst
	}
	for i, c := range cells {
		if i > 0 {
			dst = append(dst, '\t')
		}
		if c == nil {
			dst = append(dst, `\N`...)
		} else {
			dst = pgcopy.AppendCopyTextValue(dst, c)
		}
	}
	return append(dst, '\n')
}

func (s *toySession) copyIn(w *ResultWriter, binary bool) error {
	format := int16(0)
	if binary {
		format = 1
	}
	ci, err := w.CopyIn(format, 2)
	if err != nil {
		return err
	}
	var next func() ([][]byte, error)
	if binary {
		next = pgcopy.NewBinaryCopyReader(ci).Next
	} else {
		next = pgcopy.NewTextCopyReader(ci).Next
	}
	var got []toyRow
	for {
		cells, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *Error
			if errors.As(err, &pe) {
				return pe // CopyFail or a protocol error from the client
			}
			return &Error{Code: "22P04", Message: err.Error(), Cause: err}
		}
		if len(cells) != 2 || cells[0] == nil {
			return &Error{Code: "22P04", Message: "bad row"}
		}
		v, err := decodeCell(datum.OIDInt8, format, cells[0])
		if err != nil {
			return &Error{Code: pgcode.InvalidTextRepresentation, Message: err.Error()}
		}
		r := toyRow{id: v.I}
		if cells[1] != nil {
			name := string(cells[1])
			r.name = &name
		}
		got = append(got, r)
	}
	// Drain to CopyDone if the reader stopped at the trailer or `\.`.
	if _, err := io.Copy(io.Discard, ci); err != nil {
		return err
	}
	s.e.mu.Lock()
	s.e.rows = append(s.e.rows, got...)
	s.e.mu.Unlock()
	return w.Complete("COPY " + strconv.Itoa(len(got)))
}

// Extended protocol.

type toyStmt struct {
	s    *toySession
	sql  string
	oids []uint32
	cols []Column
}

var toyTypeNames = map[string]uint32{
	"int2": datum.OIDInt2, "int4": datum.OIDInt4, "int8": datum.OIDInt8, "text": datum.OIDText,
	"float8": datum.OIDFloat8, "float4": datum.OIDFloat4, "bool": datum.OIDBool, "bytea": datum.OIDBytea,
	"uuid": datum.OIDUUID, "date": datum.OIDDate, "timestamptz": datum.OIDTimestampTZ,
	"timestamp": datum.OIDTimestamp, "numeric": datum.OIDNumeric, "interval": datum.OIDInterval,
	"time": datum.OIDTime, "_int4": datum.OIDInt4Array, "_text": datum.OIDTextArray, "tid": datum.OIDTID,
	"oid": datum.OIDOID, "varchar": datum.OIDVarchar, "name": datum.OIDName,
}

func (s *toySession) Prepare(ctx context.Context, sql string, paramOIDs []uint32) (Statement, error) {
	st := &toyStmt{s: s, sql: strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(sql), ";"))}
	stmts := splitToy(sql)
	if len(stmts) > 1 {
		return st, nil // NoData; Execute runs them all
	}
	lower := strings.ToLower(st.sql)
	for _, m := range reParam.FindAllStringSubmatch(st.sql, -1) {
		n, _ := strconv.Atoi(m[1])
		for len(st.oids) < n {
			st.oids = append(st.oids, 0)
		}
		if oid, ok := toyTypeNames[m[3]]; ok {
			st.oids[n-1] = oid
		}
	}
	for i := range st.oids {
		if i < len(paramOIDs) && paramOIDs[i] != 0 {
			st.oids[i] = paramOIDs[i]
		}
		if st.oids[i] == 0 {
			st.oids[i] = datum.OIDText
		}
	}
	switch {
	case strings.HasPrefix(lower, "select $"):
		for i, oid := range st.oids {
			st.cols = append(st.cols, Column{Name: "p" + strconv.Itoa(i+1), TypeOID: oid, TypeModifier: -1})
		}
	case lower == "select 1":
		st.cols = []Column{int4Col("?column?")}
	case lower == "select types":
		st.cols, _ = toyTypes()
	case lower == "select version()":
		st.cols = []Column{{Name: "version", TypeOID: datum.OIDText, TypeModifier: -1}}
	case reSeries.MatchString(st.sql):
		st.cols = []Column{int4Col("generate_series")}
	case reSleep.MatchString(st.sql):
		st.cols = []Column{{Name: "pg_sleep", TypeOID: datum.OIDText, TypeModifier: -1}}
	case strings.HasPrefix(lower, "select * from t"), strings.HasPrefix(lower, `select "id", "name" from "t"`):
		st.cols = tCols
	case strings.HasPrefix(lower, "select"):
		return nil, &Error{Code: "42601", Message: "toy cannot prepare " + st.sql}
	}
	return st, nil
}

func (st *toyStmt) ParamOIDs() []uint32 { return st.oids }
func (st *toyStmt) Columns() []Column   { return st.cols }
func (st *toyStmt) Close()              {}

func (st *toyStmt) Bind(ctx context.Context, params []Param) (Portal, error) {
	vals := make([]datum.Value, len(params))
	for i, p := range params {
		v, err := decodeCell(p.OID, p.Format, p.Value)
		if err != nil {
			return nil, &Error{Code: pgcode.InvalidBinaryRepresentation, Message: err.Error()}
		}
		vals[i] = v
	}
	return &toyPortal{st: st, params: vals}, nil
}

type toyPortal struct {
	st     *toyStmt
	params []datum.Value
	sent   int
	done   bool
}

func (p *toyPortal) Close() {}

func (p *toyPortal) Execute(ctx context.Context, w *ResultWriter, maxRows int) error {
	s := p.st.s
	stmts := splitToy(p.st.sql)
	if len(stmts) > 1 {
		return s.Query(ctx, p.st.sql, w)
	}
	if len(stmts) == 0 {
		return nil
	}
	params := p.params
	if params == nil {
		params = []datum.Value{}
	}
	before := w.rows
	err := s.run(ctx, stmts[0], w, params, p.sent)
	if err != nil && s.tx == TxActive {
		s.tx = TxFailed
	}
	p.sent += int(w.rows - before)
	return err
}

// fastRows appends binary tuples (int8 id, text name) for COPY fast(n).
type fastRows struct {
	i    int64
	name string
}

func (f *fastRows) append(dst []byte) []byte {
	dst = pgcopy.AppendTupleStart(dst, 2)
	dst = pgcopy.AppendBytesField(dst, binary.BigEndian.AppendUint64(nil, uint64(f.i)))
	return pgcopy.AppendStringField(dst, f.name)
}
