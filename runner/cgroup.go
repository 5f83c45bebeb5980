package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
)

// The tiers a CPU budget names.
const (
	TierMySQL   = "mysql"
	TierRedis   = "redis"
	TierHarness = "harness"
)

var budgetTiers = []string{TierMySQL, TierRedis, TierHarness}

// CPUBudget is the CPU each tier may use: on the local backend through
// cgroups (v1 cpu and cpuset controllers, or v2), on docker through the
// containers' quota and cpuset (the harness, this process, through a
// cgroup on both): Cores a quota in cores
// per tier (--cpus mysql=1,redis=0.5,harness=0.5), Set the core ids a
// tier is pinned to (--cpuset mysql=0,redis=1,harness=1). A tier absent
// from both shares the machine. The zero value is no budget.
type CPUBudget struct {
	Cores map[string]float64
	Set   map[string]string
}

// Empty reports whether b sets no budget.
func (b CPUBudget) Empty() bool { return len(b.Cores) == 0 && len(b.Set) == 0 }

// ParseCPUs parses --cpus: tier=cores,… with cores > 0.
func ParseCPUs(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for tier, v := range budgetPairs(s) {
		if !slices.Contains(budgetTiers, tier) {
			return nil, fmt.Errorf("%q: tier %q, want mysql, redis or harness", s, tier)
		}
		c, err := strconv.ParseFloat(v, 64)
		if err != nil || c <= 0 {
			return nil, fmt.Errorf("%q: %s=%s is not a number of cores > 0", s, tier, v)
		}
		out[tier] = c
	}
	if len(out) == 0 && strings.TrimSpace(s) != "" {
		return nil, fmt.Errorf("%q: want tier=cores,… (mysql=1,redis=0.5,harness=0.5)", s)
	}
	return out, nil
}

// ParseCPUSet parses --cpuset: tier=cpus,… where cpus is a cpuset list
// (0, 0-1, 0;2 for 0,2 — a semicolon, since the comma separates tiers).
func ParseCPUSet(s string) (map[string]string, error) {
	out := map[string]string{}
	for tier, v := range budgetPairs(s) {
		if !slices.Contains(budgetTiers, tier) {
			return nil, fmt.Errorf("%q: tier %q, want mysql, redis or harness", s, tier)
		}
		list := strings.ReplaceAll(v, ";", ",")
		if _, err := cpuCount(list); err != nil {
			return nil, fmt.Errorf("%q: %s=%s: %w", s, tier, v, err)
		}
		out[tier] = list
	}
	if len(out) == 0 && strings.TrimSpace(s) != "" {
		return nil, fmt.Errorf("%q: want tier=cpus,… (mysql=0,redis=1,harness=1)", s)
	}
	return out, nil
}

// budgetPairs splits "a=1,b=2"; a part without "=" maps "" to it, which
// the callers refuse as an unknown tier.
func budgetPairs(s string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

// cpuCount counts the cores of a cpuset list (0,2-3 is 3).
func cpuCount(list string) (int, error) {
	n := 0
	for _, r := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(r), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, fmt.Errorf("cpu list %q: %q is not a core id", list, r)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("cpu list %q: %q is not a range", list, r)
			}
		}
		n += b - a + 1
	}
	return n, nil
}

// Results is the budget in cores per tier as results.json records it:
// the quota, or the number of cores pinned to, the smaller when both are
// set; nil without a budget.
func (b CPUBudget) Results() *results.CPUBudget {
	if b.Empty() {
		return nil
	}
	of := func(tier string) *float64 {
		var v float64
		c, hasQuota := b.Cores[tier]
		set, hasSet := b.Set[tier]
		switch {
		case hasQuota && hasSet:
			n, _ := cpuCount(set)
			v = min(c, float64(n))
		case hasQuota:
			v = c
		case hasSet:
			n, _ := cpuCount(set)
			v = float64(n)
		default:
			return nil
		}
		return &v
	}
	out := &results.CPUBudget{MySQL: of(TierMySQL), Redis: of(TierRedis), Harness: of(TierHarness)}
	if len(b.Set) > 0 {
		out.CPUSet = maps.Clone(b.Set)
	}
	return out
}

// cgroupRoot is where the cgroup file systems are mounted.
var cgroupRoot = "/sys/fs/cgroup"

// applyCPUBudget puts each budgeted tier's processes (the local servers'
// and this one) in a cgroup of their own with the tier's quota and cores;
// undo moves them back and removes the groups. When the provider limits
// its servers itself (lim: docker, through the containers' quota and
// cpuset), the server tiers go to it and only the harness — this
// process, the generator and the service code — to a cgroup. It refuses,
// in one line, a tier with neither (the external backend's servers are
// not this machine's), and a host whose cgroups it cannot write.
func applyCPUBudget(ctx context.Context, b CPUBudget, ep servers.Endpoints, lim servers.CPULimiter) (undo func(), err error) {
	if b.Empty() {
		return func() {}, nil
	}
	pids := map[string][]int{TierHarness: {os.Getpid()}}
	if ep.MySQLPID > 0 {
		pids[TierMySQL] = append([]int{ep.MySQLPID}, ep.ExtraPIDs[servers.TargetMySQL]...)
	}
	if ep.RedisPID > 0 {
		pids[TierRedis] = append([]int{ep.RedisPID}, ep.ExtraPIDs[servers.TargetRedis]...)
	}
	limited := map[string]bool{}
	if lim != nil {
		for tier, target := range map[string]string{TierMySQL: servers.TargetMySQL, TierRedis: servers.TargetRedis} {
			c, q := b.Cores[tier]
			set, s := b.Set[tier]
			if !q && !s {
				continue
			}
			if err := lim.LimitCPU(ctx, target, c, set); err != nil {
				return nil, fmt.Errorf("--cpus/--cpuset: %s: %w", tier, err)
			}
			limited[tier] = true
		}
	}
	for _, tier := range budgetTiers {
		_, q := b.Cores[tier]
		_, s := b.Set[tier]
		if (q || s) && len(pids[tier]) == 0 && !limited[tier] {
			return nil, fmt.Errorf("--cpus/--cpuset: no %s process or container of this machine to budget (local and docker backends only)", tier)
		}
	}
	v2 := false
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		v2 = true
	}
	var undos []func()
	undo = func() {
		for i := len(undos) - 1; i >= 0; i-- {
			undos[i]()
		}
	}
	for _, tier := range budgetTiers {
		c, q := b.Cores[tier]
		set, s := b.Set[tier]
		if (!q && !s) || limited[tier] {
			continue
		}
		u, err := cgroupFor(v2, tier, c, q, set, s, pids[tier])
		if err != nil {
			undo()
			return nil, fmt.Errorf("--cpus/--cpuset: %s: %w", tier, err)
		}
		undos = append(undos, u)
	}
	return undo, nil
}

// cgroupFor makes the tier's groups, writes the limits and moves pids in.
func cgroupFor(v2 bool, tier string, cores float64, quota bool, set string, pinned bool, pids []int) (func(), error) {
	name := fmt.Sprintf("stockbench-%d-%s", os.Getpid(), tier)
	type group struct{ dir, parent string }
	var groups []group
	var undo func()
	cleanup := func() {
		for _, g := range groups {
			for _, pid := range pids {
				// Back to the parent; a process that has exited is gone.
				_ = os.WriteFile(filepath.Join(g.parent, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
			}
			_ = os.Remove(g.dir)
		}
	}
	undo = cleanup
	mk := func(controller string, files [][2]string) error {
		parent := filepath.Join(cgroupRoot, controller)
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cannot create a cgroup (%w): run as root on a host with writable cgroups", err)
		}
		groups = append(groups, group{dir, parent})
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0); err != nil {
				return fmt.Errorf("write %s=%s: %w", f[0], f[1], err)
			}
		}
		for _, pid := range pids {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
				return fmt.Errorf("move pid %d: %w", pid, err)
			}
		}
		return nil
	}
	const period = 100000
	var err error
	switch {
	case v2:
		var files [][2]string
		if quota {
			files = append(files, [2]string{"cpu.max", fmt.Sprintf("%d %d", int(cores*period), period)})
		}
		if pinned {
			files = append(files, [2]string{"cpuset.cpus", set})
		}
		err = mk("", files)
	default:
		if quota {
			err = mk("cpu", [][2]string{{"cpu.cfs_period_us", strconv.Itoa(period)}, {"cpu.cfs_quota_us", strconv.Itoa(int(cores * period))}})
		}
		if err == nil && pinned {
			mems, rerr := os.ReadFile(filepath.Join(cgroupRoot, "cpuset", "cpuset.mems"))
			if rerr != nil {
				err = fmt.Errorf("read cpuset.mems: %w", rerr)
			} else {
				err = mk("cpuset", [][2]string{{"cpuset.cpus", set}, {"cpuset.mems", strings.TrimSpace(string(mems))}})
			}
		}
	}
	if err != nil {
		cleanup()
		return nil, err
	}
	return undo, nil
}
