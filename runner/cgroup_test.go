package runner

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/servers"
)

// TestParseBudgets: the forms --cpus and --cpuset take, and what they
// refuse; Results records cores per tier.
func TestParseBudgets(t *testing.T) {
	cpus := []struct {
		in   string
		want map[string]float64
		err  bool
	}{
		{"", map[string]float64{}, false},
		{"mysql=1,redis=0.5,harness=0.5", map[string]float64{"mysql": 1, "redis": 0.5, "harness": 0.5}, false},
		{"mysql=0", nil, true},
		{"web=1", nil, true},
		{"mysql", nil, true},
		{"mysql=x", nil, true},
	}
	for _, c := range cpus {
		got, err := ParseCPUs(c.in)
		if (err != nil) != c.err || (!c.err && len(got) != len(c.want)) {
			t.Errorf("ParseCPUs(%q) = %v, %v", c.in, got, err)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("ParseCPUs(%q)[%s] = %v, want %v", c.in, k, got[k], v)
			}
		}
	}
	sets := []struct {
		in   string
		want map[string]string
		err  bool
	}{
		{"mysql=0,redis=1,harness=1", map[string]string{"mysql": "0", "redis": "1", "harness": "1"}, false},
		{"mysql=0-1,harness=0;2", map[string]string{"mysql": "0-1", "harness": "0,2"}, false},
		{"mysql=1-0", nil, true},
		{"mysql=a", nil, true},
		{"disk=0", nil, true},
	}
	for _, c := range sets {
		got, err := ParseCPUSet(c.in)
		if (err != nil) != c.err || (!c.err && len(got) != len(c.want)) {
			t.Errorf("ParseCPUSet(%q) = %v, %v", c.in, got, err)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("ParseCPUSet(%q)[%s] = %q, want %q", c.in, k, got[k], v)
			}
		}
	}
	b := CPUBudget{Cores: map[string]float64{"mysql": 1.5, "redis": 0.5}, Set: map[string]string{"mysql": "0", "harness": "0-1"}}
	r := b.Results()
	if r == nil || *r.MySQL != 1 || *r.Redis != 0.5 || *r.Harness != 2 {
		t.Errorf("Results() = %+v: want mysql 1 (one core pinned beats a 1.5 quota), redis 0.5, harness 2", r)
	}
	if (CPUBudget{}).Results() != nil {
		t.Error("no budget recorded as one")
	}
}

// TestApplyCPUBudget pins a child process standing for MySQL to core 0
// with a half-core quota through this host's cgroups, checks where the
// kernel says it is and what the group holds, and that undo moves it
// back and removes the groups. It needs writable v1 cgroups (root).
func TestApplyCPUBudget(t *testing.T) {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cpuset", "cgroup.procs")); err != nil {
		t.Skipf("no cgroup v1 cpuset here: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	pid := child.Process.Pid
	b := CPUBudget{Cores: map[string]float64{TierMySQL: 0.5}, Set: map[string]string{TierMySQL: "0"}}
	undo, err := applyCPUBudget(context.Background(), b, servers.Endpoints{MySQLPID: pid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := "stockbench-" + itoa(os.Getpid()) + "-mysql"
	cg := readFile(t, "/proc/"+itoa(pid)+"/cgroup")
	if !strings.Contains(cg, "cpuset:/"+name) || !strings.Contains(cg, ":/"+name) {
		t.Errorf("child not in the groups:\n%s", cg)
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(cgroupRoot, "cpuset", name, "cpuset.cpus"))); got != "0" {
		t.Errorf("cpuset.cpus %q, want 0", got)
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(cgroupRoot, "cpu", name, "cpu.cfs_quota_us"))); got != "50000" {
		t.Errorf("cpu.cfs_quota_us %q, want 50000", got)
	}
	undo()
	if cg := readFile(t, "/proc/"+itoa(pid)+"/cgroup"); strings.Contains(cg, name) {
		t.Errorf("child still in a group after undo:\n%s", cg)
	}
	for _, c := range []string{"cpu", "cpuset"} {
		if _, err := os.Stat(filepath.Join(cgroupRoot, c, name)); err == nil {
			t.Errorf("%s group left behind", c)
		}
	}
	// A budget for a tier this machine does not run is refused.
	if _, err := applyCPUBudget(context.Background(), CPUBudget{Set: map[string]string{TierRedis: "1"}}, servers.Endpoints{}, nil); err == nil {
		t.Error("a budget for redis with no redis process was accepted")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// limits records what applyCPUBudget asked a provider's CPULimiter to do.
type limits struct {
	got map[string]string
	err error
}

func (l *limits) LimitCPU(_ context.Context, target string, cores float64, set string) error {
	if l.err != nil {
		return l.err
	}
	l.got[target] = strconv.FormatFloat(cores, 'g', -1, 64) + "@" + set
	return nil
}

// TestApplyCPUBudgetLimiter: with a provider that limits its own servers
// (docker), the server tiers go to it and need no process here; without
// one, a server tier with no process is refused; the limiter's refusal is
// one line naming the tier. (The harness tier, this process, is left out:
// moving the test binary between cgroups would budget every other test.)
func TestApplyCPUBudgetLimiter(t *testing.T) {
	cases := []struct {
		name    string
		b       CPUBudget
		lim     *limits
		want    map[string]string
		wantErr string
	}{
		{"quota and cpuset to the containers", CPUBudget{Cores: map[string]float64{TierMySQL: 1}, Set: map[string]string{TierRedis: "1"}},
			&limits{got: map[string]string{}}, map[string]string{servers.TargetMySQL: "1@", servers.TargetRedis: "0@1"}, ""},
		{"no limiter, no process", CPUBudget{Set: map[string]string{TierMySQL: "0"}}, nil, nil, "no mysql process or container"},
		{"the engine refuses", CPUBudget{Set: map[string]string{TierRedis: "9"}},
			&limits{got: map[string]string{}, err: errors.New("docker: limit redis's CPU: cpuset 9 not available")}, nil, "--cpus/--cpuset: redis: docker"},
	}
	for _, c := range cases {
		var lim servers.CPULimiter
		if c.lim != nil {
			lim = c.lim
		}
		undo, err := applyCPUBudget(context.Background(), c.b, servers.Endpoints{}, lim)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: err %v, want one line with %q", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		undo()
		if len(c.lim.got) != len(c.want) {
			t.Errorf("%s: limited %v, want %v", c.name, c.lim.got, c.want)
		}
		for k, v := range c.want {
			if c.lim.got[k] != v {
				t.Errorf("%s: %s limited %q, want %q", c.name, k, c.lim.got[k], v)
			}
		}
	}
}
