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

// serveProcs are the serve children of one run. Safe for concurrent use;
// one fault per instance at a time (the fault plan sees to it).
type serveProcs struct {
	exe  string
	args []string
	env  []string
	dirs []string

	mu   sync.Mutex
	cmds []*exec.Cmd
	done []chan error
	urls []string
	once sync.Once
	err  error
}

func (p *serveProcs) URLs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.urls...)
}

// start starts instance i listening on listen and waits for its ready
// line; it returns the instance's URL.
func (p *serveProcs) start(ctx context.Context, i int, listen string) (string, error) {
	cmd := exec.Command(p.exe, append(append([]string(nil), p.args...), "--listen", listen, "--state-dir", p.dirs[i])...)
	cmd.Env = p.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out := &readyWriter{ready: make(chan string, 1)}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("service instance %d: %w", i, err)
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() { done <- cmd.Wait(); close(exited) }()
	p.mu.Lock()
	if i < len(p.cmds) {
		p.cmds[i], p.done[i] = cmd, done
	} else {
		p.cmds, p.done = append(p.cmds, cmd), append(p.done, done)
	}
	p.mu.Unlock()
	select {
	case url, ok := <-out.ready:
		if !ok {
			return "", fmt.Errorf("service instance %d: no ready line", i)
		}
		return url, nil
	case <-exited:
		// Its error is the last line it wrote (Wait has returned: the
		// buffer is complete).
		return "", fmt.Errorf("service instance %d exited: %s", i, lastLine(stderr.String()))
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Kill ends instance i with SIGKILL (svc-kill) and waits until it is gone.
func (p *serveProcs) Kill(ctx context.Context, i int) error {
	p.mu.Lock()
	cmd, done := p.cmds[i], p.done[i]
	p.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill service instance %d: %w", i, err)
	}
	select {
	case <-done:
		// Killed on purpose: its exit is no failure of Stop's.
		gone := make(chan error, 1)
		gone <- nil
		p.mu.Lock()
		p.done[i] = gone
		p.mu.Unlock()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kill service instance %d: %w", i, ctx.Err())
	}
}

// Restart starts instance i again at its address and on its state
// directory, and returns once it answers its health check.
func (p *serveProcs) Restart(ctx context.Context, i int) error {
	p.mu.Lock()
	url := p.urls[i]
	p.mu.Unlock()
	got, err := p.start(ctx, i, strings.TrimPrefix(url, "http://"))
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if got != url {
		return fmt.Errorf("restart of service instance %d: serves on %s, not %s", i, got, url)
	}
	return service.WaitHealthy(ctx, nil, url)
}

// Stop sends SIGTERM to every instance (it drains and exits 0) and waits
// for each; one that does not end within a minute is killed.
func (p *serveProcs) Stop() error {
	p.once.Do(func() {
		if onServeStop != nil {
			for i, u := range p.URLs() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				h, err := service.ReadHealth(ctx, nil, u)
				cancel()
				if err == nil {
					onServeStop(i, h)
				}
			}
		}
		p.mu.Lock()
		cmds, done := append([]*exec.Cmd(nil), p.cmds...), append([]chan error(nil), p.done...)
		p.mu.Unlock()
		for _, c := range cmds {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
		for i, c := range cmds {
			select {
			case err := <-done[i]:
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
	args := []string{"serve", "--backend", "external", "--strategy", spec.Strategy,
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
	p := &serveProcs{exe: exe, args: args, dirs: spec.StateDirs,
		env: append(os.Environ(), shardChildEnv+"=1", "STOCKBENCH_MYSQL_DSN="+ep.MySQLDSN, "STOCKBENCH_MYSQL_DSNS=",
			"STOCKBENCH_REDIS_ADDR=", "STOCKBENCH_REDIS_URL="+redisURLOf(ep))}
	for i := range spec.StateDirs {
		url, err := p.start(ctx, i, "127.0.0.1:0")
		if err != nil {
			_ = p.Stop()
			return nil, err
		}
		p.mu.Lock()
		p.urls = append(p.urls, url)
		p.mu.Unlock()
	}
	return p, nil
}
