package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/moraine-db/moraine/internal/server"
)

// Exit codes of serve: 0 clean shutdown, 1 runtime failure, 2 bad
// configuration, 3 fenced by a newer writer.
const exitFenced = 3

// serveMain is `moraine serve [flags]`: the settings come from flags, the
// environment and a settings file (server.ParseConfig); --help prints them
// all on standard output.
func serveMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			_, _ = server.ParseConfig([]string{"--help"}, nil, stdout)
			return 0
		}
	}
	cfg, err := server.ParseConfig(args, os.Environ(), stderr)
	if err != nil {
		fmt.Fprintln(stderr, "moraine serve:", err)
		return 2
	}
	log := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	// Libraries that log through slog's default (the AWS SDK's adapter)
	// write to the server's log, at its level.
	slog.SetDefault(log)
	if cfg.SysmonAwake {
		if err := keepSysmonAwake(); err != nil {
			log.Warn("serving with the Go runtime's default system monitor", "err", err)
		}
	}
	srv := server.New(cfg, log)
	err = srv.Run(ctx)
	switch {
	case err == nil:
		log.Info("moraine stopped")
		return 0
	case errors.Is(err, server.ErrFenced):
		log.Error("moraine stopped: fenced", "err", err)
		return exitFenced
	case errors.Is(err, server.ErrUsage):
		fmt.Fprintln(stderr, "moraine serve:", err)
		return 2
	default:
		log.Error("moraine failed", "err", err)
		return 1
	}
}

func newLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
