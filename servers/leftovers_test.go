package servers

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/internal/waitfor"
)

// TestSweepLocal: only data directories whose owner is provably gone are
// removed; a live owner's, an unknown owner's, and one a live server still
// names are kept.
func TestSweepLocal(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	// A pid that was ours and has ended.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := strconv.Itoa(dead.Process.Pid)
	me := strconv.Itoa(os.Getpid())
	myStart, err := procStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A live process that names its directory on its command line, as a
	// server that outlived its owner would.
	busyDir := filepath.Join(tmp, "stockbench-mysql-busy")
	holder := exec.Command("sh", "-c", "read x", busyDir)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); holder.Wait() }()
	// The case's premise is an event, not a moment: a process runs whose
	// command line names the directory. On a loaded machine the holder may
	// not show there yet when Start returns; wait until it does.
	waitfor.Until(t, "the holder never named its directory in /proc", func() bool { return inUse(busyDir) })

	cases := []struct {
		dir   string
		owner string // content of the owner file; "-" for none
		kept  bool
	}{
		{"stockbench-mysql-dead", deadPID + " 1", false},
		{"stockbench-redis-dead", deadPID + " 1", false},
		{"stockbench-mysql-live", me + " " + myStart, true},
		{"stockbench-redis-reused-pid", me + " 1", false}, // our pid, another start time: the owner is gone
		{"stockbench-mysql-unknown", "-", true},           // no owner file and recent: maybe a run creating it
		{"stockbench-redis-legacy", "old", false},         // no owner file, untouched for days: an older stockbench's leftover
		{"stockbench-mysql-busy", deadPID + " 1", true},
		{newPrefix + "stockbench-acks-dead", deadPID + " 1", false}, // killed between MkdirTemp's two steps
		{newPrefix + "stockbench-acks-unknown", "-", true},          // killed before its owner file, or being made
		{"unrelated-dir", deadPID + " 1", true},
	}
	for _, c := range cases {
		d := filepath.Join(tmp, c.dir)
		if err := os.MkdirAll(filepath.Join(d, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		if c.owner == "old" {
			old := time.Now().Add(-72 * time.Hour)
			if err := os.Chtimes(d, old, old); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if c.owner != "-" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(c.owner+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	removed, err := SweepLocal()
	if err != nil {
		t.Fatal(err)
	}
	if !inUse(busyDir) {
		t.Fatalf("the holder of %s ended during the sweep: the busy case proves nothing", busyDir)
	}
	for _, c := range cases {
		_, err := os.Stat(filepath.Join(tmp, c.dir))
		if kept := err == nil; kept != c.kept {
			t.Errorf("%s: kept=%v, want %v (removed %v)", c.dir, kept, c.kept, removed)
		}
	}
	// MkdirTemp names this process: its directory survives a sweep.
	d, err := MkdirTemp("stockbench-redis-")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SweepLocal(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("a live owner's directory was removed")
	}
}

// TestMkdirTemp: the directory appears under the pattern's name with its
// owner file already in it (a kill at any moment leaves nothing a sweep
// would take for a live run's), and nothing else is left in the temp dir.
func TestMkdirTemp(t *testing.T) {
	cases := []struct {
		pattern, prefix, suffix string
	}{
		{"stockbench-acks-", "stockbench-acks-", ""},
		{"stockbench-local-*", "stockbench-local-", ""},
		{"stockbench-*-x", "stockbench-", "-x"},
	}
	for _, c := range cases {
		t.Run(c.pattern, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			seen := map[string]bool{}
			for range 20 {
				d, err := MkdirTemp(c.pattern)
				if err != nil {
					t.Fatal(err)
				}
				base := filepath.Base(d)
				if filepath.Dir(d) != tmp || !strings.HasPrefix(base, c.prefix) || !strings.HasSuffix(base, c.suffix) || len(base) == len(c.prefix)+len(c.suffix) {
					t.Fatalf("MkdirTemp(%q) = %s", c.pattern, d)
				}
				if seen[d] {
					t.Fatalf("%s made twice", d)
				}
				seen[d] = true
				b, err := os.ReadFile(filepath.Join(d, ownerFile))
				if err != nil || !strings.HasPrefix(string(b), strconv.Itoa(os.Getpid())+" ") || !ownerAlive(d) {
					t.Fatalf("%s: owner file %q (%v), want this process", d, b, err)
				}
			}
			all, err := os.ReadDir(tmp)
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != len(seen) {
				t.Errorf("temp dir holds %d entries, want the %d made: %v", len(all), len(seen), all)
			}
		})
	}
}
