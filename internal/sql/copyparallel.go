package sql

import (
	"runtime"
	"sync"

	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// Parallel encoding of large binary COPYs. DuckDB's first query of a table
// reads the whole of ducklake_data_file and ducklake_file_column_stats: at
// a million data files, a million and eight million rows, too many for the
// COPY cache (copycache.go). Encoding a row costs about three times what
// handing its bytes to the socket does, so one goroutine encoding and
// sending leaves the machine's other cores idle while the client waits.
// Here worker goroutines encode batches of a published table's chunks
// ahead of the session's goroutine, which sends the batches in ctid order.
//
// INVARIANT: the stream sent is exactly the serial one (sendChunk over the
// same chunks): the same messages in the same order, and for a row that
// does not encode, the rows before it and then the same error — a batch a
// worker could not encode is sent again by the serial path, which stops at
// the row, as it would have without workers (copyparallel_test.go).

const (
	// parallelMinRows is the fewest rows a COPY must send to be encoded
	// by workers: below it the hand-offs cost more than they save.
	parallelMinRows = 1 << 15
	// parallelBatchRows is about how many rows a worker encodes at a
	// time: large enough that a hand-off is rare, small enough that the
	// session's goroutine soon has a batch to send.
	parallelBatchRows = 1024
	// maxCopyWorkers bounds one COPY's workers whatever the machine.
	maxCopyWorkers = 4
)

// copyWorkers is how many workers a COPY of rows rows uses; below 2 it
// is sent serially.
func copyWorkers(rows int) int {
	if rows < parallelMinRows {
		return 1
	}
	return min(runtime.GOMAXPROCS(0), maxCopyWorkers)
}

// copyBatch is consecutive chunks a worker encodes as one run of CopyData
// messages.
type copyBatch struct {
	chunks []memcat.Chunk
	rows   int
	// msgs and ok are set by the worker before it closes done.
	msgs []byte
	ok   bool
	done chan struct{}
}

// copyParallel sends every chunk of chunks to co, encoded by workers
// goroutines batchRows rows at a time. The chunks must be a published
// table's (immutable: workers read them while the walk goes on). Every
// goroutine it starts has ended when it returns.
func (p *copyPlan) copyParallel(co messageAppender, chunks func(fn func(memcat.Chunk) bool), workers, batchRows int) error {
	stop := make(chan struct{})
	todo := make(chan *copyBatch, workers)
	// order holds the batches handed out, in ctid order; its capacity
	// bounds how far encoding runs ahead of sending.
	order := make(chan *copyBatch, 2*workers)
	free := make(chan []byte, 3*workers) // sent batches' buffers, for reuse
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		wg.Wait()
	}()

	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(todo)
		defer close(order)
		b := &copyBatch{}
		handOut := func() bool {
			b.done = make(chan struct{})
			select {
			case order <- b:
			case <-stop:
				return false
			}
			select {
			case todo <- b:
			case <-stop:
				return false
			}
			b = &copyBatch{}
			return true
		}
		chunks(func(ch memcat.Chunk) bool {
			b.chunks = append(b.chunks, ch)
			b.rows += ch.Len()
			return b.rows < batchRows || handOut()
		})
		if b.rows > 0 {
			handOut()
		}
	}()

	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := p.clone()
			w := &tupleWriter{p: q}
			for b := range todo {
				select {
				case <-stop:
					close(b.done)
					continue
				default:
				}
				var buf []byte
				select {
				case buf = <-free:
				default:
				}
				b.ok = true
				for _, ch := range b.chunks {
					if buf, b.ok = q.encodeChunk(buf, w, ch); !b.ok {
						break
					}
				}
				b.msgs = buf
				close(b.done)
			}
		}()
	}

	w := &tupleWriter{p: p}
	appendFn := w.append
	for b := range order {
		<-b.done
		if !b.ok {
			// The serial path over the same chunks sends the rows before
			// the one that fails and returns its error.
			for _, ch := range b.chunks {
				if err := p.sendChunk(co, w, appendFn, ch); err != nil {
					return err
				}
			}
			continue
		}
		if err := co.AppendMessages(b.msgs, b.rows); err != nil {
			return err
		}
		select {
		case free <- b.msgs[:0]:
		default:
		}
	}
	return nil
}
