package sql

import (
	"context"
	"testing"

	"github.com/moraine-db/moraine/internal/pgwire"
)

// TestTxStateMoves pins the transaction phases a session can move through
// and that every other move is caught.
func TestTxStateMoves(t *testing.T) {
	legal := map[[2]txPhase]bool{
		{txNone, txImplicit}: true, {txImplicit, txNone}: true, {txImplicit, txBlock}: true,
		{txBlock, txNone}: true, {txBlock, txFailed}: true, {txFailed, txNone}: true, {txFailed, txFailed}: true,
	}
	for from := txNone; from <= txFailed; from++ {
		for to := txNone; to <= txFailed; to++ {
			st := txState{phase: from}
			panicked := func() (p bool) {
				defer func() { p = recover() != nil }()
				st.to(to)
				return false
			}()
			if panicked == legal[[2]txPhase{from, to}] {
				t.Errorf("%s → %s: panicked %v, legal %v", from, to, panicked, legal[[2]txPhase{from, to}])
			}
		}
	}
}

// TestSessionTxStates walks a session through PostgreSQL's transaction
// states as a client sees them (ReadyForQuery's status).
func TestSessionTxStates(t *testing.T) {
	ctx := context.Background()
	s := testServer().Open("lake", "postgres", "", 1)
	defer s.Close()
	steps := []struct {
		sql     string
		wantErr bool
		want    pgwire.TxStatus
		phase   txPhase
	}{
		{"SELECT 1", false, pgwire.TxIdle, txNone},
		{"BEGIN", false, pgwire.TxActive, txBlock},
		{"BEGIN", false, pgwire.TxActive, txBlock}, // a warning, nothing else
		{"SELECT 1/0", true, pgwire.TxFailed, txFailed},
		{"SELECT 1", true, pgwire.TxFailed, txFailed}, // 25P02
		{"COMMIT", false, pgwire.TxIdle, txNone},      // a failed block's COMMIT rolls back
		{"SELECT 1; BEGIN", false, pgwire.TxActive, txBlock},
		{"ROLLBACK", false, pgwire.TxIdle, txNone},
		{"SELECT 1/0", true, pgwire.TxIdle, txNone}, // an implicit transaction just ends
		{"COMMIT", false, pgwire.TxIdle, txNone},
	}
	for _, st := range steps {
		err := s.query(ctx, st.sql, &textSink{})
		if (err != nil) != st.wantErr {
			t.Fatalf("%s: err %v, want error %v", st.sql, err, st.wantErr)
		}
		if got := s.TxStatus(); got != st.want || s.tx.phase != st.phase {
			t.Fatalf("%s: status %c phase %s, want %c %s", st.sql, got, s.tx.phase, st.want, st.phase)
		}
		if (s.tx.txn == nil) != (st.phase == txNone) {
			t.Fatalf("%s: phase %s with catalog transaction %v", st.sql, s.tx.phase, s.tx.txn)
		}
	}
}
