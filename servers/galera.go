package servers

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockbench/stockbench/internal/clock"
)

// galeraProvider is the Galera library of Debian's galera-4 package.
var galeraProvider = []string{"/usr/lib/galera/libgalera_smm.so", "/usr/lib/galera-4/libgalera_smm.so", "/usr/lib64/galera-4/libgalera_smm.so"}

// startGalera starts an n-node MariaDB Galera cluster (multi-primary, every
// node writable) on 127.0.0.1: the first node bootstraps, the others join
// it and receive its state by rsync (SST). It waits until every node reports
// wsrep_cluster_size = n and Synced. Run as root the nodes run as the mysql
// user: the rsync SST daemon refuses a root-owned data directory.
func (l *Local) startGalera(ctx context.Context, n int) (dsns []string, pids []int, err error) {
	lib := ""
	for _, p := range galeraProvider {
		if _, err := os.Stat(p); err == nil {
			lib = p
			break
		}
	}
	if lib == "" {
		return nil, nil, errors.New("local galera: libgalera_smm.so not found (Debian: apt-get install galera-4 rsync)")
	}
	if lookPath("rsync") == "" {
		return nil, nil, errors.New("local galera: rsync not found, needed for state transfer (Debian: apt-get install rsync)")
	}
	runAs, uid, gid := "", -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("mysql")
		if err != nil {
			return nil, nil, fmt.Errorf("local galera: run as root, the nodes need the mysql user (Debian: apt-get install mariadb-server): %w", err)
		}
		runAs = "mysql"
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	var first string // gcomm address of the bootstrap node
	startTimeout := galeraStartTimeout(l.StartTimeout)
	for i := 0; i < n; i++ {
		ports := make([]int, 4) // client, group communication, IST, SST
		var pid int
		// A node that exits during its start is started again, on new
		// ports in a new directory, twice at most: a joiner's state
		// transfer listens on ports of its own (rsync's daemon among them)
		// and fails on one taken in the meantime.
		for attempt := 1; ; attempt++ {
			for j := range ports {
				if ports[j], err = freePort(); err != nil {
					return nil, nil, err
				}
			}
			pid, err = l.startGaleraNode(ctx, i, first, lib, ports, runAs, uid, gid, startTimeout)
			if err == nil || !errors.Is(err, errExited) || attempt == 3 {
				break
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("galera node %d: %w", i+1, err)
		}
		if i == 0 {
			first = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
		}
		pids = append(pids, pid)
		dsns = append(dsns, WithDriverParams(fmt.Sprintf("root@tcp(127.0.0.1:%d)/", ports[0])))
		// Join one node at a time: each takes its state from the first.
		if err := waitGalera(ctx, dsns, startTimeout); err != nil {
			return nil, nil, err
		}
	}
	return dsns, pids, nil
}

// startGaleraNode starts node i (0: the one that bootstraps the cluster,
// others join first, its gcomm address) on ports: client, group
// communication, IST, SST.
func (l *Local) startGaleraNode(ctx context.Context, i int, first, lib string, ports []int, runAs string, uid, gid int, timeout time.Duration) (int, error) {
	gcomm := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	join := "gcomm://" + first
	extra := []string{
		"--wsrep-on=ON", "--wsrep-provider=" + lib, "--wsrep-cluster-name=stockbench",
		"--wsrep-cluster-address=" + join, "--wsrep-node-address=" + gcomm,
		fmt.Sprintf("--wsrep-provider-options=gmcast.listen_addr=tcp://%s;ist.recv_addr=127.0.0.1:%d", gcomm, ports[2]),
		"--wsrep-sst-method=rsync", fmt.Sprintf("--wsrep-sst-receive-address=127.0.0.1:%d", ports[3]),
		"--binlog-format=ROW", "--default-storage-engine=InnoDB", "--innodb-autoinc-lock-mode=2",
	}
	if i == 0 {
		extra = append(extra, "--wsrep-new-cluster")
	}
	return l.startMySQLNode(ctx, ports[0], runAs, uid, gid, extra, timeout)
}

// galeraStartTimeout bounds a Galera node's start: a joiner copies the
// first node's data (rsync state transfer) before it answers, which on a
// loaded 2-core machine took over a minute (a CI run under two burners).
func galeraStartTimeout(start time.Duration) time.Duration { return 3 * start }

// waitGalera waits until every node says the cluster has len(dsns) nodes
// and it is Synced.
func waitGalera(ctx context.Context, dsns []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		ok := true
		for i, dsn := range dsns {
			size, state, err := galeraState(ctx, dsn)
			if err != nil || size != len(dsns) || state != "Synced" {
				ok, last = false, fmt.Sprintf("node %d: size %d, state %q, %v", i+1, size, state, err)
				break
			}
		}
		if ok {
			return nil
		}
		if !clock.Sleep(ctx, 100*time.Millisecond) {
			return fmt.Errorf("local galera: not synced after %s: %s", timeout, last)
		}
	}
}

func galeraState(ctx context.Context, dsn string) (size int, state string, err error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return 0, "", err
	}
	defer db.Close()
	var name, v string
	if err := db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &v); err != nil {
		return 0, "", err
	}
	size, _ = strconv.Atoi(v)
	if err := db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_local_state_comment'").Scan(&name, &state); err != nil {
		return 0, "", err
	}
	return size, state, nil
}

// chownTree hands a data directory to the user the server runs as.
func chownTree(dir string, uid, gid int) error {
	if uid < 0 {
		return nil
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// GaleraCounters sums, over a MySQL cluster's nodes, the transactions that
// failed certification (a conflicting commit on another primary) and those
// aborted by a replicated write (brute-force aborts). Both reach the client
// as error 1213 and are retried like deadlocks; these counters tell them
// apart. ok is false when the pools are on no cluster.
func (c Conns) GaleraCounters(ctx context.Context) (certFailures, bfAborts int64, ok bool, err error) {
	if len(c.MySQLNodes) == 0 {
		return 0, 0, false, nil
	}
	err = c.eachNode(ctx, func(db *sql.DB) error {
		for _, s := range []struct {
			name string
			dst  *int64
		}{{"wsrep_local_cert_failures", &certFailures}, {"wsrep_local_bf_aborts", &bfAborts}} {
			var name string
			var v int64
			if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE '"+s.name+"'").Scan(&name, &v); err != nil {
				return fmt.Errorf("galera counters: %w", err)
			}
			*s.dst += v
		}
		return nil
	})
	return certFailures, bfAborts, true, err
}

// NodeDisagreement compares what every node of a MySQL cluster holds — each
// SKU's stock row and the orders by state — and describes each node that
// differs from the first. After settling, a replicated cluster must agree.
func (c Conns) NodeDisagreement(ctx context.Context) ([]string, error) {
	if len(c.MySQLNodes) < 2 {
		return nil, nil
	}
	const q = "SELECT CONCAT_WS(':', 'inventory', sku, total, available, occupied, sold) FROM inventory " +
		"UNION ALL SELECT CONCAT_WS(':', 'orders', state, COUNT(*), SUM(qty)) FROM orders GROUP BY state ORDER BY 1"
	var views []string
	err := c.eachNode(ctx, func(db *sql.DB) error {
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		// Read after the node has applied every write the cluster committed
		// before this read (Galera and Group Replication apply replicated
		// writes asynchronously).
		if st := CausalStatement(c.MySQLCausalReads); st != "" {
			if _, err := conn.ExecContext(ctx, st); err != nil {
				return fmt.Errorf("node agreement: %w", err)
			}
		}
		rows, err := conn.QueryContext(ctx, q)
		if err != nil {
			return fmt.Errorf("node agreement: %w", err)
		}
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				return err
			}
			lines = append(lines, l)
		}
		views = append(views, strings.Join(lines, " "))
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for i := 1; i < len(views); i++ {
		if views[i] != views[0] {
			out = append(out, fmt.Sprintf("mysql node %d disagrees with node 1: %q vs %q", i+1, views[i], views[0]))
		}
	}
	return out, nil
}

// eachNode runs fn on a short-lived connection to each cluster node in turn.
func (c Conns) eachNode(ctx context.Context, fn func(*sql.DB) error) error {
	for _, dsn := range c.MySQLNodes {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(1)
		err = fn(db)
		db.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// spreadConnector opens each new connection on the next node of a MySQL
// cluster in turn, so one pool's connections — and the buyers using them —
// are spread over every primary.
//
// Every connection reads causally (on Galera wsrep_sync_wait=1, on Group
// Replication group_replication_consistency='BEFORE'; the causal-read
// mode): a node applies the
// write sets other primaries committed asynchronously, so without it a
// transaction begun on one node may not yet see what a transaction on
// another committed just before — a confirm finds no order its reserve
// acknowledged (and answers "unknown order"), a buyer finds no SKU or
// table the setup just created, an audit reads a lagging node. With it,
// BEGIN / START TRANSACTION and every SELECT first wait until the node has
// applied everything the cluster had committed: read-your-writes across
// primaries, for one group round trip per transaction. (Writes need no
// such wait: certification rejects a write based on a stale row.)
type spreadConnector struct {
	nodes []driver.Connector
	next  atomic.Uint64
}

func newSpreadConnector(dsns []string, causal string) (*spreadConnector, error) {
	name, value := causalSetting(causal)
	c := &spreadConnector{}
	for _, dsn := range dsns {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("mysql dsn %s: %w", RedactDSN(dsn), err)
		}
		if name != "" {
			if cfg.Params == nil {
				cfg.Params = map[string]string{}
			}
			cfg.Params[name] = value
		}
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, conn)
	}
	return c, nil
}

// Connect opens a connection on the next node.
func (c *spreadConnector) Connect(ctx context.Context) (driver.Conn, error) {
	i := c.next.Add(1) - 1
	return c.nodes[i%uint64(len(c.nodes))].Connect(ctx)
}

// Driver is the MySQL driver.
func (c *spreadConnector) Driver() driver.Driver { return c.nodes[0].Driver() }

// withDatabase sets the database of every DSN.
func withDatabase(dsns []string, name string) ([]string, error) {
	out := make([]string, len(dsns))
	for i, d := range dsns {
		cfg, err := mysql.ParseDSN(d)
		if err != nil {
			return nil, fmt.Errorf("mysql dsn %s: %w", RedactDSN(d), err)
		}
		cfg.DBName = name
		out[i] = cfg.FormatDSN()
	}
	return out, nil
}
