package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/bench"
	"github.com/moraine-db/moraine/internal/objstore/fault"
)

// benchReplicaMain is `moraine bench replica`: replication lag, a replica's
// cost per applied commit and start-up time, at the catalog sizes given
// (bench.RunReplica).
func benchReplicaMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench replica [flags]", stdout, stderr)
	stores := fs.String("stores", "local,s3", "comma-separated store kinds: local (a temp directory), s3 (in-process S3)")
	putLatency := fs.String("put-latency", "50ms", `latency added to every S3 PUT: a duration or "lo-hi"`)
	files := fs.String("files", "10000,1000000", "comma-separated catalog sizes in data files")
	tables := fs.Int("tables", 10000, "user tables of the built catalog")
	stats := fs.Int("stats", 8, "column-stats rows per data file")
	replicas := fs.String("replicas", "1,3", "comma-separated replica counts")
	writers := fs.Int("writers", 16, "concurrent DuckLake writers")
	commits := fs.Int("commits", 20, "commits per writer")
	poll := fs.Duration("replica-poll", 200*time.Millisecond, "the replicas' --replica-poll")
	jsonOut := fs.String("json", "", "write the results as JSON to this file")
	if code, ok := fs.parse(args, noArgs); !ok {
		return code
	}
	lat, err := fault.ParseLatency(*putLatency)
	if err != nil {
		fmt.Fprintf(stderr, "bench replica: --put-latency: %v\n", err)
		return 2
	}
	fileCounts, err1 := parseCounts(*files)
	replicaCounts, err2 := parseCounts(*replicas)
	if err1 != nil || err2 != nil || *tables < 1 || *stats < 1 || *writers < 1 || *commits < 1 || *poll <= 0 {
		fmt.Fprintln(stderr, "bench replica: --files, --replicas, --tables, --stats, --writers, --commits and --replica-poll must be positive")
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "bench replica: %v\n", err)
		return 1
	}
	o := bench.ReplicaOptions{Exe: exe, Stores: strings.Split(*stores, ","), PutLatency: lat, Files: fileCounts, Tables: *tables,
		Stats: *stats, Replicas: replicaCounts, Writers: *writers, Commits: *commits, Poll: *poll, JSONOut: *jsonOut}
	if err := bench.RunReplica(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "bench replica: %v\n", err)
		return 1
	}
	return 0
}

// parseCounts parses a comma-separated list of positive counts.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
