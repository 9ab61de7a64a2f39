package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/moraine-db/moraine/internal/commit/changes"
)

// liveFile is one current data file as the compactor's candidate scan saw it.
type liveFile struct {
	id, table, begin, records, size int64
	rowIDStart                      int64
	hasStart                        bool
	partialMax                      int64
	hasPartial                      bool
	path                            string
}

func (d *driver) compactor(ctx context.Context, conn *pgconn.PgConn, stop <-chan struct{}) error {
	rng := rand.New(rand.NewPCG(d.cfg.Seed, 1<<32))
	for round := 0; ; round++ {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return nil
		case <-time.After(d.cfg.CompactPause):
		}
		table := d.tables[round%len(d.tables)]
		base, err := d.begin(ctx, conn)
		if err != nil {
			return err
		}
		sources, err := d.mergeCandidates(ctx, conn, table)
		if err != nil {
			_ = exec(ctx, conn, "ROLLBACK")
			return err
		}
		if len(sources) < 2 {
			// Nothing to do: DuckLake commits the empty metadata transaction.
			if err := exec(ctx, conn, "COMMIT"); err != nil {
				return fmt.Errorf("empty compaction commit: %w", err)
			}
			if err := poolReturn(ctx, conn); err != nil {
				return err
			}
			continue
		}
		tag := fmt.Sprintf("compactor-%d", round)
		m, err := d.planMerge(table, sources)
		if err == nil {
			err = d.readPaths(ctx, conn)
		}
		if err != nil {
			_ = exec(ctx, conn, "ROLLBACK")
			return err
		}
		p := plan{kind: "merge", tag: tag, writer: -1, nth: round, table: table, paths: true,
			mine:  changes.Set{{Kind: changes.MergeAdjacent, ID: table}},
			build: func(base snapshot, _ *stats) (string, Landed) { return d.mergeBatch(base, table, sources, m, tag) },
		}
		out, err := d.commitTail(ctx, conn, rng, base, nil, p)
		if err == nil {
			err = poolReturn(ctx, conn)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		d.mu.Lock()
		d.mu.res.MergeRetries += out.retries
		switch {
		case out.failed:
			d.mu.res.MergeFailed++
			if out.conflict {
				d.mu.res.MergeConflicts++
			}
		default:
			d.mu.res.Merges++
		}
		d.mu.Unlock()
	}
}

// mergeCandidates scans ducklake_data_file (DuckDB streams the whole table)
// and picks a run of up to MergeFiles small live files of table, ordered as
// DuckLake orders them (begin_snapshot, row_id_start, data_file_id). Unless
// merged files embed their row ids, the run must be row-id adjacent.
func (d *driver) mergeCandidates(ctx context.Context, conn *pgconn.PgConn, table int64) ([]liveFile, error) {
	rows, err := copyOut(ctx, conn, localScan(d.q, "ducklake_data_file", "data_file_id", "table_id", "begin_snapshot", "end_snapshot",
		"path", "path_is_relative", "record_count", "file_size_bytes", "row_id_start", "partial_max"))
	if err != nil {
		return nil, fmt.Errorf("compaction candidates: %w", err)
	}
	var files []liveFile
	for _, r := range rows {
		if len(r) < 10 {
			return nil, fmt.Errorf("compaction candidates: %w", errCopyFormat)
		}
		v, err := int8s(r, 3)
		if err != nil {
			return nil, fmt.Errorf("compaction candidates: %w", err)
		}
		if v[1] != table || r[3] != nil {
			continue
		}
		f := liveFile{id: v[0], table: v[1], begin: v[2], path: string(r[4])}
		var errs [4]error
		f.records, _, errs[0] = int8(r[6])
		f.size, _, errs[1] = int8(r[7])
		f.rowIDStart, f.hasStart, errs[2] = int8(r[8])
		f.partialMax, f.hasPartial, errs[3] = int8(r[9])
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("compaction candidates: %w", err)
		}
		if f.records >= d.cfg.MergeMaxRows {
			continue
		}
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool {
		a, b := files[i], files[j]
		if a.begin != b.begin {
			return a.begin < b.begin
		}
		if a.rowIDStart != b.rowIDStart {
			return a.rowIDStart < b.rowIDStart
		}
		return a.id < b.id
	})
	var best []liveFile
	for i := 0; i < len(files) && len(best) < 2; i++ {
		run := []liveFile{files[i]}
		for j := i + 1; j < len(files) && len(run) < d.cfg.MergeFiles; j++ {
			prev := run[len(run)-1]
			if !d.cfg.MergeEmbedsIDs && (!prev.hasStart || !files[j].hasStart || prev.rowIDStart+prev.records != files[j].rowIDStart) {
				break
			}
			run = append(run, files[j])
		}
		if len(run) >= 2 {
			best = run
		}
	}
	return best, nil
}

// mergeOut is the merged file a compaction registers; it depends only on
// the sources, so it is computed (and, with DataDir, written) once before
// the commit and reused by every attempt.
type mergeOut struct {
	path       string // relative to the table
	records    int64
	size       int64
	partialMax int64
	spans      []Span
}

func (d *driver) planMerge(table int64, sources []liveFile) (mergeOut, error) {
	m := mergeOut{path: "ducklake-" + uuidString(newUUID()) + ".parquet", partialMax: math.MinInt64}
	d.mu.Lock()
	for _, src := range sources {
		m.records += src.records
		m.size += src.size
		pm := src.begin
		if src.hasPartial {
			pm = src.partialMax
		}
		m.partialMax = max(m.partialMax, pm)
		if src.hasStart {
			m.spans = append(m.spans, Span{src.rowIDStart, src.rowIDStart + src.records})
		} else {
			m.spans = append(m.spans, d.mu.files[src.id].RowIDs...)
		}
	}
	d.mu.Unlock()
	m.spans = normalize(m.spans)
	m.size = m.size * 9 / 10
	if d.cfg.DataDir != "" {
		var embed []int64
		if d.cfg.MergeEmbedsIDs {
			embed = expandSpans(m.spans)
		}
		size, err := writeDataFile(d.localPath(table, m.path), d.cols, m.records, embed)
		if err != nil {
			return mergeOut{}, err
		}
		m.size = size
	}
	return m, nil
}

// mergeBatch is a merge_adjacent commit (RFC 0008; §3.10): hard-delete the
// sources and everything keyed by their ids, schedule their paths, insert
// the merged file backdated to the first source's begin_snapshot.
func (d *driver) mergeBatch(base snapshot, table int64, sources []liveFile, m mergeOut, tag string) (string, Landed) {
	s := base.id + 1
	ids := make([]int64, len(sources))
	for i, src := range sources {
		ids[i] = src.id
	}
	f := fileSpec{
		id: base.nextFileID, table: table, begin: sources[0].begin, path: m.path, records: m.records,
		size: m.size, footer: int64(200 + 40*len(d.cols)),
		partialMax: m.partialMax, hasPartial: len(sources) > 1,
		rowIDs: m.spans, statsColumn: d.cols,
	}
	if !d.cfg.MergeEmbedsIDs {
		f.rowIDStart, f.hasStart = sources[0].rowIDStart, sources[0].hasStart
	}
	list := inList(ids)
	var dels []string
	for _, t := range []string{"ducklake_data_file", "ducklake_file_column_stats", "ducklake_delete_file", "ducklake_file_partition_value", "ducklake_file_variant_stats"} {
		dels = append(dels, fmt.Sprintf("DELETE FROM %s.%s\nWHERE data_file_id IN (%s)", d.q, t, list))
	}
	var sched []string
	for _, src := range sources {
		sched = append(sched, fmt.Sprintf("(%d, %s, true, NOW())", src.id, quoteLiteral("main/"+d.tableDir(table)+src.path)))
	}
	batch := snapshotSQL(d.q, s, base.schemaVersion, base.nextCatalogID, base.nextFileID+1) + ";\n" +
		strings.Join(dels, ";\n\n") + ";\n" +
		fmt.Sprintf("INSERT INTO %s.ducklake_files_scheduled_for_deletion VALUES %s", d.q, strings.Join(sched, ", ")) + ";" +
		joinBatch([]string{f.insertSQL(d.q), f.statsSQL(d.q),
			changesSQL(d.q, s, changes.Set{{Kind: changes.MergeAdjacent, ID: table}}.String(), tag)})
	return batch, Landed{Snapshot: s, Table: table, File: f.id, Path: d.localPath(table, m.path), Sources: ids, Begin: f.begin, RowIDs: m.spans, Records: m.records}
}

// tableDir is the table's path relative to schema main ("t<i>/").
func (d *driver) tableDir(table int64) string {
	for i, id := range d.tables {
		if id == table {
			return fmt.Sprintf("t%d/", i+1)
		}
	}
	return fmt.Sprintf("t%d/", table)
}

// localPath is where a table's data file lives under DataDir (or, without
// DataDir, the catalog's relative path).
func (d *driver) localPath(table int64, file string) string {
	if d.cfg.DataDir == "" {
		return file
	}
	return filepath.Join(d.cfg.DataDir, "main", d.tableDir(table), file)
}

// normalize sorts spans and coalesces touching ones.
func normalize(in []Span) []Span {
	s := append([]Span(nil), in...)
	sort.Slice(s, func(i, j int) bool { return s[i].Lo < s[j].Lo })
	var out []Span
	for _, x := range s {
		if n := len(out); n > 0 && out[n-1].Hi == x.Lo {
			out[n-1].Hi = x.Hi
			continue
		}
		out = append(out, x)
	}
	return out
}
