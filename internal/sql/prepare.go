package sql

import (
	"context"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire"
)

// Prepare implements pgwire.Session. A single SELECT is described by
// running it (reads have no side effects), so the RowDescription matches
// what Execute will send; other statements describe as NoData. Several
// statements in one Parse are accepted and run in order at Execute, as
// DuckDB's postgres extension expects.
func (s *Session) Prepare(ctx context.Context, sql string, paramOIDs []uint32) (pgwire.Statement, error) {
	stmts, err := s.ex.cache.parse(sql)
	if err != nil {
		s.fail()
		return nil, err
	}
	if s.tx.failed() {
		return nil, errf(pgcode.InFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")
	}
	ps := &prepared{s: s, sql: sql, stmts: stmts}
	n := maxParam(sql)
	ps.params = make([]uint32, n)
	for i := range ps.params {
		ps.params[i] = datum.OIDText
		if i < len(paramOIDs) && paramOIDs[i] != 0 {
			ps.params[i] = paramOIDs[i]
		}
	}
	if len(stmts) == 1 && stmts[0].node.GetSelectStmt() != nil {
		// Describe with NULL parameters, in the session's current view.
		params := make([]tv, n)
		for i := range params {
			params[i] = tv{datum.Null, datum.Type{OID: ps.params[i], Mod: -1}}
		}
		// Describing takes no snapshot: outside a transaction block, or
		// in one whose snapshot is still deferred, it reads the newest
		// durable version and waits for nobody (memcat.BeginDeferred).
		implicit := s.tx.phase == txNone
		if implicit {
			s.startTxn(s.db.BeginDeferred(s.role.writer()))
		}
		x := &exec{ctx: ctx, s: s, params: params, lits: stmts[0].lits}
		r, err := x.runSelect(stmts[0].node.GetSelectStmt(), nil)
		if implicit {
			s.endTxn()
		}
		if err != nil {
			s.fail()
			return nil, err
		}
		ps.cols = r.cols
		ps.pgcols = pgColumns(r.cols)
	}
	return ps, nil
}

// maxParam counts $n placeholders (a scan of the text; $ inside quoted
// strings is rare in this vocabulary and only over-counts).
func maxParam(sql string) int {
	n := 0
	for i := 0; i < len(sql); i++ {
		if sql[i] != '$' {
			continue
		}
		j, v := i+1, 0
		for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
			v = v*10 + int(sql[j]-'0')
			j++
		}
		if j > i+1 && v > n && v < 65536 {
			n = v
		}
	}
	return n
}

type prepared struct {
	s      *Session
	sql    string // the text, for pg_stat_activity
	stmts  []stmt
	params []uint32
	cols   []colInfo
	pgcols []pgwire.Column
}

func (p *prepared) ParamOIDs() []uint32      { return p.params }
func (p *prepared) Columns() []pgwire.Column { return p.pgcols }
func (p *prepared) Close()                   {}

func (p *prepared) Bind(_ context.Context, params []pgwire.Param) (pgwire.Portal, error) {
	vals := make([]tv, len(params))
	for i, pr := range params {
		t := datum.Type{OID: pr.OID, Mod: -1}
		if t.OID == 0 && i < len(p.params) {
			t.OID = p.params[i]
		}
		if !t.Known() {
			t = datum.Text
		}
		if pr.Value == nil {
			vals[i] = tv{datum.Null, t}
			continue
		}
		var v datum.Value
		var err error
		if pr.Format == 1 {
			v, err = datum.DecodeBinary(t, pr.Value)
		} else {
			v, err = datum.ParseText(t, string(pr.Value))
		}
		if err != nil {
			return nil, err
		}
		vals[i] = tv{v, t}
	}
	return &portal{p: p, params: vals}, nil
}

type portal struct {
	p      *prepared
	params []tv
	sink   *resultSink
}

func (po *portal) Close() {}

// Execute runs the statements; a row-returning result left over by a row
// limit continues at the next Execute.
func (po *portal) Execute(ctx context.Context, w *pgwire.ResultWriter, maxRows int) error {
	s := po.p.s
	s.beginActivity(po.p.sql)
	defer s.endActivity()
	if po.sink != nil {
		po.sink.w, po.sink.max = w, maxRows
		if po.sink.done {
			return w.Complete(po.sink.tag)
		}
		if err := w.Describe(pgColumns(po.sink.cols)); err != nil {
			return err
		}
		return po.sink.emit(po.sink.pending)
	}
	po.sink = &resultSink{w: w, max: maxRows}
	for _, st := range po.p.stmts {
		if err := s.run(ctx, st, po.sink, po.params); err != nil {
			s.fail()
			return err
		}
	}
	// Outside a block every Execute is its own transaction.
	if s.tx.phase == txImplicit {
		if err := s.commitTxn(ctx); err != nil {
			return err
		}
	}
	return nil
}
