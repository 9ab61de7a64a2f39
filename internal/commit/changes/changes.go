// Package changes parses, formats and classifies DuckLake's `changes_made`
// strings: the per-snapshot summary DuckLake writes into
// ducklake_snapshot_changes and reads back to decide whether a transaction
// that lost the race for `snapshot_id = base+1` may retry on a newer base.
//
// Grammar (docs/reference/ducklake-catalog-protocol.md §4.5):
//
//	changes  = "" | entry { "," entry }
//	entry    = kind ":" value
//	value    = id | qname | name
//	id       = digit { digit }                       (a non-negative int64)
//	name     = ident                                 (created_schema)
//	qname    = ident "." ident                       (created_table/view/macro)
//	ident    = `"` { char | `""` } `"` | bare
//	bare     = one or more characters other than `"` `,` `.`
//
// Quoted identifiers double an embedded `"`. Formatting always quotes, so
// Format∘Parse is the identity on anything Format produced. The kind
// `flushed_inlined` is accepted as an alias of `inline_flush`, and the legacy
// `compacted_table` is parsed but never written by current DuckLake. An
// unknown kind is an error: a commit whose change set the server cannot read
// cannot be classified, so it must not be accepted.
package changes

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Kind is one entry type of a change string.
type Kind uint8

// The entry kinds, in the order DuckLake writes them.
const (
	DroppedSchema Kind = iota + 1
	DroppedTable
	DroppedView
	CreatedSchema
	CreatedTable
	CreatedView
	CreatedScalarMacro
	CreatedTableMacro
	DroppedScalarMacro
	DroppedTableMacro
	InsertedIntoTable
	DeletedFromTable
	AlteredTable
	AlteredView
	InlinedInsert
	InlinedDelete
	InlineFlush
	MergeAdjacent
	RewriteDelete
	CompactedTable // legacy: parsed for old catalogs, never written
	numKinds
)

// valueShape says what follows the colon of an entry.
type valueShape uint8

const (
	shapeID    valueShape = iota // a table/view/schema/macro id
	shapeName                    // one identifier (a schema name)
	shapeQName                   // schema "." name
)

var kindInfo = [numKinds]struct {
	token string
	shape valueShape
}{
	DroppedSchema:      {"dropped_schema", shapeID},
	DroppedTable:       {"dropped_table", shapeID},
	DroppedView:        {"dropped_view", shapeID},
	CreatedSchema:      {"created_schema", shapeName},
	CreatedTable:       {"created_table", shapeQName},
	CreatedView:        {"created_view", shapeQName},
	CreatedScalarMacro: {"created_scalar_macro", shapeQName},
	CreatedTableMacro:  {"created_table_macro", shapeQName},
	DroppedScalarMacro: {"dropped_scalar_macro", shapeID},
	DroppedTableMacro:  {"dropped_table_macro", shapeID},
	InsertedIntoTable:  {"inserted_into_table", shapeID},
	DeletedFromTable:   {"deleted_from_table", shapeID},
	AlteredTable:       {"altered_table", shapeID},
	AlteredView:        {"altered_view", shapeID},
	InlinedInsert:      {"inlined_insert", shapeID},
	InlinedDelete:      {"inlined_delete", shapeID},
	InlineFlush:        {"inline_flush", shapeID},
	MergeAdjacent:      {"merge_adjacent", shapeID},
	RewriteDelete:      {"rewrite_delete", shapeID},
	CompactedTable:     {"compacted_table", shapeID},
}

// aliases maps accepted-but-never-written tokens to their kind.
var aliases = map[string]Kind{"flushed_inlined": InlineFlush}

var byToken = func() map[string]Kind {
	m := make(map[string]Kind, int(numKinds)+len(aliases))
	for k := Kind(1); k < numKinds; k++ {
		m[kindInfo[k].token] = k
	}
	for tok, k := range aliases {
		m[tok] = k
	}
	return m
}()

// String returns the token DuckLake writes for k.
func (k Kind) String() string {
	if k == 0 || k >= numKinds {
		return fmt.Sprintf("Kind(%d)", uint8(k))
	}
	return kindInfo[k].token
}

// HasID reports whether entries of kind k carry a numeric id (as opposed to
// a name).
func (k Kind) HasID() bool { return k > 0 && k < numKinds && kindInfo[k].shape == shapeID }

// Entry is one parsed `kind:value` item. Exactly one of ID (id kinds) or
// Name/Schema (name kinds) is meaningful: created_schema sets Name only;
// created_table/view/macro set Schema and Name.
type Entry struct {
	Kind   Kind
	ID     int64
	Schema string
	Name   string
}

// Set is a transaction's change set in the order the string listed it.
// The zero Set is "no changes" and formats as "" (written as NULL).
type Set []Entry

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("changes: malformed changes_made")

// ErrUnknownKind is wrapped when an entry names a kind this parser does not
// know. It also wraps ErrSyntax.
var ErrUnknownKind = fmt.Errorf("%w: unknown entry type", ErrSyntax)

// Parse parses a changes_made string. The empty string is the empty Set.
func Parse(s string) (Set, error) {
	var out Set
	p := parser{s: s}
	for p.pos < len(s) {
		e, err := p.entry()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		if p.pos == len(s) {
			break
		}
		if s[p.pos] != ',' {
			return nil, p.errorf("expected ',' after entry")
		}
		p.pos++
		if p.pos == len(s) {
			return nil, p.errorf("trailing ','")
		}
	}
	return out, nil
}

type parser struct {
	s   string
	pos int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d of %q: %s", ErrSyntax, p.pos, truncate(p.s), fmt.Sprintf(format, args...))
}

func truncate(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

func (p *parser) entry() (Entry, error) {
	colon := strings.IndexByte(p.s[p.pos:], ':')
	if colon < 0 {
		return Entry{}, p.errorf("entry without ':'")
	}
	tok := p.s[p.pos : p.pos+colon]
	k, ok := byToken[tok]
	if !ok {
		return Entry{}, fmt.Errorf("%w %q at byte %d of %q", ErrUnknownKind, tok, p.pos, truncate(p.s))
	}
	p.pos += colon + 1
	e := Entry{Kind: k}
	switch kindInfo[k].shape {
	case shapeID:
		start := p.pos
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
		}
		if start == p.pos {
			return Entry{}, p.errorf("%s: expected a numeric id", tok)
		}
		id, err := strconv.ParseInt(p.s[start:p.pos], 10, 64)
		if err != nil {
			return Entry{}, p.errorf("%s: id out of range: %v", tok, err)
		}
		e.ID = id
	case shapeName:
		name, err := p.ident()
		if err != nil {
			return Entry{}, err
		}
		e.Name = name
	case shapeQName:
		schema, err := p.ident()
		if err != nil {
			return Entry{}, err
		}
		if p.pos >= len(p.s) || p.s[p.pos] != '.' {
			return Entry{}, p.errorf("%s: expected \"schema\".\"name\"", tok)
		}
		p.pos++
		name, err := p.ident()
		if err != nil {
			return Entry{}, err
		}
		e.Schema, e.Name = schema, name
	}
	return e, nil
}

// ident reads one quoted or bare identifier.
func (p *parser) ident() (string, error) {
	if p.pos >= len(p.s) {
		return "", p.errorf("expected an identifier")
	}
	if p.s[p.pos] != '"' {
		start := p.pos
		for p.pos < len(p.s) && p.s[p.pos] != ',' && p.s[p.pos] != '.' && p.s[p.pos] != '"' {
			p.pos++
		}
		if start == p.pos {
			return "", p.errorf("expected an identifier")
		}
		return p.s[start:p.pos], nil
	}
	p.pos++ // opening quote
	var b strings.Builder
	for {
		i := strings.IndexByte(p.s[p.pos:], '"')
		if i < 0 {
			return "", p.errorf("unterminated quoted identifier")
		}
		b.WriteString(p.s[p.pos : p.pos+i])
		p.pos += i + 1
		if p.pos < len(p.s) && p.s[p.pos] == '"' { // doubled quote
			b.WriteByte('"')
			p.pos++
			continue
		}
		return b.String(), nil
	}
}

// String formats s the way DuckLake writes it. Kinds outside the known set
// format as their Kind(n) placeholder, which Parse rejects.
func (s Set) String() string {
	var b strings.Builder
	for i, e := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.String())
	}
	return b.String()
}

// String formats one entry.
func (e Entry) String() string {
	var b strings.Builder
	b.WriteString(e.Kind.String())
	b.WriteByte(':')
	if e.Kind == 0 || e.Kind >= numKinds {
		return b.String()
	}
	switch kindInfo[e.Kind].shape {
	case shapeID:
		b.WriteString(strconv.FormatInt(e.ID, 10))
	case shapeName:
		writeQuoted(&b, e.Name)
	case shapeQName:
		writeQuoted(&b, e.Schema)
		b.WriteByte('.')
		writeQuoted(&b, e.Name)
	}
	return b.String()
}

func writeQuoted(b *strings.Builder, s string) {
	b.WriteByte('"')
	b.WriteString(strings.ReplaceAll(s, `"`, `""`))
	b.WriteByte('"')
}

// ParseUnion parses every string of several snapshots (DuckLake's conflict
// query aggregates them with STRING_AGG(changes_made, ',')) into one Set.
// Empty and NULL strings contribute nothing.
func ParseUnion(strs ...string) (Set, error) {
	var out Set
	for _, s := range strs {
		set, err := Parse(s)
		if err != nil {
			return nil, err
		}
		out = append(out, set...)
	}
	return out, nil
}

// CompactionOnly reports whether s is a compaction commit: non-empty, and
// every entry is merge_adjacent or rewrite_delete. DuckLake refuses to mix
// compaction with other changes in one transaction, and a compaction-only
// commit must leave every next_row_id unchanged (RFC 0008).
func (s Set) CompactionOnly() bool {
	if len(s) == 0 {
		return false
	}
	for _, e := range s {
		if e.Kind != MergeAdjacent && e.Kind != RewriteDelete {
			return false
		}
	}
	return true
}

// Tables returns the distinct ids carried by entries of the given kinds, in
// first-seen order.
func (s Set) Tables(kinds ...Kind) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, e := range s {
		for _, k := range kinds {
			if e.Kind == k && !seen[e.ID] {
				seen[e.ID] = true
				out = append(out, e.ID)
			}
		}
	}
	return out
}
