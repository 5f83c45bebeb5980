// Package servers provides the MySQL and Redis servers a run talks to, behind
// one Provider interface: local child processes, or external servers named by
// the user. The same code serves the CLI and the integration tests.
package servers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// Endpoints say where the servers answer. MySQLDSN is a go-sql-driver DSN and
// may hold a password: never print it, print Redacted() instead.
type Endpoints struct {
	Backend string
	// Network is how the docker backend reaches its containers
	// (NetworkHost or NetworkPublished); empty for the other backends.
	Network   string
	MySQLDSN  string
	RedisAddr string
	// RedisPassword is optional.
	RedisPassword string
	// PIDs of server processes this provider started, for CPU sampling.
	MySQLPID, RedisPID int
	// CPU, when set, gives the latest CPU-time sample of "mysql" and
	// "redis" from the container engine's stats (about one a second).
	CPU map[string]func() (cpu time.Duration, at time.Time, ok bool)
}

// Redacted returns the MySQL DSN with any password replaced by "***".
func (e Endpoints) Redacted() string { return RedactDSN(e.MySQLDSN) }

// RedactDSN hides the password of a go-sql-driver DSN.
func RedactDSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "(unparsable dsn)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "***"
	}
	return cfg.FormatDSN()
}

// Provider starts (or finds) the servers of a run and stops what it started.
type Provider interface {
	// Start returns reachable endpoints or an error that says what is wrong.
	Start(ctx context.Context) (Endpoints, error)
	// Stop stops everything Start started. It is safe to call more than once.
	Stop() error
}

// Options configure provider selection.
type Options struct {
	Backend    string // auto | docker | local | external
	MySQLDSN   string // external
	RedisAddr  string // external
	MySQLImage string // docker
	RedisImage string // docker
}

// OptionsFromEnv fills empty external settings from STOCKBENCH_MYSQL_DSN and
// STOCKBENCH_REDIS_ADDR.
func OptionsFromEnv(o Options) Options {
	if o.MySQLDSN == "" {
		o.MySQLDSN = os.Getenv("STOCKBENCH_MYSQL_DSN")
	}
	if o.RedisAddr == "" {
		o.RedisAddr = os.Getenv("STOCKBENCH_REDIS_ADDR")
	}
	return o
}

// Backends lists the accepted --backend values.
var Backends = []string{"auto", "docker", "local", "external"}

// New picks a provider. auto means external when both endpoints are
// configured, else docker when an engine answers and the images (or the
// offline substitutes) are present or can be pulled, else local when the
// server binaries are found, else an error that says what to install.
func New(o Options) (Provider, error) {
	switch o.Backend {
	case "external":
		if o.MySQLDSN == "" || o.RedisAddr == "" {
			return nil, errors.New("backend external needs --mysql-dsn and --redis-addr (or STOCKBENCH_MYSQL_DSN and STOCKBENCH_REDIS_ADDR)")
		}
		return &External{DSN: o.MySQLDSN, Addr: o.RedisAddr}, nil
	case "local":
		return NewLocal()
	case "docker":
		return newDockerBackend(o.MySQLImage, o.RedisImage)
	case "auto", "":
		if o.MySQLDSN != "" && o.RedisAddr != "" {
			return &External{DSN: o.MySQLDSN, Addr: o.RedisAddr}, nil
		}
		if o.MySQLDSN != "" || o.RedisAddr != "" {
			return nil, errors.New("external servers need both a MySQL DSN and a Redis address")
		}
		d, whyNot := autoDocker(o.MySQLImage, o.RedisImage)
		if d != nil {
			return d, nil
		}
		l, err := NewLocal()
		if err != nil {
			return nil, fmt.Errorf("no servers: docker: %s; %w", whyNot, err)
		}
		return l, nil
	default:
		return nil, fmt.Errorf("unknown backend %q (want one of %s)", o.Backend, strings.Join(Backends, ", "))
	}
}

// External uses servers the user runs. Stop does nothing.
type External struct {
	DSN  string
	Addr string
}

// Start checks that both servers answer.
func (e *External) Start(ctx context.Context) (Endpoints, error) {
	ep := Endpoints{Backend: "external", MySQLDSN: WithDriverParams(e.DSN), RedisAddr: e.Addr}
	if err := Ping(ctx, ep, 5*time.Second); err != nil {
		return Endpoints{}, err
	}
	return ep, nil
}

// Stop is a no-op: external servers are not ours.
func (e *External) Stop() error { return nil }

// WithDriverParams adds the driver parameters stockbench relies on
// (interpolateParams for throughput, parseTime and UTC for deadlines) unless
// the DSN sets them already.
func WithDriverParams(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return dsn
	}
	cfg.InterpolateParams = true
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	return cfg.FormatDSN()
}

// Ping retries until both servers answer or the wait runs out.
func Ping(ctx context.Context, ep Endpoints, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	db, err := sql.Open("mysql", ep.MySQLDSN)
	if err != nil {
		return fmt.Errorf("mysql dsn %s: %w", ep.Redacted(), err)
	}
	defer db.Close()
	rdb := redis.NewClient(&redis.Options{Addr: ep.RedisAddr, Password: ep.RedisPassword})
	defer rdb.Close()
	var lastErr error
	for {
		if lastErr = db.PingContext(ctx); lastErr == nil {
			break
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return fmt.Errorf("mysql at %s does not answer: %v", ep.Redacted(), lastErr)
		}
	}
	for {
		if lastErr = rdb.Ping(ctx).Err(); lastErr == nil {
			return nil
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return fmt.Errorf("redis at %s does not answer: %v", ep.RedisAddr, lastErr)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// lookPath finds the first of names on PATH or in the sbin folders, which are
// not on every user's PATH.
func lookPath(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
		for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin"} {
			if st, err := os.Stat(dir + "/" + n); err == nil && !st.IsDir() {
				return dir + "/" + n
			}
		}
	}
	return ""
}

// Conns are the connection pools of a run, shared by every strategy.
type Conns struct {
	DB    *sql.DB
	Redis *redis.Client
}

// Open opens pools sized for poolSize concurrent clients.
func Open(ep Endpoints, poolSize int) (Conns, error) {
	db, err := sql.Open("mysql", ep.MySQLDSN)
	if err != nil {
		return Conns{}, fmt.Errorf("mysql dsn %s: %w", ep.Redacted(), err)
	}
	poolSize = max(poolSize, 16)
	db.SetMaxOpenConns(poolSize + 16)
	db.SetMaxIdleConns(poolSize + 16)
	rdb := redis.NewClient(&redis.Options{Addr: ep.RedisAddr, Password: ep.RedisPassword, PoolSize: poolSize + 16})
	return Conns{DB: db, Redis: rdb}, nil
}

// Close closes both pools.
func (c Conns) Close() error {
	return errors.Join(c.DB.Close(), c.Redis.Close())
}

// DriverLog sends the MySQL driver's own log lines (such as "packets.go:
// unexpected EOF" when a server closes an idle pooled connection; the
// driver retries those and the caller sees any real error) to w instead of
// the process's stderr. The setting is process-wide.
func DriverLog(w io.Writer) {
	_ = mysql.SetLogger(log.New(w, "[mysql] ", log.LstdFlags|log.Lmicroseconds))
}
