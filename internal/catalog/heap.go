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
	// TOAST_TUPLE_THRESHOLD and TOAST_TUPLE_TARGET for 8 kB pages, and the
	// size of an on-disk TOAST pointer (VARHDRSZ_EXTERNAL + varatt_external).
	toastTupleThreshold = 2032
	toastTupleTarget    = 2032
	toastPointerSize    = 18
	maxHeapTupleSize    = pageSize - pageHeaderSize - itemIDSize // MaxHeapTupleSize
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

// colLayout is how PostgreSQL stores one column: typlen (-1 varlena) and
// typalign, and whether the varlena size is the raw payload length.
type colLayout struct {
	length, align int16
	raw           bool // text-like varlena: payload is len(Value.S)
}

func makeLayout(types []datum.Type) []colLayout {
	out := make([]colLayout, len(types))
	for i, t := range types {
		l, a := storage(t)
		k := t.Kind()
		out[i] = colLayout{int16(l), int16(a), k != datum.KindNumeric && k != datum.KindArray}
	}
	return out
}

// tupleLen is the t_len PostgreSQL gives a heap tuple of vals.
func tupleLen(layout []colLayout, types []datum.Type, vals []datum.Value) int {
	// The common case in one pass, every value in line: it runs for every
	// row a load places. Values are read in place (a Value is 40 bytes).
	layout = layout[:len(vals)]
	n, hasNull, toastable := 0, false, false
	for i := range vals {
		v := &vals[i]
		if v.K == datum.KindNull {
			hasNull = true
			continue
		}
		c := layout[i]
		if c.length > 0 {
			n = alignUp(n, int(c.align)) + int(c.length)
			continue
		}
		p := len(v.S)
		if !c.raw {
			p = varlenaPayload(types[i], *v)
		}
		toastable = toastable || p+4 > alignUp(toastPointerSize, maxAlign)
		if p+1 <= shortVarlenaMax {
			n += p + 1
			continue
		}
		n = alignUp(n, int(c.align)) + p + 4
	}
	hoff := tupleHeaderSize
	if hasNull {
		hoff += (len(vals) + 7) / 8
	}
	hoff = alignUp(hoff, maxAlign)
	if hoff+n <= toastTupleThreshold || !toastable {
		return hoff + n
	}
	return toastedTupleLen(layout, types, vals, hoff)
}

// toastedTupleLen is tupleLen for a tuple over the TOAST threshold, whose
// header takes hoff bytes.
func toastedTupleLen(layout []colLayout, types []datum.Type, vals []datum.Value, hoff int) int {
	var external []bool // attributes moved out of line (TOAST), lazily
	for {
		// Candidates are compared by their untoasted size with a 4-byte
		// header (VARSIZE_ANY of the executor's value); only those over
		// MAXALIGN(TOAST pointer) qualify, the first of equals wins.
		n, largest := 0, -1
		largestLen := alignUp(toastPointerSize, maxAlign)
		for i, v := range vals {
			if v.IsNull() {
				continue
			}
			c := layout[i]
			if c.length > 0 {
				n = alignUp(n, int(c.align)) + int(c.length)
				continue
			}
			if external != nil && external[i] {
				n += toastPointerSize // a short (1-byte header) varlena: no alignment
				continue
			}
			p := len(v.S)
			if !c.raw {
				p = varlenaPayload(types[i], v)
			}
			if p+4 > largestLen {
				largest, largestLen = i, p+4
			}
			if p+1 <= shortVarlenaMax {
				n += p + 1
				continue
			}
			n = alignUp(n, int(c.align)) + p + 4
		}
		// heap_toast_insert_or_update: a tuple over the threshold has its
		// largest varlena attributes moved out of line until it fits the
		// target. PostgreSQL first tries pglz compression in line, which
		// is not emulated: a value it would compress enough to keep in line
		// is placed here as a TOAST pointer (docs/catalog.md).
		if hoff+n <= toastTupleThreshold || largest < 0 {
			return hoff + n
		}
		if external == nil {
			external = make([]bool, len(vals))
		}
		external[largest] = true
	}
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

// PostgreSQL 15 free space map constants (storage/freespace, fsmpage.c).
const (
	fsmNodes      = pageSize - pageHeaderSize - 4 // NodesPerPage
	fsmNonLeaf    = pageSize/2 - 1                // NonLeafNodesPerPage
	fsmLeaves     = fsmNodes - fsmNonLeaf         // SlotsPerFSMPage
	fsmCatStep    = pageSize / 256
	maxFSMRequest = pageSize - 32 // MaxHeapTupleSize
)

// fsmPage is one leaf page of the free space map: a binary tree of
// categories (max of children at inner nodes) over fsmLeaves heap pages,
// and the next-slot hint that spreads searches.
type fsmPage struct {
	gen   uint64
	nodes [fsmNodes]uint8
	next  int32
}

func fsmAvailToCat(avail int) uint8 {
	if avail >= maxFSMRequest {
		return 255
	}
	return uint8(min(avail/fsmCatStep, 254))
}

func fsmNeededToCat(needed int) uint8 {
	if needed == 0 {
		return 1
	}
	return uint8(min((needed+fsmCatStep-1)/fsmCatStep, 255))
}

// set is fsm_set_avail: store a leaf value and propagate maxima upwards.
func (f *fsmPage) set(slot int, v uint8) {
	n := fsmNonLeaf + slot
	if f.nodes[n] == v && v <= f.nodes[0] {
		return
	}
	f.nodes[n] = v
	for n > 0 {
		n = (n - 1) / 2
		l := 2*n + 1
		nv := f.nodes[l]
		if l+1 < fsmNodes {
			nv = max(nv, f.nodes[l+1])
		}
		if f.nodes[n] == nv {
			break
		}
		f.nodes[n] = nv
	}
}

// search is fsm_search_avail with advancenext: starting at the next-slot
// hint, step right and climb until a node has enough space, then descend
// preferring the left child. It returns the slot or -1.
func (f *fsmPage) search(minCat uint8) int {
	if f.nodes[0] < minCat {
		return -1
	}
	target := int(f.next)
	if target < 0 || target >= fsmLeaves {
		target = 0
	}
	n := fsmNonLeaf + target
	for n > 0 {
		if f.nodes[n] >= minCat {
			break
		}
		// rightneighbor, wrapping to the leftmost node of the level, then
		// parent.
		r := n + 1
		if (r+1)&r == 0 {
			r = (r - 1) / 2
		}
		n = (r - 1) / 2
	}
	for n < fsmNonLeaf {
		c := 2*n + 1
		if c < fsmNodes && f.nodes[c] >= minCat {
			n = c
			continue
		}
		c++
		if c < fsmNodes && f.nodes[c] >= minCat {
			n = c
			continue
		}
		return -1 // inconsistent tree; PostgreSQL rebuilds it, never here
	}
	slot := n - fsmNonLeaf
	f.next = int32(slot + 1)
	return slot
}

const noBlock = ^uint32(0)

// heap emulates PostgreSQL 15's placement of heap tuples
// (RelationGetBufferForTuple, heap_update, the free space map):
//
//   - pages of 8192 bytes with a 24-byte header and 4-byte line pointers;
//     items are numbered from 1 per page and never reused;
//   - an INSERT tries the relation's target block (the page it last put a
//     tuple on; the last page when there is none). If MAXALIGN(t_len) does
//     not fit PageGetHeapFreeSpace there, the page's free space is recorded
//     in the free space map and the map is searched (from its next-slot
//     hint) for a page of a sufficient category; failing that, the relation
//     is extended by one page. The page used becomes the target block;
//   - an UPDATE writes the new version on the old tuple's page if it fits
//     there, else places it like an INSERT; the old version keeps its slot;
//   - a DELETE leaves its slot and its space in use.
//
// Nothing is ever reclaimed: moraine models a heap where neither VACUUM nor
// opportunistic page pruning has run, and one backend's target block (a
// new PostgreSQL connection starts at the last page instead).
// docs/catalog.md lists the divergences.
//
// A heap is persistent: clone() is O(pages/256) and shares chunks and free
// space map pages with the original; each is copied on its first write in
// the clone.
type heap struct {
	gen    uint64
	chunks []*pageChunk
	npages uint32
	target uint32 // noBlock when unset
	fsm    []*fsmPage
}

func newHeap() heap { return heap{gen: heapGen.Add(1), target: noBlock} }

func (h heap) clone() heap {
	c := h
	c.gen = heapGen.Add(1)
	c.chunks = append([]*pageChunk(nil), h.chunks...)
	c.fsm = append([]*fsmPage(nil), h.fsm...)
	return c
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

func (h *heap) fsmMut(i int) *fsmPage {
	for len(h.fsm) <= i {
		h.fsm = append(h.fsm, nil)
	}
	f := h.fsm[i]
	switch {
	case f == nil:
		f = &fsmPage{gen: h.gen}
		h.fsm[i] = f
	case f.gen != h.gen:
		cp := *f
		cp.gen = h.gen
		f = &cp
		h.fsm[i] = f
	}
	return f
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

// recordAndGet is RecordAndGetPageWithFreeSpace: record that page b has
// avail bytes free and look for a page with need bytes on the same map
// page. (The map's upper levels are only maintained by VACUUM, so a search
// from the root finds nothing in a never-vacuumed relation.)
func (h *heap) recordAndGet(b uint32, avail, need int) uint32 {
	f := h.fsmMut(int(b / fsmLeaves))
	f.set(int(b%fsmLeaves), fsmAvailToCat(avail))
	s := f.search(fsmNeededToCat(need))
	if s < 0 {
		return noBlock
	}
	nb := (b/fsmLeaves)*fsmLeaves + uint32(s)
	if nb >= h.npages {
		return noBlock
	}
	return nb
}

// place finds a page for a tuple of t_len l and puts it there.
func (h *heap) place(l int) CTID {
	// tupleLen toasts anything large, so l fits a page; the clamp keeps a
	// tuple of fixed-width columns too wide for a page (PostgreSQL refuses
	// those) from looping through the free space map.
	need := alignUp(min(l, maxHeapTupleSize), maxAlign)
	target := h.target
	if target == noBlock && h.npages > 0 {
		target = h.npages - 1
	}
	for target != noBlock {
		free := h.get(target).heapFree()
		if need <= free {
			h.target = target
			return MakeCTID(target, h.mut(target).place(need))
		}
		next := h.recordAndGet(target, free, need)
		if next == target {
			break // the map offers the page that just did not fit
		}
		target = next
	}
	b := h.extend()
	h.target = b
	return MakeCTID(b, h.mut(b).place(need))
}

// insert places a new tuple of t_len l and returns its ctid.
func (h *heap) insert(l int) CTID { return h.place(l) }

// update places the new version of the tuple at old, of t_len l.
func (h *heap) update(old CTID, l int) CTID {
	b := old.Block()
	if b < h.npages && alignUp(l, maxAlign) <= h.get(b).heapFree() {
		return MakeCTID(b, h.mut(b).place(l))
	}
	return h.place(l)
}
