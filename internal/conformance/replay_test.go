package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/replay"
	"github.com/moraine-db/moraine/internal/testenv/testserver"
)

// TestReplayFixtures replays every captured conversation against moraine
// serve on a local directory store, in file-name order on one server (s07
// and s10 continue the lake s01 built), and requires every recorded server
// message to match. Then it restarts the server on the same store and
// replays nothing: the restart itself must load what the fixtures wrote.
func TestReplayFixtures(t *testing.T) {
	dir, err := replay.FixturesDir()
	if err != nil {
		t.Fatal(err)
	}
	trs, err := replay.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) < 12 {
		t.Fatalf("found %d transcripts in %s, want the 12 fixtures", len(trs), dir)
	}
	store := "file://" + t.TempDir()
	addr, stop := startServer(t, store)
	ctx := context.Background()
	admin, err := replay.AdminConninfo(addr)
	if err != nil {
		t.Fatal(err)
	}
	fresh := &replay.Fresh{Admin: admin}
	for _, tr := range trs {
		if err := fresh.Prepare(ctx, tr); err != nil {
			t.Fatal(err)
		}
		res := replay.Replay(ctx, tr, replay.Options{Addr: addr, Timeout: 30 * time.Second})
		if !res.Passed() {
			t.Errorf("%s: %v\n%s", tr.Name, res.Err, replay.Explain(res.Err))
			continue
		}
		t.Logf("%s: %d server messages matched in %v", tr.Name, res.Compared, res.Elapsed.Round(time.Millisecond))
	}
	stop()
	// Everything the fixtures committed reloads from the store.
	_, stop = startServer(t, store)
	stop()
}

// startServer runs moraine serve on store. The fixtures' Parquet files were
// not captured, so the row-id hold (which reads them) is off for the replay.
func startServer(t *testing.T, store string) (addr string, stop func()) {
	t.Helper()
	r := testserver.Start(t, store, "--row-id-hold=false")
	return r.Addr, func() { r.Stop(t) }
}

// TestReplayRenamedSideBySide: one transcript replays on several databases
// of one server at once (Options.Databases), each its own lake: what
// `moraine bench replay` relies on for concurrent clients.
func TestReplayRenamedSideBySide(t *testing.T) {
	tr, err := replay.LoadFixture("s11_commit_mix")
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := startServer(t, "file://"+t.TempDir())
	defer stop()
	ctx := context.Background()
	admin, err := replay.AdminConninfo(addr)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"lake_a", "lake_b", "lake_c"}
	if err := replay.RecreateDatabases(ctx, admin, names); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, len(names))
	for _, name := range names {
		go func() {
			res := replay.Replay(ctx, tr, replay.Options{Addr: addr, Timeout: 60 * time.Second, Databases: map[string]string{"s11_commit_mix": name}})
			if !res.Passed() {
				errs <- fmt.Errorf("%s: %v\n%s", name, res.Err, replay.Explain(res.Err))
				return
			}
			errs <- nil
		}()
	}
	for range names {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
