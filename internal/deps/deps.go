//go:build deps

// Package deps pins the third-party packages moraine builds on, so that
// go.mod and go.sum stay complete while packages are developed in parallel.
// It is never compiled into moraine (build tag "deps").
package deps

import (
	_ "github.com/aws/aws-sdk-go-v2/aws"
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/credentials"
	_ "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/pgproto3"
	_ "github.com/jackc/pgx/v5/pgtype"
	_ "github.com/johannesboyne/gofakes3"
	_ "github.com/johannesboyne/gofakes3/backend/s3mem"
	_ "github.com/parquet-go/parquet-go"
	_ "github.com/pganalyze/pg_query_go/v6"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/tidwall/btree"
	_ "github.com/xdg-go/scram"
	_ "gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // objstore/azure, build tag "azure"
	_ "gocloud.dev/blob/gcsblob"   // objstore/gcs, build tag "gcs"
	_ "gocloud.dev/blob/s3blob"
	_ "gocloud.dev/gcerrors"
	_ "golang.org/x/sys/unix"
	_ "pgregory.net/rapid"
)
