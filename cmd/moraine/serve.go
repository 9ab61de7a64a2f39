package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/moraine-db/moraine/internal/server"
)

func init() {
	register(command{
		name:    "serve",
		summary: "run the catalog server (PostgreSQL wire protocol over the configured store)",
		run:     runServe,
	})
}

// Exit codes of serve: 0 clean shutdown, 1 runtime failure, 2 bad
// configuration, 3 fenced by a newer writer.
const exitFenced = 3

func runServe(ctx context.Context, args []string) int {
	cfg, err := server.ParseConfig(args, os.Environ(), os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "moraine serve:", err)
		return 2
	}
	log := newLogger(cfg.LogFormat, cfg.LogLevel)
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
		fmt.Fprintln(os.Stderr, "moraine serve:", err)
		return 2
	default:
		log.Error("moraine failed", "err", err)
		return 1
	}
}

func newLogger(format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
