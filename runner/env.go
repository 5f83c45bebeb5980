package runner

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/stockbench/stockbench/internal/version"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
)

// collectEnv asks the servers for their versions and durability settings.
// A figure it cannot read is left empty rather than guessed.
func collectEnv(ctx context.Context, ep servers.Endpoints, c servers.Conns) results.Env {
	e := results.Env{Backend: ep.Backend, DockerNetwork: ep.Network, RedisClusterNodes: len(ep.RedisCluster),
		MySQLClusterNodes: len(ep.MySQLCluster), MySQLSpread: ep.MySQLSpread && len(ep.MySQLCluster) > 1, Cores: runtime.NumCPU(), GoVersion: runtime.Version(),
		ToolVersion: version.Tool(), CPUModel: cpuModel(), StartedAt: time.Now().UTC().Format(time.RFC3339),
		RedisPersistence: ep.RedisPersistence}
	_ = c.DB.QueryRowContext(ctx, "SELECT VERSION()").Scan(&e.MySQLVersion)
	_ = c.DB.QueryRowContext(ctx, "SELECT @@innodb_flush_log_at_trx_commit").Scan(&e.InnodbFlushLogAtTrxCommit)
	_ = c.DB.QueryRowContext(ctx, "SELECT @@sync_binlog").Scan(&e.SyncBinlog)
	if info, err := c.Redis.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				e.RedisVersion = v
			}
		}
	}
	if v, err := c.Redis.ConfigGet(ctx, "appendonly").Result(); err == nil {
		e.RedisAppendOnly = v["appendonly"]
	}
	return e
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
