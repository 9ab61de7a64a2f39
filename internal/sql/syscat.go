package sql

import (
	"sort"

	"github.com/moraine-db/moraine/internal/sql/pgcatalog"
)

// virtual returns the system relation schema.name as the session sees it
// (pgcatalog), or ok=false if it is not one.
// The relations built from the DDL alone come from the catalog cache while
// the DDL stays, shared by every statement that reads them.
//
// INVARIANT: the executor never writes into a relation's rows or its row
// slice: filters, joins, ORDER BY and LIMIT make new slices.
func (x *exec) virtual(schema, name string) (*rel, bool) {
	key, shared := x.relationKey(schema, name)
	if shared {
		if r, ok := x.s.ex.catalogReads.relation(key); ok {
			return r, true
		}
	}
	r, ok := pgcatalog.Lookup(x.catalogContext(), schema, name)
	if !ok {
		return nil, false
	}
	if shared {
		return x.s.ex.catalogReads.keepRelation(key, relOf(schema, name, r, true)), true
	}
	return relOf(schema, name, r, r.Sys > 0 && !x.s.ex.catalogReads.disabled), true
}

// relOf is the executor's relation over pgcatalog's r, the system relation
// schema.name; indexed gives it indexes of its columns, which joins and
// equality filters build as they need them (the catalog cache's relations,
// and those whose PostgreSQL rows share an index across builds).
func relOf(schema, name string, r *pgcatalog.Relation, indexed bool) *rel {
	out := &rel{cols: make([]colInfo, len(r.Cols)), rows: r.Rows}
	for i, c := range r.Cols {
		out.cols[i] = colInfo{name: c.Name, typ: c.Type, tableOID: c.TableOID, attnum: c.Attnum}
	}
	if indexed {
		out.ix = &relIndexes{name: schema + "." + name, sys: r.Sys}
	}
	return out
}

// catalogContext is what the system relations are generated from.
func (x *exec) catalogContext() *pgcatalog.Context {
	s := x.s
	names := map[string]bool{s.user: true}
	for _, n := range s.ex.Roles {
		names[n] = true
	}
	roles := make([]string, 0, len(names))
	for n := range names {
		roles = append(roles, n)
	}
	sort.Strings(roles)
	return &pgcatalog.Context{
		Version:   s.view(),
		Database:  s.dbName,
		User:      s.user,
		Databases: s.ex.cat.Catalog().Databases(),
		Roles:     roles,
		Settings:  s.settings,
		Backends:  x.backends,
	}
}

// backends is what pg_stat_activity shows of every session of the server,
// in backend pid order.
func (x *exec) backends() []pgcatalog.Backend {
	var sessions []*Session
	x.s.ex.sessions.Range(func(k, _ any) bool { sessions = append(sessions, k.(*Session)); return true })
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].pid < sessions[j].pid })
	out := make([]pgcatalog.Backend, 0, len(sessions))
	for _, s := range sessions {
		a := &s.act
		a.mu.Lock()
		b := pgcatalog.Backend{Database: s.dbName, User: s.user, App: a.app, PID: s.pid, Client: a.clientAddr,
			Started: a.started, QueryStart: a.queryStart, StateChange: a.stateChange, State: a.state, Query: a.query}
		a.mu.Unlock()
		if s == x.s {
			// Only the session's own transaction start is its to read.
			b.XactStart = x.s.tx.start
		}
		out = append(out, b)
	}
	return out
}
