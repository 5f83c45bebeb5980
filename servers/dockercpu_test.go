package servers

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDockerLimitCPU starts the two containers, limits each as a table
// says and checks what the kernel then holds for the container's main
// process — the cores it may run on (/proc/PID/status) and its CFS quota
// (its cpu cgroup) — and that what cannot be done is refused in a line.
func TestDockerLimitCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	d := needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := d.Start(ctx); err != nil {
		d.Stop()
		t.Fatal(err)
	}
	defer d.Stop()
	last := strconv.Itoa(runtimeCores() - 1)
	cases := []struct {
		name, target string
		cores        float64
		set          string
		wantQuota    string // cpu.cfs_quota_us; "" not checked
		wantCPUs     string // Cpus_allowed_list; "" not checked
		wantErr      string
	}{
		{"a half-core quota for MySQL", TargetMySQL, 0.5, "", "50000", "", ""},
		{"Redis pinned to the last core", TargetRedis, 0, last, "", last, ""},
		{"both at once", TargetMySQL, 1, "0", "100000", "0", ""},
		{"a core this machine lacks", TargetRedis, 0, "99", "", "", "limit redis's CPU"},
		{"a target with no container", "galera", 1, "", "", "", "no galera container"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := d.LimitCPU(ctx, c.target, c.cores, c.set)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err = %v, want one line with %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r, err := d.role(c.target)
			if err != nil {
				t.Fatal(err)
			}
			ci, err := d.pool.Client.InspectContainer(r.res.Container.ID)
			if err != nil {
				t.Fatal(err)
			}
			pid := strconv.Itoa(ci.State.Pid)
			if c.wantCPUs != "" {
				if got := statusField(t, pid, "Cpus_allowed_list"); got != c.wantCPUs {
					t.Errorf("Cpus_allowed_list %q, want %q", got, c.wantCPUs)
				}
			}
			if c.wantQuota != "" {
				if got := cfsQuota(t, pid); got != c.wantQuota {
					t.Errorf("cpu.cfs_quota_us %q, want %q", got, c.wantQuota)
				}
			}
		})
	}
}

func runtimeCores() int {
	b, _ := os.ReadFile("/sys/fs/cgroup/cpuset/cpuset.cpus")
	n, _ := cpuListLen(strings.TrimSpace(string(b)))
	if n == 0 {
		return 1
	}
	return n
}

// cpuListLen counts a cpuset list's cores ("0-1" is 2).
func cpuListLen(list string) (int, error) {
	n := 0
	for _, r := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, err
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return 0, err
			}
		}
		n += b - a + 1
	}
	return n, nil
}

func statusField(t *testing.T, pid, field string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == field {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in /proc/%s/status", field, pid)
	return ""
}

// cfsQuota reads the CFS quota of pid's cpu cgroup (v1), or the first
// field of cpu.max (v2).
func cfsQuota(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			q, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", parts[2], "cpu.max"))
			if err != nil {
				t.Fatal(err)
			}
			return strings.Fields(string(q))[0]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpu" {
				q, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", parts[2], "cpu.cfs_quota_us"))
				if err != nil {
					t.Fatal(err)
				}
				return strings.TrimSpace(string(q))
			}
		}
	}
	t.Fatalf("no cpu cgroup in /proc/%s/cgroup", pid)
	return ""
}
