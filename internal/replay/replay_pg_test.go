package replay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/testenv"
)

// chains: transcripts that continue a lake other transcripts built
// (fixtures/README.md) are replayed after them, in order, on the same
// database; s10 was captured after s07 had added snapshot 7 to s01's lake.
// Every other transcript is a chain of its own. Chains use distinct
// databases and run in parallel.
var chains = [][]string{{"s01_basic", "s07_reattach", "s10_psql"}}

// backendCount is the number of recorded server messages in tr.
func backendCount(tr *Transcript) int {
	n := 0
	for _, m := range tr.Messages {
		if m.Dir == Backend {
			n++
		}
	}
	return n
}

// TestReplayPostgres replays every fixture against a real PostgreSQL 15,
// each chain in fresh databases, and requires all of them to pass with
// every recorded server message compared: this is what proves the replayer
// and its normalizer before moraine is measured with it.
func TestReplayPostgres(t *testing.T) {
	conninfo := testenv.Postgres(t)
	testenv.LockFixtureDatabases(t, conninfo)
	trs := loadFixtures(t)
	byName := map[string]*Transcript{}
	for _, tr := range trs {
		byName[tr.Name] = tr
	}
	inChain := map[string]bool{}
	var all [][]*Transcript
	for _, c := range chains {
		var chain []*Transcript
		for _, n := range c {
			if byName[n] == nil {
				t.Fatalf("chain transcript %s missing", n)
			}
			inChain[n] = true
			chain = append(chain, byName[n])
		}
		all = append(all, chain)
	}
	for _, tr := range trs {
		if !inChain[tr.Name] {
			all = append(all, []*Transcript{tr})
		}
	}
	opts := Options{Addr: conninfo, Timeout: 60 * time.Second}
	for _, chain := range all {
		var names []string
		dbs := map[string]bool{}
		var fresh []string
		for _, tr := range chain {
			names = append(names, tr.Name)
			for _, db := range tr.Databases() {
				if !dbs[db] {
					dbs[db] = true
					fresh = append(fresh, db)
				}
			}
		}
		t.Run(strings.Join(names, "+"), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if err := RecreateDatabases(ctx, conninfo, fresh); err != nil {
				t.Fatal(err)
			}
			for _, tr := range chain {
				res := Replay(ctx, tr, opts)
				if !res.Passed() {
					t.Fatalf("%s: %v\n%s", tr.Name, res.Err, Explain(res.Err))
				}
				if want := backendCount(tr); res.Compared != want {
					t.Fatalf("%s: compared %d server messages, transcript has %d", tr.Name, res.Compared, want)
				}
				t.Logf("%s: %d server messages matched in %v", tr.Name, res.Compared, res.Elapsed.Round(time.Millisecond))
			}
		})
	}
}
