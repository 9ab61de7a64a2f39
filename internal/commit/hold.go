package commit

import (
	"context"
	"fmt"
	"strings"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit/changes"
	"github.com/moraine-db/moraine/internal/datum"
)

// HoldFile is one data file of a compaction, with its path resolved against
// the lake's data path.
type HoldFile struct {
	DataFileID  int64
	Path        string // absolute local path or object-store URL
	RowIDStart  int64
	RecordCount int64
}

// HoldRequest is one table's compaction: the files it registers and the
// files it consumes (hard-deletes, for a merge; ends, for a rewrite).
type HoldRequest struct {
	TableID    int64
	Merge      bool // merge_adjacent: outputs hold exactly the sources' ids; else rewrite: a subset
	Registered []HoldFile
	Consumed   []HoldFile
}

// HoldChecker reads the row ids of a compaction's files and checks RFC
// 0008's hold. It returns an error describing the first violation.
type HoldChecker interface {
	CheckHold(ctx context.Context, r HoldRequest) error
}

// checkHolds gathers, per compacted table, the files the commit registers
// and consumes, and asks the HoldChecker to compare their row ids.
func (p *Pipeline) checkHolds(ctx context.Context, c *catalog.Commit, schema string, ops []*catalog.Op, mine changes.Set) error {
	merges := map[int64]bool{}
	for _, e := range mine {
		switch e.Kind {
		case changes.MergeAdjacent:
			merges[e.ID] = true
		case changes.RewriteDelete:
			if _, ok := merges[e.ID]; !ok {
				merges[e.ID] = false
			}
		}
	}
	paths, err := newPathResolver(c.Base, schema)
	if err != nil {
		return err
	}
	reqs := map[int64]*HoldRequest{}
	for tid, merge := range merges {
		reqs[tid] = &HoldRequest{TableID: tid, Merge: merge}
	}
	t, err := tableOf(c, schema, "ducklake_data_file")
	if err != nil {
		return nil
	}
	def, types := t.Def(), t.Types()
	col := func(name string) int { return def.ColumnIndex(name) }
	iID, iTable, iEnd, iPath, iRel, iStart, iCount := col("data_file_id"), col("table_id"), col("end_snapshot"),
		col("path"), col("path_is_relative"), col("row_id_start"), col("record_count")
	file := func(r []datum.Value) (HoldFile, int64, error) {
		tid := r[iTable].I
		path, err := paths.resolve(tid, r[iPath].S, !r[iRel].IsNull() && r[iRel].Bool())
		if err != nil {
			return HoldFile{}, 0, err
		}
		return HoldFile{DataFileID: r[iID].I, Path: path, RowIDStart: r[iStart].I, RecordCount: r[iCount].I}, tid, nil
	}
	for _, o := range ops {
		if o.Table != "ducklake_data_file" {
			continue
		}
		var oldV, newV []datum.Value
		if o.Old != nil {
			if oldV, err = o.Old.Decode(types, nil); err != nil {
				return err
			}
		}
		if o.New != nil {
			if newV, err = o.New.Decode(types, nil); err != nil {
				return err
			}
		}
		switch o.Kind {
		case catalog.OpInsert:
			f, tid, err := file(newV)
			if err != nil {
				return err
			}
			if r := reqs[tid]; r != nil {
				r.Registered = append(r.Registered, f)
			}
		case catalog.OpDelete:
			f, tid, err := file(oldV)
			if err != nil {
				return err
			}
			if r := reqs[tid]; r != nil && r.Merge {
				r.Consumed = append(r.Consumed, f)
			}
		case catalog.OpUpdate:
			if oldV[iEnd].IsNull() && !newV[iEnd].IsNull() {
				f, tid, err := file(oldV)
				if err != nil {
					return err
				}
				if r := reqs[tid]; r != nil && !r.Merge {
					r.Consumed = append(r.Consumed, f)
				}
			}
		}
	}
	for _, r := range reqs {
		if len(r.Registered) == 0 && len(r.Consumed) == 0 {
			continue
		}
		if err := p.opts.Hold.CheckHold(ctx, *r); err != nil {
			return &Error{Kind: ErrHold, Code: "XX001", Message: fmt.Sprintf(
				"compaction of table %d refused: its files do not hold their sources' row ids (RFC 0008): %v", r.TableID, err)}
		}
	}
	return nil
}

// pathResolver turns a data file's stored path into a readable location:
// data_path (ducklake_metadata) + schema path + table path + file path, each
// joined only when it is relative, as DuckLake resolves them.
type pathResolver struct {
	dataPath string
	tables   map[int64][2]string // table id → schema path, table path (resolved)
}

func newPathResolver(v *catalog.Version, schema string) (*pathResolver, error) {
	pr := &pathResolver{tables: map[int64][2]string{}}
	if t, err := v.Table(schema, "ducklake_metadata"); err == nil {
		def := t.Def()
		ik, iv, is := def.ColumnIndex("key"), def.ColumnIndex("value"), def.ColumnIndex("scope")
		t.Scan(func(_ catalog.CTID, r datum.Row) bool {
			vals, err := r.Decode(t.Types(), nil)
			if err == nil && vals[ik].S == "data_path" && (is < 0 || vals[is].IsNull() || vals[is].S == "") {
				pr.dataPath = vals[iv].S
			}
			return true
		})
	}
	schemaPaths := map[int64]string{}
	if t, err := v.Table(schema, "ducklake_schema"); err == nil {
		def := t.Def()
		iID, iEnd, iPath, iRel := def.ColumnIndex("schema_id"), def.ColumnIndex("end_snapshot"), def.ColumnIndex("path"), def.ColumnIndex("path_is_relative")
		t.Scan(func(_ catalog.CTID, r datum.Row) bool {
			vals, err := r.Decode(t.Types(), nil)
			if err != nil || !vals[iEnd].IsNull() || iPath < 0 {
				return true
			}
			schemaPaths[vals[iID].I] = join(pr.dataPath, vals[iPath].S, vals[iRel].IsNull() || vals[iRel].Bool())
			return true
		})
	}
	if t, err := v.Table(schema, "ducklake_table"); err == nil {
		def := t.Def()
		iID, iSchema, iEnd, iPath, iRel := def.ColumnIndex("table_id"), def.ColumnIndex("schema_id"), def.ColumnIndex("end_snapshot"), def.ColumnIndex("path"), def.ColumnIndex("path_is_relative")
		t.Scan(func(_ catalog.CTID, r datum.Row) bool {
			vals, err := r.Decode(t.Types(), nil)
			if err != nil || iPath < 0 {
				return true
			}
			// Prefer the current row; an ended row still resolves files of a
			// table dropped since.
			if _, seen := pr.tables[vals[iID].I]; seen && !vals[iEnd].IsNull() {
				return true
			}
			sp := schemaPaths[vals[iSchema].I]
			pr.tables[vals[iID].I] = [2]string{sp, join(sp, vals[iPath].S, vals[iRel].IsNull() || vals[iRel].Bool())}
			return true
		})
	}
	return pr, nil
}

func (pr *pathResolver) resolve(tableID int64, path string, relative bool) (string, error) {
	if !relative {
		return path, nil
	}
	tp, ok := pr.tables[tableID]
	if !ok {
		return "", fmt.Errorf("commit: data file of table %d: the table has no path in the catalog", tableID)
	}
	return join(tp[1], path, true), nil
}

func join(base, p string, relative bool) string {
	if !relative || base == "" {
		return p
	}
	if strings.HasSuffix(base, "/") {
		return base + p
	}
	return base + "/" + p
}
