package server

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/moraine-db/moraine/internal/slate"
)

// Config is everything `moraine serve` can be told. Each field is a setting
// with one name used three ways: the flag --name, the environment variable
// MORAINE_NAME (dashes become underscores), and the line `name = value` in
// the file given by --config. Precedence, highest first: flag, environment,
// file, default.
type Config struct {
	Store           string
	Listen          string
	UnixSocketDir   string
	UsersFile       string
	TLSCert         string
	TLSKey          string
	MetricsListen   string
	LogFormat       string
	LogLevel        string
	Replica         bool
	RowIDHold       bool
	DataPathOptions string
	MaxConnections  int
	GCMinHeapMiB    int
	CopyCacheMiB    int
	StatementMemMiB int
	// WALInFlight is how many WAL objects may be in flight at once; 0
	// chooses by store (walInFlightFor).
	WALInFlight int
	// SysmonAwake asks `moraine serve` to keep the Go runtime's system
	// monitor out of its deep sleep (cmd/moraine: sysmonAwake). The server
	// itself does not read it: it is a property of the process.
	SysmonAwake      bool
	IdleTimeout      time.Duration
	StatementTimeout time.Duration
	ReplicaPoll      time.Duration
	ConfigFile       string
	// AuthTimeout, AuthFailuresPerMinute, SSLRequire and
	// ClientCheckInterval are pgwire.Config's of the same names.
	AuthTimeout           time.Duration
	AuthFailuresPerMinute int
	SSLRequire            bool
	ClientCheckInterval   time.Duration
	// MetricsRemote allows metrics-listen beyond loopback.
	MetricsRemote bool
	// Takeover fences a live writer of the store instead of refusing to
	// start (a deliberate failover).
	Takeover bool
	// LogConnections and LogMinDuration are the logging settings
	// (pgwire.Config.LogConnections; statements slower than LogMinDuration
	// are logged, 0: none).
	LogConnections bool
	LogMinDuration time.Duration
	// StoreRewriteInterval bounds how long a deleted catalog value stays
	// in the store's live objects (slate.Options.RewriteInterval).
	StoreRewriteInterval time.Duration
	// CreateStore creates a file:// store's directory if it does not
	// exist. It is set by the create-store setting, and for the default
	// store, so that the first `moraine serve` starts without a step
	// before it; an explicit store that does not exist is an error
	// otherwise (a typo must not become a new, empty catalog).
	CreateStore bool
}

// ErrUsage marks configuration errors: the command exits 2 and names the
// setting.
var ErrUsage = errors.New("bad configuration")

type setting struct {
	name, help string
	def        string
	set        func(c *Config, v string) error
}

func str(p func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *p(c) = v; return nil }
}

// intAtLeast parses an integer setting no smaller than lo.
func intAtLeast(p func(*Config) *int, lo int) func(*Config, string) error {
	return intBetween(p, lo, math.MaxInt)
}

func intBetween(p func(*Config) *int, lo, hi int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return err
		}
		if n < lo || n > hi {
			if hi == math.MaxInt {
				return fmt.Errorf("must be at least %d", lo)
			}
			return fmt.Errorf("must be between %d and %d", lo, hi)
		}
		*p(c) = n
		return nil
	}
}

var settings = []setting{
	{"store", "object store URL holding the catalog (file://DIR, s3://BUCKET/PREFIX?endpoint=…&region=…, mem://)", "file://./moraine-data",
		str(func(c *Config) *string { return &c.Store })},
	{"listen", "TCP address for PostgreSQL clients; binding beyond loopback requires --users-file", "127.0.0.1:5433",
		str(func(c *Config) *string { return &c.Listen })},
	{"unix-socket-dir", "directory for the Unix socket .s.PGSQL.<port> (empty: none)", "",
		str(func(c *Config) *string { return &c.UnixSocketDir })},
	{"users-file", "file of users, one `name:SCRAM-SHA-256$…` verifier per line (moraine user add writes it)", "",
		str(func(c *Config) *string { return &c.UsersFile })},
	{"tls-cert", "PEM certificate for TLS (with --tls-key)", "",
		str(func(c *Config) *string { return &c.TLSCert })},
	{"tls-key", "PEM private key for TLS", "",
		str(func(c *Config) *string { return &c.TLSKey })},
	{"metrics-listen", "HTTP address for /metrics, /healthz and /readyz (empty: off); beyond loopback only with metrics-remote", "",
		str(func(c *Config) *string { return &c.MetricsListen })},
	{"metrics-remote", "allow metrics-listen on a non-loopback address: /metrics has no authentication and shows database and table names with row counts", "false",
		func(c *Config, v string) (err error) { c.MetricsRemote, err = strconv.ParseBool(v); return }},
	{"log-format", "log format: text or json", "text",
		str(func(c *Config) *string { return &c.LogFormat })},
	{"log-level", "log level: debug, info, warn or error", "info",
		str(func(c *Config) *string { return &c.LogLevel })},
	{"replica", "open the store read-only, follow the writer and serve read-only attaches", "false",
		func(c *Config, v string) (err error) { c.Replica, err = strconv.ParseBool(v); return }},
	{"row-id-hold", "before a compaction commit lands, read the row ids of the Parquet files it registers and consumes from the lake's data path and refuse one that renumbers rows (RFC 0008); needs read access to the data path", "true",
		func(c *Config, v string) (err error) { c.RowIDHold, err = strconv.ParseBool(v); return }},
	{"data-path-options", "URL query added when the row-id hold opens an object-store data path, e.g. endpoint=http://127.0.0.1:9000&use_path_style=true&region=us-east-1", "",
		str(func(c *Config) *string { return &c.DataPathOptions })},
	{"replica-poll", "how often a replica looks for new commits", "200ms",
		func(c *Config, v string) (err error) { c.ReplicaPoll, err = time.ParseDuration(v); return }},
	{"max-connections", "maximum concurrent client connections", "200",
		intAtLeast(func(c *Config) *int { return &c.MaxConnections }, 1)},
	{"wal-in-flight", fmt.Sprintf("how many WAL objects the store may be writing at once (1 to %d; 0: 1 on a local directory, %d on an object store, where a PUT takes tens of milliseconds and commits that arrive during one need not wait for it)", slate.MaxWALInFlight, slate.MaxWALInFlight), "0",
		intBetween(func(c *Config) *int { return &c.WALInFlight }, 0, slate.MaxWALInFlight)},
	{"gc-min-heap-mib", "keep the Go collector's heap target at least this many MiB while the catalog is small, trading memory for fewer collections (0: Go's default; ignored when GOGC is set)", "64",
		intAtLeast(func(c *Config) *int { return &c.GCMinHeapMiB }, 0)},
	{"store-rewrite-interval", "rewrite the whole store this often, so that a deleted or overwritten catalog value (an inlined row, a statistic) leaves the store's objects within this interval plus the GC grace (5m); 0: never (store compaction alone is driven by volume)", "24h",
		func(c *Config, v string) (err error) { c.StoreRewriteInterval, err = time.ParseDuration(v); return }},
	{"copy-cache-mib", "memory for the binary COPY cache: the encoded rows of B-tree leaves that DuckDB's whole-table catalog reads send again and again (every commit reads every table's statistics; 0: off)", "64",
		intAtLeast(func(c *Config) *int { return &c.CopyCacheMiB }, 0)},
	{"statement-mem-mib", "the most memory one statement's rows may hold: a statement past it (a cross join of large tables) fails with 53200 out of memory instead of growing the server without limit (0: no bound)", "2048",
		intAtLeast(func(c *Config) *int { return &c.StatementMemMiB }, 0)},
	{"log-connections", "log each connection's arrival, authorization and end (PostgreSQL's log_connections and log_disconnections)", "false",
		func(c *Config, v string) (err error) { c.LogConnections, err = strconv.ParseBool(v); return }},
	{"log-min-duration-statement", "log every statement that runs this long or longer, with its session and duration (PostgreSQL's log_min_duration_statement; 0: none)", "0s",
		func(c *Config, v string) (err error) { c.LogMinDuration, err = time.ParseDuration(v); return }},
	{"takeover", "open the store even while another writer is alive on it, fencing that writer (a deliberate failover); without it such a store is refused, naming its writer", "false",
		func(c *Config, v string) (err error) { c.Takeover, err = strconv.ParseBool(v); return }},
	{"create-store", "create the store's directory if it does not exist (file:// stores; the default store is always created)", "false",
		func(c *Config, v string) (err error) {
			b, err := strconv.ParseBool(v)
			c.CreateStore = c.CreateStore || b
			return err
		}},
	{"sysmon-awake", "keep the Go runtime's system monitor from deep-sleeping whenever the server waits for its clients (serve restarts itself once with GODEBUG=schedtrace set so): waking it on every client message cost a fifth of the server's CPU on a 2-vCPU VM; ignored when GODEBUG already sets schedtrace", "true",
		func(c *Config, v string) (err error) { c.SysmonAwake, err = strconv.ParseBool(v); return }},
	{"idle-timeout", "close client connections idle this long (0: never)", "0s",
		func(c *Config, v string) (err error) { c.IdleTimeout, err = time.ParseDuration(v); return }},
	{"statement-timeout", "cancel statements running this long (0: never)", "0s",
		func(c *Config, v string) (err error) { c.StatementTimeout, err = time.ParseDuration(v); return }},
	{"auth-timeout", "close connections that have not completed startup and authentication this long after connecting (PostgreSQL's authentication_timeout)", "60s",
		func(c *Config, v string) (err error) { c.AuthTimeout, err = time.ParseDuration(v); return }},
	{"auth-failures-per-minute", "failed authentications one client address may make in a minute; past it the address's connections are refused until the minute has passed (0: no bound)", "20",
		intAtLeast(func(c *Config) *int { return &c.AuthFailuresPerMinute }, 0)},
	{"ssl-require", "refuse TCP clients that do not use TLS (needs tls-cert and tls-key; the Unix socket is exempt)", "false",
		func(c *Config, v string) (err error) { c.SSLRequire, err = strconv.ParseBool(v); return }},
	{"client-check-interval", "while a statement runs, look this often whether its client closed the connection, and abandon the statement if so (PostgreSQL's client_connection_check_interval; 0: never)", "1s",
		func(c *Config, v string) (err error) { c.ClientCheckInterval, err = time.ParseDuration(v); return }},
}

// ParseConfig reads the configuration from args, the environment (env, in
// os.Environ form) and the optional file named by --config / MORAINE_CONFIG.
// Errors wrap ErrUsage and name the setting.
func ParseConfig(args []string, env []string, usage io.Writer) (*Config, error) {
	fs := flag.NewFlagSet("moraine serve", flag.ContinueOnError)
	fs.SetOutput(usage)
	flagVals := map[string]*string{}
	for _, s := range settings {
		help := s.help + " [env MORAINE_" + envName(s.name) + "]"
		if s.def == "false" || s.def == "true" {
			// Boolean settings work as bare flags (--replica) as well as
			// --replica=true.
			b := &boolFlag{v: s.def}
			fs.Var(b, s.name, help)
			flagVals[s.name] = &b.v
			continue
		}
		if arg := argOf(s); arg != "" {
			// The flag package shows the first back-quoted word as the
			// value's name (`N`, `DURATION`) instead of "string".
			help = s.help + " [`" + arg + "`; env MORAINE_" + envName(s.name) + "]"
		}
		flagVals[s.name] = fs.String(s.name, s.def, help)
	}
	configFile := fs.String("config", "", "optional settings `FILE`, one `name = value` a line [env MORAINE_CONFIG]")
	fs.Usage = func() {
		fmt.Fprintf(usage, "usage: moraine serve [flags]\n\nSettings come from flags, then MORAINE_* environment variables, then --config, then defaults.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	setByFlag := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { setByFlag[f.Name] = true })
	envVals := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "MORAINE_") {
			envVals[k] = v
		}
	}
	file := *configFile
	if !setByFlag["config"] {
		file = envVals["MORAINE_CONFIG"]
	}
	fileVals := map[string]string{}
	if file != "" {
		var err error
		if fileVals, err = readConfigFile(file); err != nil {
			return nil, err
		}
	}
	known := map[string]bool{}
	for _, s := range settings {
		known[s.name] = true
	}
	for k := range fileVals {
		if !known[k] {
			return nil, fmt.Errorf("%w: %s: unknown setting %q", ErrUsage, file, k)
		}
	}
	c := &Config{ConfigFile: file}
	for _, s := range settings {
		v, from := s.def, "default"
		if fv, ok := fileVals[s.name]; ok {
			v, from = fv, file
		}
		if ev, ok := envVals["MORAINE_"+envName(s.name)]; ok {
			v, from = ev, "MORAINE_"+envName(s.name)
		}
		if setByFlag[s.name] {
			v, from = *flagVals[s.name], "--"+s.name
		}
		if err := s.set(c, v); err != nil {
			return nil, fmt.Errorf("%w: %s (from %s): %q: %v", ErrUsage, s.name, from, v, err)
		}
		if s.name == "store" && from == "default" {
			c.CreateStore = true
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// boolFlag is a string-valued flag that may be given bare.
type boolFlag struct{ v string }

func (b *boolFlag) String() string {
	if b == nil {
		return ""
	}
	return b.v
}
func (b *boolFlag) Set(v string) error { b.v = v; return nil }
func (b *boolFlag) IsBoolFlag() bool   { return true }

func envName(name string) string { return strings.ToUpper(strings.ReplaceAll(name, "-", "_")) }

func readConfigFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: config: %v", ErrUsage, err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%w: %s:%d: expected `name = value`", ErrUsage, path, n)
		}
		// PostgreSQL spells its settings with underscores (log_level);
		// either spelling names the same setting.
		out[strings.ReplaceAll(strings.TrimSpace(k), "_", "-")] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: config: %v", ErrUsage, err)
	}
	return out, nil
}

func (c *Config) validate() error {
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("%w: log-format: %q is neither text nor json", ErrUsage, c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("%w: log-level: %q is not one of debug, info, warn, error", ErrUsage, c.LogLevel)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("%w: tls-cert and tls-key go together", ErrUsage)
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("%w: listen: %v", ErrUsage, err)
	}
	if !isLoopback(host) && c.UsersFile == "" {
		return fmt.Errorf("%w: listen: %s is not a loopback address; binding it requires authentication (--users-file)", ErrUsage, c.Listen)
	}
	if c.Store == "" {
		return fmt.Errorf("%w: store: empty", ErrUsage)
	}
	if c.MetricsListen != "" {
		mhost, _, err := net.SplitHostPort(c.MetricsListen)
		if err != nil {
			return fmt.Errorf("%w: metrics-listen: %v", ErrUsage, err)
		}
		if !isLoopback(mhost) && !c.MetricsRemote {
			return fmt.Errorf("%w: metrics-listen: %s is not a loopback address; /metrics answers without authentication and names every database and table with its row count: set metrics-remote to serve it there", ErrUsage, c.MetricsListen)
		}
	}
	if c.SSLRequire && c.TLSCert == "" {
		return fmt.Errorf("%w: ssl-require needs tls-cert and tls-key", ErrUsage)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// Settings lists the setting names, for documentation tests.
func Settings() []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = s.name
	}
	sort.Strings(out)
	return out
}

// argNames are the --help placeholders of the string settings.
var argNames = map[string]string{
	"store": "URL", "listen": "ADDR", "metrics-listen": "ADDR", "unix-socket-dir": "DIR",
	"users-file": "FILE", "tls-cert": "FILE", "tls-key": "FILE", "log-format": "text|json",
	"log-level": "debug|info|warn|error", "data-path-options": "QUERY",
}

// argOf is a setting's value placeholder in --help: N, DURATION, URL…
// ("" for a boolean, which is given bare).
func argOf(s setting) string {
	switch {
	case s.def == "true" || s.def == "false":
		return ""
	case argNames[s.name] != "":
		return argNames[s.name]
	case isInt(s.def):
		return "N"
	case isDuration(s.def):
		return "DURATION"
	}
	return "VALUE"
}

func isInt(s string) bool { _, err := strconv.Atoi(s); return err == nil }

func isDuration(s string) bool { _, err := time.ParseDuration(s); return err == nil }
