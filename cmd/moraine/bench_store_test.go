package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
)

func TestBenchStoreSmoke(t *testing.T) {
	var out, errb bytes.Buffer
	code := benchStoreMain(context.Background(), []string{"--writers=8", "--put-latency=2ms", "--batch-keys=5", "--duration=300ms"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	m := regexp.MustCompile(`(?m)^batches/s=(\d+)\n\z`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no final batches/s line:\n%s", out.String())
	}
	if n, _ := strconv.Atoi(m[1]); n <= 0 {
		t.Fatalf("batches/s=%d", n)
	}
	if code := benchStoreMain(context.Background(), []string{"--writers=0"}, &out, &errb); code != 2 {
		t.Fatalf("bad flags: exit %d", code)
	}
}
