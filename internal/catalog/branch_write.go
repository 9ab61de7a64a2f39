package catalog

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/keyspace"
	"github.com/moraine-db/moraine/internal/pgcode"
)

// A writable branch is forked with a data path of its own. Its catalogs
// get catalog ids of their own: what it writes is stored under them and
// overlays what it reads of the parent at the fork (keyspace.Branch;
// a hidden value stands for a row the branch deleted), so a fork still
// writes no row of the parent's again.
//
// DuckLake resolves a file's relative path against the catalog's data
// path, and its maintenance functions delete files in the client:
// ducklake_delete_orphaned_files deletes every file under the data path
// that no data-file, delete-file or schedule row names. A branch sharing
// its parent's data path would lose the parent's new files to its own
// orphan cleanup, and the parent the branch's. So the branch writes under
// a data path of its own, disjoint from its parent's (neither contains the
// other); the files it inherited stay in the parent's, and it is served
// their rows with the paths made absolute (memcat: the branch's view of
// ducklake_data_file and ducklake_delete_file), which is where DuckDB
// reads them and where the branch's orphan cleanup never looks. The fork
// drops from the branch the parent's deletion schedule (files the parent
// already gave up; its own cleanup deletes them), and the branch may not
// remove, schedule or expire what it inherited (checkBranches): those
// files are the parent's.

// writableFork prepares the fork of v into a writable branch writing
// under dataPath: it checks the parent's catalog can be branched so, gives
// each catalog of rec its own id and the parent's data path, and returns
// the branch's first version (v with its catalogs under their own ids) and
// the fork commit's writes (the branch's data path, the schedule dropped).
func (s *Server) writableFork(v *Version, rec *keyspace.Branch, dataPath string) (*Version, func(*Txn) error, error) {
	dataPath = withSlash(dataPath)
	var lake string
	lakes := 0
	for i := range rec.Catalogs {
		c := &rec.Catalogs[i]
		sc, _ := v.Schema(c.Schema)
		if _, ok := sc.Table("ducklake_metadata"); !ok {
			continue
		}
		lakes++
		lake = c.Schema
		parentPath, ok := metadataValue(sc, "data_path")
		if !ok || parentPath == "" {
			return nil, nil, &Error{Kind: ErrBadDef, Code: pgcode.FeatureNotSupported,
				Message: fmt.Sprintf("cannot fork %q with a data path: its DuckLake catalog %s has no data_path", rec.Parent, c.Schema)}
		}
		c.DataPath = withSlash(parentPath)
		if strings.HasPrefix(dataPath, c.DataPath) || strings.HasPrefix(c.DataPath, dataPath) {
			return nil, nil, &Error{Kind: ErrBadDef, Code: pgcode.InvalidParameterValue,
				Message: fmt.Sprintf("the branch's data path %q overlaps %q's data path %q", dataPath, rec.Parent, c.DataPath),
				Detail:  "Each side's ducklake_delete_orphaned_files deletes what its own catalog does not name under its data path: neither may contain the other."}
		}
		for _, table := range []string{"ducklake_schema", "ducklake_table"} {
			if name, ok := absolutePath(sc, table); ok {
				return nil, nil, &Error{Kind: ErrBadDef, Code: pgcode.FeatureNotSupported,
					Message: fmt.Sprintf("cannot fork %q with a data path: %s %q has an absolute path, where the branch's new files would land among %q's", rec.Parent, strings.TrimPrefix(table, "ducklake_"), name, rec.Parent)}
			}
		}
	}
	if lakes != 1 {
		return nil, nil, &Error{Kind: ErrBadDef, Code: pgcode.FeatureNotSupported,
			Message: fmt.Sprintf("cannot fork %q with a data path: it holds %d DuckLake catalogs, and a writable branch takes one", rec.Parent, lakes)}
	}
	// Nor may it overlap the data path of any other lake of the server (a
	// sibling branch's above all): each one's orphan cleanup would take
	// the other's files.
	for name, other := range s.dataPaths() {
		if strings.HasPrefix(dataPath, other) || strings.HasPrefix(other, dataPath) {
			return nil, nil, &Error{Kind: ErrBadDef, Code: pgcode.InvalidParameterValue,
				Message: fmt.Sprintf("the branch's data path %q overlaps %s's data path %q", dataPath, name, other),
				Detail:  "Each lake's ducklake_delete_orphaned_files deletes what its own catalog does not name under its data path: no data path may contain another."}
		}
	}
	// Nor may it hold a file any lake names by absolute path (a merged
	// branch's files, which stay under the data path it had; DuckLake's
	// add_files): this branch's orphan cleanup would take it.
	if name, path, ok := s.namedUnder(dataPath); ok {
		return nil, nil, &Error{Kind: ErrBadDef, Code: pgcode.InvalidParameterValue,
			Message: fmt.Sprintf("the branch's data path %q holds %q, a file %s names", dataPath, path, name),
			Detail:  "The branch's ducklake_delete_orphaned_files would delete it: its data path must hold no file another lake reads."}
	}
	b := newBuilder(v)
	for i := range rec.Catalogs {
		c := &rec.Catalogs[i]
		c.OwnID = s.allocCatalogID()
		own, err := b.ownSchema(c.Schema)
		if err != nil {
			return nil, nil, err
		}
		own.CatalogID = c.OwnID
	}
	fork := func(t *Txn) error {
		if rec.HasAt {
			if err := materializeAt(t, lake, rec.At); err != nil {
				return err
			}
		}
		if err := setMetadata(t, lake, "data_path", dataPath); err != nil {
			return err
		}
		st, err := t.Peek(lake, "ducklake_files_scheduled_for_deletion")
		if err != nil {
			return nil
		}
		var gone []CTID
		st.Scan(func(c CTID, _ datum.Row) bool { gone = append(gone, c); return true })
		for _, c := range gone {
			if err := t.DeleteRow(lake, "ducklake_files_scheduled_for_deletion", c); err != nil {
				return err
			}
		}
		return nil
	}
	return b.finish(), fork, nil
}

// dataPaths returns the data path of every DuckLake catalog of every
// database of the server, by "database.schema".
func (s *Server) dataPaths() map[string]string {
	out := map[string]string{}
	for _, db := range s.live() {
		for _, sc := range db.Current().Schemas() {
			if p, ok := metadataValue(sc, "data_path"); ok && p != "" {
				out[db.name+"."+sc.Name] = withSlash(p)
			}
		}
	}
	return out
}

// namedUnder finds a data or delete file that a DuckLake catalog of the
// server names by an absolute path under dir: the catalog's name, the path.
// It reads every file row of every catalog (tables a branch shares with
// its parent once).
func (s *Server) namedUnder(dir string) (name, path string, found bool) {
	seen := map[*Table]bool{}
	for _, db := range s.live() {
		for _, sc := range db.Current().Schemas() {
			for _, table := range []string{"ducklake_data_file", "ducklake_delete_file"} {
				t, ok := sc.Table(table)
				if !ok || seen[t] {
					continue
				}
				seen[t] = true
				pc, rc := t.Def().ColumnIndex("path"), t.Def().ColumnIndex("path_is_relative")
				if pc < 0 || rc < 0 {
					continue
				}
				t.Scan(func(_ CTID, r datum.Row) bool {
					rel, err := r.Column(t.Types(), rc)
					if err != nil || rel.IsNull() || rel.I != 0 {
						return true
					}
					p, err := r.Column(t.Types(), pc)
					if err == nil && !p.IsNull() && strings.HasPrefix(p.S, dir) {
						name, path, found = db.name+"."+sc.Name, p.S, true
					}
					return !found
				})
				if found {
					return name, path, true
				}
			}
		}
	}
	return "", "", false
}

// live returns the databases not dropped.
func (s *Server) live() []*Database {
	s.mu.Lock()
	defer s.mu.Unlock()
	dbs := make([]*Database, 0, len(s.mu.dbs))
	for _, db := range s.mu.dbs {
		if !db.dropped.Load() {
			dbs = append(dbs, db)
		}
	}
	return dbs
}

func withSlash(p string) string {
	if !strings.HasSuffix(p, "/") {
		return p + "/"
	}
	return p
}

// metadataValue is the catalog-wide (scope NULL) ducklake_metadata value
// of key.
func metadataValue(sc *Schema, key string) (string, bool) {
	t, ok := sc.Table("ducklake_metadata")
	if !ok {
		return "", false
	}
	var out string
	found := false
	t.Scan(func(_ CTID, r datum.Row) bool {
		vals, err := r.Decode(t.Types(), nil)
		if err != nil || len(vals) < 3 || vals[0].IsNull() || vals[0].S != key || !vals[2].IsNull() {
			return true
		}
		out, found = vals[1].S, !vals[1].IsNull()
		return false
	})
	return out, found
}

// setMetadata sets the catalog-wide ducklake_metadata value of key.
func setMetadata(t *Txn, schema, key, value string) error {
	mt, err := t.Peek(schema, "ducklake_metadata")
	if err != nil {
		return err
	}
	var at CTID
	var vals []datum.Value
	mt.Scan(func(c CTID, r datum.Row) bool {
		v, err := r.Decode(mt.Types(), nil)
		if err == nil && len(v) >= 3 && !v[0].IsNull() && v[0].S == key && v[2].IsNull() {
			at, vals = c, v
			return false
		}
		return true
	})
	if vals == nil {
		return fmt.Errorf("catalog: %s.ducklake_metadata has no %s", schema, key)
	}
	vals[1] = datum.TextValue(value)
	_, err = t.UpdateRow(schema, "ducklake_metadata", at, vals)
	return err
}

// absolutePath returns the name of a row of a DuckLake schema or table
// table whose path is absolute, if one is.
func absolutePath(sc *Schema, table string) (string, bool) {
	t, ok := sc.Table(table)
	if !ok {
		return "", false
	}
	rel, name := -1, -1
	for i, c := range t.Def().Columns {
		switch c.Name {
		case "path_is_relative":
			rel = i
		case "schema_name", "table_name":
			name = i
		}
	}
	if rel < 0 {
		return "", false
	}
	var out string
	found := false
	t.Scan(func(_ CTID, r datum.Row) bool {
		v, err := r.Column(t.Types(), rel)
		if err != nil || v.IsNull() || v.I != 0 {
			return true
		}
		found = true
		if name >= 0 {
			if n, err := r.Column(t.Types(), name); err == nil {
				out = n.S
			}
		}
		return false
	})
	return out, found
}

// inheritedFile reports whether id names a file the writable branch db
// inherited in schema: one its parent wrote before the fork.
func (db *Database) inheritedFile(schema string, id int64) (keyspace.BranchCatalog, bool) {
	if db.branch == nil {
		return keyspace.BranchCatalog{}, false
	}
	for _, c := range db.branch.Catalogs {
		if c.Schema == schema {
			return c, id < c.NextFileID
		}
	}
	return keyspace.BranchCatalog{}, false
}

// checkOwnFiles refuses a commit of the writable branch db that would
// remove the row of a file it inherited or schedule one for deletion:
// those files are its parent's, in its parent's data path.
func (db *Database) checkOwnFiles(ops []Op) error {
	for i := range ops {
		o := &ops[i]
		var row datum.Row
		switch {
		case o.Kind == OpDelete && (o.Table == "ducklake_data_file" || o.Table == "ducklake_delete_file"):
			row = o.Old
		case o.Kind == OpInsert && o.Table == "ducklake_files_scheduled_for_deletion":
			row = o.New
		default:
			continue
		}
		v, err := row.Column(db.tableTypes(o.Schema, o.Table), 0)
		if err != nil || v.IsNull() {
			continue
		}
		if c, ok := db.inheritedFile(o.Schema, v.Int()); ok {
			return &Error{Kind: ErrBranchPinned, Code: pgcode.ObjectInUse, Schema: o.Schema, Table: o.Table,
				Message: fmt.Sprintf("file %d is %q's: database %q inherited it when it was forked at snapshot %d", v.Int(), db.branch.Parent, db.name, c.Snapshot),
				Detail:  "A branch reads its parent's files in place and may not remove, schedule or expire them."}
		}
	}
	return nil
}

// tableTypes are the column types of schema.table in db's current version.
func (db *Database) tableTypes(schema, table string) []datum.Type {
	t, err := db.cur.Load().Table(schema, table)
	if err != nil {
		return nil
	}
	return t.Types()
}

// TableDirs resolves the directory of every DuckLake table of schema in v
// as DuckLake does for a relative file path: the data path, the schema's
// path, the table's path, each joined only when relative. A table's
// current row wins; an ended one still resolves the files of a table
// dropped since.
func (v *Version) TableDirs(schema, dataPath string) map[int64]string {
	schemas := map[int64]string{}
	if t, err := v.Table(schema, "ducklake_schema"); err == nil {
		id, end, path, rel := t.Def().ColumnIndex("schema_id"), t.Def().ColumnIndex("end_snapshot"), t.Def().ColumnIndex("path"), t.Def().ColumnIndex("path_is_relative")
		if id >= 0 && end >= 0 && path >= 0 && rel >= 0 {
			t.Scan(func(_ CTID, r datum.Row) bool {
				vals, err := r.Decode(t.Types(), nil)
				if err == nil && vals[end].IsNull() {
					schemas[vals[id].I] = JoinPath(dataPath, vals[path].S, vals[rel].IsNull() || vals[rel].I != 0)
				}
				return true
			})
		}
	}
	out := map[int64]string{}
	t, err := v.Table(schema, "ducklake_table")
	if err != nil {
		return out
	}
	id, sid, end, path, rel := t.Def().ColumnIndex("table_id"), t.Def().ColumnIndex("schema_id"), t.Def().ColumnIndex("end_snapshot"), t.Def().ColumnIndex("path"), t.Def().ColumnIndex("path_is_relative")
	if id < 0 || sid < 0 || end < 0 || path < 0 || rel < 0 {
		return out
	}
	current := map[int64]bool{}
	t.Scan(func(_ CTID, r datum.Row) bool {
		vals, err := r.Decode(t.Types(), nil)
		if err != nil || (current[vals[id].I] && !vals[end].IsNull()) {
			return true
		}
		current[vals[id].I] = vals[end].IsNull()
		out[vals[id].I] = JoinPath(schemas[vals[sid].I], vals[path].S, vals[rel].IsNull() || vals[rel].I != 0)
		return true
	})
	return out
}

// JoinPath is DuckLake's join of a path onto the one it is relative to:
// p itself when it is absolute (or there is nothing to join it to).
func JoinPath(base, p string, relative bool) string {
	if !relative || base == "" {
		return p
	}
	if strings.HasSuffix(base, "/") {
		return base + p
	}
	return base + "/" + p
}

// MetadataValue is the catalog-wide ducklake_metadata value of key in
// schema's DuckLake catalog.
func (v *Version) MetadataValue(schema, key string) (string, bool) {
	sc, ok := v.Schema(schema)
	if !ok {
		return "", false
	}
	return metadataValue(sc, key)
}

// releaseBranchFiles hands the files a dropped writable branch wrote to its
// parent's deletion schedule, so that the parent's own
// ducklake_cleanup_old_files deletes them: nothing the branch wrote is
// left behind for good. The files are under the branch's data path, which
// the parent's catalog names nowhere else; their schedule rows carry
// absolute paths and ids DuckLake never allocates (ReleasedID), so the
// parent's cleanup deleting them by id touches no row of its own.
func (s *Server) releaseBranchFiles(ctx context.Context, name string, b *keyspace.Branch, v *Version) error {
	p, ok := s.Lookup(b.Parent)
	if !ok {
		return errNoDatabase(b.Parent)
	}
	now := datum.TimestampTZValue(time.Now().UnixMicro() - pgEpochMicros)
	t := p.BeginLatest()
	for _, c := range b.Catalogs {
		sc, ok := v.Schema(c.Schema)
		if !ok {
			continue
		}
		if _, ok := sc.Table("ducklake_files_scheduled_for_deletion"); !ok {
			continue
		}
		files, err := ownFiles(v, sc, c)
		if err != nil {
			return err
		}
		for _, f := range files {
			vals := []datum.Value{datum.IntValue(ReleasedID(c.OwnID, f.id)), datum.TextValue(f.path), datum.BoolValue(false), now}
			if _, err := t.InsertRow(c.Schema, "ducklake_files_scheduled_for_deletion", vals); err != nil {
				t.Rollback()
				return err
			}
		}
	}
	if len(t.Ops()) == 0 {
		t.Rollback()
		return nil
	}
	return t.Commit(ctx)
}

// pgEpochMicros is 2000-01-01 in Unix microseconds.
const pgEpochMicros = 946684800 * 1_000_000

// ReleasedID is the schedule id of file id of a dropped branch's catalog
// own: above 2^62, where DuckLake's ids (counted from 0 by next_file_id)
// never reach, and distinct per branch catalog.
func ReleasedID(own uint32, id int64) int64 {
	return 1<<62 | int64(own)<<30 | id&(1<<30-1)
}

type ownFile struct {
	id   int64
	path string
}

// ownFiles lists the files branch catalog c wrote, as of v: its data and
// delete files of any snapshot and what it scheduled, with absolute paths.
func ownFiles(v *Version, sc *Schema, c keyspace.BranchCatalog) ([]ownFile, error) {
	dataPath, _ := metadataValue(sc, "data_path")
	dataPath = withSlash(dataPath)
	dirs := v.TableDirs(sc.Name, dataPath)
	seen := map[string]bool{}
	var out []ownFile
	add := func(id int64, path string) {
		if !seen[path] {
			seen[path] = true
			out = append(out, ownFile{id, path})
		}
	}
	for _, table := range []string{"ducklake_data_file", "ducklake_delete_file", "ducklake_files_scheduled_for_deletion"} {
		t, ok := sc.Table(table)
		if !ok {
			continue
		}
		pc, rc, tc := t.Def().ColumnIndex("path"), t.Def().ColumnIndex("path_is_relative"), t.Def().ColumnIndex("table_id")
		if pc < 0 || rc < 0 {
			return nil, fmt.Errorf("catalog: %s has no path", table)
		}
		var buf []datum.Value
		t.Scan(func(_ CTID, r datum.Row) bool {
			vals, err := r.Decode(t.Types(), buf[:0])
			if err != nil || vals[0].IsNull() || vals[0].I < c.NextFileID || vals[pc].IsNull() {
				return true
			}
			buf = vals
			path := vals[pc].S
			if vals[rc].IsNull() || vals[rc].I != 0 {
				switch {
				case tc < 0:
					path = dataPath + path // the schedule: relative to the data path
				default:
					dir, ok := dirs[vals[tc].I]
					if !ok {
						return true
					}
					path = JoinPath(dir, path, true)
				}
			}
			add(vals[0].I, path)
			return true
		})
	}
	return out, nil
}
