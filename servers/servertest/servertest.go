// Package servertest gives integration tests real servers through the same
// provider code users run: local child processes by default, another
// backend with STOCKBENCH_TEST_BACKEND=docker|external|auto (external takes
// STOCKBENCH_MYSQL_DSN and STOCKBENCH_REDIS_ADDR).
package servertest

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/servers"
)

// Env is what a test package gets: endpoints and open pools.
type Env struct {
	Endpoints servers.Endpoints
	servers.Conns
	// Faulter injects process faults into the servers (nil on the external
	// backend, whose servers are not ours).
	Faulter servers.Faulter
	// Network changes the network profile of servers started behind one
	// (Options.Network); nil otherwise.
	Network servers.Networker
}

// Main starts the servers, runs the package's tests and stops the servers.
// Use it from TestMain: os.Exit(servertest.Main(m, &env)). Servers that
// cannot be started fail the run with the reason; they are never mocked.
//
// With -short (the fast tier: no servers) it starts none and runs only the
// package's tests named in pure, which must not touch env.
func Main(m *testing.M, env *Env, pure ...string) int {
	flag.Parse()
	if testing.Short() {
		if len(pure) == 0 {
			fmt.Println("servertest: -short: skipping this package's tests, which need real servers")
			return 0
		}
		if err := flag.Set("test.run", "^("+strings.Join(pure, "|")+")$"); err != nil {
			fmt.Fprintln(os.Stderr, "servertest:", err)
			return 1
		}
		return m.Run()
	}
	e, stop, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "servertest:", err)
		return 1
	}
	defer stop()
	*env = e
	return m.Run()
}

// Start starts servers as Main does, for a package that needs them in only
// some of its tests; stop closes the pools and stops the servers.
func Start() (env Env, stop func(), err error) { return StartWith(nil) }

// StartWith is Start with options adjusted by tune (say, a Redis
// persistence setting) before the provider is chosen.
func StartWith(tune func(*servers.Options)) (env Env, stop func(), err error) {
	servers.DriverLog(io.Discard)
	backend := os.Getenv("STOCKBENCH_TEST_BACKEND")
	if backend == "" {
		backend = "local"
	}
	o := servers.Options{Backend: backend}
	// STOCKBENCH_TEST_REDIS_CLUSTER=N and STOCKBENCH_TEST_MYSQL_CLUSTER=N run
	// the package's tests on a Redis Cluster of N masters (local, or docker
	// with STOCKBENCH_TEST_BACKEND=docker) and a local Galera cluster of N
	// primaries.
	for _, c := range []struct {
		env string
		dst *int
	}{{"STOCKBENCH_TEST_REDIS_CLUSTER", &o.RedisCluster}, {"STOCKBENCH_TEST_MYSQL_CLUSTER", &o.MySQLCluster}} {
		if v := os.Getenv(c.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return env, nil, fmt.Errorf("%s: %w", c.env, err)
			}
			*c.dst = n
		}
	}
	o = servers.OptionsFromEnv(o)
	if tune != nil {
		tune(&o)
	}
	p, err := servers.New(o)
	if err != nil {
		return env, nil, err
	}
	// Generous: only a hang reaches it. A Galera cluster's joiners copy
	// state one after another, over a minute each on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	ep, err := p.Start(ctx)
	cancel()
	if err != nil {
		_ = p.Stop()
		return env, nil, err
	}
	conns, err := servers.Open(ep, 256)
	if err != nil {
		_ = p.Stop()
		return env, nil, err
	}
	env.Endpoints, env.Conns = ep, conns
	env.Faulter, _ = servers.FaulterOf(p)
	if ep.Netns != "" {
		env.Network, _ = p.(servers.Networker)
	}
	return env, func() { _ = conns.Close(); _ = p.Stop() }, nil
}
