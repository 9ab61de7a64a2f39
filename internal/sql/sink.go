package sql

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/pgwire/pgcopy"
)

// resultSink writes results to a pgwire ResultWriter. In a portal
// (Execute), rows may be limited: the sink then writes up to max rows and
// keeps the rest for the next Execute.
type resultSink struct {
	w       *pgwire.ResultWriter
	max     int             // 0 = no limit
	pending [][]datum.Value // rows left over after a Suspend
	cols    []colInfo
	tag     string
	done    bool
}

func (r *resultSink) rows(cols []colInfo, rows [][]datum.Value, tag string) error {
	if err := r.w.Describe(pgColumns(cols)); err != nil {
		return err
	}
	r.cols, r.tag = cols, tag
	return r.emit(rows)
}

func (r *resultSink) emit(rows [][]datum.Value) error {
	formats := r.w.Formats()
	cells := make([][]byte, len(r.cols))
	var buf []byte
	for i, row := range rows {
		if r.max > 0 && i >= r.max {
			r.pending = rows[i:]
			return r.w.Suspend()
		}
		var err error
		if buf, err = encodeRow(buf[:0], r.cols, row, formats, cells); err != nil {
			return err
		}
		if err := r.w.RawRow(cells); err != nil {
			return err
		}
	}
	return r.finished()
}

// finished completes a result whose every row has been sent.
func (r *resultSink) finished() error {
	r.pending = nil
	r.done = true
	return r.w.Complete(r.tag)
}

// cached sends a cached catalog answer. A result of text columns without a
// row limit (every simple query's) gets the answer's DataRow messages as
// encoded once for all sessions; any other is encoded row by row.
func (r *resultSink) cached(a *catalogAnswer, tag string) error {
	if err := r.w.Describe(pgColumns(a.r.cols)); err != nil {
		return err
	}
	r.cols, r.tag = a.r.cols, tag
	if r.max > 0 || slices.ContainsFunc(r.w.Formats(), func(f int16) bool { return f != 0 }) {
		return r.emit(a.r.rows)
	}
	msgs, err := a.textRows()
	if err != nil {
		return err
	}
	if err := r.w.EncodedRows(msgs, len(a.r.rows)); err != nil {
		return err
	}
	return r.finished()
}

// encodeRow encodes row's values in formats into buf and points cells (one
// per column, nil for NULL) into it; it returns buf.
func encodeRow(buf []byte, cols []colInfo, row []datum.Value, formats []int16, cells [][]byte) ([]byte, error) {
	var offs [64]int
	off := offs[:0]
	if len(row) >= len(offs) {
		off = make([]int, 0, len(row)+1)
	}
	for j, v := range row {
		off = append(off, len(buf))
		if v.IsNull() {
			continue
		}
		var err error
		if buf, err = encodeCell(buf, cols[j].typ, v, formats[j]); err != nil {
			return buf, fmt.Errorf("column %q: %w", cols[j].name, err)
		}
	}
	off = append(off, len(buf))
	for j, v := range row {
		if v.IsNull() {
			cells[j] = nil
			continue
		}
		cells[j] = buf[off[j]:off[j+1]:off[j+1]]
		if cells[j] == nil {
			cells[j] = []byte{}
		}
	}
	return buf, nil
}

func (r *resultSink) complete(tag string) error {
	r.done = true
	return r.w.Complete(tag)
}

func (r *resultSink) notice(n *pgwire.Error) { _ = r.w.Notice(n) }

func (r *resultSink) parameter(name, value string) { _ = r.w.ParameterStatus(name, value) }

func (r *resultSink) copyOut(format int16, cols []colInfo, src rowSource) error {
	co, err := r.w.CopyOut(format, pgColumns(cols))
	if err != nil {
		return err
	}
	if err := copyValues(co, format, cols, src); err != nil {
		// The COPY is open: pgwire sends the error after what was sent.
		return err
	}
	r.done = true
	return co.Close()
}

// copyOutEncoded is copyOut in binary format for a plan over a table's
// stored rows (see copyplan.go): the rows go from their stored encoding to
// the wire without being decoded into values.
func (r *resultSink) copyOutEncoded(cols []colInfo, p *copyPlan, src encodedSource) error {
	co, err := r.w.CopyOut(1, pgColumns(cols))
	if err != nil {
		return err
	}
	if err := p.copyChunks(co, src); err != nil {
		return err
	}
	r.done = true
	return co.Close()
}

// rowAppender is where COPY rows go: pgwire's CopyOut, or a buffer in
// tests. AppendRow calls fn once to append one whole row payload.
type rowAppender interface {
	AppendRow(fn func(dst []byte) []byte) error
}

// copyValues writes the rows of src to co as COPY rows in format (0 text,
// 1 binary).
func copyValues(co rowAppender, format int16, cols []colInfo, src rowSource) error {
	// One valueWriter and one method value for the whole COPY: a closure
	// per row would escape through the rowAppender interface and cost an
	// allocation per row.
	w := &valueWriter{format: format, cols: cols}
	appendFn := w.append
	return src(func(row []datum.Value) error {
		w.row, w.err = row, nil
		err := co.AppendRow(appendFn)
		if w.err != nil {
			return w.err
		}
		return err
	})
}

// valueWriter appends one row of values as a COPY row.
type valueWriter struct {
	format int16
	cols   []colInfo
	row    []datum.Value
	err    error  // the row's encoding error, if any
	text   []byte // a text cell before escaping, reused
}

func (w *valueWriter) append(dst []byte) []byte {
	if w.format == 1 {
		dst, w.err = appendBinaryTuple(dst, w.cols, w.row)
		return dst
	}
	for j, v := range w.row {
		if j > 0 {
			dst = append(dst, '\t')
		}
		if v.IsNull() {
			dst = append(dst, `\N`...)
			continue
		}
		w.text = datum.AppendText(w.text[:0], outType(w.cols[j].typ), v)
		dst = pgcopy.AppendCopyTextValue(dst, w.text)
	}
	return append(dst, '\n')
}

// appendBinaryTuple appends row as one binary COPY tuple. On an encoding
// error the tuple is still complete (the failing cell holds what was
// encoded) and the first error is returned with it.
func appendBinaryTuple(dst []byte, cols []colInfo, row []datum.Value) ([]byte, error) {
	var encErr error
	dst = pgcopy.AppendTupleStart(dst, len(row))
	for j, v := range row {
		if v.IsNull() {
			dst = pgcopy.AppendNullField(dst)
			continue
		}
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		var e error
		dst, e = encodeCell(dst, cols[j].typ, v, 1)
		if e != nil && encErr == nil {
			encErr = e
		}
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	}
	return dst, encErr
}

func (r *resultSink) copyIn(format int16, ncols int, null string) (copySource, error) {
	ci, err := r.w.CopyIn(format, ncols)
	if err != nil {
		return nil, err
	}
	if format == 1 {
		return &drainSource{src: pgcopy.NewBinaryCopyReader(ci), ci: ci}, nil
	}
	tr := pgcopy.NewTextCopyReader(ci)
	tr.Null = null
	return &drainSource{src: &textSource{r: tr}, ci: ci}, nil
}

// drainSource reads the client's stream to its CopyDone once the rows end
// (the binary trailer, or a text "\." line, may precede it), so that the
// COPY completes in protocol order.
type drainSource struct {
	src copySource
	ci  *pgwire.CopyIn
}

func (d *drainSource) Next() ([][]byte, error) {
	cells, err := d.src.Next()
	if errors.Is(err, io.EOF) {
		for {
			if _, derr := d.ci.Next(); derr != nil {
				if errors.Is(derr, io.EOF) {
					return nil, io.EOF
				}
				return nil, derr
			}
		}
	}
	return cells, err
}

type textSource struct{ r *pgcopy.TextCopyReader }

func (t *textSource) Next() ([][]byte, error) { return t.r.Next() }
