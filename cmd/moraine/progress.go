package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/moraine-db/moraine/internal/slate"
)

// progress reports a long copy (checkpoint, backup, restore): on a
// terminal, a line rewritten in place at most five times a second with the
// objects and bytes copied and the rate; elsewhere nothing until done, a
// log being no place for a counter. done prints the summary line either way.
type progress struct {
	w       io.Writer
	what    string
	tty     bool
	start   time.Time
	last    time.Time
	objects int
	bytes   int64
	printed bool
}

func newProgress(w io.Writer, what string) *progress {
	return &progress{w: w, what: what, tty: isTerminal(w), start: time.Now()}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// copied is a slate.Progress.
func (p *progress) copied(_ string, n int) {
	p.objects++
	p.bytes += int64(n)
	if p.tty && time.Since(p.last) >= 200*time.Millisecond {
		p.last = time.Now()
		fmt.Fprintf(p.w, "\r%s: %s", p.what, p.figures())
		p.printed = true
	}
}

func (p *progress) fn() slate.Progress { return p.copied }

func (p *progress) figures() string {
	el := time.Since(p.start)
	rate := float64(p.bytes) / max(el.Seconds(), 1e-3)
	return fmt.Sprintf("%d objects, %s in %v (%s/s)", p.objects, size(p.bytes), el.Round(time.Millisecond), size(int64(rate)))
}

// done prints the summary line.
func (p *progress) done() {
	if p.printed {
		fmt.Fprint(p.w, "\r")
	}
	fmt.Fprintf(p.w, "%s: %s\n", p.what, p.figures())
}

// size renders a byte count in binary units.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
