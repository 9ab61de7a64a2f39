package localdir

import (
	"os"
	"testing"
	"time"
)

// TestPoolWakesFillerOnlyWhenLow: a take that leaves the pool above half
// full does not kick the filler; the take that brings it to half does, and
// so does one that finds it empty.
func TestPoolWakesFillerOnlyWhenLow(t *testing.T) {
	dir := t.TempDir()
	p := newPool(dir)
	p.mu.started = true // no filler: the test watches its kicks instead
	for len(p.ready) < cap(p.ready) {
		f, err := os.CreateTemp(dir, tmpPrefix+"pool-*")
		if err != nil {
			t.Fatal(err)
		}
		p.ready <- pooledFile{path: f.Name(), f: f, created: time.Now()}
	}
	kicked := func() bool {
		select {
		case <-p.kick:
			return true
		default:
			return false
		}
	}
	for i := 1; i <= cap(p.ready); i++ {
		f, ok := p.take()
		if !ok {
			t.Fatalf("take %d: pool empty", i)
		}
		f.discard()
		left := cap(p.ready) - i
		if want := left <= cap(p.ready)/2; kicked() != want {
			t.Fatalf("take %d leaves %d of %d: kicked %v, want %v", i, left, cap(p.ready), !want, want)
		}
	}
	_, ok := p.take()
	if k := kicked(); ok || !k {
		t.Fatalf("a take from the empty pool: got a file %v, kicked the filler %v; want no file and a kick", ok, k)
	}
}
