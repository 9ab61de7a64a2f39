package sql

import (
	"strings"
	"sync"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// The catalog read cache. DuckDB's postgres extension reloads its view of
// the database with a batch of SELECTs over PostgreSQL's catalogs (every
// relation, column, constraint, type and index) whenever it starts a
// transaction on a connection whose cache it dropped: in a busy lake's
// commit mix, once per commit or two. Their answers depend only on the
// database's DDL, so a SELECT that reads nothing but the DDL-derived
// catalogs is answered from the previous answer while no DDL landed. The
// general interpreter stays the reference: a miss runs it, and a test
// compares every cached answer with a fresh evaluation.

// ddlCatalogs are the relations whose rows follow from the DDL alone (and
// from PostgreSQL's own fixed catalogs).
var ddlCatalogs = map[string]bool{
	"pg_namespace": true, "pg_class": true, "pg_attribute": true, "pg_type": true,
	"pg_constraint": true, "pg_description": true, "pg_enum": true, "pg_indexes": true,
	"pg_index": true, "pg_attrdef": true,
}

const catalogCacheEntries = 64

// catalogRelationEntries bounds the built DDL-derived relations kept: a
// database's ten at a few DDL versions each, for a few dozen databases.
const catalogRelationEntries = 512

// relationKey names a DDL-derived relation of a database at a DDL version.
type relationKey struct {
	db   *memcat.DB
	ddl  uint64
	name string
}

type catalogKey struct {
	db   *memcat.DB
	ddl  uint64
	text string // the statement's text and the literals bound into it
}

// catalogCache holds the answers, at most catalogCacheEntries, and the
// relations, at most catalogRelationEntries, each dropping its oldest
// first.
type catalogCache struct {
	mu        sync.Mutex
	answers   fifo[catalogKey]
	cacheable treeMemo[bool]
	disabled  bool // tests: always evaluate, and without relation indexes
	// relations holds the DDL-derived relations as built (pgcatalog), for
	// statements the answer cache does not cover: the postgres extension's
	// per-table loads name each table in a literal.
	relations fifo[relationKey]
}

func newCatalogCache() *catalogCache {
	return &catalogCache{answers: newFIFO[catalogKey](catalogCacheEntries), relations: newFIFO[relationKey](catalogRelationEntries)}
}

// fifo is a map of at most limit relations that drops its oldest entry to
// make room. Its user locks it.
type fifo[K comparable] struct {
	limit int
	m     map[K]*rel
	order []K
}

func newFIFO[K comparable](limit int) fifo[K] { return fifo[K]{limit: limit, m: map[K]*rel{}} }

func (f *fifo[K]) get(k K) (*rel, bool) {
	r, ok := f.m[k]
	return r, ok
}

func (f *fifo[K]) put(k K, r *rel) {
	if _, ok := f.m[k]; ok {
		return
	}
	if len(f.order) >= f.limit {
		delete(f.m, f.order[0])
		f.order = f.order[1:]
	}
	f.m[k] = r
	f.order = append(f.order, k)
}

func (c *catalogCache) get(k catalogKey) (*rel, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answers.get(k)
}

func (c *catalogCache) put(k catalogKey, r *rel) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers.put(k, r)
}

func (c *catalogCache) relation(k relationKey) (*rel, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.relations.get(k)
}

func (c *catalogCache) putRelation(k relationKey, r *rel) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.relations.put(k, r)
}

// relationKey returns the key of the DDL-derived catalog name as the
// session sees it, ok false when the session's view is not a published
// version's (its own temp tables or staged DDL show in the catalogs).
func (x *exec) relationKey(schema, name string) (relationKey, bool) {
	if x.s.ex.catalogReads.disabled || schema != "pg_catalog" || !ddlCatalogs[name] ||
		len(x.s.temps) > 0 || (x.s.tx.txn != nil && x.s.tx.txn.HasDDL()) {
		return relationKey{}, false
	}
	return relationKey{db: x.s.db, ddl: x.s.view().DDLSeq(), name: name}, true
}

// catalogReadKey returns the cache key of sel when its answer may come from
// the cache: it reads only DDL-derived catalogs, calls no function and
// takes no parameter, and the session's catalogs are those of a published
// version (no temp table of its own, no staged DDL; staged rows do not
// show in the catalogs).
func (x *exec) catalogReadKey(sel *pg.SelectStmt) (catalogKey, bool) {
	c := x.s.ex.catalogReads
	if c.disabled || len(x.params) > 0 || len(x.s.temps) > 0 || (x.s.tx.txn != nil && x.s.tx.txn.HasDDL()) || x.text == "" {
		return catalogKey{}, false
	}
	if !c.cacheable.get(sel, readsOnlyDDLCatalogs) {
		return catalogKey{}, false
	}
	text := x.text
	if x.lits != nil && len(x.lits.vals) > 0 {
		var b strings.Builder
		b.WriteString(text)
		for _, v := range x.lits.vals {
			b.WriteByte(0)
			if v.v.IsNull() {
				b.WriteString("\x01NULL")
				continue
			}
			b.WriteString(datum.FormatText(outType(v.t), v.v))
		}
		text = b.String()
	}
	return catalogKey{db: x.s.db, ddl: x.s.view().DDLSeq(), text: text}, true
}

// readsOnlyDDLCatalogs reports whether every relation sel names is a
// DDL-derived catalog (unqualified or in pg_catalog) and it holds no
// function call, parameter or SQL value function (current_user and the
// like) anywhere.
func readsOnlyDDLCatalogs(sel *pg.SelectStmt) bool {
	ok, names := true, 0
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if !ok {
			return
		}
		switch v := m.Interface().(type) {
		case *pg.RangeVar:
			names++
			if (v.Schemaname != "" && v.Schemaname != "pg_catalog") || !ddlCatalogs[v.Relname] {
				ok = false
			}
			return
		case *pg.FuncCall, *pg.ParamRef, *pg.SQLValueFunction, *pg.RangeFunction, *pg.CommonTableExpr:
			ok = false
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				l := val.List()
				for i := 0; i < l.Len() && ok; i++ {
					walk(l.Get(i).Message())
				}
			case fd.Message() != nil && !fd.IsMap():
				walk(val.Message())
			}
			return ok
		})
	}
	walk(sel.ProtoReflect())
	return ok && names > 0
}
