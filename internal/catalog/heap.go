package catalog

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/moraine-db/moraine/internal/datum"
)

// CTID is a row locator, PostgreSQL's (block, offset) tuple id. moraine
// assigns ctids by emulating PostgreSQL's heap layout (see the heap type)
// so that a history of inserts, updates and deletes gives every row the
// ctid PostgreSQL 15 would have given it. DuckLake reads ctids and sends
// them back (`DELETE … WHERE ctid IN ('(0,3)')`), and the captured fixtures
// replay exactly those values.
//
// INVARIANT: a committed row's ctid never changes while it lives; ordering
// CTIDs as integers is scan order.
type CTID uint64

// MakeCTID builds the locator (block, offset).
func MakeCTID(block uint32, offset uint16) CTID { return CTID(uint64(block)<<16 | uint64(offset)) }

// Block is the heap page number.
func (c CTID) Block() uint32 { return uint32(c >> 16) }

// Offset is the 1-based item number within the page.
func (c CTID) Offset() uint16 { return uint16(c) }

// String is PostgreSQL's text form, "(0,3)".
func (c CTID) String() string {
	return "(" + strconv.FormatUint(uint64(c.Block()), 10) + "," + strconv.FormatUint(uint64(c.Offset()), 10) + ")"
}

// Value is the ctid as a datum of type tid.
func (c CTID) Value() datum.Value { return datum.TIDValue(c.Block(), c.Offset()) }

// CTIDFromValue converts a tid datum.
func CTIDFromValue(v datum.Value) CTID { b, o := v.TID(); return MakeCTID(b, o) }

// ParseCTID parses "(block,offset)" as PostgreSQL's tidin does (surrounding
// blanks allowed).
func ParseCTID(s string) (CTID, error) {
	t := strings.TrimSpace(s)
	if len(t) < 5 || t[0] != '(' || t[len(t)-1] != ')' {
		return 0, fmt.Errorf("invalid input syntax for type tid: %q", s)
	}
	b, o, ok := strings.Cut(t[1:len(t)-1], ",")
	if !ok {
		return 0, fmt.Errorf("invalid input syntax for type tid: %q", s)
	}
	bn, err1 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	on, err2 := strconv.ParseUint(strings.TrimSpace(o), 10, 16)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("invalid input syntax for type tid: %q", s)
	}
	return MakeCTID(uint32(bn), uint16(on)), nil
}

// PostgreSQL 15 heap constants (src/include/storage/bufpage.h, htup_details.h).
const (
	pageSize             = 8192
	pageHeaderSize       = 24 // SizeOfPageHeaderData
	itemIDSize           = 4  // sizeof(ItemIdData)
	maxAlign             = 8
	tupleHeaderSize      = 23 // offsetof(HeapTupleHeaderData, t_bits)
	maxHeapTuplesPerPage = 291
	shortVarlenaMax      = 127 // VARATT_SHORT_MAX
)

func alignUp(n, a int) int { return (n + a - 1) &^ (a - 1) }

// storage is how PostgreSQL lays out one attribute: typlen (-1 varlena) and
// typalign in bytes.
func storage(t datum.Type) (length, align int) {
	switch t.OID {
	case datum.OIDBool, datum.OIDChar:
		return 1, 1
	case datum.OIDInt2:
		return 2, 2
	case datum.OIDInt4, datum.OIDOID, datum.OIDFloat4, datum.OIDDate, datum.OIDRegproc, datum.OIDXID, datum.OIDRegclass:
		return 4, 4
	case datum.OIDInt8, datum.OIDFloat8, datum.OIDTime, datum.OIDTimestamp, datum.OIDTimestampTZ:
		return 8, 8
	case datum.OIDTimeTZ:
		return 12, 8
	case datum.OIDInterval:
		return 16, 8
	case datum.OIDUUID:
		return 16, 1
	case datum.OIDTID:
		return 6, 2
	case datum.OIDName:
		return 64, 1
	case datum.OIDInt8Array:
		return -1, 8
	}
	return -1, 4
}

// varlenaPayload is the size of a varlena value's data without its header,
// as PostgreSQL stores it.
func varlenaPayload(t datum.Type, v datum.Value) int {
	switch t.Kind() {
	case datum.KindNumeric:
		return numericPayload(v.S)
	case datum.KindArray:
		return arrayPayload(t, v)
	}
	return len(v.S)
}

// numericPayload is the size of PostgreSQL's packed numeric: a 2-byte short
// header (or 4-byte long header when the display scale or weight does not
// fit the short form) and one int16 per base-10000 digit.
func numericPayload(s string) int {
	if s == "NaN" || s == "Infinity" || s == "-Infinity" {
		return 2
	}
	s = strings.TrimPrefix(s, "-")
	ip, fp, _ := strings.Cut(s, ".")
	dscale := len(fp)
	ip = strings.TrimLeft(ip, "0")
	fp = strings.TrimRight(fp, "0")
	if ip == "" && fp == "" {
		return 2 // zero: no digits
	}
	// Pad to base-10000 groups aligned on the decimal point.
	ig := (len(ip) + 3) / 4
	fg := (len(fp) + 3) / 4
	digits := make([]string, 0, ig+fg)
	ipad := strings.Repeat("0", ig*4-len(ip)) + ip
	for i := 0; i < len(ipad); i += 4 {
		digits = append(digits, ipad[i:i+4])
	}
	fpad := fp + strings.Repeat("0", fg*4-len(fp))
	for i := 0; i < len(fpad); i += 4 {
		digits = append(digits, fpad[i:i+4])
	}
	weight := ig - 1
	for len(digits) > 0 && digits[0] == "0000" {
		digits = digits[1:]
		weight--
	}
	for len(digits) > 0 && digits[len(digits)-1] == "0000" {
		digits = digits[:len(digits)-1]
	}
	hdr := 2
	if dscale > 0x3F || weight > 63 || weight < -64 {
		hdr = 4
	}
	return hdr + 2*len(digits)
}

// arrayPayload is the size of a one-dimensional PostgreSQL array without its
// varlena header: ndim, dataoffset, elemtype, dims and lower bounds, an
// optional NULL bitmap, then the elements with their alignment.
func arrayPayload(t datum.Type, v datum.Value) int {
	elems, err := datum.ArrayElems(t, v)
	if err != nil || len(elems) == 0 {
		return 12 // empty array: ndim 0
	}
	et := t.Elem()
	el, ea := storage(et)
	nulls := false
	for _, e := range elems {
		nulls = nulls || e.IsNull()
	}
	hdr := 4 + 12 + 8 // varlena header + ndim/dataoffset/elemtype + dim/lbound
	if nulls {
		hdr += (len(elems) + 7) / 8
	}
	n := alignUp(hdr, maxAlign)
	for _, e := range elems {
		if e.IsNull() {
			continue
		}
		if el > 0 {
			n = alignUp(n, ea) + el
			continue
		}
		// Array elements are never short varlenas.
		n = alignUp(n, ea) + 4 + varlenaPayload(et, e)
	}
	return n - 4
}

// TupleLen is t_len of the heap tuple PostgreSQL 15 builds for vals: the
// header (23 bytes, plus a NULL bitmap over all of the tuple's attributes
// when any is NULL, MAXALIGNed) followed by the attributes with their
// alignment. Varlena values whose data is under 127 bytes are stored with a
// 1-byte header and no alignment (PostgreSQL converts them to short
// varlenas); longer ones keep a 4-byte header and int alignment. TOAST
// compression of very long values (over ~2 kB per tuple) is not emulated.
func TupleLen(types []datum.Type, vals []datum.Value) int {
	hasNull := false
	for _, v := range vals {
		if v.IsNull() {
			hasNull = true
			break
		}
	}
	hoff := tupleHeaderSize
	if hasNull {
		hoff += (len(vals) + 7) / 8
	}
	hoff = alignUp(hoff, maxAlign)
	n := 0
	for i, v := range vals {
		if v.IsNull() {
			continue
		}
		l, a := storage(types[i])
		if l > 0 {
			n = alignUp(n, a) + l
			continue
		}
		p := varlenaPayload(types[i], v)
		if p+1 <= shortVarlenaMax {
			n += p + 1
			continue
		}
		n = alignUp(n, a) + p + 4
	}
	return hoff + n
}

// page is the state of one heap page that placement decisions depend on.
type page struct {
	free   uint16 // pd_upper - pd_lower
	nitems uint16 // line pointers in use (never reused: no pruning, no vacuum)
}

func newPage() page { return page{free: pageSize - pageHeaderSize} }

// heapFree is PageGetHeapFreeSpace: the space a new tuple may use, after
// its line pointer, or 0 once the page has MaxHeapTuplesPerPage items.
func (p page) heapFree() int {
	if p.nitems >= maxHeapTuplesPerPage {
		return 0
	}
	if int(p.free) < itemIDSize {
		return 0
	}
	return int(p.free) - itemIDSize
}

// place records a tuple of t_len l on the page and returns its item number.
// REQUIRES: alignUp(l, 8) <= p.heapFree().
func (p *page) place(l int) uint16 {
	p.free -= uint16(alignUp(l, maxAlign) + itemIDSize)
	p.nitems++
	return p.nitems
}

const chunkPages = 256

// pageChunk is a fixed run of pages; gen says which heap generation owns it
// (may write it in place).
type pageChunk struct {
	gen   uint64
	pages [chunkPages]page
}

var heapGen atomic.Uint64

// heap emulates PostgreSQL's placement of heap tuples:
//
//   - pages of 8192 bytes with a 24-byte header and 4-byte line pointers;
//   - an INSERT goes on the last page if MAXALIGN(t_len) fits
//     PageGetHeapFreeSpace, else on a new page; items are numbered from 1
//     per page;
//   - an UPDATE writes a new tuple version on the old tuple's page when it
//     fits there (PostgreSQL's heap_update; HOT when no index key changed),
//     else like an INSERT; the old version keeps its slot;
//   - a DELETE leaves its slot and its space in use.
//
// Nothing is ever reclaimed: moraine models a heap where neither VACUUM nor
// opportunistic page pruning has run. This is what PostgreSQL does while a
// page has more than 10% free space (pruning only starts below that) or no
// dead tuples; docs/catalog.md lists the divergences.
//
// A heap is persistent: clone() is O(pages/256) and shares chunks with the
// original; a chunk is copied on its first write in the clone.
type heap struct {
	gen    uint64
	chunks []*pageChunk
	npages uint32
}

func newHeap() heap { return heap{gen: heapGen.Add(1)} }

func (h heap) clone() heap {
	return heap{gen: heapGen.Add(1), chunks: append([]*pageChunk(nil), h.chunks...), npages: h.npages}
}

func (h *heap) get(b uint32) page { return h.chunks[b/chunkPages].pages[b%chunkPages] }

func (h *heap) mut(b uint32) *page {
	c := h.chunks[b/chunkPages]
	if c.gen != h.gen {
		cp := *c
		cp.gen = h.gen
		c = &cp
		h.chunks[b/chunkPages] = c
	}
	return &c.pages[b%chunkPages]
}

func (h *heap) extend() uint32 {
	b := h.npages
	if int(b/chunkPages) == len(h.chunks) {
		h.chunks = append(h.chunks, &pageChunk{gen: h.gen})
	}
	*h.mut(b) = newPage()
	h.npages++
	return b
}

// insert places a new tuple of t_len l and returns its ctid.
func (h *heap) insert(l int) CTID {
	need := alignUp(l, maxAlign)
	if h.npages > 0 {
		last := h.npages - 1
		if need <= h.get(last).heapFree() {
			return MakeCTID(last, h.mut(last).place(l))
		}
	}
	b := h.extend()
	return MakeCTID(b, h.mut(b).place(l))
}

// update places the new version of the tuple at old, of t_len l.
func (h *heap) update(old CTID, l int) CTID {
	b := old.Block()
	if b < h.npages && alignUp(l, maxAlign) <= h.get(b).heapFree() {
		return MakeCTID(b, h.mut(b).place(l))
	}
	return h.insert(l)
}

// Pages is the number of heap pages (pg_class.relpages after ANALYZE).
func (h *heap) pages() uint32 { return h.npages }
