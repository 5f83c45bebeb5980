package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/observe"
	"github.com/stockbench/stockbench/reports"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/servers"
)

// shardFlags are the flags of `stockbench run` that split a run over
// several generator processes.
type shardFlags struct {
	procs        int
	shard        string
	noReset      bool
	startBarrier string
	// generators is how --procs starts its generators: process or docker.
	generators string
	// stateDir is --state-dir: a generator's own directory.
	stateDir string
	// image is the docker generators' image (checked by check).
	image string
	// index and of are --shard parsed.
	index, of int
	// on is set when the flags were registered (run, not sweep).
	on bool
}

func (s *shardFlags) register(fs *flag.FlagSet) {
	s.on = true
	fs.IntVar(&s.procs, "procs", 1, "generator processes: this process starts the servers, prepares the stores, runs N shards of itself (each its slice of the buyers, its own strategy instance and background loops), merges them and audits once")
	fs.StringVar(&s.shard, "shard", "", "I/N: be generator I (from 0) of N against --backend external: play buyers with index % N == I, leave the audit to whoever merges (--procs sets it)")
	fs.BoolVar(&s.noReset, "no-reset", false, "with --shard: use the stores as prepared (no schema reset, no stock load)")
	fs.StringVar(&s.startBarrier, "start-barrier", "", "with --shard: Redis key the N generators meet at after setup; load starts when the last arrives")
	fs.StringVar(&s.stateDir, "state-dir", "", "with --shard: this generator's own directory, kept however it ends (locked while in use): its strategy's local state (outbox-local's message table) and its ack log, one write(2) per ack; a generator started again on it relays what its predecessor left, and with --no-reset its acks join the new results. --procs N gives each generator OUT/shards/…/shard-I/state")
	fs.StringVar(&s.generators, "generators", generatorsProcess, "with --procs N: how the generators run: process (children of this process) | docker (containers on this host: host networking, this binary mounted read-only)")
}

// check validates the shard flags against the run's.
func (s *shardFlags) check(f *runFlags) error {
	if !s.on {
		return nil
	}
	switch {
	case s.procs < 1:
		return errors.New("--procs must be at least 1")
	case s.procs > 1 && s.shard != "":
		return errors.New("--procs and --shard: a shard starts no generators of its own")
	case s.procs > 1 && (f.servers.RedisCluster > 0 || f.servers.MySQLCluster > 0):
		return errors.New("--procs: not on a Redis or MySQL cluster yet")
	case s.procs > 1 && len(f.faults) > 0:
		return errors.New("--procs: not with --fault yet (faults do not merge)")
	case s.shard == "" && (s.noReset || s.startBarrier != ""):
		return errors.New("--no-reset and --start-barrier go with --shard")
	case s.shard == "" && s.stateDir != "":
		return errors.New("--state-dir goes with --shard (--procs N gives each generator its own)")
	case s.generators != generatorsProcess && s.generators != generatorsDocker:
		return fmt.Errorf("--generators %q: want process or docker", s.generators)
	case s.generators == generatorsDocker && s.procs < 2:
		return errors.New("--generators docker goes with --procs N, N ≥ 2")
	}
	if s.generators == generatorsDocker {
		exe, err := selfExe()
		if err != nil {
			return err
		}
		if s.image, err = generatorImage(exe); err != nil {
			return fmt.Errorf("--generators docker: %w", err)
		}
	}
	if s.shard == "" {
		return nil
	}
	i, n, ok := strings.Cut(s.shard, "/")
	index, err1 := strconv.Atoi(i)
	of, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || of < 1 || index < 0 || index >= of {
		return fmt.Errorf("--shard %q: want I/N with 0 ≤ I < N", s.shard)
	}
	if f.servers.Backend != "external" {
		return errors.New("--shard needs --backend external: the servers of the whole run")
	}
	s.index, s.of = index, of
	return nil
}

// apply puts the shard settings into the runner options.
func (s *shardFlags) apply(o *runner.Options, args []string, out string) {
	spawn := spawner(args, out, "")
	if s.generators == generatorsDocker {
		spawn = spawner(args, out, s.image)
	}
	if s.procs > 1 {
		o.Procs, o.Spawn = s.procs, spawn
	}
	if s.of > 1 {
		o.Segment = runner.Segment{Index: s.index, Of: s.of, NoReset: s.noReset,
			StartBarrier: s.startBarrier, ServerPIDs: serverPIDs()}
	}
	o.Segment.StateDir = s.stateDir
}

// stateDirLock is the lock a generator holds on its --state-dir.
const stateDirLock = "generator.lock"

// lockState creates and locks the generator's --state-dir (none: a no-op).
func (s *shardFlags) lockState() (unlock func(), err error) {
	if s.stateDir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(s.stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	return lockStateDir(s.stateDir, stateDirLock, "generator")
}

// written is told that the generator's results file holds its run: its
// acks are in it, so the state directory's ack log goes (a generator
// started again there starts a new one).
func (s *shardFlags) written(res *results.Results) {
	if s.stateDir != "" && len(res.Runs) == 1 {
		_ = os.Remove(filepath.Join(s.stateDir, runner.AckFile))
	}
}

// shardChildEnv, set in a generator's environment, tells a test binary to
// run Main (see TestMain); the stockbench binary ignores it.
const shardChildEnv = "STOCKBENCH_SHARD_CHILD"

// serverPIDsEnv gives a generator its parent's server processes
// (mysql=PID,redis=PID), when they run on its host, for server CPU.
const serverPIDsEnv = "STOCKBENCH_SHARD_SERVER_PIDS"

// serverPIDs reads serverPIDsEnv (nil when unset or unreadable).
func serverPIDs() map[string]int {
	var m map[string]int
	for _, kv := range strings.Split(os.Getenv(serverPIDsEnv), ",") {
		k, v, ok := strings.Cut(kv, "=")
		if pid, err := strconv.Atoi(v); ok && err == nil && pid > 0 {
			if m == nil {
				m = map[string]int{}
			}
			m[k] = pid
		}
	}
	return m
}

// selfExe is the binary generators are started from.
var selfExe = os.Executable

// onSpawn, when set (tests), is told each generator's pid once it started.
var onSpawn func(pid int)

// serverFlags name the servers; a generator gets them in its environment.
var serverFlags = map[string]bool{"mysql-dsn": true, "redis-addr": true, "redis-url": true}

// withoutServerFlags drops the server flags (and their values) from a run's
// arguments, so that no DSN or URL — and no password in one — is on a
// generator's command line, where ps and docker inspect would show it.
func withoutServerFlags(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && serverFlags[name] {
			if !hasValue {
				i++ // the value is the next argument
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

// spawner starts each generator as a child process of this binary: the
// run's own arguments, then what makes it shard I of N of one strategy on
// one scenario against the parent's servers (passed in its environment,
// never on a command line). It writes into OUT/shards/…/shard-I; a child
// is killed if the parent dies, and interrupted (so that it settles) when
// the run is. With image set, each child is a container of that image
// (dockerCommand): the same arguments, the same environment.
func spawner(args []string, out, image string) runner.Spawn {
	return func(ctx context.Context, g runner.Generator) (*results.Results, error) {
		ep := g.Endpoints
		if len(ep.RedisCluster) > 0 || len(ep.MySQLCluster) > 0 {
			return nil, errors.New("several generators: not on a cluster yet")
		}
		exe, err := selfExe()
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(out, "shards", fmt.Sprintf("%s-%s-%d", g.Strategy, g.Scenario, max(1, g.Repeat)), fmt.Sprintf("shard-%d", g.Shard))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		// Its own state, kept however it ends (a past run's is stale: the
		// stores were prepared afresh).
		state := filepath.Join(dir, "state")
		if err := os.RemoveAll(state); err != nil {
			return nil, err
		}
		redisURL := redisURLOf(ep)
		cargs := append([]string{"run"}, withoutServerFlags(args)...)
		if g.Metrics != nil {
			// Its own endpoint on a free port, re-exposed by the parent's.
			addrFile := observe.AddrFile(dir)
			_ = os.Remove(addrFile) // a past run's
			defer g.Metrics.Follow(strconv.Itoa(g.Shard), addrFile)()
			cargs = append(cargs, "--metrics-addr", "127.0.0.1:0")
		}
		cargs = append(cargs, "--procs", "1", "--generators", generatorsProcess, "--shard", fmt.Sprintf("%d/%d", g.Shard, g.Of), "--no-reset",
			"--start-barrier", g.Barrier, "--backend", "external", "--strategies", g.Strategy, "--scenario", g.Scenario,
			"--repeat", "1", "--calibrate", "0", "--quiet", "--out", dir, "--state-dir", state)
		env := []string{shardChildEnv + "=1", "STOCKBENCH_SKIP_SETUP=1",
			"STOCKBENCH_MYSQL_DSN=" + ep.MySQLDSN, "STOCKBENCH_MYSQL_DSNS=", "STOCKBENCH_REDIS_ADDR=", "STOCKBENCH_REDIS_URL=" + redisURL}
		if ep.MySQLPID > 0 || ep.RedisPID > 0 {
			// On this host: the generator samples the servers' CPU itself.
			env = append(env, fmt.Sprintf("%s=%s=%d,%s=%d", serverPIDsEnv, servers.TargetMySQL, ep.MySQLPID, servers.TargetRedis, ep.RedisPID))
		}
		var cmd *exec.Cmd
		var name string
		var lifeline *os.File
		if image == "" {
			cmd = exec.CommandContext(ctx, exe, cargs...)
			cmd.Env = append(os.Environ(), env...)
		} else {
			name = fmt.Sprintf("stockbench-gen-%d-%s-%s-%d-%d", os.Getpid(), g.Strategy, g.Scenario, max(1, g.Repeat), g.Shard)
			if cmd, lifeline, err = dockerCommand(ctx, image, exe, name, dir, env, cargs); err != nil {
				return nil, err
			}
			defer lifeline.Close()
			// Whatever happened, no container of this generator stays.
			defer removeContainer(name)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		// Ctrl-C of the run: the child settles and writes what it measured.
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		cmd.WaitDelay = 3 * time.Minute
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		runErr := cmd.Start()
		if cmd.Stdin != nil {
			// The child's end of the lifeline belongs to the child now.
			_ = cmd.Stdin.(*os.File).Close()
		}
		if runErr == nil {
			if onSpawn != nil {
				onSpawn(cmd.Process.Pid)
			}
			runErr = cmd.Wait()
		}
		res, err := results.ReadJSON(filepath.Join(dir, "results.json"))
		if runErr != nil && ctx.Err() == nil && (err != nil || len(res.Runs) == 0) {
			// Dead before its report (SIGKILL, OOM…): what it left is in
			// its state directory, for the parent to drain.
			why := runErr.Error()
			if l := lastLine(stderr.String()); l != "" {
				why += ": " + l
			}
			return res, &runner.GeneratorLost{StateDir: state, Err: errors.New(why)}
		}
		if runErr != nil && (err != nil || ctx.Err() == nil) {
			return res, fmt.Errorf("%v: %s", runErr, lastLine(stderr.String()))
		}
		if runErr == nil {
			// Settled and reported: nothing is left to relay.
			_ = os.RemoveAll(state)
		}
		return res, err
	}
}

// redisURLOf is the URL of the servers' Redis (with its password), as
// generators are given it.
func redisURLOf(ep servers.Endpoints) string {
	if ep.RedisURL != "" {
		return ep.RedisURL
	}
	u := url.URL{Scheme: "redis", Host: ep.RedisAddr}
	if ep.RedisPassword != "" {
		u.User = url.UserPassword("", ep.RedisPassword)
	}
	return u.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// cmdMerge merges the results.json of several generators into one report.
func cmdMerge(args []string, stdout io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("merge", flag.ContinueOnError)
	if code, done := parseFlagsAllowArgs(fs, args, stdout, fail); done {
		return code
	}
	if fs.NArg() < 2 {
		return fail(exitUsage, errors.New("usage: stockbench merge OUT DIR…"))
	}
	out := fs.Arg(0)
	var shards []*results.Results
	for _, dir := range fs.Args()[1:] {
		r, err := results.ReadJSON(filepath.Join(dir, "results.json"))
		if err != nil {
			return fail(exitUsage, err)
		}
		if len(r.Runs) == 0 {
			// A generator that failed before measuring leaves a file with
			// no run: a merge without it would be a report of nothing.
			return fail(exitUsage, fmt.Errorf("%s holds no run: did that generator fail? (its exit code and last line say why)", dir))
		}
		shards = append(shards, r)
	}
	res, err := results.Merge(shards)
	if err != nil {
		return fail(exitUsage, err)
	}
	if err := checkOut(out); err != nil {
		return fail(exitUsage, err)
	}
	a := analysis.Analyze(res)
	if err := reports.WriteAll(out, a); err != nil {
		return fail(exitFailed, err)
	}
	// The acks the generators' clients got, for stockbench audit --acks:
	// one file when each generator ran one run (several runs' acks were
	// given on stores reset between them).
	var acks []inventory.Ack
	one := true
	for _, r := range shards {
		one = one && len(r.Runs) == 1
		for _, run := range r.Runs {
			acks = append(acks, run.ShardAcks...)
		}
	}
	auditHint := "stockbench audit"
	if one && len(acks) > 0 {
		b, err := json.Marshal(acks)
		if err == nil {
			err = os.WriteFile(filepath.Join(out, "acks.json"), b, 0o644)
		}
		if err != nil {
			return fail(exitFailed, err)
		}
		auditHint += " --acks " + filepath.Join(out, "acks.json")
	}
	reports.Table(stdout, a)
	fmt.Fprintf(stdout, "\nmerged %d generators into %s; grade the stores with %s (the shards' own files hold no audit)\n",
		len(shards), filepath.Join(out, "results.json"), auditHint)
	return exitOK
}
