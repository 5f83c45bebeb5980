// Package servers provides the MySQL and Redis servers a run talks to, behind
// one Provider interface: docker containers (official or offline images),
// local child processes (single servers, a Redis Cluster, a Galera cluster),
// or external servers named by the user; FaulterOf pauses, kills and
// restarts the servers a provider started. The same code serves the CLI and
// the integration tests.
package servers

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/servers/netpath"
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
	// RedisURL, when set, says how to reach Redis instead of RedisAddr and
	// RedisPassword: redis://[user:pass@]host:port[/db] or rediss:// (TLS).
	// It may hold a password: never print it, print RedisRedacted().
	RedisURL string
	// MySQLCluster, when set, holds one DSN per node of a multi-primary
	// MySQL cluster (a local Galera, or the external nodes given as a list
	// of MySQLDSN); MySQLDSN is then the first. Pools spread their
	// connections over every node (MySQLSpread).
	MySQLCluster []string
	// MySQLSpread says whether a cluster's pools open their connections on
	// every node in turn (true) or on the first node only.
	MySQLSpread bool
	// MySQLCausalReads is the causal-read mode of the cluster's
	// connections (CausalWsrep, CausalGroupReplication or CausalNone; empty
	// means none); MySQLCausalAuto says auto chose it by asking the nodes.
	MySQLCausalReads string
	MySQLCausalAuto  bool
	// RedisCluster, when set, lists the nodes of a Redis Cluster (a seed
	// list: any reachable node finds the rest); RedisAddr is then the first.
	// Credentials and TLS come from RedisURL or RedisPassword as above.
	RedisCluster []string
	// Netns names the network namespace the servers run in, behind the
	// run's network profile (local or docker backend with a profile);
	// empty otherwise.
	Netns string
	// RedisPersistence is the AOF setting of a Redis stockbench started
	// (none, everysec, always): what a Redis restart keeps. Empty for
	// external servers (not ours to know).
	RedisPersistence string
	// PIDs of server processes this provider started, for CPU sampling;
	// ExtraPIDs are the further nodes of a cluster, by kind ("mysql",
	// "redis").
	MySQLPID, RedisPID int
	ExtraPIDs          map[string][]int
	// CPU, when set, gives the latest CPU-time sample of "mysql" and
	// "redis" from the container engine's stats (about one a second).
	CPU map[string]func() (cpu time.Duration, at time.Time, ok bool)
}

// Redacted returns the MySQL DSN with any password replaced by "***".
func (e Endpoints) Redacted() string { return RedactDSN(e.MySQLDSN) }

// RedisRedacted names the Redis server without its password.
func (e Endpoints) RedisRedacted() string {
	if e.RedisURL != "" {
		return RedactURL(e.RedisURL)
	}
	if len(e.RedisCluster) > 0 {
		return "cluster " + strings.Join(e.RedisCluster, ",")
	}
	return e.RedisAddr
}

// RedisClient opens a client on the endpoints' Redis: a ClusterClient
// (pool per node) when RedisCluster is set, else a single-node client. tune,
// when not nil, sets pool and retry options on the single-node options,
// which the cluster options copy.
func (e Endpoints) RedisClient(tune func(*redis.Options)) redis.UniversalClient {
	o := e.RedisOptions()
	if tune != nil {
		tune(o)
	}
	if len(e.RedisCluster) == 0 {
		return redis.NewClient(o)
	}
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: e.RedisCluster, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
		PoolSize: o.PoolSize, PoolTimeout: o.PoolTimeout, MaxRetries: o.MaxRetries, DialerRetries: o.DialerRetries,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,
	})
}

// RedisOptions are the go-redis options that reach the Redis server: from
// RedisURL when set (user, password, database number, TLS and any query
// parameters), else from RedisAddr and RedisPassword. Pool settings are the
// caller's.
func (e Endpoints) RedisOptions() *redis.Options {
	if e.RedisURL != "" {
		if o, err := redis.ParseURL(e.RedisURL); err == nil {
			return o
		}
	}
	return &redis.Options{Addr: e.RedisAddr, Password: e.RedisPassword}
}

// ParseRedisURL checks a Redis URL. Its errors never quote the URL, which
// may hold a password.
func ParseRedisURL(raw string) (*redis.Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("redis url %s: %s", RedactURL(raw), strings.ReplaceAll(err.Error(), raw, "…"))
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("redis url %s: scheme %q: want redis:// or rediss://", RedactURL(raw), u.Scheme)
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("redis url %s: %s", RedactURL(raw), strings.ReplaceAll(err.Error(), raw, "…"))
	}
	return o, nil
}

// RedactURL hides the password of a URL; an unparsable one is hidden whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "***")
	}
	return strings.Replace(u.String(), ":%2A%2A%2A@", ":***@", 1)
}

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

// Networker is a provider whose servers sit behind a network profile
// that can change between runs (a sweep over RTT). SetNetwork is safe to
// call between runs, not during one.
type Networker interface {
	SetNetwork(ctx context.Context, p netpath.Profile) error
}

// Options configure provider selection.
type Options struct {
	// Network is the run's network profile (--rtt): the local and docker
	// backends start their servers behind it (auto means local); the zero
	// profile is loopback.
	Network  netpath.Profile
	Backend  string // auto | docker | local | external
	MySQLDSN string // external: the first (or only) node's DSN
	// MySQLDSNs, when it holds two or more, are the nodes of an external
	// MySQL cluster, one DSN per node (repeated MySQLDSN); MySQLDSN is
	// then the first.
	MySQLDSNs  []string
	RedisAddr  string // external
	RedisURL   string // external, instead of RedisAddr
	MySQLImage string // docker
	RedisImage string // docker
	// RedisCluster, when > 0, asks the local or docker provider for a Redis
	// Cluster of that many masters (auto then means local). An external
	// cluster is given as a comma-separated RedisAddr (its seed list).
	RedisCluster int
	// MySQLCluster, when > 0, asks the local provider for a Galera cluster
	// of that many MariaDB primaries (auto then means local).
	MySQLCluster int
	// NoSpread pins a cluster's connections to its first node instead of
	// spreading them over every node.
	NoSpread bool
	// CausalReads is the causal-read mode (CausalModes; empty
	// means auto).
	CausalReads string
	// RedisPersistence is the AOF setting of the Redis stockbench starts
	// (local and docker): none (or empty: no AOF), everysec or always
	// (appendfsync). What a Redis restart keeps depends on it.
	RedisPersistence string
}

// OptionsFromEnv fills empty external settings from STOCKBENCH_MYSQL_DSN
// (or STOCKBENCH_MYSQL_DSNS, a cluster's nodes one DSN per line: a DSN may
// hold a comma in its password), STOCKBENCH_REDIS_ADDR and
// STOCKBENCH_REDIS_URL (a Redis given by flag is not mixed with one from
// the environment, nor a MySQL).
func OptionsFromEnv(o Options) Options {
	if o.MySQLDSN == "" && len(o.MySQLDSNs) == 0 {
		// A list in the environment names an external cluster: it does not
		// apply to the servers the local and docker backends start.
		ownServers := o.Backend == "local" || o.Backend == "docker"
		if list := os.Getenv("STOCKBENCH_MYSQL_DSNS"); strings.TrimSpace(list) != "" && !ownServers {
			for _, l := range strings.Split(list, "\n") {
				if l = strings.TrimSpace(l); l != "" {
					o.MySQLDSNs = append(o.MySQLDSNs, l)
				}
			}
		} else {
			o.MySQLDSN = os.Getenv("STOCKBENCH_MYSQL_DSN")
		}
	}
	if o.RedisAddr == "" && o.RedisURL == "" {
		o.RedisAddr = os.Getenv("STOCKBENCH_REDIS_ADDR")
		o.RedisURL = os.Getenv("STOCKBENCH_REDIS_URL")
	}
	return o
}

// external builds the external provider, checking the DSN and the URL.
func (o Options) external() (*External, error) {
	if o.RedisAddr != "" && o.RedisURL != "" {
		return nil, errors.New("give RedisAddr or RedisURL, not both")
	}
	seen := map[string]int{}
	for i, dsn := range o.MySQLDSNs {
		node := ""
		if len(o.MySQLDSNs) > 1 {
			node = fmt.Sprintf(" (node %d)", i+1)
		}
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			// The driver's message does not quote the DSN.
			return nil, fmt.Errorf("mysql dsn%s %s: %v (want user:pass@tcp(host:port)/database)", node, RedactDSN(dsn), err)
		}
		if cfg.DBName == "" {
			return nil, fmt.Errorf("mysql dsn%s %s names no database: add /DATABASE (a scratch one)", node, RedactDSN(dsn))
		}
		key := cfg.Net + " " + cfg.Addr
		if j, ok := seen[key]; ok {
			return nil, fmt.Errorf("MySQLDSN: node %d (%s) is node %d again: give each node of a cluster once", i+1, cfg.Addr, j+1)
		}
		seen[key] = i
	}
	if o.RedisURL != "" {
		if _, err := ParseRedisURL(o.RedisURL); err != nil {
			return nil, err
		}
	}
	return &External{DSN: o.MySQLDSN, Nodes: o.MySQLDSNs, NoSpread: o.NoSpread, CausalReads: o.CausalReads,
		Addr: o.RedisAddr, URL: o.RedisURL}, nil
}

func (o Options) redisSet() bool { return o.RedisAddr != "" || o.RedisURL != "" }

// Backends lists the accepted Backend values.
var Backends = []string{"auto", "docker", "local", "external"}

// New picks a provider. auto means external when both endpoints are
// configured, else docker when an engine answers and the images (or the
// offline substitutes) are present or can be pulled, else local when the
// server binaries are found, else an error that says what to install.
func New(o Options) (Provider, error) {
	if _, err := checkPersistence(o.RedisPersistence); err != nil {
		return nil, err
	}
	if _, err := CheckCausal(o.CausalReads); err != nil {
		return nil, err
	}
	// One list of nodes: MySQLDSN is its first.
	if len(o.MySQLDSNs) == 0 && o.MySQLDSN != "" {
		o.MySQLDSNs = []string{o.MySQLDSN}
	}
	if len(o.MySQLDSNs) > 0 {
		o.MySQLDSN = o.MySQLDSNs[0]
	}
	switch {
	case len(o.MySQLDSNs) > 1 && o.MySQLCluster > 0:
		return nil, errors.New("MySQLCluster starts a local Galera cluster, a list of MySQLDSN names an external one: give one or the other")
	case len(o.MySQLDSNs) > 1 && (o.Backend == "local" || o.Backend == "docker"):
		return nil, fmt.Errorf("a list of MySQLDSN is an external cluster: use Backend external (or auto), not %s", o.Backend)
	case o.MySQLCluster > 0 && o.MySQLDSN != "" && o.Backend != "local":
		return nil, errors.New("MySQLCluster starts a local Galera cluster, MySQLDSN (or STOCKBENCH_MYSQL_DSN) names an external server: give one or the other")
	}
	// A negative size is refused whatever the backend: auto branches on
	// sizes above 0 and would otherwise start plain servers.
	if o.RedisCluster < 0 {
		return nil, checkRedisCluster(o.RedisCluster)
	}
	if o.MySQLCluster < 0 {
		return nil, fmt.Errorf("MySQLCluster %d: want 0 (one server), 1, or 3 or more nodes", o.MySQLCluster)
	}
	external := o.Backend == "external" || (o.Backend == "auto" || o.Backend == "") && o.MySQLDSN != "" && o.redisSet()
	if o.Network.Set {
		switch {
		case external:
			return nil, errors.New("a network profile shapes the path to servers stockbench starts; an external server's network is the real one (its RTT is measured and recorded without one)")
		case o.RedisCluster > 0 || o.MySQLCluster > 0:
			return nil, errors.New("a network profile applies to single servers, not clusters")
		}
		if err := netpath.Available(); err != nil {
			return nil, fmt.Errorf("a network profile %w", err)
		}
		if o.Backend != "docker" {
			return o.local()
		}
	}
	if external && o.RedisPersistence != "" && o.RedisPersistence != PersistenceNone {
		return nil, fmt.Errorf("RedisPersistence %s applies to the servers stockbench starts, not to external ones (set appendonly/appendfsync on your Redis)", o.RedisPersistence)
	}
	switch o.Backend {
	case "external":
		if o.MySQLDSN == "" || !o.redisSet() {
			return nil, errors.New("backend external needs MySQLDSN and RedisAddr or RedisURL (or STOCKBENCH_MYSQL_DSN and STOCKBENCH_REDIS_ADDR or STOCKBENCH_REDIS_URL)")
		}
		return o.external()
	case "local":
		return o.local()
	case "docker":
		if o.MySQLCluster != 0 {
			return nil, errors.New("MySQLCluster: not on the docker backend: the official mysql image has no Galera (use Backend local, which starts MariaDB with galera-4, or give an external cluster's nodes to MySQLDSN)")
		}
		if err := checkRedisCluster(o.RedisCluster); err != nil {
			return nil, err
		}
		if c := o.CausalReads; c == CausalWsrep || c == CausalGroupReplication {
			return nil, fmt.Errorf("CausalReads %s: the docker backend starts one plain MySQL server, no cluster", c)
		}
		d, err := newDockerBackend(o.MySQLImage, o.RedisImage)
		if err != nil {
			return nil, err
		}
		d.RedisPersistence, d.RedisCluster, d.Profile = o.RedisPersistence, o.RedisCluster, o.Network
		if d.RedisCluster > 0 && d.Network != NetworkHost {
			return nil, errClusterPublished
		}
		if d.Profile.Set && d.Network != NetworkHost {
			return nil, fmt.Errorf("a network profile on the docker backend needs an engine on this machine's kernel (host networking), not %s (Docker Desktop, rootless or remote): use Backend local", d.Network)
		}
		return d, nil
	case "auto", "":
		if o.MySQLDSN != "" && o.redisSet() {
			return o.external()
		}
		if o.MySQLDSN != "" || o.redisSet() {
			return nil, errors.New("external servers need both a MySQL DSN and a Redis address")
		}
		if o.RedisCluster > 0 || o.MySQLCluster > 0 {
			return o.local()
		}
		d, whyNot := autoDocker(o.MySQLImage, o.RedisImage)
		if d != nil {
			d.RedisPersistence = o.RedisPersistence
			return d, nil
		}
		l, err := NewLocal()
		if err != nil {
			return nil, fmt.Errorf("no servers: docker: %s; %w", whyNot, err)
		}
		l.RedisPersistence = o.RedisPersistence
		return l, nil
	default:
		return nil, fmt.Errorf("unknown backend %q (want one of %s)", o.Backend, strings.Join(Backends, ", "))
	}
}

// checkRedisCluster checks a RedisCluster value.
func checkRedisCluster(n int) error {
	if n < 0 {
		return fmt.Errorf("RedisCluster %d: want 0 (one server) or the number of masters", n)
	}
	return nil
}

// local is the local provider with the clusters asked for.
func (o Options) local() (*Local, error) {
	if err := checkRedisCluster(o.RedisCluster); err != nil {
		return nil, err
	}
	if o.MySQLCluster < 0 || o.MySQLCluster == 2 {
		return nil, fmt.Errorf("MySQLCluster %d: want 0 (one server), 1, or 3 or more nodes (Galera needs a majority to survive a node's loss)", o.MySQLCluster)
	}
	l, err := NewLocal()
	if err != nil {
		return nil, err
	}
	l.RedisCluster, l.MySQLCluster, l.NoSpread, l.CausalReads = o.RedisCluster, o.MySQLCluster, o.NoSpread, o.CausalReads
	l.RedisPersistence, l.Network = o.RedisPersistence, o.Network
	return l, nil
}

// External uses servers the user runs. Stop does nothing.
type External struct {
	DSN string
	// Nodes, when it holds two or more DSNs, are the nodes of a MySQL
	// cluster (DSN is the first); NoSpread pins the pools to the first and
	// CausalReads is the causal-read mode.
	Nodes       []string
	NoSpread    bool
	CausalReads string
	Addr        string
	// URL, when set, is a redis:// or rediss:// URL used instead of Addr.
	URL string
}

// Start checks that both servers answer.
func (e *External) Start(ctx context.Context) (Endpoints, error) {
	ep := Endpoints{Backend: "external", MySQLDSN: WithDriverParams(e.DSN), RedisAddr: e.Addr, RedisURL: e.URL}
	if nodes := strings.Split(e.Addr, ","); len(nodes) > 1 {
		// A list of nodes is a Redis Cluster's seed list.
		for i := range nodes {
			nodes[i] = strings.TrimSpace(nodes[i])
		}
		ep.RedisCluster, ep.RedisAddr = nodes, nodes[0]
	}
	if e.URL != "" {
		o, err := ParseRedisURL(e.URL)
		if err != nil {
			return Endpoints{}, err
		}
		ep.RedisAddr = o.Addr
	}
	// Without a Redis address (an audit of a MySQL-only strategy) only
	// MySQL is asked.
	ping := Ping
	if e.Addr == "" && e.URL == "" {
		ping = pingMySQL
	}
	if err := ping(ctx, ep, 5*time.Second); err != nil {
		return Endpoints{}, err
	}
	nodes := []string{ep.MySQLDSN}
	if len(e.Nodes) > 1 {
		nodes = make([]string, len(e.Nodes))
		for i, d := range e.Nodes {
			nodes[i] = WithDriverParams(d)
			if i > 0 {
				if err := pingMySQL(ctx, Endpoints{MySQLDSN: nodes[i]}, 5*time.Second); err != nil {
					return Endpoints{}, fmt.Errorf("node %d: %w", i+1, err)
				}
			}
		}
		ep.MySQLCluster, ep.MySQLSpread = nodes, !e.NoSpread
	}
	mode, err := resolveCausal(ctx, nodes, e.CausalReads)
	if err != nil {
		return Endpoints{}, err
	}
	ep.MySQLCausalReads, ep.MySQLCausalAuto = mode, len(nodes) > 1 && (e.CausalReads == "" || e.CausalReads == CausalAuto)
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
	if err := pingMySQL(ctx, ep, wait); err != nil {
		return err
	}
	return pingRedisFor(ctx, ep, wait)
}

// pingMySQL retries until MySQL answers or the wait runs out.
func pingMySQL(ctx context.Context, ep Endpoints, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	db, err := sql.Open("mysql", ep.MySQLDSN)
	if err != nil {
		return fmt.Errorf("mysql dsn %s: %w", ep.Redacted(), err)
	}
	defer db.Close()
	var lastErr error
	for {
		if lastErr = db.PingContext(ctx); lastErr == nil {
			return nil
		}
		if refusedForGood(lastErr) {
			return fmt.Errorf("mysql at %s refuses: %s", ep.Redacted(), redactErr(lastErr, ep))
		}
		if !clock.Sleep(ctx, 50*time.Millisecond) {
			return fmt.Errorf("mysql at %s does not answer: %s", ep.Redacted(), redactErr(lastErr, ep))
		}
	}
}

// pingRedisFor retries until Redis answers or the wait runs out.
func pingRedisFor(ctx context.Context, ep Endpoints, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// Ping retries on its own: one dial per try.
	rdb := ep.RedisClient(func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 })
	defer rdb.Close()
	var lastErr error
	for {
		// Each try gets a share of the wait, so that a refused dial is what
		// gets reported rather than the end of the wait.
		tctx, tcancel := context.WithTimeout(ctx, time.Second)
		err := rdb.Ping(tctx).Err()
		tcancel()
		if err == nil {
			return nil
		}
		if lastErr == nil || !errors.Is(err, context.DeadlineExceeded) {
			lastErr = err
		}
		if refusedForGood(lastErr) {
			return fmt.Errorf("redis at %s refuses: %s", ep.RedisRedacted(), redactErr(lastErr, ep))
		}
		if !clock.Sleep(ctx, 50*time.Millisecond) {
			return fmt.Errorf("redis at %s does not answer: %s", ep.RedisRedacted(), redactErr(lastErr, ep))
		}
	}
}

// refusedForGood reports errors that waiting does not cure: bad
// credentials, a missing database, a TLS mismatch.
func refusedForGood(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1044, 1045, 1049, 1698, 3159: // access denied (db, user), unknown database, insecure transport
			return true
		}
	}
	msg := err.Error()
	for _, s := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "invalid password", "tls:", "TLS handshake", "first record does not look like a TLS handshake"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// redactErr is err's text with any password of ep cut out (drivers do not
// quote passwords, but an error must never be the one that does).
func redactErr(err error, ep Endpoints) string {
	msg := err.Error()
	var pws []string
	if cfg, perr := mysql.ParseDSN(ep.MySQLDSN); perr == nil && cfg.Passwd != "" {
		pws = append(pws, cfg.Passwd)
	}
	if o := ep.RedisOptions(); o.Password != "" {
		pws = append(pws, o.Password)
	}
	for _, pw := range pws {
		// A very short password would also match ordinary words of the
		// message; drivers never quote passwords, so this is only a guard.
		if len(pw) >= 4 {
			msg = strings.ReplaceAll(msg, pw, "***")
		}
	}
	return msg
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
	DB *sql.DB
	// Redis is a *redis.Client, or a *redis.ClusterClient on a cluster.
	Redis redis.UniversalClient
	// MySQLNodes are the DSNs of a MySQL cluster's nodes (empty for one
	// server), for the per-node checks: GaleraCounters, NodeDisagreement.
	MySQLNodes []string
	// MySQLCausalReads is the causal-read mode of the cluster (see
	// Endpoints): the per-node checks read with it.
	MySQLCausalReads string
	// Trips counts both pools' round trips (nil for Conns not made by Open).
	Trips *RoundTrips
}

// DefaultPool is the default size of each of a run's pools (MySQL and
// Redis): what a typical service instance keeps, not one per buyer.
const DefaultPool = 64

// Open opens the run's pools, each bounded at poolSize connections: MySQL
// and Redis. Callers beyond that wait for a connection, as in a service; a
// wait for Redis is bounded by the caller's context, not by a pool timeout.
// A Redis call is bounded by its context's deadline too, as the MySQL
// driver's are: a service gives up on a stalled store when its request's
// time is up, not after go-redis's own 3 s read timeout. go-redis does not
// send a failed command again (see below).
func Open(ep Endpoints, poolSize int) (Conns, error) {
	trips := &RoundTrips{}
	var conn driver.Connector
	if len(ep.MySQLCluster) > 1 && ep.MySQLSpread {
		c, err := newSpreadConnector(ep.MySQLCluster, ep.MySQLCausalReads)
		if err != nil {
			return Conns{}, err
		}
		conn = c
	} else {
		c, err := mysql.MySQLDriver{}.OpenConnector(ep.MySQLDSN)
		if err != nil {
			return Conns{}, fmt.Errorf("mysql dsn %s: %w", ep.Redacted(), err)
		}
		conn = c
	}
	db := sql.OpenDB(countingConnector{inner: conn, n: &trips.MySQL})
	poolSize = max(poolSize, 1)
	db.SetMaxOpenConns(poolSize)
	db.SetMaxIdleConns(poolSize)
	rdb := ep.RedisClient(func(o *redis.Options) {
		o.PoolSize, o.PoolTimeout, o.ContextTimeoutEnabled = poolSize, time.Hour, true
		// No silent re-send: a script whose reply was lost may have run,
		// and run again it answers "already there", which a strategy would
		// take for a client's repeat. The strategies see the error and
		// settle it the way they settle any cut reply.
		o.MaxRetries = -1
	})
	rdb.AddHook(redisTrips{n: &trips.Redis})
	return Conns{DB: db, Redis: rdb, MySQLNodes: ep.MySQLCluster, MySQLCausalReads: ep.MySQLCausalReads, Trips: trips}, nil
}

// Close closes both pools.
func (c Conns) Close() error {
	return errors.Join(c.DB.Close(), c.Redis.Close())
}

// DriverLog sends the MySQL and Redis drivers' own log lines (such as
// "packets.go: unexpected EOF" when a server closes an idle pooled
// connection, or a refused dial; the drivers retry those and the caller sees
// any real error) to w instead of the process's stderr. The setting is
// process-wide.
func DriverLog(w io.Writer) {
	l := log.New(w, "", log.LstdFlags|log.Lmicroseconds)
	_ = mysql.SetLogger(log.New(w, "[mysql] ", log.LstdFlags|log.Lmicroseconds))
	redis.SetLogger(redisLogger{l})
}

// redisLogger adapts a log.Logger to go-redis's logging interface.
type redisLogger struct{ l *log.Logger }

func (r redisLogger) Printf(_ context.Context, format string, v ...any) {
	r.l.Printf("[redis] "+format, v...)
}
