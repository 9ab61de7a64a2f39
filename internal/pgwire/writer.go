package pgwire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/moraine-db/moraine/internal/pgwire/pgcopy"
)

// writerState tracks where the executor is within one statement's result.
type writerState int

const (
	wsIdle    writerState = iota // between statements
	wsRows                       // after Describe, before Complete/Suspend
	wsCopyOut                    // a CopyOut is open
	wsCopyIn                     // a CopyIn is open
)

// ResultWriter is how the executor answers: it frames statement results as
// protocol messages on the connection. It is valid only during the Query or
// Execute call it was passed to, and is not safe for concurrent use.
//
// For each statement the executor calls, in order: Describe(cols), then Row
// or RawRow per row, then Complete(tag) — or Suspend() when a portal's row
// limit was reached; or CopyOut/CopyIn for COPY; or only Complete for a
// statement without rows (INSERT, BEGIN, SET ...). Notice and
// ParameterStatus may be called at any point.
type ResultWriter struct {
	c         *conn
	ctx       context.Context
	extended  bool
	portal    *boundPortal
	maxRows   int
	state     writerState
	cols      []Column
	formats   []int16
	rows      int64
	results   int  // statements completed
	suspended bool // Suspend was called
	copyIn    *CopyIn
	discard   bool // rows of a NoData portal are not sent
}

// finishStatement releases what an executor call may have left open: a
// COPY IN whose data was not read to the end (the rest of it is dropped by
// the connection loop).
func (w *ResultWriter) finishStatement() {
	if w.copyIn != nil && w.copyIn.err == nil {
		w.copyIn.finish(errWriterState)
	}
	w.copyIn = nil
	if w.state == wsCopyIn {
		w.state = wsIdle
	}
}

var errWriterState = errors.New("pgwire: ResultWriter method called out of order")

func (c *conn) resetWriter(extended bool, bp *boundPortal, maxRows int) *ResultWriter {
	w := &c.rw
	*w = ResultWriter{c: c, extended: extended, portal: bp, maxRows: maxRows,
		cols: w.cols[:0], formats: w.formats[:0]}
	return w
}

func (w *ResultWriter) inResult() bool { return w.state != wsIdle }

// Extended reports whether the statement runs through the extended
// protocol (Execute) rather than a simple Query.
func (w *ResultWriter) Extended() bool { return w.extended }

// Describe starts a row-returning result with these columns. In a simple
// Query it sends the RowDescription (every SELECT gets one, even with zero
// rows); in an Execute it only checks the columns against the Describe the
// client saw and applies the Bind's result formats. Column.Format is
// ignored: pgwire decides formats.
func (w *ResultWriter) Describe(cols []Column) error {
	if w.state != wsIdle {
		return errWriterState
	}
	w.cols = append(w.cols[:0], cols...)
	w.formats = w.formats[:0]
	w.discard = false
	if w.extended && w.portal != nil && w.portal.cols == nil {
		// The portal was described as NoData (a multi-statement Parse):
		// the client expects no rows, and DataRow without a
		// RowDescription would break libpq. Rows are counted, not sent.
		w.discard = true
		for range w.cols {
			w.formats = append(w.formats, 0)
		}
	} else if w.extended {
		if w.portal != nil && len(w.portal.cols) != len(cols) {
			return &Error{Code: pgcode.InternalError, Message: fmt.Sprintf(
				"portal described %d columns but produced %d", len(w.portal.cols), len(cols))}
		}
		for i := range w.cols {
			f := int16(0)
			if w.portal != nil {
				f = w.portal.formats[i]
			}
			w.cols[i].Format = f
			w.formats = append(w.formats, f)
		}
	} else {
		for i := range w.cols {
			w.cols[i].Format = 0
			w.formats = append(w.formats, 0)
		}
		w.c.out = appendRowDescription(w.c.out, w.cols, nil)
	}
	w.state = wsRows
	w.rows = 0
	return w.c.maybeFlush()
}

// Columns returns the columns of the current result, with formats.
func (w *ResultWriter) Columns() []Column { return w.cols }

// Formats returns the format code of each column of the current result;
// RawRow cells must be encoded in these formats.
func (w *ResultWriter) Formats() []int16 { return w.formats }

func (w *ResultWriter) checkRow(n int) error {
	if w.state != wsRows {
		return errWriterState
	}
	if n != len(w.cols) {
		return &Error{Code: pgcode.InternalError, Message: fmt.Sprintf("row has %d values for %d columns", n, len(w.cols))}
	}
	if w.maxRows > 0 && w.rows >= int64(w.maxRows) {
		return &Error{Code: pgcode.InternalError, Message: "executor wrote past the portal's row limit"}
	}
	if w.rows&1023 == 1023 && w.ctx != nil {
		if err := w.ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// RawRow sends one DataRow of cells already encoded in Formats() (nil =
// NULL). The cells are copied; the executor may reuse them.
func (w *ResultWriter) RawRow(cells [][]byte) error {
	if err := w.checkRow(len(cells)); err != nil {
		return err
	}
	if w.discard {
		w.rows++
		return nil
	}
	c := w.c
	c.out = AppendDataRow(c.out, cells)
	w.rows++
	return c.maybeFlush()
}

// AppendDataRow appends the DataRow message of cells (nil = NULL) to dst.
func AppendDataRow(dst []byte, cells [][]byte) []byte {
	start := len(dst)
	dst = append(dst, 'D', 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(cells)))
	for _, cell := range cells {
		if cell == nil {
			dst = pgcopy.AppendNullField(dst)
			continue
		}
		dst = pgcopy.AppendBytesField(dst, cell)
	}
	binary.BigEndian.PutUint32(dst[start+1:], uint32(len(dst)-start-1))
	return dst
}

// EncodedRows sends n rows given as their DataRow messages (AppendDataRow),
// each of len(Columns()) cells in Formats(). A portal with a row limit
// takes its rows one at a time (RawRow), so that it can stop at the limit.
func (w *ResultWriter) EncodedRows(msgs []byte, n int) error {
	if n == 0 {
		return nil
	}
	if err := w.checkRow(len(w.cols)); err != nil {
		return err
	}
	if w.maxRows > 0 {
		return &Error{Code: pgcode.InternalError, Message: "encoded rows sent to a portal with a row limit"}
	}
	w.rows += int64(n)
	if w.discard {
		return nil
	}
	w.c.out = append(w.c.out, msgs...)
	return w.c.maybeFlush()
}

// AppendRow is the DataRow fast path: fn appends exactly len(Columns())
// length-prefixed cells in Formats() (pgcopy.AppendBytesField,
// AppendNullField, AppendInt8Field ...) straight into
// the send buffer. pgwire writes the message header and column count.
func (w *ResultWriter) AppendRow(fn func(dst []byte) []byte) error {
	if err := w.checkRow(len(w.cols)); err != nil {
		return err
	}
	w.rows++
	if w.discard {
		return nil
	}
	c := w.c
	start := len(c.out)
	c.out = append(c.out, 'D', 0, 0, 0, 0)
	c.out = binary.BigEndian.AppendUint16(c.out, uint16(len(w.cols)))
	c.out = fn(c.out)
	binary.BigEndian.PutUint32(c.out[start+1:], uint32(len(c.out)-start-1))
	return c.maybeFlush()
}

// RowsWritten is the number of rows sent in the current result.
func (w *ResultWriter) RowsWritten() int64 { return w.rows }

// Complete ends the current statement with CommandComplete (for example
// "SELECT 3", "INSERT 0 1", "BEGIN"). A statement without rows calls only
// Complete.
func (w *ResultWriter) Complete(tag string) error {
	if w.state != wsIdle && w.state != wsRows {
		return errWriterState
	}
	w.c.send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
	w.state = wsIdle
	w.results++
	if tag == "DISCARD ALL" {
		w.c.discarded = true
	}
	return w.c.maybeFlush()
}

// Suspend ends an Execute that stopped at its row limit with rows left
// (PortalSuspended). Only valid in the extended protocol.
func (w *ResultWriter) Suspend() error {
	if !w.extended || w.state != wsRows {
		return errWriterState
	}
	w.c.send(&pgproto3.PortalSuspended{})
	w.state = wsIdle
	w.suspended = true
	return w.c.maybeFlush()
}

// Notice sends a NoticeResponse (severity defaults to NOTICE).
func (w *ResultWriter) Notice(n *Error) error {
	w.c.send(n.toNoticeResponse())
	return w.c.maybeFlush()
}

// ParameterStatus reports a changed run-time parameter (e.g. after SET
// application_name). Like PostgreSQL, pgwire sends it just before the next
// ReadyForQuery; a later report of the same name replaces an earlier one.
func (w *ResultWriter) ParameterStatus(name, value string) error {
	for i := range w.c.pendingStatus {
		if w.c.pendingStatus[i][0] == name {
			w.c.pendingStatus[i][1] = value
			return nil
		}
	}
	w.c.pendingStatus = append(w.c.pendingStatus, [2]string{name, value})
	return nil
}

// Format codes of the wire protocol.
const (
	TextFormat   int16 = 0
	BinaryFormat int16 = 1
)

// typeSize is pg_type.typlen for the fixed-size types, -1 otherwise.
func typeSize(oid uint32) int16 {
	if t := (datum.Type{OID: oid, Mod: -1}); t.Known() && t.Len() > 0 {
		return t.Len()
	}
	return -1
}

// appendRowDescription appends a RowDescription directly (pgproto3's
// encoder wants []FieldDescription with []byte names, which would allocate
// per column).
func appendRowDescription(dst []byte, cols []Column, formats []int16) []byte {
	start := len(dst)
	dst = append(dst, 'T', 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(cols)))
	for i, col := range cols {
		dst = append(dst, col.Name...)
		dst = append(dst, 0)
		dst = binary.BigEndian.AppendUint32(dst, col.TableOID)
		dst = binary.BigEndian.AppendUint16(dst, uint16(col.TableAttr))
		dst = binary.BigEndian.AppendUint32(dst, col.TypeOID)
		size := col.TypeSize
		if size == 0 {
			size = typeSize(col.TypeOID)
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(size))
		dst = binary.BigEndian.AppendUint32(dst, uint32(col.TypeModifier))
		f := col.Format
		if formats != nil {
			f = formats[i]
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(f))
	}
	binary.BigEndian.PutUint32(dst[start+1:], uint32(len(dst)-start-1))
	return dst
}

// CopyOut is an open COPY ... TO STDOUT. Rows go one per CopyData
// message; in binary format the header travels in the first message
// together with the first row (or with the trailer when there are no rows),
// which is what DuckDB's binary reader requires.
type CopyOut struct {
	w             *ResultWriter
	binary        bool
	cols          []Column
	headerPending bool
	rows          int64
	closed        bool
	scratch       []byte
}

// CopyOut starts COPY OUT in format (0 text, 1 binary) for rows of cols
// (only TypeOID is used, by Row). It sends CopyOutResponse.
func (w *ResultWriter) CopyOut(format int16, cols []Column) (*CopyOut, error) {
	if w.state != wsIdle {
		return nil, errWriterState
	}
	if format != 0 && format != 1 {
		return nil, fmt.Errorf("pgwire: COPY format %d", format)
	}
	codes := make([]uint16, len(cols))
	for i := range codes {
		codes[i] = uint16(format)
	}
	w.c.send(&pgproto3.CopyOutResponse{OverallFormat: byte(format), ColumnFormatCodes: codes})
	w.state = wsCopyOut
	return &CopyOut{w: w, binary: format == 1, cols: cols, headerPending: format == 1}, nil
}

// beginData opens a CopyData message in the output buffer and returns the
// offset of its length field.
func (co *CopyOut) beginData() int {
	c := co.w.c
	at := len(c.out) + 1
	c.out = append(c.out, 'd', 0, 0, 0, 0)
	if co.headerPending {
		c.out = pgcopy.AppendCopyHeader(c.out)
		co.headerPending = false
	}
	return at
}

func (co *CopyOut) endData(at int) error {
	c := co.w.c
	binary.BigEndian.PutUint32(c.out[at:], uint32(len(c.out)-at))
	co.rows++
	if co.rows&1023 == 0 && co.w.ctx != nil {
		if err := co.w.ctx.Err(); err != nil {
			return err
		}
	}
	return c.maybeFlush()
}

// AppendRow is the fast path: fn appends one complete row payload to dst —
// a binary tuple (pgcopy.AppendTupleStart, then the fields) or a text line
// ending in '\n' — and returns the extended slice. It is written straight
// into the connection's send buffer, without copying or allocating.
func (co *CopyOut) AppendRow(fn func(dst []byte) []byte) error {
	if co.closed {
		return errWriterState
	}
	c := co.w.c
	at := co.beginData()
	c.out = fn(c.out)
	return co.endData(at)
}

// AppendCopyData appends to dst one CopyData message whose payload fn
// appends: a COPY row framed as AppendRow frames it, for AppendMessages.
func AppendCopyData(dst []byte, fn func(dst []byte) []byte) []byte {
	at := len(dst) + 1
	dst = fn(append(dst, 'd', 0, 0, 0, 0))
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at))
	return dst
}

// AppendMessages appends rows whole rows framed by AppendCopyData, kept
// from an earlier COPY (the SQL layer's cache of encoded rows). The first
// row of a binary COPY still carries the COPY header. msgs must hold
// exactly rows such messages; only the first one's length is read.
func (co *CopyOut) AppendMessages(msgs []byte, rows int) error {
	if co.closed {
		return errWriterState
	}
	if rows == 0 {
		return nil
	}
	c := co.w.c
	if co.headerPending {
		if len(msgs) < 5 {
			return fmt.Errorf("pgwire: COPY messages: %d bytes", len(msgs))
		}
		end := 1 + int(binary.BigEndian.Uint32(msgs[1:5]))
		if end < 5 || end > len(msgs) {
			return fmt.Errorf("pgwire: COPY message of length %d in %d bytes", end-1, len(msgs))
		}
		at := co.beginData()
		c.out = append(c.out, msgs[5:end]...)
		binary.BigEndian.PutUint32(c.out[at:], uint32(len(c.out)-at))
		msgs = msgs[end:]
	}
	c.out = append(c.out, msgs...)
	before := co.rows
	co.rows += int64(rows)
	if before>>10 != co.rows>>10 && co.w.ctx != nil {
		if err := co.w.ctx.Err(); err != nil {
			return err
		}
	}
	return c.maybeFlush()
}

// Rows is the number of rows sent so far.
func (co *CopyOut) Rows() int64 { return co.rows }

// Close ends the COPY: the binary trailer (with the header if no row was
// sent), CopyDone and CommandComplete "COPY n".
func (co *CopyOut) Close() error {
	if co.closed {
		return errWriterState
	}
	co.closed = true
	c := co.w.c
	if co.binary {
		at := len(c.out) + 1
		c.out = append(c.out, 'd', 0, 0, 0, 0)
		if co.headerPending {
			c.out = pgcopy.AppendCopyHeader(c.out)
			co.headerPending = false
		}
		c.out = pgcopy.AppendCopyTrailer(c.out)
		binary.BigEndian.PutUint32(c.out[at:], uint32(len(c.out)-at))
	}
	c.send(&pgproto3.CopyDone{})
	co.w.state = wsIdle
	return co.w.Complete("COPY " + strconv.FormatInt(co.rows, 10))
}

// CopyIn is an open COPY ... FROM STDIN. It is an io.Reader over the
// concatenated CopyData payloads: Read returns io.EOF after the client's
// CopyDone, and an *Error (57014) after CopyFail.
type CopyIn struct {
	w       *ResultWriter
	pending []byte
	err     error
	stop    func() bool
	fired   chan struct{}
}

// CopyIn starts COPY IN in format (0 text, 1 binary) for ncols columns. It
// sends CopyInResponse and flushes, so the client starts sending. The
// executor reads the data with Read or Next and then calls Complete("COPY
// n"). If it returns an error instead, the client's remaining CopyData
// messages are dropped.
func (w *ResultWriter) CopyIn(format int16, ncols int) (*CopyIn, error) {
	if w.state != wsIdle {
		return nil, errWriterState
	}
	if format != 0 && format != 1 {
		return nil, fmt.Errorf("pgwire: COPY format %d", format)
	}
	codes := make([]uint16, ncols)
	for i := range codes {
		codes[i] = uint16(format)
	}
	w.c.send(&pgproto3.CopyInResponse{OverallFormat: byte(format), ColumnFormatCodes: codes})
	if err := w.c.flush(); err != nil {
		return nil, err
	}
	w.state = wsCopyIn
	ci := &CopyIn{w: w}
	w.copyIn = ci
	if w.ctx != nil {
		// A cancel must unblock a read waiting on a stalled client.
		nc := w.c.nc()
		ci.fired = make(chan struct{})
		ci.stop = context.AfterFunc(w.ctx, func() {
			_ = nc.SetReadDeadline(time.Now())
			close(ci.fired)
		})
	}
	return ci, nil
}

// Next returns the next CopyData payload, valid until the next call, or
// io.EOF at CopyDone.
func (ci *CopyIn) Next() ([]byte, error) {
	if ci.err != nil {
		return nil, ci.err
	}
	c := ci.w.c
	for {
		msg, err := c.be.Receive()
		if err != nil {
			if ci.w.ctx != nil && ci.w.ctx.Err() != nil {
				// Our own deadline from the cancel. pgproto3 keeps a
				// partly read message, so the loop can go on dropping
				// the rest of the COPY data.
				ci.finish(asPgError(ci.w.ctx.Err(), context.Cause(ci.w.ctx)))
				return nil, ci.err
			}
			c.fatal = fmt.Errorf("pgwire: reading COPY data: %w", err)
			ci.finish(&Error{Code: pgcode.ProtocolViolation, Message: "unexpected EOF on client connection with an open transaction", Cause: err})
			return nil, ci.err
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			return m.Data, nil
		case *pgproto3.CopyDone:
			ci.finish(io.EOF)
			return nil, io.EOF
		case *pgproto3.CopyFail:
			ci.finish(&Error{Code: pgcode.QueryCanceled, Message: "COPY from stdin failed: " + m.Message})
			return nil, ci.err
		case *pgproto3.Flush, *pgproto3.Sync:
			// PostgreSQL ignores these during COPY IN.
		default:
			c.fatal = fmt.Errorf("pgwire: unexpected %T during COPY from stdin", msg)
			ci.finish(&Error{Code: pgcode.ProtocolViolation, Message: fmt.Sprintf("unexpected message type during COPY from stdin: %T", msg)})
			return nil, ci.err
		}
	}
}

func (ci *CopyIn) finish(err error) {
	ci.err = err
	if ci.stop != nil {
		if !ci.stop() {
			<-ci.fired // the deadline is (being) set; wait, then clear it
		}
		ci.stop = nil
		_ = ci.w.c.nc().SetReadDeadline(time.Time{})
	}
	ci.w.state = wsIdle
}

// Read implements io.Reader over the CopyData payloads.
func (ci *CopyIn) Read(p []byte) (int, error) {
	for len(ci.pending) == 0 {
		data, err := ci.Next()
		if err != nil {
			return 0, err
		}
		ci.pending = data
	}
	n := copy(p, ci.pending)
	ci.pending = ci.pending[n:]
	return n, nil
}
