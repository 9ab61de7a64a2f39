package pgcatalog

import (
	"net"
	"time"

	"github.com/moraine-db/moraine/internal/datum"
	"github.com/moraine-db/moraine/internal/sql/memcat"
)

// Context is what the relations are generated from: the session's view of
// its database and what it knows of the server.
type Context struct {
	Version   *memcat.Version // the transaction's view of the session's database
	Database  string          // the session's database
	User      string          // the session's user
	Databases []string        // every database of the server, in creation order
	// Roles are the server's users, the session's own included, sorted.
	Roles    []string
	Settings map[string]string // the session's settings (pg_settings)
	// Backends lists the server's sessions in pid order (pg_stat_activity);
	// called only for that relation.
	Backends func() []Backend
}

// Backend is what pg_stat_activity shows of one session.
type Backend struct {
	Database, User, App string
	PID                 uint32
	Client              net.Addr // nil for none
	Started             time.Time
	XactStart           time.Time // zero outside a transaction
	QueryStart          time.Time
	StateChange         time.Time
	State               string // active, idle, idle in transaction, idle in transaction (aborted)
	Query               string
}

// Lookup returns the relation schema.name ("pg_catalog" or
// "information_schema") as c sees it, or ok=false if moraine does not
// answer it.
func Lookup(c *Context, schema, name string) (*Relation, bool) {
	if !Exists(schema, name) {
		return nil, false
	}
	r, ok := build(c, schema, name)
	if ok {
		label(r, schema, name)
	}
	return r, ok
}

// Exists reports whether Lookup answers schema.name, without building it.
func Exists(schema, name string) bool {
	if schema == "information_schema" {
		return infoSchemaNames[name]
	}
	return catalogNames[name]
}

var catalogNames = map[string]bool{
	"pg_namespace": true, "pg_class": true, "pg_attribute": true, "pg_type": true, "pg_description": true,
	"pg_enum": true, "pg_am": true, "pg_collation": true, "pg_index": true, "pg_attrdef": true,
	"pg_policy": true, "pg_statistic_ext": true, "pg_publication": true, "pg_publication_rel": true,
	"pg_publication_namespace": true, "pg_inherits": true, "pg_constraint": true, "pg_indexes": true,
	"pg_settings": true, "pg_database": true, "pg_roles": true, "pg_user": true, "pg_authid": true,
	"pg_auth_members": true, "pg_tablespace": true, "pg_stat_activity": true,
}

var infoSchemaNames = map[string]bool{"schemata": true, "tables": true, "columns": true}

// activity is pg_stat_activity.
func activity(c *Context) *Relation {
	r := newRel([]col{{"datid", tOID}, {"datname", tName}, {"pid", tInt4}, {"leader_pid", tInt4}, {"usesysid", tOID},
		{"usename", tName}, {"application_name", tText}, {"client_addr", tText}, {"client_hostname", tText},
		{"client_port", tInt4}, {"backend_start", datum.TimestampTZ}, {"xact_start", datum.TimestampTZ},
		{"query_start", datum.TimestampTZ}, {"state_change", datum.TimestampTZ}, {"wait_event_type", tText},
		{"wait_event", tText}, {"state", tText}, {"backend_xid", datum.Int8}, {"backend_xmin", datum.Int8},
		{"query_id", datum.Int8}, {"query", tText}, {"backend_type", tText}})
	dbOID := map[string]uint32{}
	for i, name := range c.Databases {
		dbOID[name] = DatabaseOID(i)
	}
	ts := func(t time.Time) datum.Value {
		if t.IsZero() {
			return datum.Null
		}
		return datum.TimestampTZValue(t.UnixMicro())
	}
	if c.Backends == nil {
		return r
	}
	for _, b := range c.Backends() {
		addr, port := datum.Null, datum.Null
		if ta, ok := b.Client.(*net.TCPAddr); ok {
			addr, port = datum.TextValue(ta.IP.String()), intV(ta.Port)
		} else if b.Client != nil {
			port = intV(-1) // a Unix socket, as PostgreSQL shows it
		}
		r.add(oidV(dbOID[b.Database]), nameV(b.Database), intV(int(b.PID)), datum.Null, oidV(ownerOID),
			nameV(b.User), datum.TextValue(b.App), addr, datum.Null, port,
			ts(b.Started), ts(b.XactStart), ts(b.QueryStart), ts(b.StateChange), datum.Null, datum.Null,
			datum.TextValue(b.State), datum.Null, datum.Null, datum.Null, datum.TextValue(b.Query),
			datum.TextValue("client backend"))
	}
	return r
}

// roles is pg_roles: the server's users, all superusers of this server.
func roles(c *Context) *Relation {
	r := newRel([]col{{"rolname", tName}, {"rolsuper", tBool}, {"rolinherit", tBool}, {"rolcreaterole", tBool},
		{"rolcreatedb", tBool}, {"rolcanlogin", tBool}, {"rolreplication", tBool}, {"rolconnlimit", tInt4},
		{"rolpassword", tText}, {"rolvaliduntil", datum.TimestampTZ}, {"rolbypassrls", tBool},
		{"rolconfig", datum.TextArray}, {"oid", tOID}})
	for i, n := range c.Roles {
		r.add(nameV(n), boolV(true), boolV(true), boolV(true), boolV(true), boolV(true), boolV(false), intV(-1),
			datum.TextValue("********"), datum.Null, boolV(true), datum.Null, oidV(uint32(ownerOID+i)))
	}
	return r
}

// DatabaseOID is pg_database.oid of the i-th database.
func DatabaseOID(i int) uint32 { return uint32(16384 + i) }
