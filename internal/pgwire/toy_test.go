package pgwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/moraine-db/moraine/internal/pgwire/pgvalue"
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
	codec  *pgvalue.Codec
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
	int4Col = func(name string) Column { return Column{Name: name, TypeOID: pgvalue.Int4OID, TypeModifier: -1} }
	tCols   = []Column{
		{Name: "id", TypeOID: pgvalue.Int8OID, TypeModifier: -1, TableAttr: 1},
		{Name: "name", TypeOID: pgvalue.TextOID, TypeModifier: -1, TableAttr: 2},
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

// toyTypes is the "SELECT types" row: one value per supported type.
func toyTypes() ([]Column, []any) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 678000000, time.UTC)
	cols := []Column{}
	vals := []any{}
	add := func(name string, oid uint32, v any) {
		cols = append(cols, Column{Name: name, TypeOID: oid, TypeModifier: -1})
		vals = append(vals, v)
	}
	add("i2", pgvalue.Int2OID, int16(-2))
	add("i4", pgvalue.Int4OID, int32(40000))
	add("i8", pgvalue.Int8OID, int64(1)<<40)
	add("f4", pgvalue.Float4OID, float32(1.5))
	add("f8", pgvalue.Float8OID, 2.25)
	add("num", pgvalue.NumericOID, "12345.678")
	add("b", pgvalue.BoolOID, true)
	add("txt", pgvalue.TextOID, "hello")
	add("vc", pgvalue.VarcharOID, "varchar")
	add("nm", pgvalue.NameOID, "aname")
	add("ch", pgvalue.CharOID, "c")
	add("by", pgvalue.ByteaOID, []byte{0xde, 0xad})
	add("u", pgvalue.UUIDOID, [16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11})
	add("d", pgvalue.DateOID, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	add("tm", pgvalue.TimeOID, "03:04:05.5")
	add("ts", pgvalue.TimestampOID, ts)
	add("tstz", pgvalue.TimestamptzOID, ts)
	add("iv", pgvalue.IntervalOID, time.Duration(90)*time.Minute)
	add("o", pgvalue.OIDOID, uint32(2200))
	add("tid", pgvalue.TIDOID, "(3,4)")
	add("ia", pgvalue.Int4ArrayOID, []int32{1, 2, 3})
	add("ta", pgvalue.TextArrayOID, []string{"a", "b c"})
	add("nul", pgvalue.TextOID, nil)
	return cols, vals
}

// run executes one statement. params is non-nil for extended-protocol
// portals; maxRows limits rows (portal state kept by toyPortal).
func (s *toySession) run(ctx context.Context, st string, w *ResultWriter, params []any, skip int) error {
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
		if err := w.Row([]any{int32(1)}); err != nil {
			return err
		}
		return w.Complete("SELECT 1")
	case lower == "select fastrows":
		if err := w.Describe(tCols); err != nil {
			return err
		}
		for i := range 2 {
			if err := w.AppendRow(func(dst []byte) []byte {
				dst = pgvalue.AppendStringField(dst, strconv.Itoa(i))
				if i == 1 {
					return pgvalue.AppendNullField(dst)
				}
				return pgvalue.AppendStringField(dst, "x")
			}); err != nil {
				return err
			}
		}
		return w.Complete("SELECT 2")
	case lower == "misuse": // a buggy executor: a row before Describe
		return w.Row([]any{int32(1)})
	case lower == "unfinished": // a buggy executor: no Complete
		return w.Describe([]Column{int4Col("x")})
	case lower == "select 1/0": // PostgreSQL folds it at plan time: no RowDescription
		return &Error{Code: "22012", Message: "division by zero"}
	case lower == "select version()":
		if err := w.Describe([]Column{{Name: "version", TypeOID: pgvalue.TextOID, TypeModifier: -1}}); err != nil {
			return err
		}
		if err := w.Row([]any{"PostgreSQL 16.4 (moraine toy)"}); err != nil {
			return err
		}
		return w.Complete("SELECT 1")
	case lower == "select types":
		cols, vals := toyTypes()
		if err := w.Describe(cols); err != nil {
			return err
		}
		if err := w.Row(vals); err != nil {
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
		if err := w.Describe([]Column{{Name: "pg_sleep", TypeOID: pgvalue.TextOID, TypeModifier: -1}}); err != nil {
			return err
		}
		if err := w.Row([]any{""}); err != nil {
			return err
		}
		return w.Complete("SELECT 1")
	case reSeries.MatchString(st):
		n, _ := strconv.Atoi(reSeries.FindStringSubmatch(st)[1])
		return s.rowsResult(w, []Column{int4Col("generate_series")}, n, skip, func(i int) []any { return []any{int32(i + 1)} })
	case lower == "select * from t" || lower == "select * from t where false":
		s.e.mu.Lock()
		rows := append([]toyRow(nil), s.e.rows...)
		s.e.mu.Unlock()
		if strings.HasSuffix(lower, "false") {
			rows = nil
		}
		return s.rowsResult(w, tCols, len(rows), skip, func(i int) []any {
			var name any
			if rows[i].name != nil {
				name = *rows[i].name
			}
			return []any{rows[i].id, name}
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
		if err := w.Row(params); err != nil {
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

func (s *toySession) rowsResult(w *ResultWriter, cols []Column, n, skip int, row func(i int) []any) error {
	if err := w.Describe(cols); err != nil {
		return err
	}
	limit := w.maxRows
	for i := skip; i < n; i++ {
		if limit > 0 && i-skip == limit {
			return w.Suspend()
		}
		if err := w.Row(row(i)); err != nil {
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
			err = co.AppendRow(func(dst []byte) []byte {
				dst = pgvalue.AppendTupleStart(dst, 2)
				dst = pgvalue.AppendInt8Field(dst, r.id)
				if r.name == nil {
					return pgvalue.AppendNullField(dst)
				}
				return pgvalue.AppendStringField(dst, *r.name)
			})
		} else {
			var name any
			if r.name != nil {
				name = *r.name
			}
			err = co.Row([]any{r.id, name})
		}
		if err != nil {
			return err
		}
	}
	return co.Close()
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
		next = pgvalue.NewBinaryCopyReader(ci).Next
	} else {
		next = pgvalue.NewTextCopyReader(ci).Next
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
		v, err := w.Codec().Decode(pgvalue.Int8OID, format, cells[0])
		if err != nil {
			return &Error{Code: pgcode.InvalidTextRepresentation, Message: err.Error()}
		}
		r := toyRow{id: v.(int64)}
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
	"int2": pgvalue.Int2OID, "int4": pgvalue.Int4OID, "int8": pgvalue.Int8OID, "text": pgvalue.TextOID,
	"float8": pgvalue.Float8OID, "float4": pgvalue.Float4OID, "bool": pgvalue.BoolOID, "bytea": pgvalue.ByteaOID,
	"uuid": pgvalue.UUIDOID, "date": pgvalue.DateOID, "timestamptz": pgvalue.TimestamptzOID,
	"timestamp": pgvalue.TimestampOID, "numeric": pgvalue.NumericOID, "interval": pgvalue.IntervalOID,
	"time": pgvalue.TimeOID, "_int4": pgvalue.Int4ArrayOID, "_text": pgvalue.TextArrayOID, "tid": pgvalue.TIDOID,
	"oid": pgvalue.OIDOID, "varchar": pgvalue.VarcharOID, "name": pgvalue.NameOID,
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
			st.oids[i] = pgvalue.TextOID
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
		st.cols = []Column{{Name: "version", TypeOID: pgvalue.TextOID, TypeModifier: -1}}
	case reSeries.MatchString(st.sql):
		st.cols = []Column{int4Col("generate_series")}
	case reSleep.MatchString(st.sql):
		st.cols = []Column{{Name: "pg_sleep", TypeOID: pgvalue.TextOID, TypeModifier: -1}}
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
	vals := make([]any, len(params))
	if st.s.codec == nil {
		st.s.codec = pgvalue.NewCodec() // one per session: NewCodec builds a type map
	}
	codec := st.s.codec
	for i, p := range params {
		v, err := codec.Decode(p.OID, p.Format, p.Value)
		if err != nil {
			return nil, &Error{Code: pgcode.InvalidBinaryRepresentation, Message: err.Error()}
		}
		vals[i] = v
	}
	return &toyPortal{st: st, params: vals}, nil
}

type toyPortal struct {
	st     *toyStmt
	params []any
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
		params = []any{}
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
	dst = pgvalue.AppendTupleStart(dst, 2)
	dst = pgvalue.AppendInt8Field(dst, f.i)
	return pgvalue.AppendStringField(dst, f.name)
}
