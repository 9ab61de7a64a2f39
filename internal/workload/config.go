package workload

import (
	"context"
	"path/filepath"
	"runtime/metrics"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Config describes one workload run.
type Config struct {
	// ConnString is a libpq conninfo or URL; Dial, when set, is used instead.
	ConnString string
	Dial       func(ctx context.Context) (*pgconn.PgConn, error)

	Schema   string // metadata schema; default "public"
	DataPath string // ducklake_metadata data_path; default "/lake/workload/", or DataDir + "/"
	// DataDir, when set, makes the driver write every data file it
	// registers as a real Parquet file under DataDir/main/t<i>/ (merged
	// files with embedded row ids when they are not row-id adjacent), so a
	// server that holds compactions to their row ids (RFC 0008) can read
	// them. Without it no file is written.
	DataDir string

	Writers          int // concurrent writers; default 4
	CommitsPerWriter int // the timed window counts Writers×CommitsPerWriter commits; default 10
	Tables           int // default 4
	Columns          int // user columns per table = stats rows per file; default 8
	RowsPerFile      int // mean records per data file; default 100

	// Warmup commits come first, untimed: the timed window opens when
	// that many writer commits have ended, whichever writers made them,
	// and counts Writers×CommitsPerWriter more (Run); Result
	// counts only the window's (every commit is in Landed and verified). A
	// server's first commits pay for what a running one already has —
	// memory the process has not touched yet, connections' first
	// statements — which is not what a steady stream of commits costs.
	Warmup int
	// ServerRunQueue, when set, reads the server's scheduler latency
	// histogram (a server in another process); the timed window then
	// reports how long the server's goroutines waited to run
	// (CPUUse.ServerRunQueue). A failed reading leaves it unmeasured.
	ServerRunQueue func(ctx context.Context) (*metrics.Float64Histogram, error)

	Compactor      bool          // run a concurrent merge compactor
	CompactPause   time.Duration // pause between compactor rounds; default 10ms
	MergeFiles     int           // max sources per merge; default 4
	MergeMaxRows   int64         // only files smaller than this merge; default RowsPerFile×MergeFiles
	MergeEmbedsIDs bool          // merged files embed row ids (row_id_start NULL), as the bundled DuckLake does

	MaxRetries   int           // DuckLake's ducklake_max_retry_count; default 10
	RetryWait    time.Duration // ducklake_retry_wait_ms; default 100ms
	RetryBackoff float64       // ducklake_retry_backoff; default 1.5

	Seed uint64 // randomness seed (table choice, file sizes, backoff jitter)
}

// WithDefaults is c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Schema == "" {
		c.Schema = "public"
	}
	if c.DataPath == "" {
		c.DataPath = "/lake/workload/"
		if c.DataDir != "" {
			c.DataPath = filepath.ToSlash(c.DataDir) + "/"
		}
	}
	if c.Writers <= 0 {
		c.Writers = 4
	}
	if c.CommitsPerWriter <= 0 {
		c.CommitsPerWriter = 10
	}
	if c.Tables <= 0 {
		c.Tables = 4
	}
	if c.Columns <= 0 {
		c.Columns = 8
	}
	if c.RowsPerFile <= 0 {
		c.RowsPerFile = 100
	}
	if c.CompactPause <= 0 {
		c.CompactPause = 10 * time.Millisecond
	}
	if c.MergeFiles < 2 {
		c.MergeFiles = 4
	}
	if c.MergeMaxRows <= 0 {
		c.MergeMaxRows = int64(c.RowsPerFile * c.MergeFiles)
	}
	if c.MaxRetries < 0 {
		c.MaxRetries = 0
	} else if c.MaxRetries == 0 {
		c.MaxRetries = 10
	}
	if c.RetryWait <= 0 {
		c.RetryWait = 100 * time.Millisecond
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 1.5
	}
	return c
}
