package replay

import (
	"encoding/json"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Commits that overlap a snapshot.
//
// A COMMIT sent on one connection and answered later is in flight for a
// while; another connection's snapshot taken in that window may or may not
// see it, by PostgreSQL's rules: the commit becomes visible at some instant
// between the server reading COMMIT and sending its CommandComplete, and a
// snapshot is taken when the server reads the statement that takes it. The
// recording says which one PostgreSQL did only through the answers, but the
// window tells: PostgreSQL makes a commit visible after its WAL flush, just
// before the CommandComplete goes out, so a snapshot-taking message recorded
// before that CommandComplete was, in practice, read before the commit was
// visible. The replay reproduces that order on the server under test: before
// it sends a COMMIT, it runs every other connection's conversation up to the
// first answer of the transaction that took its snapshot inside the
// COMMIT's recorded window, so that snapshot is taken first whatever the
// server's speed. (moraine takes a REPEATABLE READ snapshot at the first
// statement it executes, which may be later than PostgreSQL's first Parse;
// running up to the first answer covers both.)

// snapPoint is where a connection takes a snapshot: at is the index of the
// client message at which PostgreSQL takes it, until the index of the first
// server message answering the first executing message (Query or Execute)
// at or after it — the point by which any server has taken it.
type snapPoint struct{ at, until int }

// overlaps is the precomputed part of the rule above.
type overlaps struct {
	// commitEnd maps the index of a client message whose answer completes a
	// COMMIT to the index of that CommandComplete.
	commitEnd map[int]int
	// snaps lists each connection's snapshot points in order.
	snaps map[int][]snapPoint
}

// findOverlaps classifies a transcript's client messages: which ones end in
// a COMMIT, and where each connection takes its snapshots (a REPEATABLE READ
// or SERIALIZABLE block at its first statement that needs one, Parse
// included, as PostgreSQL's parse analysis takes it; otherwise every Query
// or Execute that needs one).
func findOverlaps(t *Transcript) overlaps {
	o := overlaps{commitEnd: map[int]int{}, snaps: map[int][]snapPoint{}}
	type state struct {
		inBlock, repeatable, pinned bool
		lastExec                    int // index of the last Query or Execute
		pending                     int // index into snaps awaiting its until, or -1
		executed                    bool
	}
	conns := map[int]*state{}
	for i, m := range t.Messages {
		st := conns[m.Conn]
		if st == nil {
			st = &state{lastExec: -1, pending: -1}
			conns[m.Conn] = st
		}
		if m.Dir == Backend {
			if st.pending >= 0 && st.executed {
				o.snaps[m.Conn][st.pending].until = i
				st.pending = -1
			}
			switch m.Type {
			case "ReadyForQuery":
				var rfq struct{ TxStatus string }
				_ = json.Unmarshal(m.Raw, &rfq)
				st.inBlock = rfq.TxStatus != "I"
				if !st.inBlock {
					st.repeatable, st.pinned = false, false
				}
			case "CommandComplete":
				var cc struct{ CommandTag string }
				_ = json.Unmarshal(m.Raw, &cc)
				if cc.CommandTag == "COMMIT" && st.lastExec >= 0 {
					o.commitEnd[st.lastExec] = i
				}
			}
			continue
		}
		fm, err := t.frontend(i)
		if err != nil {
			continue
		}
		var text string
		exec := false
		switch q := fm.(type) {
		case *pgproto3.Query:
			text, exec = q.String, true
		case *pgproto3.Parse:
			text = q.Query
		case *pgproto3.Execute:
			exec = true
		default:
			continue
		}
		if exec {
			st.lastExec = i
			if st.pending >= 0 {
				st.executed = true
			}
		}
		word := firstWord(text)
		if word == "BEGIN" || word == "START" {
			up := strings.ToUpper(text)
			st.repeatable = strings.Contains(up, "REPEATABLE READ") || strings.Contains(up, "SERIALIZABLE")
			st.pinned = false
			continue
		}
		takes := false
		switch {
		case st.repeatable:
			takes = !st.pinned && text != "" && needsSnapshot(word)
			if takes {
				st.pinned = true
			}
		case text != "":
			takes = exec && needsSnapshot(word)
		default: // an Execute outside a REPEATABLE READ block
			takes = true
		}
		if takes && st.pending < 0 {
			o.snaps[m.Conn] = append(o.snaps[m.Conn], snapPoint{at: i, until: -1})
			st.pending, st.executed = len(o.snaps[m.Conn])-1, exec
		}
	}
	return o
}

// firstWord is the upper-cased first keyword of a statement text.
func firstWord(text string) string {
	text = strings.TrimLeft(text, " \t\r\n(")
	end := strings.IndexFunc(text, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_')
	})
	if end >= 0 {
		text = text[:end]
	}
	return strings.ToUpper(text)
}

// needsSnapshot reports whether a statement starting with keyword word takes
// a snapshot in PostgreSQL (transaction control and session commands do
// not).
func needsSnapshot(word string) bool {
	switch word {
	case "", "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SET", "SHOW", "RESET",
		"DISCARD", "DEALLOCATE", "SAVEPOINT", "RELEASE", "LISTEN", "UNLISTEN":
		return false
	}
	return true
}

// inWindow returns, for the COMMIT sent at client index i, the snapshot
// points of other connections taken inside its recorded window (after i,
// before its CommandComplete), in recorded order, with their connections.
func (o overlaps) inWindow(t *Transcript, i int) []snapPoint {
	end, ok := o.commitEnd[i]
	if !ok {
		return nil
	}
	var out []snapPoint
	for conn, pts := range o.snaps {
		if conn == t.Messages[i].Conn {
			continue
		}
		for _, p := range pts {
			if p.at > i && p.at < end && p.until > p.at {
				out = append(out, p)
				break
			}
		}
	}
	// Recorded order, so that two connections' pre-runs interleave as
	// recorded.
	for a := 1; a < len(out); a++ {
		for b := a; b > 0 && out[b].at < out[b-1].at; b-- {
			out[b], out[b-1] = out[b-1], out[b]
		}
	}
	return out
}
