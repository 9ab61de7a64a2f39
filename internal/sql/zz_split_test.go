package sql

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

func TestZZSplit(t *testing.T) {
	ctx := context.Background()
	ex := testServer()
	s := ex.Open("lake", "postgres", "", 1)
	defer s.Close()
	if out := runSQL(ctx, s, duckLakeCommitSetup, ""); strings.Contains(out, "ERROR") {
		t.Fatal(out)
	}
	sink := &countSink{}
	var tot [6]time.Duration
	n := 20000
	for i := 0; i < n; i++ {
		for k, q := range duckLakeCommit(i) {
			t0 := time.Now()
			var qerr error
			pprof.Do(ctx, pprof.Labels("stmt", fmt.Sprint(k)), func(ctx context.Context) { qerr = s.query(ctx, q, sink) })
			if qerr != nil {
				t.Fatal(qerr)
			}
			tot[k] += time.Since(t0)
		}
	}
	for k := range tot {
		t.Logf("stmt %d: %.1f us", k, float64(tot[k].Microseconds())/float64(n))
	}
}
