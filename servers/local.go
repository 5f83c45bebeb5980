package servers

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockbench/stockbench/servers/netpath"
)

// Local starts mariadbd (or mysqld) and redis-server found on the machine as
// child processes on free 127.0.0.1 ports with temporary data directories.
// The children run in their own process group (a terminal's Ctrl-C reaches
// only stockbench, which then stops them in order) and die with stockbench if
// it is killed.
type Local struct {
	MySQLBin, InstallDB, RedisBin string
	// StartTimeout bounds how long each server may take to answer.
	StartTimeout time.Duration
	// RedisPassword, when set, starts redis-server with requirepass (for
	// tests of AUTH: the password is on the server's command line).
	RedisPassword string
	// RedisCluster, when > 0, starts a Redis Cluster of that many masters
	// (no replicas) instead of one server.
	RedisCluster int
	// MySQLCluster, when > 0, starts a Galera cluster of that many MariaDB
	// primaries instead of one server; NoSpread pins the pools to its
	// first node.
	MySQLCluster int
	NoSpread     bool
	// CausalReads is the cluster's causal-read mode (empty: auto,
	// which finds the Galera nodes and chooses wsrep).
	CausalReads string
	// RedisPersistence is the Redis AOF setting: PersistenceNone (or
	// empty: no AOF), PersistenceEverysec or PersistenceAlways.
	RedisPersistence string
	// Network, when set, starts the servers in a network namespace of
	// their own behind the profile's RTT (netpath.Path); SetNetwork
	// changes it between runs. Single servers only.
	Network netpath.Profile

	mu    sync.Mutex
	path  *netpath.Path
	procs []*exec.Cmd
	dirs  []string
	// roles are the single servers (not cluster nodes) by target, for
	// process faults (faulter.go).
	roles map[string]*localRole
	// redisNodes are a Redis Cluster's nodes, for Checkpoint and RollBack
	// (clusterlose.go): the cluster loses data as a whole.
	redisNodes []*localRole
}

// NewLocal finds the server binaries or says what to install.
func NewLocal() (*Local, error) {
	l := &Local{
		MySQLBin:     lookPath("mariadbd", "mysqld"),
		InstallDB:    lookPath("mariadb-install-db", "mysql_install_db"),
		RedisBin:     lookPath("redis-server"),
		StartTimeout: 60 * time.Second,
	}
	var missing []string
	if l.MySQLBin == "" {
		missing = append(missing, "mariadbd or mysqld (Debian: apt-get install mariadb-server)")
	}
	if l.RedisBin == "" {
		missing = append(missing, "redis-server (Debian: apt-get install redis-server)")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("local backend: not found: %s; or use Backend external", strings.Join(missing, ", "))
	}
	return l, nil
}

// Start starts both servers and waits until they answer.
func (l *Local) Start(ctx context.Context) (ep Endpoints, err error) {
	defer func() {
		if err != nil {
			l.Stop()
		}
	}()
	ep.Backend = "local"
	if ep.RedisPersistence, err = checkPersistence(l.RedisPersistence); err != nil {
		return ep, err
	}
	// Data dirs of killed runs go first; a failure to sweep does not stop
	// this run.
	_, _ = SweepLocal()
	if l.Network.Set {
		if l.MySQLCluster > 0 || l.RedisCluster > 0 {
			return ep, errors.New("local: a network profile applies to single servers, not clusters")
		}
		p, err := netpath.Create(ctx)
		if err != nil {
			return ep, err
		}
		l.mu.Lock()
		l.path = p
		l.mu.Unlock()
	}
	var mysqlPort int
	if l.MySQLCluster > 0 {
		dsns, pids, err := l.startGalera(ctx, l.MySQLCluster)
		if err != nil {
			return ep, err
		}
		// On every node, not only the first: Galera applies node 1's
		// DDL on the others a moment after node 1 returns, and the first
		// query on node 2 may come sooner (seen on a busy CI machine).
		// IF NOT EXISTS makes the repeats no-ops wherever it arrived.
		for _, dsn := range dsns {
			if err := createDatabase(ctx, dsn, "stockbench"); err != nil {
				return ep, err
			}
		}
		if ep.MySQLCluster, err = withDatabase(dsns, "stockbench"); err != nil {
			return ep, err
		}
		ep.MySQLSpread = !l.NoSpread
		if ep.MySQLCausalReads, err = resolveCausal(ctx, ep.MySQLCluster, l.CausalReads); err != nil {
			return ep, err
		}
		ep.MySQLCausalAuto = len(ep.MySQLCluster) > 1 && (l.CausalReads == "" || l.CausalReads == CausalAuto)
		ep.MySQLPID = pids[0]
		ep.ExtraPIDs = map[string][]int{"mysql": pids[1:]}
		cfg, _ := mysql.ParseDSN(dsns[0])
		_, p, _ := net.SplitHostPort(cfg.Addr)
		mysqlPort, _ = strconv.Atoi(p)
	} else if mysqlPort, ep.MySQLPID, err = l.startMySQL(ctx); err != nil {
		return ep, err
	}
	var redisPort int
	if l.RedisCluster > 0 {
		var pids []int
		ep.RedisCluster, pids, err = l.startRedisCluster(ctx, l.RedisCluster)
		if err != nil {
			return ep, err
		}
		ep.RedisPID = pids[0]
		if ep.ExtraPIDs == nil {
			ep.ExtraPIDs = map[string][]int{}
		}
		ep.ExtraPIDs["redis"] = pids[1:]
		_, p, _ := net.SplitHostPort(ep.RedisCluster[0])
		redisPort, _ = strconv.Atoi(p)
	} else if redisPort, ep.RedisPID, err = l.startSingleRedis(ctx); err != nil {
		return ep, err
	}
	if p := l.netPath(); p != nil {
		if err := p.Shape(netpath.StoreMySQL, mysqlPort); err != nil {
			return ep, err
		}
		if err := p.Shape(netpath.StoreRedis, redisPort); err != nil {
			return ep, err
		}
		if err := p.Set(ctx, l.Network); err != nil {
			return ep, err
		}
		ep.Netns = p.Name()
	}
	root := fmt.Sprintf("root@tcp(%s)/", net.JoinHostPort(l.host(), strconv.Itoa(mysqlPort)))
	if err := createDatabase(ctx, WithDriverParams(root), "stockbench"); err != nil {
		return ep, err
	}
	ep.MySQLDSN = WithDriverParams(root + "stockbench")
	if l.MySQLCluster == 0 {
		// An explicit mode is checked against the one server too.
		if ep.MySQLCausalReads, err = resolveCausal(ctx, []string{ep.MySQLDSN}, l.CausalReads); err != nil {
			return ep, err
		}
	}
	ep.RedisAddr = net.JoinHostPort(l.host(), strconv.Itoa(redisPort))
	ep.RedisPassword = l.RedisPassword
	return ep, nil
}

func createDatabase(ctx context.Context, dsn, name string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+name); err != nil {
		return fmt.Errorf("local mysql: create database: %w", err)
	}
	return nil
}

func (l *Local) tempDir(kind string) (string, error) {
	d, err := MkdirTemp("stockbench-" + kind + "-")
	if err != nil {
		return "", fmt.Errorf("local %s: %w", kind, err)
	}
	l.mu.Lock()
	l.dirs = append(l.dirs, d)
	l.mu.Unlock()
	return d, nil
}

// initMySQL makes a data directory for one server: a private tmpdir
// (instances sharing /tmp clobber each other's temporary tables during
// bootstrap, seen with parallel test packages) and the system tables. With
// runAs set (root starting a Galera node) the directory is that user's.
func (l *Local) initMySQL(ctx context.Context, runAs string, uid, gid int) (dir string, mariadb bool, err error) {
	dir, err = l.tempDir("mysql")
	if err != nil {
		return "", false, err
	}
	data, tmp := filepath.Join(dir, "data"), filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return "", false, fmt.Errorf("local mysql: %w", err)
	}
	if err := chownTree(dir, uid, gid); err != nil {
		return "", false, fmt.Errorf("local mysql: %w", err)
	}
	user := "--user=root"
	if runAs != "" {
		user = "--user=" + runAs
	}
	mariadb = strings.Contains(filepath.Base(l.MySQLBin), "mariadb") || l.InstallDB != "" && strings.Contains(l.InstallDB, "mariadb")
	var initCmd *exec.Cmd
	if mariadb {
		if l.InstallDB == "" {
			return "", false, errors.New("local mysql: mariadb-install-db not found (Debian: apt-get install mariadb-server)")
		}
		initCmd = exec.CommandContext(ctx, l.InstallDB, "--no-defaults", "--datadir="+data, "--tmpdir="+tmp, user,
			"--auth-root-authentication-method=normal", "--skip-test-db")
	} else {
		initCmd = exec.CommandContext(ctx, l.MySQLBin, "--no-defaults", "--initialize-insecure", "--datadir="+data, "--tmpdir="+tmp, user)
	}
	if out, err := initCmd.CombinedOutput(); err != nil {
		return "", false, fmt.Errorf("local mysql: initialise data dir: %v: %s", err, lastLine(out))
	}
	return dir, mariadb, nil
}

// runMySQL starts a server on an initialised directory and waits until it
// answers, for up to timeout. errExited (wrapped) means it exited during
// start.
func (l *Local) runMySQL(ctx context.Context, dir string, mariadb bool, port int, runAs string, extra []string, timeout time.Duration) (pid int, err error) {
	user := "--user=root"
	if runAs != "" {
		user = "--user=" + runAs
	}
	logFile := filepath.Join(dir, "error.log")
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(dir, "data"), "--tmpdir=" + filepath.Join(dir, "tmp"),
		"--port=" + strconv.Itoa(port), "--socket=" + filepath.Join(dir, "mysql.sock"), "--bind-address=" + l.host(), user,
		"--skip-name-resolve", "--log-error=" + logFile, "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
		"--max-connections=2000", "--innodb-buffer-pool-size=256M",
		// As in the docker image (Debian's defaults) and MySQL 8.0: the same
		// settings on every backend.
		"--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci"}
	if !mariadb {
		args = append(args, "--skip-log-bin", "--mysqlx=OFF")
	}
	if l.netPath() != nil {
		// The harness connects from the host's end of the veth, not from
		// localhost: root may connect from there (from nowhere else: the
		// namespace is reachable from this host only).
		init := filepath.Join(dir, "network-init.sql")
		grant := "CREATE USER IF NOT EXISTS 'root'@'%';\nGRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;\n"
		if err := os.WriteFile(init, []byte(grant), 0o600); err != nil {
			return 0, fmt.Errorf("local mysql: %w", err)
		}
		args = append(args, "--init-file="+init)
	}
	cmd, err := l.spawn(l.MySQLBin, append(args, extra...)...)
	if err != nil {
		return 0, fmt.Errorf("local mysql: %w", err)
	}
	dsn := WithDriverParams(fmt.Sprintf("root@tcp(%s)/", net.JoinHostPort(l.host(), strconv.Itoa(port))))
	err = l.waitReady(ctx, cmd, timeout, func(ctx context.Context) error {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	})
	if err == nil {
		return cmd.Process.Pid, nil
	}
	if errors.Is(err, errExited) {
		return 0, fmt.Errorf("local mysql: %s exited: %w: %s", l.MySQLBin, errExited, tailFile(logFile))
	}
	return 0, fmt.Errorf("local mysql: %w: %s", err, tailFile(logFile))
}

func (l *Local) startMySQL(ctx context.Context) (port, pid int, err error) {
	dir, mariadb, err := l.initMySQL(ctx, "", -1, -1)
	if err != nil {
		return 0, 0, err
	}
	for attempt := 0; attempt < 3; attempt++ {
		if port, err = freePort(); err != nil {
			return 0, 0, err
		}
		pid, err = l.runMySQL(ctx, dir, mariadb, port, "", nil, l.StartTimeout)
		if err == nil {
			l.setRole(TargetMySQL, pid, func(ctx context.Context) (int, error) {
				return l.runMySQL(ctx, dir, mariadb, port, "", nil, l.StartTimeout)
			})
			return port, pid, nil
		}
		// A port taken between choosing and binding: try another.
		if !errors.Is(err, errExited) || !strings.Contains(tailFile(filepath.Join(dir, "error.log")), "in use") {
			return 0, 0, err
		}
	}
	return 0, 0, errors.New("local mysql: no free port after 3 tries")
}

// startMySQLNode starts one server of a cluster on a chosen port, waiting
// up to timeout for it to answer.
func (l *Local) startMySQLNode(ctx context.Context, port int, runAs string, uid, gid int, extra []string, timeout time.Duration) (pid int, err error) {
	dir, mariadb, err := l.initMySQL(ctx, runAs, uid, gid)
	if err != nil {
		return 0, err
	}
	return l.runMySQL(ctx, dir, mariadb, port, runAs, extra, timeout)
}

// startRedis starts one redis-server; extra are further arguments.
func (l *Local) startRedis(ctx context.Context, extra ...string) (port, pid int, dir string, err error) {
	dir, err = l.tempDir("redis")
	if err != nil {
		return 0, 0, "", err
	}
	for attempt := 0; attempt < 3; attempt++ {
		port, err = freePort()
		if err != nil {
			return 0, 0, "", err
		}
		pid, err = l.runRedis(ctx, dir, port, extra)
		if err == nil {
			return port, pid, dir, nil
		}
		if !errors.Is(err, errExited) || !strings.Contains(tailFile(filepath.Join(dir, "redis.log")), "in use") {
			return 0, 0, "", err
		}
	}
	return 0, 0, "", errors.New("local redis: no free port after 3 tries")
}

// startSingleRedis starts the run's one Redis server, which process
// faults can then pause and restart.
func (l *Local) startSingleRedis(ctx context.Context) (port, pid int, err error) {
	port, pid, dir, err := l.startRedis(ctx)
	if err != nil {
		return 0, 0, err
	}
	l.setRole(TargetRedis, pid, func(ctx context.Context) (int, error) {
		return l.runRedis(ctx, dir, port, nil)
	})
	// The address it listens on: the network namespace's with a profile.
	addr := net.JoinHostPort(l.host(), strconv.Itoa(port))
	l.mu.Lock()
	l.roles[TargetRedis].dir, l.roles[TargetRedis].addr = dir, addr
	l.mu.Unlock()
	return port, pid, nil
}

// runRedis runs redis-server on dir and port and waits until it answers;
// errExited (wrapped) means it exited during start. Run again on the same
// dir it reloads the append-only file, if persistence keeps one.
func (l *Local) runRedis(ctx context.Context, dir string, port int, extra []string) (pid int, err error) {
	logFile := filepath.Join(dir, "redis.log")
	args := []string{"--port", strconv.Itoa(port), "--bind", l.host(), "--save", "",
		"--dir", dir, "--logfile", logFile, "--daemonize", "no"}
	args = append(args, persistenceArgs(l.RedisPersistence)...)
	if l.RedisPassword != "" {
		args = append(args, "--requirepass", l.RedisPassword)
	}
	if l.netPath() != nil && l.RedisPassword == "" {
		// Reached from the host's end of the veth, not from loopback.
		args = append(args, "--protected-mode", "no")
	}
	args = append(args, extra...)
	cmd, err := l.spawn(l.RedisBin, args...)
	if err != nil {
		return 0, fmt.Errorf("local redis: %w", err)
	}
	addr := net.JoinHostPort(l.host(), strconv.Itoa(port))
	err = l.waitReady(ctx, cmd, l.StartTimeout, func(ctx context.Context) error { return pingRedis(ctx, addr, l.RedisPassword) })
	if err == nil {
		return cmd.Process.Pid, nil
	}
	if errors.Is(err, errExited) {
		return 0, fmt.Errorf("local redis: %s exited: %w: %s", l.RedisBin, errExited, tailFile(logFile))
	}
	return 0, fmt.Errorf("local redis: %w: %s", err, tailFile(logFile))
}

var errExited = errors.New("server exited during start")

// host is the address the single servers listen on: the network
// namespace's when the run has a profile, else 127.0.0.1.
func (l *Local) host() string {
	if p := l.netPath(); p != nil {
		return p.Addr()
	}
	return "127.0.0.1"
}

func (l *Local) netPath() *netpath.Path {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.path
}

// SetNetwork changes the profile of a run started with one (a sweep over
// RTT): the same servers, the same path, new delays from now on.
func (l *Local) SetNetwork(ctx context.Context, pr netpath.Profile) error {
	p := l.netPath()
	if p == nil {
		return errors.New("local: started without a network profile")
	}
	return p.Set(ctx, pr)
}

// NetworkStats are the network path's shaper counts per store (nil
// without a profile).
func (l *Local) NetworkStats() map[string]netpath.Stats {
	if p := l.netPath(); p != nil {
		return p.Stats()
	}
	return nil
}

// spawn starts a child in its own process group that is killed if we die;
// with a network profile, inside the run's namespace (ip netns exec execs
// the server: the child's pid is the server's).
func (l *Local) spawn(bin string, args ...string) (*exec.Cmd, error) {
	if p := l.netPath(); p != nil {
		bin, args = p.Command(bin, args...)
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.procs = append(l.procs, cmd)
	l.mu.Unlock()
	return cmd, nil
}

// waitReady polls ready until it succeeds, the process exits, or the start
// timeout passes.
func (l *Local) waitReady(ctx context.Context, cmd *exec.Cmd, timeout time.Duration, ready func(context.Context) error) error {
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		select {
		case <-exited:
			l.forget(cmd)
			return errExited
		default:
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		last = ready(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			l.forget(cmd)
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %v", timeout, last)
		case <-time.After(30 * time.Millisecond):
		}
	}
}

func (l *Local) forget(cmd *exec.Cmd) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, c := range l.procs {
		if c == cmd {
			l.procs = append(l.procs[:i], l.procs[i+1:]...)
			return
		}
	}
}

// Stop terminates the servers (SIGTERM, then SIGKILL after 10 s) and removes
// their data directories. It is safe to call more than once. Directories a
// killed run could not remove are swept by the next local run and by
// `stockbench down` (SweepLocal).
func (l *Local) Stop() error {
	l.mu.Lock()
	procs, dirs := l.procs, l.dirs
	l.procs, l.dirs = nil, nil
	l.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i].Process
		_ = p.Signal(syscall.SIGTERM)
		// A server paused by a fault must run again to hear the SIGTERM.
		_ = syscall.Kill(-p.Pid, syscall.SIGCONT)
		done := make(chan struct{})
		go func() {
			for {
				// The waitReady goroutine reaps the child; poll for its exit.
				if err := p.Signal(syscall.Signal(0)); err != nil {
					close(done)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Kill()
			<-done
		}
	}
	var errs []error
	l.mu.Lock()
	path := l.path
	l.path = nil
	l.mu.Unlock()
	if path != nil {
		if err := path.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// freePort picks a port for a server to listen on: one that nothing
// listens on now and that lies below the kernel's ephemeral range
// (ip_local_port_range), from which every outgoing connection takes its
// local port. A port from that range, which listening on :0 gives, can be
// taken by some client's connection between being chosen here and the
// server binding it, and a machine running tests opens thousands.
func freePort() (int, error) {
	lo, hi := listenRange(ephemeralLow())
	var err error
	for try := range 65 {
		port := 0 // the last try: any port the kernel gives
		if try < 64 {
			port = lo + rand.IntN(hi-lo)
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			defer ln.Close()
			return ln.Addr().(*net.TCPAddr).Port, nil
		}
	}
	return 0, fmt.Errorf("find a free port: %w", err)
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default 32768 when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	if f := strings.Fields(string(b)); len(f) == 2 {
		if n, err := strconv.Atoi(f[0]); err == nil {
			return n
		}
	}
	return 32768
}

// listenRange is where freePort looks for a port, given the ephemeral
// range's first port: the 16384 ports below it, above the privileged ones
// (at least 1024 ports).
func listenRange(ephemeralLow int) (lo, hi int) {
	hi = max(ephemeralLow, 2048)
	return max(1024, hi-16384), hi
}

func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	return lastLine(b)
}

// lastLine returns the first line MariaDB marks [ERROR], else the first
// that names an error, either other than the generic "Aborting"; or else
// the last line. The mark comes first because a command line Galera logs
// (its state-transfer script's, with --log-error=…/error.log) names one.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for _, names := range []func(string) bool{
		func(l string) bool { return strings.Contains(l, "[ERROR]") },
		func(l string) bool { return strings.Contains(strings.ToLower(l), "error") },
	} {
		for _, l := range lines {
			if names(l) && !strings.Contains(l, "Aborting") {
				return strings.TrimSpace(l)
			}
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}
