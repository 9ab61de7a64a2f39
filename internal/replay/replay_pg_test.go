package replay

import (
	"context"
	"os"
	"testing"
	"time"
)

// postgresConninfo returns the conninfo of the real PostgreSQL the replayer
// is validated against; under CI its absence is a failure.
func postgresConninfo(t *testing.T) string {
	t.Helper()
	ci := os.Getenv("MORAINE_TEST_POSTGRES")
	if ci == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MORAINE_TEST_POSTGRES is not set under CI")
		}
		t.Skip("MORAINE_TEST_POSTGRES not set")
	}
	return ci
}

// prerequisites: transcripts that continue a lake other transcripts built
// (fixtures/README.md), replayed after them, in order, on the same database.
// s10 was captured after s07 had added snapshot 7 to s01's lake.
var prerequisites = map[string][]string{
	"s07_reattach": {"s01_basic"},
	"s10_psql":     {"s01_basic", "s07_reattach"},
}

// TestReplayPostgres replays every fixture against a real PostgreSQL 15,
// each in a fresh database, and requires all of them to pass: this is what
// proves the replayer and its normalizer before moraine is measured with it.
func TestReplayPostgres(t *testing.T) {
	conninfo := postgresConninfo(t)
	trs, err := LoadDir(fixturesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Transcript{}
	for _, tr := range trs {
		byName[tr.Name] = tr
	}
	opts := Options{Addr: conninfo, Timeout: 30 * time.Second}
	for _, tr := range trs {
		t.Run(tr.Name, func(t *testing.T) {
			ctx := context.Background()
			var chain []*Transcript
			for _, pre := range prerequisites[tr.Name] {
				if byName[pre] == nil {
					t.Fatalf("prerequisite %s missing", pre)
				}
				chain = append(chain, byName[pre])
			}
			chain = append(chain, tr)
			if err := RecreateDatabases(ctx, conninfo, tr.Databases()); err != nil {
				t.Fatal(err)
			}
			for _, x := range chain {
				res := Replay(ctx, x, opts)
				if !res.Passed() {
					t.Fatalf("%s: %v\n%s", x.Name, res.Err, Explain(res.Err))
				}
				t.Logf("%s: %d server messages matched in %v", x.Name, res.Compared, res.Elapsed.Round(time.Millisecond))
			}
		})
	}
}
