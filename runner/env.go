package runner

import (
	"context"
	"net"
	"runtime"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockbench/stockbench/internal/sysstat"
	"github.com/stockbench/stockbench/internal/version"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/servers/netpath"
)

// collectEnv asks the servers for their versions and durability settings.
// A figure it cannot read is left empty rather than guessed.
func collectEnv(ctx context.Context, ep servers.Endpoints, c servers.Conns) results.Env {
	e := results.Env{Backend: ep.Backend, DockerNetwork: ep.Network, RedisClusterNodes: len(ep.RedisCluster),
		MySQLClusterNodes: len(ep.MySQLCluster), MySQLSpread: ep.MySQLSpread && len(ep.MySQLCluster) > 1, Cores: runtime.NumCPU(), GoVersion: runtime.Version(),
		ToolVersion: version.Tool(), CPUModel: cpuModel(), StartedAt: time.Now().UTC().Format(time.RFC3339),
		RedisPersistence: ep.RedisPersistence}
	if len(ep.MySQLCluster) > 1 {
		e.MySQLCausalReads, e.MySQLCausalAuto = ep.MySQLCausalReads, ep.MySQLCausalAuto
		if e.MySQLCausalReads == "" {
			e.MySQLCausalReads = servers.CausalNone
		}
	}
	e.ClusterOnOneHost = clusterOnOneHost(ep)
	if ep.Netns != "" {
		e.NetworkPath = netpath.Method(ep.Netns)
		if ep.Backend == "docker" {
			e.NetworkPath = netpath.ContainerMethod(ep.Netns)
		}
	}
	e.LoadAverage = sysstat.LoadAverage()
	_ = c.DB.QueryRowContext(ctx, "SELECT VERSION()").Scan(&e.MySQLVersion)
	_ = c.DB.QueryRowContext(ctx, "SELECT @@innodb_flush_log_at_trx_commit").Scan(&e.InnodbFlushLogAtTrxCommit)
	_ = c.DB.QueryRowContext(ctx, "SELECT @@sync_binlog").Scan(&e.SyncBinlog)
	e.MySQLIsolation, _ = servers.ServerIsolation(ctx, c.DB)
	if info, err := c.Redis.Info(ctx, "server").Result(); err == nil {
		e.RedisVersion = sysstat.InfoField(info, "redis_version")
	}
	if v, err := c.Redis.ConfigGet(ctx, "appendonly").Result(); err == nil {
		e.RedisAppendOnly = v["appendonly"]
	}
	return e
}

// cpuModel names the machine's CPU: its model name, else its architecture.
func cpuModel() string {
	if m := sysstat.CPUModel(); m != "" {
		return m
	}
	return runtime.GOARCH
}

// clusterOnOneHost reports whether the run has a cluster (Redis or MySQL)
// and every node of it listens on a loopback address, that is on this
// machine.
func clusterOnOneHost(ep servers.Endpoints) bool {
	var addrs []string
	addrs = append(addrs, ep.RedisCluster...)
	if len(ep.MySQLCluster) > 1 {
		for _, d := range ep.MySQLCluster {
			cfg, err := mysql.ParseDSN(d)
			if err != nil {
				return false
			}
			addrs = append(addrs, cfg.Addr)
		}
	}
	if len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return false
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return false
		}
	}
	return true
}
