package sql

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"maps"
	"slices"
	"strings"
	"sync"
	"weak"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/sql/pgcatalog"
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
//
// Entries are keyed by what the catalogs hold, not by database: every
// DuckLake database of one catalog version has the same PostgreSQL tables
// (DuckLake's own; a lake's user tables are rows), so a server of many
// lakes keeps one copy of their catalogs and answers, a lake's first attach
// after it is created or the server restarts finds them, and a dropped
// database leaves nothing behind that names it. The catalogs a session
// sees are identified by a catalogID (ddlID): a hash of what pgcatalog
// builds them from, computed once per database and published DDL version,
// and at each read of a view with staged DDL. Two databases with equal
// catalogs share relations and answers; any difference in a row gives
// another ID.

// ddlCatalogs are the relations whose rows follow from the DDL alone (and
// from PostgreSQL's own fixed catalogs).
var ddlCatalogs = map[string]bool{
	"pg_namespace": true, "pg_class": true, "pg_attribute": true, "pg_type": true,
	"pg_constraint": true, "pg_description": true, "pg_enum": true, "pg_indexes": true,
	"pg_index": true, "pg_attrdef": true,
}

// ddlCatalogNames is ddlCatalogs in the order their rows are hashed.
var ddlCatalogNames = slices.Sorted(maps.Keys(ddlCatalogs))

// catalogCacheEntries bounds the answers kept: the five statements of the
// postgres extension's whole-database load and its per-table loads (one
// text per table, ~25 for a DuckLake catalog) for each catalog in use.
const catalogCacheEntries = 256

// catalogRelationEntries bounds the built DDL-derived relations kept: ten
// for each distinct catalog (DuckLake version, DDL state) in use.
const catalogRelationEntries = 512

// catalogIDEntries bounds the (database, DDL version) → catalogID map.
const catalogIDEntries = 4096

// catalogID identifies the contents of a database's DDL-derived catalogs.
type catalogID [sha256.Size]byte

// ddlKey names a published DDL state of one database. The database is held
// weakly: a dropped database's entries name nothing and age out.
type ddlKey struct {
	db  weak.Pointer[memcat.DB]
	ddl uint64
}

// relationKey names a DDL-derived relation of the catalogs id.
type relationKey struct {
	id   catalogID
	name string
}

type catalogKey struct {
	id   catalogID
	text string // the statement's text and the literals bound into it
}

// catalogCache holds the answers, at most catalogCacheEntries, the
// relations, at most catalogRelationEntries, and the catalog IDs of
// database DDL versions, each dropping its oldest first.
type catalogCache struct {
	mu        sync.Mutex
	answers   fifo[catalogKey, *catalogAnswer]
	cacheable treeMemo[bool]
	disabled  bool // tests: always evaluate, and without relation indexes
	// relations holds the DDL-derived relations as built (pgcatalog), for
	// statements the answer cache does not cover: the postgres extension's
	// per-table loads name each table in a literal.
	relations fifo[relationKey, *rel]
	ids       fifo[ddlKey, catalogID]
}

func newCatalogCache() *catalogCache {
	return &catalogCache{
		answers:   newFIFO[catalogKey, *catalogAnswer](catalogCacheEntries),
		relations: newFIFO[relationKey, *rel](catalogRelationEntries),
		ids:       newFIFO[ddlKey, catalogID](catalogIDEntries),
	}
}

// fifo is a map of at most limit entries that drops its oldest entry to
// make room. Its user locks it.
type fifo[K comparable, V any] struct {
	limit int
	m     map[K]V
	order []K
}

func newFIFO[K comparable, V any](limit int) fifo[K, V] {
	return fifo[K, V]{limit: limit, m: map[K]V{}}
}

func (f *fifo[K, V]) get(k K) (V, bool) {
	v, ok := f.m[k]
	return v, ok
}

// put adds k unless it is there already.
func (f *fifo[K, V]) put(k K, v V) {
	if _, ok := f.m[k]; ok {
		return
	}
	if len(f.order) >= f.limit {
		delete(f.m, f.order[0])
		f.order = f.order[1:]
	}
	f.m[k] = v
	f.order = append(f.order, k)
}

// catalogAnswer is a cached answer: its result, and the result's rows as
// text-format DataRow messages — what every simple query that reads it
// sends — encoded once, when the answer is first reused.
type catalogAnswer struct {
	r    *rel
	once sync.Once
	text []byte
	err  error
}

// textRows returns the answer's rows as text-format DataRow messages.
func (a *catalogAnswer) textRows() ([]byte, error) {
	a.once.Do(func() {
		formats := make([]int16, len(a.r.cols))
		cells := make([][]byte, len(a.r.cols))
		var buf []byte
		for _, row := range a.r.rows {
			if buf, a.err = encodeRow(buf[:0], a.r.cols, row, formats, cells); a.err != nil {
				return
			}
			a.text = pgwire.AppendDataRow(a.text, cells)
		}
	})
	return a.text, a.err
}

func (c *catalogCache) get(k catalogKey) (*catalogAnswer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answers.get(k)
}

func (c *catalogCache) put(k catalogKey, r *rel) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers.put(k, &catalogAnswer{r: r})
}

func (c *catalogCache) relation(k relationKey) (*rel, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.relations.get(k)
}

// keepRelation keeps r under k unless a relation is kept there already, and
// returns the one kept.
func (c *catalogCache) keepRelation(k relationKey, r *rel) *rel {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kept, ok := c.relations.get(k); ok {
		return kept
	}
	c.relations.put(k, r)
	return r
}

// catalogID returns the ID of the catalogs the session sees, ok false when
// its own temp tables show in them. A published DDL version's ID is kept
// per database; a view with staged DDL (a transaction's own CREATE TABLE,
// not yet committed) is hashed at each read, which costs microseconds.
func (x *exec) catalogID() (catalogID, bool) {
	c := x.s.ex.catalogReads
	if c.disabled || len(x.s.temps) > 0 {
		return catalogID{}, false
	}
	v := x.s.view()
	if x.catalog.ok && x.catalog.v == v {
		return x.catalog.id, true
	}
	id := x.viewID(c, v)
	x.catalog.v, x.catalog.id, x.catalog.ok = v, id, true
	return id, true
}

// viewID is the ID of v, the session's view: kept per database and
// published DDL version, hashed afresh where the view holds staged DDL.
func (x *exec) viewID(c *catalogCache, v *memcat.Version) catalogID {
	if x.s.tx.txn != nil && x.s.tx.txn.HasDDL() {
		return ddlID(v)
	}
	k := ddlKey{db: weak.Make(x.s.db), ddl: v.DDLSeq()}
	c.mu.Lock()
	id, ok := c.ids.get(k)
	c.mu.Unlock()
	if ok {
		return id
	}
	id = ddlID(v)
	c.mu.Lock()
	c.ids.put(k, id)
	c.mu.Unlock()
	return id
}

// ddlID identifies the DDL-derived catalogs of a view by what pgcatalog
// builds them from: each schema's OID and name, and each table's OID, row
// type OID, primary key OID, name, columns (name, type, typmod, NOT NULL)
// and primary key columns. Hashing these costs microseconds where building
// the relations costs as much as answering a read; that matters where DDL
// is staged, since a transaction's DDL makes a new view at every statement
// and DuckLake creates its tables in one transaction, reading each table's
// catalog rows after each CREATE TABLE — every new lake of one DuckLake
// version passes through the same views and reads the first lake's answers.
// TestDDLIDSeesEveryCatalogChange checks that two views have equal IDs
// exactly when their catalogs hold the same rows.
func ddlID(v *memcat.Version) catalogID {
	h := sha256.New()
	var b []byte
	schemas := slices.Clone(v.SchemaList())
	slices.SortFunc(schemas, func(a, b *memcat.Schema) int { return cmp.Compare(a.OID, b.OID) })
	for _, sc := range schemas {
		b = binary.AppendUvarint(b, uint64(sc.OID))
		b = appendString(b, sc.Name)
	}
	h.Write(b)
	for _, ti := range pgcatalog.Tables(v) {
		t := ti.Table
		b = binary.AppendUvarint(b[:0], uint64(ti.Schema.OID))
		b = binary.AppendUvarint(b, uint64(t.OID))
		b = binary.AppendUvarint(b, uint64(t.TypOID))
		b = binary.AppendUvarint(b, uint64(t.PKOID))
		b = appendString(b, t.Name)
		b = binary.AppendUvarint(b, uint64(len(t.Def.Columns)))
		for _, c := range t.Def.Columns {
			b = appendString(b, c.Name)
			b = binary.AppendUvarint(b, uint64(c.Type.OID))
			b = binary.AppendVarint(b, int64(c.Type.Mod))
			if c.NotNull {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
		b = binary.AppendUvarint(b, uint64(len(t.Def.PK)))
		for _, i := range t.Def.PK {
			b = binary.AppendUvarint(b, uint64(i))
		}
		h.Write(b)
	}
	var id catalogID
	h.Sum(id[:0])
	return id
}

// appendString appends s with its length.
func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// relationKey returns the key of the DDL-derived catalog name as the
// session sees it, ok false when its catalogs have no ID (catalogID).
func (x *exec) relationKey(schema, name string) (relationKey, bool) {
	if schema != "pg_catalog" || !ddlCatalogs[name] {
		return relationKey{}, false
	}
	id, ok := x.catalogID()
	if !ok {
		return relationKey{}, false
	}
	return relationKey{id: id, name: name}, true
}

// catalogReadKey returns the cache key of sel when its answer may come from
// the cache: it reads only DDL-derived catalogs, calls no function and
// takes no parameter, and the session has no temp table of its own (staged
// rows do not show in the catalogs; staged DDL is hashed into its ID by ddlID).
func (x *exec) catalogReadKey(sel *pg.SelectStmt) (catalogKey, bool) {
	c := x.s.ex.catalogReads
	if c.disabled || len(x.params) > 0 || x.text == "" || !c.cacheable.get(sel, readsOnlyDDLCatalogs) {
		return catalogKey{}, false
	}
	id, ok := x.catalogID()
	if !ok {
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
	return catalogKey{id: id, text: text}, true
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
