package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/commit/changes"
	"github.com/moraine-db/moraine/internal/replay"
)

// Server CPU per kind of commit. With one client a conversation is one
// sequence of DuckLake transactions, so the server's CPU between the
// answers to two consecutive commits belongs to the later one: its own
// statements and every read DuckLake made for it (schema loads, the latest
// snapshot, statistics). A commit's kind is what the changes_made of the
// snapshot it inserts says it changed.

// KindCPU is what the commits of one kind cost on each target.
type KindCPU struct {
	Commits map[string]int64
	CPU     map[string]time.Duration
}

// changesMadeRE finds the changes_made literal of the snapshot a
// transaction inserts.
var changesMadeRE = regexp.MustCompile(`ducklake_snapshot_changes VALUES \(\d+, '((?:[^']|'')*)'`)

// commitKinds maps the index of each recorded COMMIT's CommandComplete to
// the kind of the commit: the entry kinds of its changes_made, in
// DuckLake's order, joined by "+". A transaction that inserts no snapshot
// (a read) commits nothing of the lake and has no kind.
func commitKinds(tr *replay.Transcript) (map[int]string, error) {
	out := map[int]string{}
	pending := map[int]string{} // per connection: the open transaction's changes_made
	for i, m := range tr.Messages {
		if m.Dir == replay.Frontend {
			var q struct{ String, Query string }
			if m.Type != "Query" && m.Type != "Parse" {
				continue
			}
			if err := json.Unmarshal(m.Raw, &q); err != nil {
				return nil, fmt.Errorf("bench: %s message %d: %w", tr.Name, m.Seq, err)
			}
			if g := changesMadeRE.FindStringSubmatch(q.String + q.Query); g != nil {
				pending[m.Conn] = strings.ReplaceAll(g[1], "''", "'")
			}
			continue
		}
		if m.Type != "CommandComplete" {
			continue
		}
		var cc struct{ CommandTag string }
		if err := json.Unmarshal(m.Raw, &cc); err != nil {
			return nil, fmt.Errorf("bench: %s message %d: %w", tr.Name, m.Seq, err)
		}
		if cc.CommandTag != "COMMIT" && cc.CommandTag != "ROLLBACK" {
			continue
		}
		made, ok := pending[m.Conn]
		delete(pending, m.Conn)
		if !ok || cc.CommandTag == "ROLLBACK" {
			continue
		}
		set, err := changes.Parse(made)
		if err != nil {
			return nil, fmt.Errorf("bench: %s message %d: changes_made %q: %w", tr.Name, m.Seq, made, err)
		}
		var kinds []changes.Kind
		for _, e := range set {
			if !slices.Contains(kinds, e.Kind) {
				kinds = append(kinds, e.Kind)
			}
		}
		slices.Sort(kinds)
		names := make([]string, len(kinds))
		for j, k := range kinds {
			names[j] = k.String()
		}
		out[i] = strings.Join(names, "+")
	}
	return out, nil
}

// CommitCompletes is the set of indexes in tr.Messages of the
// CommandCompletes that end a commit of the lake (commitKinds).
func CommitCompletes(tr *replay.Transcript) (map[int]bool, error) {
	kinds, err := commitKinds(tr)
	if err != nil {
		return nil, err
	}
	out := make(map[int]bool, len(kinds))
	for i := range kinds {
		out[i] = true
	}
	return out, nil
}

// kindMeter adds the server's CPU between consecutive commits to the later
// commit's kind.
type kindMeter struct {
	kinds   map[int]string
	threads func(map[int]time.Duration) error
	last    map[int]time.Duration
	target  string
	into    map[string]*KindCPU
	err     error
}

func newKindMeter(kinds map[int]string, threads func(map[int]time.Duration) error, target string, into map[string]*KindCPU) *kindMeter {
	return &kindMeter{kinds: kinds, threads: threads, target: target, into: into}
}

// restart starts the next interval now: what the server did before (the
// round's database set-up) belongs to no commit.
func (k *kindMeter) restart() error {
	k.last = map[int]time.Duration{}
	return k.threads(k.last)
}

// answered is replay.Options.Answered.
func (k *kindMeter) answered(i int) {
	kind, ok := k.kinds[i]
	if !ok || k.err != nil {
		return
	}
	now := map[int]time.Duration{}
	if err := k.threads(now); err != nil {
		k.err = err
		return
	}
	kc := k.into[kind]
	if kc == nil {
		kc = &KindCPU{Commits: map[string]int64{}, CPU: map[string]time.Duration{}}
		k.into[kind] = kc
	}
	kc.Commits[k.target]++
	kc.CPU[k.target] += CPUSince(k.last, now)
	k.last = now
}

// WriteReplayKinds prints, for the one-client rows, the server CPU per
// commit of each kind on each target and their ratio (PostgreSQL ÷
// moraine), and the floor's beside them.
func WriteReplayKinds(w io.Writer, rows []ReplayRow) error {
	tw := newTab(w)
	fmt.Fprintln(tw, "transcript\tkind\tcommits\tCPU/commit PG\tCPU/commit moraine\tCPU ratio\tCPU/commit floor\tPG ÷ floor\t")
	for _, r := range rows {
		names := make([]string, 0, len(r.ByKind))
		for k := range r.ByKind {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			kc := r.ByKind[name]
			per := func(t string) time.Duration {
				if n := kc.Commits[t]; n > 0 {
					return kc.CPU[t] / time.Duration(n)
				}
				return 0
			}
			pg, mo := per("postgres"), per("moraine")
			fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%v\t%.2f×\t%s\t\n", r.Transcript, name, kc.Commits["moraine"],
				pg.Round(time.Microsecond), mo.Round(time.Microsecond), ratio(pg, mo), floorCells(pg, kc.Commits[Floor], kc.CPU[Floor]))
		}
	}
	return tw.Flush()
}
