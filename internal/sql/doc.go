// Package sql is moraine's statement vocabulary: it parses what DuckLake and
// DuckDB's postgres extension send with the real PostgreSQL grammar
// (pg_query), classifies each statement as one of a fixed set of shapes, and
// runs it over the resident catalog.
package sql

import pgquery "github.com/pganalyze/pg_query_go/v6"

var _ = pgquery.Fingerprint
