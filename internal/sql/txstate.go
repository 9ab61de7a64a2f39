package sql

import (
	"fmt"
	"time"

	"github.com/moraine-db/moraine/internal/pgwire"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// txPhase is where a session stands with respect to transactions.
//
//	none ──first statement──▶ implicit ──BEGIN──▶ block ──error──▶ failed
//	  ▲                          │                  │                │
//	  └────── end of query ──────┴── COMMIT/ROLLBACK┴── COMMIT/ROLLBACK
//
// A failed block stays failed until it ends; an error outside a block ends
// the implicit transaction. Any other move is a bug in the executor, and
// txState.to panics on it rather than answer a client from a state
// PostgreSQL cannot be in.
type txPhase uint8

const (
	txNone     txPhase = iota // no transaction
	txImplicit                // a statement's (or simple query's) implicit transaction
	txBlock                   // an explicit BEGIN is open
	txFailed                  // the block saw an error: only COMMIT and ROLLBACK run
)

func (p txPhase) String() string {
	return [...]string{"none", "implicit", "block", "failed"}[p]
}

// txMoves[from][to] are the legal transitions (staying put is legal where
// the statement is idempotent: a failed block failing again).
var txMoves = [4][4]bool{
	txNone:     {txImplicit: true},
	txImplicit: {txNone: true, txBlock: true},
	txBlock:    {txNone: true, txFailed: true},
	txFailed:   {txNone: true, txFailed: true},
}

// txState is a session's transaction: its phase, the catalog transaction
// (non-nil exactly when the phase is not none), and its characteristics.
type txState struct {
	phase txPhase
	txn   *memcat.Txn
	// readOnly and repeatable are the transaction's access mode and
	// isolation (REPEATABLE READ or SERIALIZABLE: one snapshot for the
	// block).
	readOnly, repeatable bool
	start                time.Time // transaction_timestamp()
}

// to moves the transaction to phase p.
func (t *txState) to(p txPhase) {
	if !txMoves[t.phase][p] {
		panic(fmt.Sprintf("sql: impossible transaction transition %s → %s", t.phase, p))
	}
	t.phase = p
}

// begin starts txn as the implicit transaction of the statement running.
func (t *txState) begin(txn *memcat.Txn, start time.Time, readOnly bool) {
	t.to(txImplicit)
	t.txn, t.start, t.readOnly, t.repeatable = txn, start, readOnly, false
}

// end leaves the transaction, whatever its phase, and returns the catalog
// transaction for the caller to commit or roll back (nil if none).
func (t *txState) end() *memcat.Txn {
	txn := t.txn
	if t.phase != txNone {
		t.to(txNone)
	}
	*t = txState{}
	return txn
}

// inBlock reports an explicit transaction block, failed or not.
func (t *txState) inBlock() bool { return t.phase == txBlock || t.phase == txFailed }

// failed reports a block that saw an error.
func (t *txState) failed() bool { return t.phase == txFailed }

// status is what ReadyForQuery reports.
func (t *txState) status() pgwire.TxStatus {
	switch t.phase {
	case txFailed:
		return pgwire.TxFailed
	case txBlock:
		return pgwire.TxActive
	}
	return pgwire.TxIdle
}

// sessionRole is what a session's history says about its next
// transactions: a session that staged writes before pins its snapshots under
// the writers' lease (memcat); one that ended a transaction block without
// ever writing is a reader. A new session counts as a writer for blocks
// (a burst of new DuckLake connections committing at once would otherwise
// all pin the same head, and all but one fail and back off), not for single
// statements. A writer stays a writer.
type sessionRole uint8

const (
	roleNew sessionRole = iota
	roleReader
	roleWriter
)

// wrote records that a transaction of the session staged a write.
func (r *sessionRole) wrote() { *r = roleWriter }

// blockEnded records a transaction block that ended.
func (r *sessionRole) blockEnded() {
	if *r == roleNew {
		*r = roleReader
	}
}

// writer reports a session that wrote before.
func (r sessionRole) writer() bool { return r == roleWriter }

// leasedBlocks reports whether the session's transaction blocks pin under
// the writers' lease.
func (r sessionRole) leasedBlocks() bool { return r != roleReader }
