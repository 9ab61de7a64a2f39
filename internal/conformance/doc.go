// Package conformance holds moraine's conformance tests: the captured
// conversations between DuckDB+DuckLake and PostgreSQL 15 in
// testdata/fixtures replayed against a real moraine (store, catalog,
// commit pipeline, SQL, wire), every recorded server message compared.
package conformance
