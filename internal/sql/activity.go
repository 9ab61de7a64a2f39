package sql

import (
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/sql/memcat"
	"github.com/moraine-db/moraine/internal/sql/pgcatalog"
)

// What psql's everyday inspection reads: the sessions of pg_stat_activity,
// the roles of \du, the tablespaces and sizes of \l+ and \dt+, SHOW ALL.

// activity is what pg_stat_activity shows of one session. Other sessions
// read it while the session runs, so it has its own lock.
type activity struct {
	mu          sync.Mutex
	clientAddr  net.Addr
	started     time.Time // backend_start
	queryStart  time.Time
	stateChange time.Time
	state       string // active, idle, idle in transaction, idle in transaction (aborted)
	query       string // the running or last statement
	app         string // application_name, as of the statement
}

// begin records that the session started running sql.
func (s *Session) beginActivity(sql string) {
	a := &s.act
	now := s.ex.Now()
	app := s.settings["application_name"]
	a.mu.Lock()
	a.state, a.query, a.queryStart, a.stateChange, a.app = "active", sql, now, now, app
	a.mu.Unlock()
}

// endActivity records that the session went idle, in or out of a
// transaction.
func (s *Session) endActivity() {
	state := "idle"
	switch {
	case s.tx.failed():
		state = "idle in transaction (aborted)"
	case s.tx.inBlock():
		state = "idle in transaction"
	}
	a := &s.act
	a.mu.Lock()
	a.state, a.stateChange = state, s.ex.Now()
	a.mu.Unlock()
}

// register adds s to the executor's sessions (pg_stat_activity).
func (ex *Executor) register(s *Session) {
	ex.sessions.Store(s, struct{}{})
}

func (ex *Executor) unregister(s *Session) { ex.sessions.Delete(s) }

// showAll is SHOW ALL: every setting, its value and a description.
func (x *exec) showAll(out sink) error {
	names := make([]string, 0, len(x.s.settings))
	for n := range x.s.settings {
		names = append(names, n)
	}
	sort.Strings(names)
	rows := make([][]datum.Value, 0, len(names))
	for _, n := range names {
		v, _ := x.s.setting(n)
		rows = append(rows, []datum.Value{datum.TextValue(n), datum.TextValue(v), datum.TextValue(settingDescription(n))})
	}
	cols := []colInfo{{name: "name", typ: datum.Text}, {name: "setting", typ: datum.Text}, {name: "description", typ: datum.Text}}
	return out.rows(cols, rows, "SHOW")
}

func settingDescription(name string) string {
	if d, ok := settingDescriptions[name]; ok {
		return d
	}
	return ""
}

var settingDescriptions = map[string]string{
	"application_name":              "Sets the application name to be reported in statistics and logs.",
	"client_encoding":               "Sets the client's character set encoding.",
	"datestyle":                     "Sets the display format for date and time values.",
	"default_transaction_isolation": "Sets the transaction isolation level of each new transaction.",
	"default_transaction_read_only": "Sets the default read-only status of new transactions.",
	"extra_float_digits":            "Sets the number of digits displayed for floating-point values.",
	"in_hot_standby":                "Shows whether hot standby is currently active.",
	"integer_datetimes":             "Shows whether datetimes are integer based.",
	"intervalstyle":                 "Sets the display format for interval values.",
	"is_superuser":                  "Shows whether the current user is a superuser.",
	"search_path":                   "Sets the schema search order for names that are not schema-qualified.",
	"server_encoding":               "Shows the server (database) character set encoding.",
	"server_version":                "Shows the server version.",
	"server_version_num":            "Shows the server version as an integer.",
	"standard_conforming_strings":   "Causes '...' strings to treat backslashes literally.",
	"statement_timeout":             "Sets the maximum allowed duration of any statement.",
	"timezone":                      "Sets the time zone for displaying and interpreting time stamps.",
	"transaction_isolation":         "Sets the current transaction's isolation level.",
	"transaction_read_only":         "Sets the current transaction's read-only status.",
}

// tableBytes is a table's resident size: the bytes of its stored rows
// (moraine keeps no pages).
func tableBytes(t *memcat.Table) int64 {
	_, scan, ok := t.EncodedRows()
	if !ok {
		return 0
	}
	var n int64
	scan(func(_ int64, r datum.Row) bool { n += int64(len(r)); return true })
	return n
}

// relationSize is what pg_table_size and pg_relation_size answer for a
// catalog table.
func (x *exec) relationSize(oid int64) (int64, bool) {
	for _, ti := range pgcatalog.Tables(x.s.view()) {
		if int64(ti.Table.OID) == oid {
			return tableBytes(ti.Table), true
		}
	}
	return 0, false
}

// databaseSize is pg_database_size: the resident bytes of every table of a
// database's current version.
func (x *exec) databaseSize(name string) (int64, bool) {
	v := x.s.view()
	if name != x.s.dbName {
		found := false
		for _, n := range x.s.ex.cat.Catalog().Databases() {
			found = found || n == name
		}
		if !found {
			return 0, false
		}
		v = x.s.ex.cat.Database(name).Head()
	}
	var n int64
	for _, ti := range pgcatalog.Tables(v) {
		n += tableBytes(ti.Table)
	}
	return n, true
}

// sizePretty is pg_size_pretty, with PostgreSQL's steps and rounding.
func sizePretty(size int64) string {
	const limit = 10 * 1024
	const limit2 = limit*2 - 1
	abs := func(v int64) int64 {
		if v < 0 {
			return -v
		}
		return v
	}
	half := func(v int64) int64 {
		if v < 0 {
			return (v - 1) / 2
		}
		return (v + 1) / 2
	}
	if abs(size) < limit {
		return strconv.FormatInt(size, 10) + " bytes"
	}
	size >>= 9 // one extra bit for rounding
	for _, unit := range []string{"kB", "MB", "GB", "TB"} {
		if abs(size) < limit2 {
			return strconv.FormatInt(half(size), 10) + " " + unit
		}
		size >>= 10
	}
	return strconv.FormatInt(half(size), 10) + " PB"
}
