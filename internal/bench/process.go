package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moraine-db/moraine/internal/server"
)

// startProcess runs `exe argv…` (`serve …`, or `bench recorded …`) as a
// child process logging JSON and waits until it logs that it is ready,
// taking the address it listens on from that log line (argv asks for port
// 0, so only the child knows it). Afterwards
// m.cancel asks the child to stop as an operator would (SIGTERM, or when
// ctx ends) and m.done reports how it exited, with the end of its log when
// that was not cleanly.
func (m *Moraine) startProcess(ctx context.Context, exe string, argv []string) error {
	cmd := exec.Command(exe, append(argv, "--log-format", "json")...)
	logs, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("start moraine process: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start moraine process: %w", err)
	}
	m.PID = cmd.Process.Pid
	ready := make(chan string, 1)
	tail := &logTail{}
	m.log = tail
	go func() {
		sc := bufio.NewScanner(logs)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		announced := false
		for sc.Scan() {
			line := sc.Text()
			tail.add(line)
			if !announced {
				// The metrics listener is announced before the server is
				// ready; the channel send orders the write before the
				// starter's reads.
				switch msg, addr := announcement(line); msg {
				case "metrics listening":
					m.metricsAddr = addr
				case server.ReadyMessage, RecordedReady:
					announced = true
					ready <- addr
				}
			}
		}
		// Wait only after the log pipe is drained (os/exec's rule).
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("moraine process: %w; its log ends:\n%s", err, tail)
		}
		m.done <- err
	}()
	stop := make(chan struct{})
	var once sync.Once
	m.cancel = func() { once.Do(func() { close(stop) }) }
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
		}
		cmd.Process.Signal(syscall.SIGTERM)
	}()
	// A child that does not stop when asked is killed before its store is
	// removed (cleanup runs last-added first).
	m.cleanup = append(m.cleanup, func() { cmd.Process.Kill() })
	select {
	case m.addr = <-ready:
		return nil
	case err := <-m.done:
		m.cancel()
		m.stopped, m.stopErr = true, err // for a Stop that follows
		return fmt.Errorf("start moraine process: exited before ready: %v", err)
	case <-time.After(processWait):
		m.cancel()
		cmd.Process.Kill()
		return fmt.Errorf("start moraine process: not ready after %v", processWait)
	}
}

// processWait bounds a child's start and stop: loading (or flushing) a
// catalog of ten million data files takes tens of seconds, a hung child
// forever.
const processWait = 10 * time.Minute

// announcement reads the JSON log lines that announce an address:
// server.ReadyMessage or RecordedReady (listen) and "metrics listening"
// (addr). It returns the message and the address, or "" for any other
// line.
func announcement(line string) (msg, addr string) {
	var rec struct {
		Msg    string `json:"msg"`
		Listen string `json:"listen"`
		Addr   string `json:"addr"`
	}
	if json.Unmarshal([]byte(line), &rec) != nil {
		return "", ""
	}
	switch {
	case (rec.Msg == server.ReadyMessage || rec.Msg == RecordedReady) && rec.Listen != "":
		return rec.Msg, rec.Listen
	case rec.Msg == "metrics listening" && rec.Addr != "":
		return rec.Msg, rec.Addr
	}
	return "", ""
}

// logTail keeps the last lines of a child's log for its error messages.
// Only the log reader adds to it, and the error that prints it is built by
// that same goroutine, so it needs no lock.
// logTail keeps the last lines of a child's log; it is written by the
// reading goroutine and may be read by others.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

const logTailLines = 20

func (t *logTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == logTailLines {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:logTailLines-1]
	}
	t.lines = append(t.lines, line)
}

// find returns the last line holding s, "" if none of the tail does.
func (t *logTail) find(s string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.lines) - 1; i >= 0; i-- {
		if strings.Contains(t.lines[i], s) {
			return t.lines[i]
		}
	}
	return ""
}

func (t *logTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
