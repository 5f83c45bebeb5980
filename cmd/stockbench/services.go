package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/service"
)

// parseService reads --service: in-process (the default), process (one
// instance) or process:N, N ≥ 1 instances of `stockbench serve` started as
// children of this binary.
func parseService(v string) (runner.ServiceOptions, error) {
	var so runner.ServiceOptions
	switch {
	case v == "" || v == "in-process":
		return so, nil
	case v == "process":
		so.Procs = 1
	case strings.HasPrefix(v, "process:"):
		n, err := strconv.Atoi(strings.TrimPrefix(v, "process:"))
		if err != nil || n < 1 {
			return so, fmt.Errorf("%q: want process:N with N ≥ 1", v)
		}
		so.Procs = n
	default:
		return so, fmt.Errorf("%q: want in-process, process or process:N", v)
	}
	so.Start = startServeProcs
	return so, nil
}

// serveReady is serve's ready line: "serving NAME on URL (state dir DIR)".
var serveReady = regexp.MustCompile(`^serving \S+ on (http://\S+) `)

// readyWriter is a serve child's stdout: it hands the URL of the ready
// line to ready, once, and drops the rest.
type readyWriter struct {
	mu    sync.Mutex
	line  []byte
	sent  bool
	ready chan string
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.line = append(w.line, p...)
	if i := bytes.IndexByte(w.line, '\n'); i >= 0 {
		w.sent = true
		if m := serveReady.FindSubmatch(w.line[:i+1]); m != nil {
			w.ready <- string(m[1])
		}
		close(w.ready)
	}
	return len(p), nil
}

// onServeStop, when set (tests), is given each instance's health (what it
// served, by outcome) just before Stop drains it.
var onServeStop func(i int, h service.Health)

// serveProcs are the serve children of one run.
type serveProcs struct {
	cmds []*exec.Cmd
	done []chan error
	urls []string
	once sync.Once
	err  error
}

func (p *serveProcs) URLs() []string { return p.urls }

// Stop sends SIGTERM to every instance (it drains and exits 0) and waits
// for each; one that does not end within a minute is killed.
func (p *serveProcs) Stop() error {
	p.once.Do(func() {
		if onServeStop != nil {
			for i, u := range p.urls {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				h, err := service.ReadHealth(ctx, nil, u)
				cancel()
				if err == nil {
					onServeStop(i, h)
				}
			}
		}
		for _, c := range p.cmds {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
		for i, c := range p.cmds {
			select {
			case err := <-p.done[i]:
				if err != nil {
					p.err = errors.Join(p.err, fmt.Errorf("service instance %d: %w", i, err))
				}
			case <-time.After(time.Minute):
				_ = c.Process.Kill()
				p.err = errors.Join(p.err, fmt.Errorf("service instance %d: did not drain within a minute; killed", i))
			}
		}
	})
	return p.err
}

// startServeProcs starts spec's instances as `serve` children of this
// binary on the run's servers (passed in their environment, never on a
// command line), each on a free loopback port and its own state
// directory, and waits for every ready line. A child dies with its parent.
func startServeProcs(ctx context.Context, spec runner.ServiceSpec) (runner.ServiceGroup, error) {
	ep := spec.Endpoints
	if len(ep.RedisCluster) > 0 || len(ep.MySQLCluster) > 0 {
		return nil, errors.New("--service process: not on a cluster yet")
	}
	exe, err := selfExe()
	if err != nil {
		return nil, err
	}
	c := spec.Config
	args := []string{"serve", "--backend", "external", "--listen", "127.0.0.1:0", "--strategy", spec.Strategy,
		"--pool", strconv.Itoa(spec.Pool), "--inflight", "-1"}
	add := func(flag string, set bool, v string) {
		if set {
			args = append(args, "--"+flag, v)
		}
	}
	add("op-timeout", c.OpTimeout > 0, c.OpTimeout.String())
	add("sweep-period", c.SweepPeriod > 0, c.SweepPeriod.String())
	add("outbox-period", c.OutboxPeriod > 0, c.OutboxPeriod.String())
	add("reconcile-period", c.ReconcilePeriod > 0, c.ReconcilePeriod.String())
	add("batch-max", c.BatchMax > 0, strconv.Itoa(c.BatchMax))
	add("batch-wait", c.BatchWait > 0, c.BatchWait.String())
	add("cas-retry", c.CASRetry != "", c.CASRetry)
	add("cas-max-attempts", c.CASMaxAttempts > 0, strconv.Itoa(c.CASMaxAttempts))
	add("cas-max-wait", c.CASMaxWait > 0, c.CASMaxWait.String())
	add("buckets", c.Buckets > 0, strconv.Itoa(c.Buckets))
	env := append(os.Environ(), shardChildEnv+"=1", "STOCKBENCH_MYSQL_DSN="+ep.MySQLDSN, "STOCKBENCH_MYSQL_DSNS=",
		"STOCKBENCH_REDIS_ADDR=", "STOCKBENCH_REDIS_URL="+redisURLOf(ep))
	p := &serveProcs{}
	fail := func(err error) (runner.ServiceGroup, error) {
		_ = p.Stop()
		return nil, err
	}
	for i, dir := range spec.StateDirs {
		cmd := exec.Command(exe, append(args, "--state-dir", dir)...)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out := &readyWriter{ready: make(chan string, 1)}
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = out, &stderr
		if err := cmd.Start(); err != nil {
			return fail(fmt.Errorf("service instance %d: %w", i, err))
		}
		done := make(chan error, 1)
		p.cmds, p.done = append(p.cmds, cmd), append(p.done, done)
		exited := make(chan struct{})
		go func() { done <- cmd.Wait(); close(exited) }()
		select {
		case url, ok := <-out.ready:
			if !ok {
				return fail(fmt.Errorf("service instance %d: no ready line", i))
			}
			p.urls = append(p.urls, url)
		case <-exited:
			// Its error is the last line it wrote (Wait has returned: the
			// buffer is complete).
			return fail(fmt.Errorf("service instance %d exited: %s", i, lastLine(stderr.String())))
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	return p, nil
}
