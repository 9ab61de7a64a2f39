package sql

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/moraine-db/moraine/internal/datum"
)

// stmt is one parsed statement of a query string.
type stmt struct {
	node *pg.Node
	text string // the statement's own text (of the template, on a template hit)
	// lits binds the literals of this text onto a shared template tree:
	// the executor reads an A_Const through it (exec.constValue). Nil when
	// the tree was parsed from this very text.
	lits *boundLits
}

// boundLits are the values one text gives a template's literals: slot maps
// each bindable A_Const of the shared tree to its index in vals. slot is
// the template's, built once; only vals is made per text, so a bind costs
// one allocation however many literals the text has.
type boundLits struct {
	slot map[*pg.A_Const]int
	vals []tv
}

// get returns the value bound to c, if c is one of the template's literals.
func (b *boundLits) get(c *pg.A_Const) (tv, bool) {
	if b == nil {
		return tv{}, false
	}
	i, ok := b.slot[c]
	if !ok {
		return tv{}, false
	}
	return b.vals[i], true
}

// The plan cache. DuckLake sends the same statement templates over and over
// with different literals (every commit batch, every stats read). A text is
// reduced by a small lexer to its shape — the text with every string and
// number literal replaced by a placeholder, which is what pg_query's
// fingerprint distinguishes too — and the first text of a shape is parsed
// with the real grammar into a template. Later texts of the same shape are
// not parsed again: their literals, in order, are bound onto the template's
// A_Const nodes. Literals that shape the statement rather than feed a value
// (a type modifier such as VARCHAR(10), ORDER BY 2) must equal the
// template's, else the text is parsed on its own. Texts the lexer cannot
// map with certainty (E” strings, dollar quotes, literals the grammar does
// not turn into A_Const, DDL and SET) are parsed every time and cached by
// their exact text.
//
// Parsed trees are shared between sessions and never modified.
type parseCache struct {
	mu    sync.Mutex
	exact map[string][]stmt
	shape map[string]*template
	max   int
	stats struct{ parses, exactHits, shapeHits int }
}

type template struct {
	stmts []stmt
	lits  []litSlot
	slot  map[*pg.A_Const]int // the index in lits of each value literal's node
}

// litSlot ties the i-th literal of a template's text to its A_Const.
type litSlot struct {
	node       *pg.A_Const
	negate     bool // the grammar folded a unary minus into the constant
	structural bool // a type modifier or ORDER BY position: must match exactly
	raw        string
	str        bool
}

// maxCachedText is the longest statement text the cache keeps.
const maxCachedText = 256 << 10

func newParseCache(max int) *parseCache {
	return &parseCache{exact: map[string][]stmt{}, shape: map[string]*template{}, max: max}
}

// parse splits and parses a query string with the PostgreSQL grammar. The
// statements of a template hit bind their literals into memory of their
// own; parseInto's may use the caller's reusable bindBuf instead.
func (c *parseCache) parse(sql string) ([]stmt, error) { return c.parseInto(sql, nil) }

// bindBuf is memory a session reuses for the statements of one query text
// at a time: what parseInto returned with it must not be used once the
// buffer is passed to parseInto again or released.
type bindBuf struct {
	lits  boundLits
	stmts []stmt
}

// release drops the references the last bind left (the literal values
// alias the query text).
func (b *bindBuf) release() {
	clear(b.lits.vals)
	b.lits.vals = b.lits.vals[:0]
	clear(b.stmts)
	b.stmts = b.stmts[:0]
}

// parseInto is parse, binding a template hit's literals into buf when buf
// is not nil.
func (c *parseCache) parseInto(sql string, buf *bindBuf) ([]stmt, error) {
	if err := CheckSize(sql); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if s, ok := c.exact[sql]; ok {
		c.stats.exactHits++
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()
	sb := shapeBufs.Get().(*shapeBuf)
	defer shapeBufs.Put(sb)
	lexOK := lexShape(sql, sb)
	lits := sb.lits
	if lexOK {
		c.mu.Lock()
		tpl := c.shape[string(sb.key)] // no copy of the key for a lookup
		c.mu.Unlock()
		if tpl != nil {
			if out, ok := tpl.bind(lits, buf); ok {
				c.mu.Lock()
				c.stats.shapeHits++
				c.mu.Unlock()
				return out, nil
			}
		}
	}
	if err := CheckDepth(sql); err != nil {
		return nil, err
	}
	res, err := pg.Parse(sql)
	if err != nil {
		return nil, parseError(err)
	}
	out := make([]stmt, 0, len(res.Stmts))
	for _, rs := range res.Stmts {
		if rs.Stmt == nil {
			continue
		}
		start := int(rs.StmtLocation)
		end := len(sql)
		if rs.StmtLen > 0 {
			end = start + int(rs.StmtLen)
		}
		if start < 0 || start > end || end > len(sql) {
			start, end = 0, len(sql)
		}
		out = append(out, stmt{node: rs.Stmt, text: sql[start:end]})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.parses++
	if len(c.exact) >= c.max {
		// Crude but bounded: a flood of one-off texts restarts the cache.
		clear(c.exact)
	}
	if len(c.shape) >= c.max {
		clear(c.shape)
	}
	if len(sql) > maxCachedText {
		// A huge one-off text (a bulk INSERT) is not kept: the cache would
		// hold its text and tree long after the statement ended.
		return out, nil
	}
	c.exact[sql] = out
	if lexOK && templatable(out) {
		if tpl, ok := makeTemplate(sql, out, lits); ok {
			c.shape[string(sb.key)] = tpl
		}
	}
	return out, nil
}

// templatable limits templates to statements whose literals the executor
// reads only as values.
func templatable(stmts []stmt) bool {
	for _, s := range stmts {
		n := s.node
		switch {
		case n.GetSelectStmt() != nil, n.GetInsertStmt() != nil, n.GetUpdateStmt() != nil,
			n.GetDeleteStmt() != nil, n.GetTransactionStmt() != nil:
		default:
			return false
		}
	}
	return true
}

// lexLit is a literal found by lexShape.
type lexLit struct {
	start int
	raw   string // the number, or the string's value (unescaped)
	str   bool
}

// shapeBuf holds lexShape's output. The parse of every statement text
// computes a shape and the shape is needed only for a lookup, so the
// buffers are reused (shapeBufs) rather than allocated per text: a DuckLake
// commit batch is kilobytes.
type shapeBuf struct {
	key  []byte
	lits []lexLit
}

var shapeBufs = sync.Pool{New: func() any { return new(shapeBuf) }}

// lexShape puts into sb the text with literals replaced by placeholders,
// and the literals in order. ok is false for texts it cannot reduce with
// certainty.
func lexShape(sql string, sb *shapeBuf) (ok bool) {
	b := shapeWriter{sb.key[:0]}
	lits := sb.lits[:0]
	defer func() { sb.key, sb.lits = b.buf, lits }()
	i := 0
	isIdent := func(c byte) bool {
		return c == '_' || c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
	}
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == '\'':
			// The value is the text between the quotes, with each doubled
			// quote made single: a substring of sql unless it has one.
			j := i + 1
			doubled := false
			for {
				if j >= len(sql) {
					return false
				}
				if sql[j] == '\'' {
					if j+1 < len(sql) && sql[j+1] == '\'' {
						doubled = true
						j += 2
						continue
					}
					break
				}
				j++
			}
			raw := sql[i+1 : j]
			if doubled {
				raw = strings.ReplaceAll(raw, "''", "'")
			}
			lits = append(lits, lexLit{start: i, raw: raw, str: true})
			b.add("'?'")
			i = j + 1
		case c == '"':
			j := i + 1
			for {
				if j >= len(sql) {
					return false
				}
				if sql[j] == '"' {
					if j+1 < len(sql) && sql[j+1] == '"' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			b.add(sql[i : j+1])
			i = j + 1
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				j = len(sql) - i
			}
			b.add(sql[i : i+j])
			i += j
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			j := strings.Index(sql[i+2:], "*/")
			if j < 0 || strings.Contains(sql[i+2:i+2+j], "/*") {
				return false // unterminated or nested comment
			}
			b.add(sql[i : i+2+j+2])
			i += 2 + j + 2
		case c == '$':
			j := i + 1
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
			if j == i+1 {
				return false // dollar quoting
			}
			b.add(sql[i:j])
			i = j
		case isIdent(c):
			j := i + 1
			for j < len(sql) && (isIdent(sql[j]) || isDigit(sql[j]) || sql[j] == '$') {
				j++
			}
			if j < len(sql) && sql[j] == '\'' {
				return false // E'', B'', X'', N'' and U&'' literals
			}
			if j < len(sql) && sql[j] == '&' && j+1 < len(sql) && (sql[j+1] == '\'' || sql[j+1] == '"') {
				return false
			}
			b.add(sql[i:j])
			i = j
		case isDigit(c) || (c == '.' && i+1 < len(sql) && isDigit(sql[i+1])):
			j := i
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
			if j < len(sql) && sql[j] == '.' {
				j++
				for j < len(sql) && isDigit(sql[j]) {
					j++
				}
			}
			if j < len(sql) && (sql[j] == 'e' || sql[j] == 'E') {
				k := j + 1
				if k < len(sql) && (sql[k] == '+' || sql[k] == '-') {
					k++
				}
				if k >= len(sql) || !isDigit(sql[k]) {
					return false
				}
				for k < len(sql) && isDigit(sql[k]) {
					k++
				}
				j = k
			}
			if j < len(sql) && (isIdent(sql[j]) || sql[j] == '.') {
				return false // 0x1F, 1_000, 1.2.3, 12abc
			}
			lits = append(lits, lexLit{start: i, raw: sql[i:j]})
			b.add("?n")
			i = j
		default:
			b.addByte(c)
			i++
		}
	}
	return true
}

// shapeWriter appends to a reused buffer.
type shapeWriter struct{ buf []byte }

func (w *shapeWriter) add(s string)   { w.buf = append(w.buf, s...) }
func (w *shapeWriter) addByte(c byte) { w.buf = append(w.buf, c) }

type constSite struct {
	node       *pg.A_Const
	structural bool
}

// collectConsts walks a parse tree and records every A_Const by location.
func collectConsts(m protoreflect.Message, structural bool, out map[int32]constSite) {
	switch n := m.Interface().(type) {
	case *pg.A_Const:
		out[n.Location] = constSite{n, structural}
		return
	case *pg.TypeName:
		structural = true
	case *pg.SortBy:
		if n.Node != nil && n.Node.GetAConst() != nil {
			structural = true // ORDER BY <position>
		}
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				collectConsts(l.Get(i).Message(), structural, out)
			}
		case !fd.IsMap() && fd.Message() != nil:
			collectConsts(v.Message(), structural, out)
		}
		return true
	})
}

// makeTemplate maps each literal of sql to its A_Const. It fails when a
// literal has no constant of its own (the grammar used it otherwise).
func makeTemplate(sql string, stmts []stmt, lits []lexLit) (*template, bool) {
	sites := map[int32]constSite{}
	for _, s := range stmts {
		collectConsts(s.node.ProtoReflect(), false, sites)
	}
	tpl := &template{stmts: stmts, lits: make([]litSlot, len(lits)), slot: make(map[*pg.A_Const]int, len(lits))}
	used := map[*pg.A_Const]bool{}
	for i, l := range lits {
		site, ok := sites[int32(l.start)]
		negate := false
		if !ok {
			// "-1": the grammar folds the minus into the constant and
			// places it at the minus sign.
			j := l.start - 1
			for j >= 0 && (sql[j] == ' ' || sql[j] == '\t' || sql[j] == '\n' || sql[j] == '\r') {
				j--
			}
			if j >= 0 && sql[j] == '-' {
				site, ok = sites[int32(j)]
				negate = true
			}
		}
		if !ok || used[site.node] {
			return nil, false
		}
		used[site.node] = true
		tpl.lits[i] = litSlot{node: site.node, negate: negate, structural: site.structural, raw: l.raw, str: l.str}
		if !site.structural {
			tpl.slot[site.node] = i
		}
	}
	return tpl, true
}

// bind binds a text's literals onto the template, in buf's memory when buf
// is not nil.
func (t *template) bind(lits []lexLit, buf *bindBuf) ([]stmt, bool) {
	if len(lits) != len(t.lits) {
		return nil, false
	}
	var b *boundLits
	if buf != nil {
		b = &buf.lits
		b.vals = slices.Grow(b.vals[:0], len(lits))[:len(lits)]
	} else {
		b = &boundLits{vals: make([]tv, len(lits))}
	}
	b.slot = t.slot
	for i, l := range lits {
		slot := t.lits[i]
		if l.str != slot.str {
			return nil, false
		}
		if slot.structural {
			if l.raw != slot.raw {
				return nil, false
			}
			continue
		}
		v, ok := literalValue(l, slot.negate)
		if !ok {
			return nil, false
		}
		b.vals[i] = v
	}
	var out []stmt
	if buf != nil {
		out = slices.Grow(buf.stmts[:0], len(t.stmts))[:len(t.stmts)]
		buf.stmts = out
	} else {
		out = make([]stmt, len(t.stmts))
	}
	for i, s := range t.stmts {
		out[i] = stmt{node: s.node, text: s.text, lits: b}
	}
	return out, true
}

// literalValue is the value PostgreSQL's grammar gives a literal: an
// integer that fits int4 is int4, a larger integer is int8 (pg_query's
// Float constant, as constValue reads it), anything else numeric; a string
// is of unknown type.
func literalValue(l lexLit, negate bool) (tv, bool) {
	if l.str {
		return tv{datum.TextValue(l.raw), unknownType}, true
	}
	s := l.raw
	if negate {
		s = "-" + s
	}
	if !strings.ContainsAny(s, ".eE") {
		i, err := strconv.ParseInt(s, 10, 64)
		if err == nil {
			digits := strings.TrimPrefix(s, "-")
			if u, err := strconv.ParseInt(digits, 10, 64); err == nil && u <= 2147483647 {
				// The lexer reads the digits as an int4 constant, the minus
				// is applied after.
				return tv{datum.IntValue(i), datum.Int4}, true
			}
			return tv{datum.IntValue(i), datum.Int8}, true
		}
	}
	n, err := datum.ParseNumeric(s, datum.Numeric)
	if err != nil {
		return tv{}, false
	}
	return tv{datum.NumericValue(n), datum.Numeric}, true
}
