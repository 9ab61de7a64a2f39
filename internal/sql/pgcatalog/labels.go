package pgcatalog

import (
	"bytes"
	"strconv"
	"sync"
)

// PostgreSQL's RowDescription names, for every column that comes straight
// from a relation, the relation's OID and the column's attribute number —
// for system catalogs and information_schema views too. These are fixed by
// initdb, so moraine reports PostgreSQL 15's own numbers, read from the
// embedded sysdata (pg_class and pg_attribute).

type sysRelKey struct {
	ns   uint32
	name string
}

var sysAttrs struct {
	once  sync.Once
	rel   map[sysRelKey]uint32        // (namespace, relname) → pg_class.oid
	attno map[uint32]map[string]int16 // relid → attname → attnum
}

func loadSysAttrs() {
	sysAttrs.rel = map[sysRelKey]uint32{}
	sysAttrs.attno = map[uint32]map[string]int16{}
	if data, err := sysdataFS.ReadFile("sysdata/pg_class.tsv"); err == nil {
		for _, line := range bytes.Split(data, []byte("\n")) {
			f := bytes.Split(line, []byte("\t"))
			if len(f) < 3 {
				continue
			}
			oid, err1 := strconv.ParseUint(string(f[0]), 10, 32)
			ns, err2 := strconv.ParseUint(string(f[2]), 10, 32)
			if err1 == nil && err2 == nil {
				sysAttrs.rel[sysRelKey{uint32(ns), string(f[1])}] = uint32(oid)
			}
		}
	}
	if data, err := sysdataFS.ReadFile("sysdata/pg_attribute.tsv"); err == nil {
		for _, line := range bytes.Split(data, []byte("\n")) {
			f := bytes.Split(line, []byte("\t"))
			if len(f) < 5 {
				continue
			}
			rel, err1 := strconv.ParseUint(string(f[0]), 10, 32)
			num, err2 := strconv.ParseInt(string(f[4]), 10, 16)
			if err1 != nil || err2 != nil || num <= 0 {
				continue
			}
			m := sysAttrs.attno[uint32(rel)]
			if m == nil {
				m = map[string]int16{}
				sysAttrs.attno[uint32(rel)] = m
			}
			m[string(f[1])] = int16(num)
		}
	}
}

// label sets the relation OID and attribute numbers of a system relation's
// columns, as PostgreSQL reports them in RowDescription. Columns PostgreSQL
// does not have keep 0.
func label(r *Relation, schema, name string) {
	sysAttrs.once.Do(loadSysAttrs)
	ns := uint32(nsPgCatalog)
	if schema == "information_schema" {
		ns = nsInformationSchema
	}
	oid, ok := sysAttrs.rel[sysRelKey{ns, name}]
	if !ok {
		return
	}
	attnos := sysAttrs.attno[oid]
	for i := range r.Cols {
		if n, ok := attnos[r.Cols[i].Name]; ok {
			r.Cols[i].TableOID, r.Cols[i].Attnum = oid, n
		}
	}
}
