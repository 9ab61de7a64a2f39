package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore/objstoretest"
	"github.com/moraine-db/moraine/internal/server"
	"github.com/moraine-db/moraine/internal/testenv/testserver"
	"github.com/moraine-db/moraine/internal/workload"
)

// TestFailoverWithWALPutsInFlight: a writer on S3 keeps several WAL PUTs
// in flight (wal-in-flight; 20 ms PUTs here) when a second server opens
// the store. The first is fenced and exits; the second serves exactly an
// acknowledged prefix: every commit the first acknowledged, and of the
// others at most the one in flight on each connection — one whose WAL
// object landed before the fences, its client told of the fence instead of
// the outcome, as a client that loses its connection during COMMIT is.
func TestFailoverWithWALPutsInFlight(t *testing.T) {
	s3 := objstoretest.StartS3(t, 20*time.Millisecond)
	store := s3.URL(s3.NewBucket(t), "catalog/")
	for round := 0; round < 3; round++ {
		a := testserver.Start(t, store)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		db := "lake" + string(rune('a'+round))
		cfg := workload.Config{ConnString: a.Conninfo(db), Writers: 4, CommitsPerWriter: 100000, Tables: 2,
			RetryWait: time.Millisecond, Seed: uint64(20 + round)}
		if err := prepare(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		ran := workload.Go(ctx, cfg)
		time.Sleep(time.Duration(400+300*round) * time.Millisecond)
		b := testserver.Start(t, store, "--takeover")
		select {
		case err := <-a.Done():
			if !errors.Is(err, server.ErrFenced) {
				t.Fatalf("round %d: the first server ended with %v, want ErrFenced", round, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: the first server still runs after the second opened the store", round)
		}
		var r workload.Outcome
		select {
		case r = <-ran:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: workload still running after the fence", round)
		}
		if r.Err == nil || r.Result == nil || len(r.Result.Landed()) < 3 {
			t.Fatalf("round %d: workload against the fenced server: %v", round, r.Err)
		}
		present, err := checkAt(ctx, b.Addr, db, r.Result, 8)
		if err != nil {
			t.Fatalf("round %d, after failover (%d acknowledged commits): %v", round, len(r.Result.Landed()), err)
		}
		t.Logf("round %d: %d commits acknowledged by the first server, all on the second; %d in flight found present", round, len(r.Result.Landed()), present)
		// The second server goes on committing after the first one's
		// objects, void or not.
		after := workload.Config{ConnString: b.Conninfo(db + "x"), Writers: 2, CommitsPerWriter: 5, Tables: 1, RetryWait: time.Millisecond, Seed: 5}
		if err := prepare(ctx, after); err != nil {
			t.Fatal(err)
		}
		res, err := workload.Run(ctx, after)
		if err != nil {
			t.Fatalf("round %d: commits on the second server: %v", round, err)
		}
		if err := verifyAt(ctx, b.Addr, db+"x", res); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		b.Stop(t)
		cancel()
	}
}
