package commit

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/moraine-db/moraine/internal/catalog"
	"github.com/moraine-db/moraine/internal/commit/changes"
	"github.com/moraine-db/moraine/internal/commit/rowids"
	"github.com/moraine-db/moraine/internal/datum"
)

// HoldChecker reads the row ids of a compaction's files and checks RFC
// 0008's hold; *rowids.Checker is the implementation. It returns an error
// describing the first violation.
type HoldChecker interface {
	Check(ctx context.Context, c rowids.Compaction) error
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
	paths, err := newPathResolver(c.DB, c.Base, schema)
	if err != nil {
		return err
	}
	type req struct {
		merge   bool
		c       rowids.Compaction
		sources map[int64]int // data_file_id → index in c.Sources
	}
	reqs := map[int64]*req{}
	for tid, merge := range merges {
		k := rowids.Rewrite
		if merge {
			k = rowids.Merge
		}
		reqs[tid] = &req{merge: merge, c: rowids.Compaction{Kind: k}, sources: map[int64]int{}}
	}
	t, err := tableOf(c, schema, "ducklake_data_file")
	if err != nil {
		return nil
	}
	def, types := t.Def(), t.Types()
	col := func(name string) int { return def.ColumnIndex(name) }
	iID, iTable, iEnd, iPath, iRel, iStart, iCount, iKey := col("data_file_id"), col("table_id"), col("end_snapshot"),
		col("path"), col("path_is_relative"), col("row_id_start"), col("record_count"), col("encryption_key")
	file := func(r []datum.Value) (rowids.File, int64, error) {
		tid := r[iTable].I
		path, err := paths.resolve(r[iID].I, tid, r[iPath].S, !r[iRel].IsNull() && r[iRel].Bool())
		if err != nil {
			return rowids.File{}, 0, err
		}
		key, err := encryptionKey(r, iKey, path)
		if err != nil {
			return rowids.File{}, 0, err
		}
		return rowids.File{Path: path, RowIDStart: r[iStart].I, HasRowIDStart: !r[iStart].IsNull(), RecordCount: r[iCount].I, EncryptionKey: key}, tid, nil
	}
	decode := func(types []datum.Type, r datum.Row) ([]datum.Value, error) {
		if r == nil {
			return nil, nil
		}
		return r.Decode(types, nil)
	}
	for _, o := range ops {
		if o.Table != "ducklake_data_file" {
			continue
		}
		oldV, err := decode(types, o.Old)
		if err != nil {
			return err
		}
		newV, err := decode(types, o.New)
		if err != nil {
			return err
		}
		consume := func(v []datum.Value, merge bool) error {
			f, tid, err := file(v)
			if err != nil {
				return err
			}
			if r := reqs[tid]; r != nil && r.merge == merge {
				r.sources[v[iID].I] = len(r.c.Sources)
				r.c.Sources = append(r.c.Sources, f)
			}
			return nil
		}
		switch {
		case o.Kind == catalog.OpInsert:
			f, tid, err := file(newV)
			if err != nil {
				return err
			}
			if r := reqs[tid]; r != nil {
				r.c.Outputs = append(r.c.Outputs, f)
			}
		case o.Kind == catalog.OpDelete:
			if err := consume(oldV, true); err != nil {
				return err
			}
		case o.Kind == catalog.OpUpdate && oldV[iEnd].IsNull() && !newV[iEnd].IsNull():
			if err := consume(oldV, false); err != nil {
				return err
			}
		}
	}
	// A rewrite's sources had their deletes applied: the delete files it
	// ends name the rows the outputs may lack.
	if dt, err := tableOf(c, schema, "ducklake_delete_file"); err == nil {
		ddef, dtypes := dt.Def(), dt.Types()
		dFile, dTable, dEnd, dPath, dRel := ddef.ColumnIndex("data_file_id"), ddef.ColumnIndex("table_id"),
			ddef.ColumnIndex("end_snapshot"), ddef.ColumnIndex("path"), ddef.ColumnIndex("path_is_relative")
		dFormat, dKey, dID := ddef.ColumnIndex("format"), ddef.ColumnIndex("encryption_key"), ddef.ColumnIndex("delete_file_id")
		for _, o := range ops {
			if o.Table != "ducklake_delete_file" || o.Kind != catalog.OpUpdate {
				continue
			}
			oldV, err := decode(dtypes, o.Old)
			if err != nil {
				return err
			}
			newV, err := decode(dtypes, o.New)
			if err != nil {
				return err
			}
			if !oldV[dEnd].IsNull() || newV[dEnd].IsNull() {
				continue
			}
			r := reqs[oldV[dTable].I]
			if r == nil || r.merge {
				continue
			}
			i, ok := r.sources[oldV[dFile].I]
			if !ok {
				continue
			}
			path, err := paths.resolve(oldV[dID].I, oldV[dTable].I, oldV[dPath].S, !oldV[dRel].IsNull() && oldV[dRel].Bool())
			if err != nil {
				return err
			}
			key, err := encryptionKey(oldV, dKey, path)
			if err != nil {
				return err
			}
			df := rowids.DeleteFile{Path: path, EncryptionKey: key}
			if dFormat >= 0 && !oldV[dFormat].IsNull() {
				df.Format = oldV[dFormat].S
			}
			r.c.Sources[i].Deletes = append(r.c.Sources[i].Deletes, df)
		}
	}
	for tid, r := range reqs {
		if len(r.c.Outputs) == 0 && len(r.c.Sources) == 0 {
			continue
		}
		if err := p.opts.Hold.Check(ctx, r.c); err != nil {
			if !errors.Is(err, rowids.ErrCorrupt) {
				// Not a proven violation: the files could not be read. The
				// compaction is refused all the same (its sources stay live),
				// but the message says what went wrong.
				return &Error{Kind: ErrHold, Code: pgcode.IOError, Message: fmt.Sprintf(
					"compaction of table %d refused: cannot read its data files to check their row ids (RFC 0008): %v", tid, err)}
			}
			return &Error{Kind: ErrHold, Code: pgcode.DataCorrupted, Message: fmt.Sprintf(
				"compaction of table %d refused: its files do not hold their sources' row ids (RFC 0008): %v", tid, err)}
		}
	}
	return nil
}

// encryptionKey decodes a file row's encryption_key (base64, as DuckLake
// stores it); nil when the column is absent or NULL.
func encryptionKey(r []datum.Value, i int, path string) ([]byte, error) {
	if i < 0 || r[i].IsNull() || r[i].S == "" {
		return nil, nil
	}
	key, err := base64.StdEncoding.DecodeString(r[i].S)
	if err != nil {
		return nil, &Error{Kind: ErrHold, Code: pgcode.DataCorrupted, Message: fmt.Sprintf(
			"compaction refused: the encryption_key of %s is not base64: %v", path, err)}
	}
	return key, nil
}

// pathResolver turns a data or delete file's stored path into a readable
// location: data_path (ducklake_metadata) + schema path + table path + file
// path, each joined only when it is relative, as DuckLake resolves them
// (catalog.Version.TableDirs). On a writable branch the files it inherited
// resolve against its parent's data path (catalog/branch_write.go).
type pathResolver struct {
	dirs       map[int64]string // table id → directory
	inherited  map[int64]string // the same against the parent's data path
	nextFileID int64            // files below it are inherited
}

func newPathResolver(db *catalog.Database, v *catalog.Version, schema string) (*pathResolver, error) {
	dataPath, _ := v.MetadataValue(schema, "data_path")
	pr := &pathResolver{dirs: v.TableDirs(schema, dataPath)}
	if b := db.Branch(); b != nil && b.Writable() {
		for _, c := range b.Catalogs {
			if c.Schema == schema {
				pr.inherited, pr.nextFileID = v.TableDirs(schema, c.DataPath), c.NextFileID
			}
		}
	}
	return pr, nil
}

func (pr *pathResolver) resolve(fileID, tableID int64, path string, relative bool) (string, error) {
	if !relative {
		return path, nil
	}
	dirs := pr.dirs
	if pr.inherited != nil && fileID < pr.nextFileID {
		dirs = pr.inherited
	}
	dir, ok := dirs[tableID]
	if !ok {
		return "", fmt.Errorf("commit: data file of table %d: the table has no path in the catalog", tableID)
	}
	return catalog.JoinPath(dir, path, true), nil
}
