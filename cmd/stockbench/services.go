package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stockbench/stockbench/faults"
	"github.com/stockbench/stockbench/internal/clock"
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

// serviceContainers is the StartServices of the docker backend: the
// instances as containers of the image docker generators run in (checked
// here: docker present, host networking, this binary runs in it).
func serviceContainers() (runner.StartServices, error) {
	exe, err := selfExe()
	if err != nil {
		return nil, err
	}
	image, err := generatorImage(exe)
	if err != nil {
		return nil, err
	}
	return startServeContainers(image), nil
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
	// image, when set, runs each instance as a container of it (the
	// docker backend): host networking, this binary mounted read-only,
	// its state directory read-write, the environment passed by name
	// (dockerEnv) — as docker generators run.
	image     string
	dockerEnv []string

	mu sync.Mutex
	// clocks are the instances' clock offsets (svc-clock), which a
	// restart keeps.
	clocks []time.Duration
	// names and lifelines are the containers' names and the write ends
	// of their stdin (image set); pids the serve processes' host pids.
	names     []string
	lifelines []*os.File
	pids      []int
	started   int
	cmds      []*exec.Cmd
	done      []chan error
	urls      []string
	once      sync.Once
	err       error
}

func (p *serveProcs) URLs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.urls...)
}

// PIDs are the instances' current process ids.
func (p *serveProcs) PIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.image != "" {
		return append([]int(nil), p.pids...)
	}
	out := make([]int, 0, len(p.cmds))
	for _, c := range p.cmds {
		out = append(out, c.Process.Pid)
	}
	return out
}

// start starts instance i listening on listen and waits for its ready
// line; it returns the instance's URL.
func (p *serveProcs) start(ctx context.Context, i int, listen string) (string, error) {
	p.mu.Lock()
	off := p.clocks[i]
	p.started++
	name := fmt.Sprintf("stockbench-svc-%d-%d-%d", os.Getpid(), i, p.started)
	p.mu.Unlock()
	args := append(append([]string(nil), p.args...), "--listen", listen, "--state-dir", p.dirs[i], "--clock-offset", off.String())
	var cmd *exec.Cmd
	var lifeline *os.File
	if p.image != "" {
		var err error
		if cmd, lifeline, err = dockerCommand(context.Background(), p.image, p.exe, name, p.dirs[i], p.dockerEnv, args); err != nil {
			return "", fmt.Errorf("service instance %d: %w", i, err)
		}
	} else {
		cmd = exec.Command(p.exe, args...)
		cmd.Env = p.env
	}
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
		if p.image != "" {
			_ = p.lifelines[i].Close()
			p.names[i], p.lifelines[i] = name, lifeline
		}
	} else {
		p.cmds, p.done = append(p.cmds, cmd), append(p.done, done)
		p.names, p.lifelines, p.pids = append(p.names, name), append(p.lifelines, lifeline), append(p.pids, 0)
	}
	p.mu.Unlock()
	select {
	case url, ok := <-out.ready:
		if !ok {
			return "", fmt.Errorf("service instance %d: no ready line", i)
		}
		if p.image != "" {
			// The serve process's host pid (the container shares the
			// host's pid namespace): for the CPU sampler.
			b, err := exec.Command("docker", "inspect", "-f", "{{.State.Pid}}", name).Output()
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pid <= 0 {
				return "", fmt.Errorf("service instance %d: container %s: no pid (%v)", i, name, err)
			}
			p.mu.Lock()
			p.pids[i] = pid
			p.mu.Unlock()
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
	done := p.done[i]
	p.mu.Unlock()
	if err := p.signal(i, syscall.SIGKILL); err != nil {
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

// signal sends sig to instance i's serve process: directly, or for a
// container through the engine — SIGSTOP and SIGCONT as docker pause and
// unpause (the cgroup freezer), any other as docker kill -s.
func (p *serveProcs) signal(i int, sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmds[i]
	var name string
	if p.image != "" {
		name = p.names[i]
	}
	p.mu.Unlock()
	if name == "" {
		return cmd.Process.Signal(sig)
	}
	var args []string
	switch sig {
	case syscall.SIGSTOP:
		args = []string{"pause", name}
	case syscall.SIGCONT:
		args = []string{"unpause", name}
	default:
		args = []string{"kill", "-s", strconv.Itoa(int(sig)), name}
	}
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("docker %s: %v: %s", args[0], err, lastLine(string(out)))
	}
	return nil
}

// each sends sig to instance i, or to every instance when i is
// faults.AllInstances.
func (p *serveProcs) each(i int, what string, sig syscall.Signal) error {
	p.mu.Lock()
	n := len(p.cmds)
	p.mu.Unlock()
	var errs []error
	for j := 0; j < n; j++ {
		if i == faults.AllInstances || i == j {
			if err := p.signal(j, sig); err != nil {
				errs = append(errs, fmt.Errorf("%s service instance %d: %w", what, j, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Pause freezes instance i, or every instance (svc-pause): SIGSTOP, or
// docker pause for a container.
func (p *serveProcs) Pause(ctx context.Context, i int) error {
	return p.each(i, "pause", syscall.SIGSTOP)
}

// Resume lets instance i, or every instance, run again: SIGCONT, or
// docker unpause.
func (p *serveProcs) Resume(ctx context.Context, i int) error {
	return p.each(i, "resume", syscall.SIGCONT)
}

// SetClock offsets instance i's clock by d (svc-clock): it writes the
// offset to the instance's state directory, signals SIGUSR1, and returns
// once the instance's health reports the new offset. A restart of the
// instance starts it with the offset.
func (p *serveProcs) SetClock(ctx context.Context, i int, d time.Duration) error {
	if i == faults.AllInstances {
		return errors.New("svc-clock: one instance at a time")
	}
	p.mu.Lock()
	p.clocks[i] = d
	url := p.urls[i]
	p.mu.Unlock()
	tmp := filepath.Join(p.dirs[i], clockFile+".tmp")
	if err := os.WriteFile(tmp, []byte(d.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("clock of service instance %d: %w", i, err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dirs[i], clockFile)); err != nil {
		return fmt.Errorf("clock of service instance %d: %w", i, err)
	}
	// The signal goes only to an instance that answers its health check
	// (it has its SIGUSR1 handler by then: one that is still starting,
	// after svc-kill, would die of the signal), and again until the
	// instance reports the offset (a restart may have read the old one).
	for {
		h, err := service.ReadHealth(ctx, nil, url)
		if err == nil && h.ClockOffsetMillis == d.Milliseconds() {
			return nil
		}
		if err == nil {
			if serr := p.each(i, "clock of", syscall.SIGUSR1); serr != nil {
				err = serr
			}
		}
		if !clock.Sleep(ctx, 20*time.Millisecond) {
			return fmt.Errorf("clock of service instance %d: not read back (%v): %w", i, err, ctx.Err())
		}
	}
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
		for i, c := range cmds {
			// A frozen instance (svc-pause cut short) thaws to drain. A
			// container's CLI passes SIGTERM on (--sig-proxy).
			_ = p.signal(i, syscall.SIGCONT)
			_ = c.Process.Signal(syscall.SIGTERM)
		}
		for i, c := range cmds {
			select {
			case err := <-done[i]:
				if err != nil {
					p.err = errors.Join(p.err, fmt.Errorf("service instance %d: %w", i, err))
				}
			case <-time.After(time.Minute):
				_ = p.signal(i, syscall.SIGKILL)
				_ = c.Process.Kill()
				p.err = errors.Join(p.err, fmt.Errorf("service instance %d: did not drain within a minute; killed", i))
			}
		}
		p.mu.Lock()
		for i, w := range p.lifelines {
			if w != nil {
				_ = w.Close()
			}
			if p.image != "" {
				removeContainer(p.names[i])
			}
		}
		p.mu.Unlock()
	})
	return p.err
}

// startServeProcs starts spec's instances as `serve` children of this
// binary on the run's servers (passed in their environment, never on a
// command line), each on a free loopback port and its own state
// directory, and waits for every ready line. A child dies with its parent.
func startServeProcs(ctx context.Context, spec runner.ServiceSpec) (runner.ServiceGroup, error) {
	return startServeGroup(ctx, spec, "")
}

// startServeContainers is the docker backend's StartServices: each
// instance a container of image (see serveProcs.image).
func startServeContainers(image string) runner.StartServices {
	return func(ctx context.Context, spec runner.ServiceSpec) (runner.ServiceGroup, error) {
		return startServeGroup(ctx, spec, image)
	}
}

// startServeGroup starts spec's instances, as containers of image when it is
// set.
func startServeGroup(ctx context.Context, spec runner.ServiceSpec, image string) (runner.ServiceGroup, error) {
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
	add("degrade", c.Degrade != "", c.Degrade)
	add("degrade-timeout", c.Degrade != "" && c.DegradeTimeout > 0, c.DegradeTimeout.String())
	add("soldout-flag", c.SoldOutFlag > 0, c.SoldOutFlag.String())
	own := []string{shardChildEnv + "=1", "STOCKBENCH_MYSQL_DSN=" + ep.MySQLDSN, "STOCKBENCH_MYSQL_DSNS=",
		"STOCKBENCH_REDIS_ADDR=", "STOCKBENCH_REDIS_URL=" + redisURLOf(ep)}
	p := &serveProcs{exe: exe, args: args, dirs: spec.StateDirs, clocks: make([]time.Duration, len(spec.StateDirs)),
		env: append(os.Environ(), own...), image: image, dockerEnv: own}
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
