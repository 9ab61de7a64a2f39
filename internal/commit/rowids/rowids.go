// Package rowids implements RFC 0008's row-id hold: before a compaction
// lands, the commit reads the row ids of the files the compaction registers
// and of the files it consumes, and refuses the commit as corruption if the
// compaction would change which rows exist.
//
//   - merge_adjacent: the outputs must hold exactly the multiset of row ids
//     the sources held;
//   - rewrite_delete: the outputs may hold fewer ids, but none the sources
//     lacked (as a multiset: no id more often than the sources held it), and
//     none the sources' delete files deleted.
//
// A data file's row ids are its `_ducklake_internal_row_id` column — the
// Parquet column with field id 2147483540 — when present, else
// row_id_start + position (docs/reference/ducklake-catalog-protocol.md §5). A file without
// the column is never decoded: its ids follow from its catalog row. A file
// with the column is decoded unless its footer statistics prove the ids are
// one contiguous run (min, max, no nulls, and a distinct count equal to the
// row count).
//
// The hold exists because DuckLake's merge judges adjacency from
// row_id_start + record_count and then numbers the output by position; a
// flushed file's row_id_start is only its lowest embedded id, so a sparse
// source would be silently renumbered onto ids other files hold.
package rowids

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// RowIDFieldID is the Parquet field id of `_ducklake_internal_row_id`.
const RowIDFieldID = 2147483540

// ErrCorrupt is matched by every refusal: the compaction would change row ids.
var ErrCorrupt = errors.New("rowids: compaction changes row ids (corruption)")

// ErrInvalid is wrapped when a file cannot be read as the catalog describes
// it (unreadable Parquet, NULL row ids, a record count that disagrees, no
// row_id_start and no embedded column).
var ErrInvalid = errors.New("rowids: invalid data file")

// Kind is the compaction shape.
type Kind uint8

const (
	// Merge is ducklake_merge_adjacent_files (change `merge_adjacent`).
	Merge Kind = iota + 1
	// Rewrite is ducklake_rewrite_data_files (change `rewrite_delete`).
	Rewrite
)

func (k Kind) String() string {
	switch k {
	case Merge:
		return "merge"
	case Rewrite:
		return "rewrite"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// File is one data file as the catalog row names it.
type File struct {
	// Path is a local path (optionally file://) or an object-store URL such
	// as s3://bucket/key, resolved by the Checker's Opener.
	Path string
	// RowIDStart is row_id_start; HasRowIDStart is false when it is NULL.
	RowIDStart    int64
	HasRowIDStart bool
	// RecordCount is record_count; the file must hold exactly this many rows.
	RecordCount int64
	// EncryptionKey is the file's key (encryption_key, decoded) when the
	// lake is ENCRYPTED; nil for a plain file.
	EncryptionKey []byte
	// Deletes are the source's delete files. Only meaningful for a
	// rewrite's sources.
	Deletes []DeleteFile
}

// DeleteFile is one ducklake_delete_file row: a Parquet file of (file_path,
// pos) rows, or an Iceberg deletion vector in a Puffin file.
type DeleteFile struct {
	Path          string
	Format        string // "parquet" (also when empty) or "puffin"
	EncryptionKey []byte
}

// Compaction is what one compaction commit registers and consumes.
type Compaction struct {
	Kind    Kind
	Outputs []File // files the commit registers (backdated or rebased)
	Sources []File // files it hard-deletes (merge) or ends (rewrite)
}

// MismatchError is a refusal: File holds (or lacks) RowID in a way the
// compaction kind does not allow. It matches ErrCorrupt.
type MismatchError struct {
	Kind   Kind
	File   string
	RowID  int64
	Reason string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("rowids: %s refused as corruption: %s: row id %d %s", e.Kind, e.File, e.RowID, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *MismatchError) Is(target error) bool { return target == ErrCorrupt }

// Checker runs the hold. Open resolves file paths; nil means LocalOpener.
type Checker struct {
	Open Opener
}

// Check returns nil if c keeps every row id as its kind requires, a
// *MismatchError (ErrCorrupt) naming a file and an offending id if it does
// not, or another error if a file cannot be read.
func (ch *Checker) Check(ctx context.Context, c Compaction) error {
	if c.Kind != Merge && c.Kind != Rewrite {
		return fmt.Errorf("rowids: unknown compaction kind %v", c.Kind)
	}
	op := ch.Open
	if op == nil {
		op = LocalOpener{}
	}
	read := func(files []File, withPositions bool) ([]fileIDs, error) {
		out := make([]fileIDs, len(files))
		for i, f := range files {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			ids, err := readFileIDs(ctx, op, f, withPositions)
			if err != nil {
				return nil, err
			}
			out[i] = ids
		}
		return out, nil
	}
	needPositions := c.Kind == Rewrite
	sources, err := read(c.Sources, needPositions)
	if err != nil {
		return err
	}
	outputs, err := read(c.Outputs, false)
	if err != nil {
		return err
	}

	var deleted []Span
	if c.Kind == Rewrite {
		for i, src := range c.Sources {
			for _, df := range src.Deletes {
				positions, err := readDeletePositions(ctx, op, df, src.Path)
				if err != nil {
					return err
				}
				for _, pos := range positions {
					id, ok := sources[i].idAt(pos)
					if !ok {
						return fmt.Errorf("%w: delete file %s deletes position %d of %s, which holds %d rows",
							ErrInvalid, df.Path, pos, src.Path, src.RecordCount)
					}
					deleted = append(deleted, Span{id, id + 1})
				}
			}
		}
	}

	var srcSpans, outSpans []Span
	for _, s := range sources {
		srcSpans = append(srcSpans, s.spans...)
	}
	for _, o := range outputs {
		outSpans = append(outSpans, o.spans...)
	}
	// The allowance for a rewrite: what the sources held minus what their
	// delete files removed.
	allowed := srcSpans
	if len(deleted) > 0 {
		allowed = subtract(srcSpans, deleted)
	}

	// Outputs may never hold an id more often than allowed.
	if x, have, want, bad := firstExcess(outSpans, allowed); bad {
		reason := "is not held by any source"
		switch {
		case want > 0:
			reason = fmt.Sprintf("is held %d times, the sources held it %d times", have, want)
		case c.Kind == Rewrite && countAt(srcSpans, x) > 0:
			reason = "was deleted by the source's delete file"
		}
		return &MismatchError{Kind: c.Kind, File: holder(c.Outputs, outputs, x), RowID: x, Reason: reason}
	}
	// A merge must also keep every id the sources held.
	if c.Kind == Merge {
		if x, _, _, bad := firstExcess(srcSpans, outSpans); bad {
			return &MismatchError{Kind: c.Kind, File: holder(c.Sources, sources, x), RowID: x,
				Reason: "is missing from the merged output"}
		}
	}
	return nil
}

// holder names the first file whose ids contain x.
func holder(files []File, ids []fileIDs, x int64) string {
	for i, f := range ids {
		if countAt(f.spans, x) > 0 {
			return files[i].Path
		}
	}
	return "?"
}

// Span is the half-open row-id range [Lo, Hi). A multiset of row ids is a
// list of spans; overlapping spans mean an id is held more than once.
type Span struct{ Lo, Hi int64 }

// fileIDs is one file's row ids.
type fileIDs struct {
	spans []Span
	// ordered is the ids in file order, when positions were requested and
	// the ids are embedded; nil when they are start + position.
	ordered []int64
	start   int64
	count   int64
}

func (f fileIDs) idAt(pos int64) (int64, bool) {
	if pos < 0 || pos >= f.count {
		return 0, false
	}
	if f.ordered != nil {
		return f.ordered[pos], true
	}
	return f.start + pos, true
}

// spansOf compresses ids into spans (sorting them).
func spansOf(ids []int64) []Span {
	s := append([]int64(nil), ids...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var out []Span
	for _, v := range s {
		if n := len(out); n > 0 && out[n-1].Hi == v {
			out[n-1].Hi++
			continue
		}
		out = append(out, Span{v, v + 1})
	}
	return out
}

type event struct {
	at    int64
	delta int
	side  int // 0 = a, 1 = b
}

// firstExcess sweeps the multiplicity functions of a and b and returns the
// smallest id x held more often by a than by b, with both counts.
func firstExcess(a, b []Span) (x int64, have, want int, bad bool) {
	evs := make([]event, 0, 2*(len(a)+len(b)))
	for _, s := range a {
		if s.Lo < s.Hi {
			evs = append(evs, event{s.Lo, 1, 0}, event{s.Hi, -1, 0})
		}
	}
	for _, s := range b {
		if s.Lo < s.Hi {
			evs = append(evs, event{s.Lo, 1, 1}, event{s.Hi, -1, 1})
		}
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	var cnt [2]int
	for i := 0; i < len(evs); {
		at := evs[i].at
		for ; i < len(evs) && evs[i].at == at; i++ {
			cnt[evs[i].side] += evs[i].delta
		}
		if cnt[0] > cnt[1] {
			return at, cnt[0], cnt[1], true
		}
	}
	return 0, 0, 0, false
}

// countAt is the multiplicity of x in spans.
func countAt(spans []Span, x int64) int {
	n := 0
	for _, s := range spans {
		if s.Lo <= x && x < s.Hi {
			n++
		}
	}
	return n
}

// subtract removes each id of del once from the multiset a.
func subtract(a, del []Span) []Span {
	evs := make([]event, 0, 2*(len(a)+len(del)))
	for _, s := range a {
		evs = append(evs, event{s.Lo, 1, 0}, event{s.Hi, -1, 0})
	}
	for _, s := range del {
		evs = append(evs, event{s.Lo, 1, 1}, event{s.Hi, -1, 1})
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	var out []Span
	var cnt [2]int
	for i := 0; i < len(evs); {
		at := evs[i].at
		for ; i < len(evs) && evs[i].at == at; i++ {
			cnt[evs[i].side] += evs[i].delta
		}
		next := at
		if i < len(evs) {
			next = evs[i].at
		}
		for k := 0; k < cnt[0]-cnt[1] && next > at; k++ {
			out = append(out, Span{at, next})
		}
	}
	return out
}
