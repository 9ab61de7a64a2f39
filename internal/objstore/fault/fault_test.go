package fault_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moraine-db/moraine/internal/objstore"
	"github.com/moraine-db/moraine/internal/objstore/fault"
	"github.com/moraine-db/moraine/internal/objstore/objstoretest"
)

// With the zero Config the wrapper must be a faithful Store.
func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store {
		return fault.New(objstore.NewMem(), fault.Config{Seed: 1})
	})
}

func TestErrorRateAlwaysFailsWithoutWriting(t *testing.T) {
	ctx := context.Background()
	inner := objstore.NewMem()
	s := fault.New(inner, fault.Config{Ops: map[fault.Op]fault.Rule{fault.OpPut: {ErrorRate: 1}}})
	err := s.Put(ctx, "k", []byte("v"))
	if !errors.Is(err, fault.ErrInjected) || !strings.Contains(err.Error(), `"k"`) || !strings.Contains(err.Error(), "put") {
		t.Fatalf("Put = %v, want ErrInjected naming op and key", err)
	}
	if _, err := inner.Stat(ctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("injected Put reached inner: %v", err)
	}
	// Other operations are unaffected.
	if err := s.PutIfAbsent(ctx, "k", []byte("v")); err != nil {
		t.Fatalf("PutIfAbsent: %v", err)
	}
	if got, err := s.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if st := s.Stats(); st.Injected != 1 || st.Puts != 1 || st.Errors != 1 || st.BytesWritten != 1 {
		t.Fatalf("Stats = %+v", st)
	}
}

// outcomes runs n Gets under cfg and records which failed.
func outcomes(t *testing.T, cfg fault.Config, n int) string {
	t.Helper()
	ctx := context.Background()
	inner := objstore.NewMem()
	if err := inner.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s := fault.New(inner, cfg)
	var b strings.Builder
	for range n {
		_, err := s.Get(ctx, "k")
		switch {
		case err == nil:
			b.WriteByte('.')
		case errors.Is(err, fault.ErrInjected):
			b.WriteByte('x')
		default:
			t.Fatalf("Get: %v", err)
		}
	}
	return b.String()
}

func TestRatesAreSeededAndRoughlyRight(t *testing.T) {
	cfg := func(seed uint64) fault.Config {
		return fault.Config{Seed: seed, Default: fault.Rule{ErrorRate: 0.3}}
	}
	a, b, c := outcomes(t, cfg(7), 2000), outcomes(t, cfg(7), 2000), outcomes(t, cfg(8), 2000)
	if a != b {
		t.Fatal("the same seed gave different fault sequences")
	}
	if a == c {
		t.Fatal("different seeds gave the same fault sequence")
	}
	if n := strings.Count(a, "x"); n < 500 || n > 700 {
		t.Fatalf("%d of 2000 calls failed at rate 0.3", n)
	}
	// A per-op rule overrides the default.
	got := outcomes(t, fault.Config{Default: fault.Rule{ErrorRate: 1}, Ops: map[fault.Op]fault.Rule{fault.OpGet: {}}}, 50)
	if strings.Contains(got, "x") {
		t.Fatalf("per-op rule did not override Default: %s", got)
	}
}

func TestAmbiguousWriteLands(t *testing.T) {
	ctx := context.Background()
	inner := objstore.NewMem()
	s := fault.New(inner, fault.Config{Default: fault.Rule{AmbiguousRate: 1}})
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"put", func() error { return s.Put(ctx, "a", []byte("1")) }},
		{"put-if-absent", func() error { return s.PutIfAbsent(ctx, "b", []byte("2")) }},
	} {
		if err := tc.do(); !errors.Is(err, fault.ErrAmbiguous) {
			t.Fatalf("%s: err = %v, want ErrAmbiguous", tc.name, err)
		}
	}
	for k, want := range map[string]string{"a": "1", "b": "2"} {
		if got, err := inner.Get(ctx, k); err != nil || string(got) != want {
			t.Fatalf("ambiguous write of %s did not land: %q, %v", k, got, err)
		}
	}
	// The retry of an ambiguous PutIfAbsent finds its own object: ErrExists,
	// not ambiguous, because nothing was applied.
	if err := s.PutIfAbsent(ctx, "b", []byte("2")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("retry: err = %v, want ErrExists", err)
	}
	// Reads ignore AmbiguousRate.
	if got, err := s.Get(ctx, "a"); err != nil || string(got) != "1" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if err := s.Delete(ctx, "a"); !errors.Is(err, fault.ErrAmbiguous) {
		t.Fatalf("Delete = %v, want ErrAmbiguous", err)
	}
	if _, err := inner.Stat(ctx, "a"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("ambiguous delete did not land: %v", err)
	}
	if st := s.Stats(); st.Ambiguous != 3 {
		t.Fatalf("Stats.Ambiguous = %d, want 3", st.Ambiguous)
	}
}

func TestCrashAtWrite(t *testing.T) {
	for _, applies := range []bool{false, true} {
		t.Run(fmt.Sprintf("applies=%v", applies), func(t *testing.T) {
			ctx := context.Background()
			inner := objstore.NewMem()
			s := fault.New(inner, fault.Config{CrashAtWrite: 3, CrashAppliesWrite: applies})
			for i := 1; i <= 2; i++ {
				if err := s.Put(ctx, fmt.Sprintf("w%d", i), []byte("x")); err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
				if _, err := s.Get(ctx, "w1"); err != nil { // reads do not count
					t.Fatal(err)
				}
			}
			if err := s.PutIfAbsent(ctx, "w3", []byte("x")); !errors.Is(err, fault.ErrCrashed) {
				t.Fatalf("write 3 = %v, want ErrCrashed", err)
			}
			if !s.Crashed() {
				t.Fatal("Crashed() = false after the crash")
			}
			if _, err := s.Get(ctx, "w1"); !errors.Is(err, fault.ErrCrashed) {
				t.Fatalf("read after crash = %v, want ErrCrashed", err)
			}
			if _, err := s.List(ctx, ""); !errors.Is(err, fault.ErrCrashed) {
				t.Fatalf("list after crash = %v, want ErrCrashed", err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close after crash: %v", err)
			}
			// Restart over the same inner store.
			r := fault.New(inner, fault.Config{})
			l, err := r.List(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			want := 2
			if applies {
				want = 3
			}
			if len(l) != want {
				t.Fatalf("after restart %d objects, want %d: %v", len(l), want, l)
			}
			if st := s.Stats(); st.CrashRejected != 3 || st.Puts != 2 || st.PutIfAbsents != 1 {
				t.Fatalf("Stats = %+v", st)
			}
		})
	}
}

func TestCrashAtOpAndManualCrash(t *testing.T) {
	ctx := context.Background()
	inner := objstore.NewMem()
	s := fault.New(inner, fault.Config{CrashAtOp: 2})
	if _, err := s.List(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", nil); !errors.Is(err, fault.ErrCrashed) {
		t.Fatalf("op 2 = %v, want ErrCrashed", err)
	}
	m := fault.New(inner, fault.Config{})
	if err := m.Put(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	if _, err := m.Stat(ctx, "k"); !errors.Is(err, fault.ErrCrashed) {
		t.Fatalf("after Crash() = %v", err)
	}
	// The wrapper's Close left inner usable.
	_ = m.Close()
	if _, err := inner.Stat(ctx, "k"); err != nil {
		t.Fatalf("inner after wrapper Close: %v", err)
	}
}

func TestHook(t *testing.T) {
	ctx := context.Background()
	var calls []fault.Call
	s := fault.New(objstore.NewMem(), fault.Config{
		Default: fault.Rule{ErrorRate: 1}, // the hook's Pass overrides it
		Hook: func(c fault.Call) fault.Action {
			calls = append(calls, c)
			switch {
			case strings.HasPrefix(c.Key, "manifest/"):
				return fault.Fail
			case c.Key == "crash":
				return fault.CrashAfterApply
			}
			return fault.Pass
		},
	})
	if err := s.Put(ctx, "wal/1", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "manifest/1", nil); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("manifest put = %v", err)
	}
	if _, err := s.Get(ctx, "wal/1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "crash", []byte("landed")); !errors.Is(err, fault.ErrCrashed) {
		t.Fatalf("crash put = %v", err)
	}
	if got, err := s.Inner().Get(ctx, "crash"); err != nil || string(got) != "landed" {
		t.Fatalf("CrashAfterApply write = %q, %v", got, err)
	}
	want := []fault.Call{
		{Op: fault.OpPut, Key: "wal/1", Seq: 1, WriteSeq: 1},
		{Op: fault.OpPutIfAbsent, Key: "manifest/1", Seq: 2, WriteSeq: 2},
		{Op: fault.OpGet, Key: "wal/1", Seq: 3},
		{Op: fault.OpPut, Key: "crash", Seq: 4, WriteSeq: 3},
	}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("hook calls = %v\nwant %v", calls, want)
	}
}

func TestLatency(t *testing.T) {
	ctx := context.Background()
	s := fault.New(objstore.NewMem(), fault.Config{Ops: map[fault.Op]fault.Rule{
		fault.OpPut: {Latency: fault.Fixed(30 * time.Millisecond)},
		fault.OpGet: {Latency: fault.Uniform(time.Millisecond, 5*time.Millisecond)},
	}})
	start := time.Now()
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Fatalf("Put took %v, want >= 30ms", el)
	}
	for range 5 {
		if _, err := s.Get(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Delayed != 6 || st.Delay < 35*time.Millisecond || st.Delay > 55*time.Millisecond {
		t.Fatalf("Delayed = %d, Delay = %v", st.Delayed, st.Delay)
	}

	// A context that ends during the delay ends the call, without writing.
	slow := fault.New(objstore.NewMem(), fault.Config{Default: fault.Rule{Latency: fault.Fixed(time.Hour)}})
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	err := slow.Put(cctx, "k", []byte("v"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Fatalf("Put under a 20ms deadline = %v after %v", err, time.Since(start))
	}
	if _, err := slow.Inner().Stat(ctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("timed-out Put landed: %v", err)
	}
}

func TestParseLatency(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    fault.Latency
		wantErr bool
	}{
		{"", fault.Latency{}, false},
		{"0", fault.Latency{}, false},
		{"50ms", fault.Fixed(50 * time.Millisecond), false},
		{"10ms-80ms", fault.Uniform(10*time.Millisecond, 80*time.Millisecond), false},
		{" 1s ", fault.Fixed(time.Second), false},
		{"80ms-10ms", fault.Latency{}, true},
		{"fast", fault.Latency{}, true},
		{"10ms-", fault.Latency{}, true},
		{"-5ms", fault.Latency{}, true},
	} {
		got, err := fault.ParseLatency(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseLatency(%q) = %v, %v; want %v, err=%v", tc.in, got, err, tc.want, tc.wantErr)
			continue
		}
		if err == nil && tc.in != "" {
			if back, err := fault.ParseLatency(got.String()); err != nil || back != got {
				t.Errorf("round trip of %v: %v, %v", got, back, err)
			}
		}
	}
}

func TestParseOp(t *testing.T) {
	for op := fault.OpPut; op <= fault.OpStat; op++ {
		got, err := fault.ParseOp(op.String())
		if err != nil || got != op {
			t.Fatalf("ParseOp(%q) = %v, %v", op.String(), got, err)
		}
	}
	if _, err := fault.ParseOp("rename"); err == nil {
		t.Fatal("ParseOp accepted an unknown op")
	}
}

// Under concurrency the crash point is exact: writes admitted before it
// succeed and land, the one at it and every later one fail, and nothing
// that failed with ErrCrashed reached inner (CrashAppliesWrite off).
func TestCrashUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	inner := objstore.NewMem()
	const crashAt = 50
	s := fault.New(inner, fault.Config{CrashAtWrite: crashAt})
	var (
		mu      sync.Mutex
		ok      = map[string]bool{}
		crashed int
		wg      sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := range 20 {
				key := fmt.Sprintf("w%d/%d", w, i)
				err := s.Put(ctx, key, []byte(key))
				mu.Lock()
				switch {
				case err == nil:
					ok[key] = true
				case errors.Is(err, fault.ErrCrashed):
					crashed++
				default:
					t.Errorf("Put(%s): %v", key, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(ok) != crashAt-1 || crashed != 8*20-(crashAt-1) {
		t.Fatalf("%d writes succeeded and %d crashed; want %d and %d", len(ok), crashed, crashAt-1, 8*20-(crashAt-1))
	}
	l, err := inner.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range l {
		if !ok[o.Key] {
			t.Fatalf("%s reached inner but was reported crashed", o.Key)
		}
	}
	if len(l) != len(ok) {
		t.Fatalf("inner holds %d objects, %d writes succeeded", len(l), len(ok))
	}
}
