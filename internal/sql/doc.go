// Package sql is moraine's statement vocabulary: what DuckLake and DuckDB's
// postgres extension send, parsed with PostgreSQL's own grammar (pg_query)
// and run over the resident catalog, answering as PostgreSQL 15 answers.
//
// A Session is one connection's state (session.go): its settings and its
// transaction, one state type (txstate.go: none, implicit, block, failed)
// around a memcat.Txn. Every statement goes parse (parse.go, with a cache of parse
// trees keyed by text) → run (session.go) → one of:
//
//	transaction control   session.go: BEGIN, COMMIT, ROLLBACK, SAVEPOINT
//	queries               select.go (targets, names), from.go (FROM, joins,
//	                      pushed-down filters), aggregate.go, order.go
//	                      (ORDER BY, LIMIT), setop.go (UNION, VALUES, WITH),
//	                      eval.go and expr.go (expressions), like.go
//	writes                statement.go (INSERT, UPDATE, DELETE), copyplan.go
//	                      and copycache.go (COPY, the binary catalog reads)
//	DDL                   ddl.go (tables, schemas, SET/SHOW), database.go
//	                      (CREATE/DROP DATABASE)
//	PostgreSQL's catalogs the pgcatalog package builds them; syscat.go gives
//	                      it the session's view, catcache.go reuses answers
//	                      that depend on DDL only, activity.go (sizes)
//
// Limits on what one statement may hold (memory, nesting depth, time) are in
// limits.go and work.go; read-only serving (replicas, a store that refuses
// writes) in readonly.go. Errors carry PostgreSQL's SQLSTATE
// (internal/pgcode) and wording from where they arise (errors.go for the
// executor's own); pgwire sends them.
//
// Anything outside the vocabulary is refused with 0A000 naming the
// construct, never guessed at.
package sql
